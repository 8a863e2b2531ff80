//! The task behind every [`Lease`](crate::Lease): it reads the session's
//! events into the lease's shared state until the lease ends, ends it when
//! the validity runs out (less the stop margin), and, for a lease that
//! [reattaches](crate::Acquire::reattach), keeps the lock with Extends of
//! its own when the session breaks or goes silent (`reattach.rs`).
//!
//! Safety rests on the validity alone: whatever happens to the session or
//! the connections, the lease ends no later than its last known validity
//! less [`stop_margin`](crate::stop_margin), and an Extend's answer counts
//! from when the Extend was sent.

use crate::auth::Stub;
use crate::end::End;
use crate::error::Error;
use crate::events::LeaseEvent;
use crate::reattach::{Keeper, RETRY_PAUSE, SETTLE};
use crate::validity::Shared;
use crate::wire::std_duration;
use redlockd_proto::pb;
use redlockd_proto::pb::hold_event::Event;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tonic::{Status, Streaming};

/// Why a lease that gave up waiting for the daemon's answer to its
/// release ended.
const NO_ANSWER: &str = "released at the client's request (no answer)";

/// The reader of one lease's session, and what it keeps when it
/// reattaches.
pub(crate) struct Watch {
    shared: Arc<Shared>,
    /// The session's events, until its stream ends or breaks.
    events: Option<Streaming<pb::HoldEvent>>,
    /// Resolves when the lease is dropped (or released).
    on_drop: oneshot::Receiver<()>,
    /// How long a dropped lease waits for the daemon's answer.
    linger: Duration,
    /// Set for a lease that reattaches.
    keeper: Option<Arc<Keeper>>,
    /// The lease's own connection for its Extends, once one was made; a
    /// failure drops it (it may be what is broken).
    connection: Option<Stub>,
    /// When to try an Extend again after a failure or a broken session.
    retry_at: Option<Instant>,
    /// The last failure, for the lease's end if no attempt succeeds.
    last_error: Option<String>,
}

impl Watch {
    /// The reader of `events` for the lease sharing `shared`.
    pub(crate) fn new(
        shared: Arc<Shared>,
        events: Streaming<pb::HoldEvent>,
        on_drop: oneshot::Receiver<()>,
        linger: Duration,
        keeper: Option<Arc<Keeper>>,
    ) -> Watch {
        Watch {
            shared,
            events: Some(events),
            on_drop,
            linger,
            keeper,
            connection: None,
            retry_at: None,
            last_error: None,
        }
    }

    /// Runs until the lease ends; always ends it before returning. Once
    /// the lease is dropped, waits at most `linger` for the daemon's answer
    /// to the half-close, then drops the stream (which cancels it); a lease
    /// keeping its lock with its own Extends is released by a Release call
    /// instead.
    pub(crate) async fn run(mut self) {
        let mut give_up_at: Option<tokio::time::Instant> = None;
        while self.shared.ended().is_none() {
            let stop_at = tokio::time::Instant::from_std(self.shared.stop_at());
            let act_at = self.act_at().map(tokio::time::Instant::from_std);
            tokio::select! {
                // A lapse is final: it goes before any event already waiting.
                biased;
                () = tokio::time::sleep_until(give_up_at.unwrap_or(stop_at)) => {
                    if give_up_at.is_some() {
                        self.shared.finish(End::unconfirmed(NO_ANSWER));
                    } else if Instant::now() >= self.shared.stop_at() {
                        self.shared.finish(End::unconfirmed(self.lapse_reason()));
                    }
                }
                _ = &mut self.on_drop, if give_up_at.is_none() => {
                    if self.keeper.is_some() && self.shared.extending() {
                        self.release_by_call().await;
                    } else {
                        give_up_at = Some(tokio::time::Instant::now() + self.linger);
                    }
                }
                event = next_event(&mut self.events) => self.on_event(event),
                () = sleep_until_some(act_at), if act_at.is_some() => self.extend_once().await,
            }
        }
    }

    /// When a reattaching lease extends the lock itself next: after a
    /// failure or a broken session, at its retry time; else once an
    /// extension is overdue (half the ttl without one through the session,
    /// a third once the lease extends it itself). Never past the stop time;
    /// none once a release was asked for.
    fn act_at(&self) -> Option<Instant> {
        if self.keeper.is_none() || self.shared.releasing() {
            return None;
        }
        let ttl = self.shared.ttl();
        let overdue = if self.shared.extending() { 3 } else { 2 };
        let at = self
            .retry_at
            .unwrap_or_else(|| self.shared.heard() + ttl / overdue);
        Some(at.min(self.shared.stop_at()))
    }

