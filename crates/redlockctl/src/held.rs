//! `run`'s lock as the client crate keeps it: a `Lease` that reattaches
//! (when the Hold session breaks or goes silent it keeps the lock with
//! Extend on a new connection; when that cannot be done in time it counts
//! the lock lost a margin before its last known validity ends, so the
//! command is stopped before anyone else can be granted the lock). Here:
//! what redlockctl says on stderr about it, how hard to stop the command
//! once it is lost, and the release.

use crate::error::describe;
use crate::print::shell_word;
use redlockd_client::{Lease, LeaseEvent, LeaseEvents};
use std::time::Duration;
use tokio::time::Instant;

/// How long a release waits for the daemon's answer.
const RELEASE_WAIT: Duration = Duration::from_secs(2);

/// The lease's events, said on stderr as they come.
pub(crate) struct Held {
    events: LeaseEvents,
    /// The resource, as a shell word.
    resource: String,
    /// The lease keeps the lock with Extends of its own.
    extending: bool,
}

impl Held {
    /// The events of `lease` on `resource` from now on.
    pub(crate) fn new(lease: &Lease, resource: &str) -> Held {
        Held {
            events: lease.events(),
            resource: shell_word(resource),
            extending: false,
        }
    }

    /// The next event; `None` once the lease has ended (cancel-safe).
    pub(crate) async fn next(&mut self) -> Option<LeaseEvent> {
        self.events.next().await
    }

    /// Says `event` on stderr (routine extensions and failed attempts
    /// quietly: the latter are in the reason if the lock is lost).
    pub(crate) fn say(&mut self, event: &LeaseEvent, lease: &Lease) {
        match event {
            LeaseEvent::Extended { .. } if self.extending => {
                self.extending = false;
                eprintln!("redlockctl: the session is extending the lock again");
            }
            LeaseEvent::Draining => eprintln!("redlockctl: the daemon is draining (stopping)"),
            LeaseEvent::Silent { silent } => {
                self.extending = true;
                eprintln!(
                    "redlockctl: no extension from the daemon for {} ms; extending through Extend",
                    silent.as_millis()
                );
            }
            LeaseEvent::SessionBroke { reason } => {
                self.extending = true;
                eprintln!(
                    "redlockctl: the Hold session on {} is over ({reason}); re-attaching through \
                     Extend ({} ms of validity left)",
                    self.resource,
                    lease.lock().remaining().as_millis()
                );
            }
            LeaseEvent::Reattached { validity } => eprintln!(
                "redlockctl: re-attached: the lock on {} is extended ({} ms)",
                self.resource,
                validity.as_millis()
            ),
            _ => {}
        }
    }
}

/// Why the lock is gone, and how hard to stop the command.
#[derive(Debug)]
pub(crate) struct Lost {
    /// In words, for stderr.
    pub reason: String,
    /// The latest moment for SIGKILL: set when the lock may still be held
    /// but its validity is about to run out.
    pub kill_by: Option<Instant>,
    /// The daemon said the lock is gone: nothing is left to release.
    pub gone: bool,
}

/// How `lease`, taken for `ttl`, was lost (once `Lease::lost` resolved).
/// When the daemon did not say the lock is gone it may still be held
/// until its last known validity ends: SIGKILL comes no later than a
/// quarter of the stop margin before that (ttl/40, 12 to 500 ms).
pub(crate) async fn lost(lease: &Lease, ttl: Duration) -> Lost {
    let error = lease.lost().await;
    let Some(end) = lease.ended() else {
        return Lost {
            reason: error.to_string(),
            kill_by: None,
            gone: false,
        };
    };
    if end.gone {
        return Lost {
            reason: end.reason,
            kill_by: None,
            gone: true,
        };
    }
    let valid_until = Instant::from_std(end.valid_until);
    let margin = (ttl / 40).clamp(Duration::from_millis(12), Duration::from_millis(500));
    Lost {
        reason: format!(
            "could not keep the lock: {}; its validity runs out in {} ms",
            end.reason,
            valid_until
                .saturating_duration_since(Instant::now())
                .as_millis()
        ),
        kill_by: Some(valid_until.checked_sub(margin).unwrap_or(valid_until)),
        gone: false,
    }
}

/// How the release went.
pub(crate) enum Released {
    /// The daemon released it; whether it was still held.
    Done { was_held: bool },
    /// No answer: it expires with its ttl or when the daemon sees us gone.
    Failed(String),
}

/// Releases the lock: through the session while it is healthy, else with
/// a Release call (the client crate decides); waits at most a couple of
/// seconds (past them the lease is dropped, which ends its session).
pub(crate) async fn release(lease: Lease) -> Released {
    match tokio::time::timeout(RELEASE_WAIT, lease.release()).await {
        Ok(Ok(was_held)) => Released::Done { was_held },
        Ok(Err(error)) => Released::Failed(describe(error.status())),
        Err(_) => Released::Failed(format!(
            "DEADLINE_EXCEEDED: no answer within {RELEASE_WAIT:?}"
        )),
    }
}

/// Says on stderr when releasing went wrong; silent when it went right.
pub(crate) fn report_release(resource: &str, released: Released) {
    match released {
        Released::Done { was_held: true } => {}
        Released::Done { was_held: false } => eprintln!(
            "redlockctl: released {}, but it had already expired or been taken over: \
             work done under it may have overlapped another holder's",
            shell_word(resource)
        ),
        Released::Failed(why) => eprintln!(
            "redlockctl: could not release {} ({why}); it expires within its ttl",
            shell_word(resource)
        ),
    }
}
