//! A written batch's timer: its answer, or a timeout judged by the
//! overload rules (`crate::valkey::pace`).

use crate::metrics;
use crate::valkey::pace::{more_time, Pace, Silence, SLOW_MEMORY};
use crate::valkey::quarantine::Peers;
use crate::valkey::state::NodeState;
use fred::prelude::Value;
use std::time::Duration;
use tokio::time::Instant as TokioInstant;

/// The answer of a batch sent at `sent`, or a timeout once `node_timeout`
/// passed on a timer that ran on time with the master's silence its own
/// ([`more_time`]); fred's own timeout ([`BACKSTOP`](crate::valkey::pace::BACKSTOP)) ends it whatever
/// happens.
pub(super) async fn bounded<F>(
    link: &Watch<'_>,
    mut call: std::pin::Pin<Box<F>>,
    sent: TokioInstant,
) -> Result<Value, fred::error::Error>
where
    F: std::future::Future<Output = Result<Value, fred::error::Error>>,
{
    let node_timeout = link.node_timeout;
    let mut due = sent + node_timeout;
    loop {
        if let Ok(result) = tokio::time::timeout_at(due, call.as_mut()).await {
            return result;
        }
        // One look past the daemon's own backlog before judging: a yielded
        // task resumes only once every task ready before it has run and the
        // IO driver has been polled, so an answer already in the master's
        // socket is read meanwhile and counts. A long wait here is the
        // daemon's run queue, not the master: it counts like a late timer
        // (`more_time`), as `now` is taken after it.
        tokio::task::yield_now().await;
        if let std::task::Poll::Ready(result) = futures::poll!(call.as_mut()) {
            return result;
        }
        let silence = Silence {
            progressing: link.state.answered_since(sent),
            others_answered: link.peers.quorum_of_others_answered_since(sent, link.state),
            recently_slow: link.pace.slow_within(node_timeout * SLOW_MEMORY),
        };
        let now = TokioInstant::now();
        match more_time(sent, due, now, node_timeout, silence) {
            Some(next) => {
                metrics::node_overdue(link.name);
                due = next;
            }
            None => {
                // Why a master is blamed, for investigating overload (bursts
                // on a shared machine).
                tracing::debug!(
                    node = link.name,
                    since_send = ?now.saturating_duration_since(sent),
                    timer_late = ?now.saturating_duration_since(due),
                    ?silence,
                    last_slow = ?link.pace.last_slow(),
                    "batch timed out: its master was silent"
                );
                // The master's own silence, judged on time: until it
                // answers again, commands still queued for it are not the
                // daemon's backlog (`redlock::round`), and a waiter that
                // never got to attempt says UNAVAILABLE, not "held".
                link.state.fell_silent();
                return Err(fred::error::Error::new(
                    fred::error::ErrorKind::Timeout,
                    "no answer within node_timeout",
                ));
            }
        }
    }
}

/// What [`bounded`] judges a silence by.
pub(super) struct Watch<'a> {
    pub(super) name: &'a str,
    pub(super) state: &'a NodeState,
    pub(super) peers: &'a Peers,
    pub(super) pace: &'a Pace,
    pub(super) node_timeout: Duration,
}