    /// One event (or the stream's end) into the lease's state.
    fn on_event(&mut self, event: Result<Option<pb::HoldEvent>, Status>) {
        let shared = &self.shared;
        match event {
            Ok(Some(pb::HoldEvent { event: Some(event) })) => match event {
                Event::Extended(lock) => {
                    shared.extended(std_duration(lock.validity), Instant::now());
                    self.retry_at = None;
                    self.last_error = None;
                }
                // Not an end: the daemon keeps the lock until the drain ends.
                Event::Draining(_) => shared.draining(),
                Event::Lost(lost) => {
                    shared.finish(End::confirmed(format!(
                        "the daemon reports it lost: {}",
                        lost.reason
                    )));
                }
                Event::Released(released) => {
                    shared.finish(End::Released {
                        was_held: released.was_held,
                        requested: shared.releasing(),
                    });
                }
                Event::Acquired(_) => {
                    shared.finish(End::broke(
                        "a second `acquired` mid-session (a protocol error)",
                        Status::internal("a second `acquired` mid-session"),
                    ));
                }
            },
            // An event this client does not know (a newer daemon): not an end.
            Ok(Some(pb::HoldEvent { event: None })) => {}
            Ok(None) => self.session_over("the session ended".into(), None),
            Err(status) => {
                let reason = format!(
                    "the session broke: {}: {}",
                    redlockd_proto::code_name(status.code()),
                    status.message()
                );
                self.session_over(reason, Some(status));
            }
        }
    }

    /// The session's stream ended or broke: the end of the lease, unless
    /// it reattaches (and no release was asked for), in which case its own
    /// Extends keep the lock from [`SETTLE`] on.
    fn session_over(&mut self, reason: String, status: Option<Status>) {
        self.events = None;
        if self.keeper.is_none() || self.shared.releasing() {
            self.shared.finish(match status {
                Some(status) => End::broke(reason, status),
                None => End::unconfirmed(reason),
            });
            return;
        }
        self.shared.set_extending();
        self.connection = None;
        self.retry_at = Some(Instant::now() + SETTLE);
        self.last_error = Some(reason.clone());
        self.shared.emit(LeaseEvent::SessionBroke { reason });
    }

    /// One Extend of the lease's own, bounded so that it ends by the stop
    /// time.
    async fn extend_once(&mut self) {
        let Some(keeper) = self.keeper.clone() else {
            return;
        };
        let now = Instant::now();
        let left = self.shared.stop_at().saturating_duration_since(now);
        if left.is_zero() {
            return; // The lapse is the select's first branch.
        }
        if !self.shared.extending() {
            self.shared.set_extending();
            let silent = now.saturating_duration_since(self.shared.heard());
            self.shared.emit(LeaseEvent::Silent { silent });
        }
        let recovering = self.last_error.is_some();
        let sent = Instant::now();
        match keeper
            .extend(&mut self.connection, keeper.budget(left))
            .await
        {
            Ok(validity) => {
                self.shared.extended_by_call(validity, sent, Instant::now());
                self.retry_at = None;
                self.last_error = None;
                if recovering {
                    self.shared.emit(LeaseEvent::Reattached { validity });
                }
            }
            Err(Error::NotHeld(status)) => {
                self.shared.finish(End::confirmed(format!(
                    "it is no longer held (Extend: {})",
                    status.message()
                )));
            }
            Err(error) => {
                let reason = error.to_string();
                self.connection = None;
                self.retry_at = Some(Instant::now() + RETRY_PAUSE);
                self.last_error = Some(reason.clone());
                self.shared.emit(LeaseEvent::ExtendFailed { reason });
            }
        }
    }

    /// The lease was dropped while it kept the lock with its own Extends:
    /// a Release call by token, bounded by `linger`, ends it (the session,
    /// if still open, is dropped with it).
    async fn release_by_call(&mut self) {
        self.shared.set_releasing();
        self.events = None;
        let Some(keeper) = self.keeper.clone() else {
            return;
        };
        let end = match keeper.release(self.linger).await {
            Ok(was_held) => End::Released {
                was_held,
                requested: true,
            },
            Err(_) => End::unconfirmed(NO_ANSWER),
        };
        self.shared.finish(end);
    }

    /// Why the validity ran out: no extension came, and the last attempt's
    /// failure if there was one.
    fn lapse_reason(&self) -> String {
        let reason = "no extension arrived before the validity ran out";
        match &self.last_error {
            Some(last) => format!("{reason} (last: {last})"),
            None => reason.to_owned(),
        }
    }
}

/// The session's next event; never completes once there is no session.
async fn next_event(
    events: &mut Option<Streaming<pb::HoldEvent>>,
) -> Result<Option<pb::HoldEvent>, Status> {
    match events {
        Some(events) => events.message().await,
        None => std::future::pending().await,
    }
}

/// Sleeps until `at`; never completes without one.
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
