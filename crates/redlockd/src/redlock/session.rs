//! Keeping a lock alive for as long as a session lasts: extend it before it
//! expires, and never claim it once an extension could not keep it valid.

use super::{boottime, Claim, Lock, LockError, Redlock};
use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::time::Instant;

/// How often the engine compares the boot clock with the monotonic one.
const SUSPEND_CHECK_EVERY: Duration = Duration::from_secs(1);

/// A gap between the two clocks above this is a suspend, not jitter.
const SUSPEND_THRESHOLD: Duration = Duration::from_millis(100);

/// How often an extension held back by a silent client looks again.
pub(crate) const HEARD_POLL: Duration = Duration::from_millis(200);

/// How a held session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldEnd {
    /// `until` completed: the caller is done (or the daemon stops); the lock
    /// is still held and the caller should release it.
    Stopped,
    /// The lock is no longer guaranteed; the reason, fit for the client.
    Lost(String),
    /// Its validity ran out while extensions were held back for a silent
    /// client ([`Redlock::hold_while_heard`]): no longer guaranteed, and
    /// not to be deleted: the client (or a client library keeping the
    /// lock with Extend calls of its own while its session is cut off)
    /// may hold it still; it expires on the masters by itself.
    Unheard,
}

impl Redlock {
    /// Watches for the host being suspended (the boot clock running ahead of
    /// the monotonic one) and tells every session, which then checks its
    /// deadline on the boot clock. One task for all sessions; it ends with
    /// the engine.
    pub(crate) fn watch_for_suspend(self: &Arc<Self>) {
        let engine: Weak<Redlock> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut last = (Instant::now(), boottime::now());
            let mut interval = tokio::time::interval(SUSPEND_CHECK_EVERY);
            loop {
                interval.tick().await;
                let Some(engine) = engine.upgrade() else {
                    return;
                };
                let now = (Instant::now(), boottime::now());
                let suspended = boottime::suspended_between(last, now);
                if suspended > SUSPEND_THRESHOLD {
                    tracing::warn!(
                        ?suspended,
                        "the host was suspended: checking every session's lock"
                    );
                    engine
                        .suspends
                        .send_modify(|count| *count = count.wrapping_add(1));
                }
                last = now;
            }
        });
    }

    /// Extends `lock` (acquired with `ttl`) each time `extend_at` of the ttl
    /// has passed, calling `on_extended` after each extension, until `until`
    /// completes or the lock is lost. A failed extension is retried while the
    /// lock's validity lasts; the lock counts as lost before that runs out.
    /// The lock's deadline is the engine's (`Lock::deadline`, computed with
    /// its validity), never re-anchored when an answer arrives here.
    pub async fn hold(
        &self,
        lock: &mut Lock,
        ttl: Duration,
        extend_at: f64,
        until: impl Future<Output = ()>,
        on_extended: impl FnMut(&Lock),
    ) -> HoldEnd {
        self.hold_while_heard(lock, ttl, extend_at, until, on_extended, || true)
            .await
    }

    /// [`Redlock::hold`] for a holder that may go silent: an extension
    /// falls due only while `heard()` says its client still shows signs of
    /// life; while it does not, the extension waits (looking again every
    /// [`HEARD_POLL`]), and the lock is lost if its validity runs out
    /// first. So a frozen or cut-off client is never told a validity
    /// beyond what it could have read before it went silent (plus the
    /// silence `heard` allows): the lock passes on soon after that
    /// validity, which the daemon then lets run out
    /// (`service::hold`).
    pub(crate) async fn hold_while_heard(
        &self,
        lock: &mut Lock,
        ttl: Duration,
        extend_at: f64,
        until: impl Future<Output = ()>,
        mut on_extended: impl FnMut(&Lock),
        heard: impl Fn() -> bool,
    ) -> HoldEnd {
        tokio::pin!(until);
        let period = ttl.mul_f64(extend_at);
        let mut extend_at = Instant::now() + period;
        let mut suspends = self.suspends.subscribe();
        let mut silent = false;
        loop {
            let valid_until = lock.deadline.mono;
            tokio::select! {
                () = &mut until => return HoldEnd::Stopped,
                () = tokio::time::sleep_until(valid_until) => {
                    return ran_out(silent);
                }
                () = tokio::time::sleep_until(extend_at.min(valid_until)) => {}
                Ok(()) = suspends.changed() => {
                    if lock.deadline.passed_on_boot_clock() {
                        return HoldEnd::Lost(
                            "the host was suspended past the lock's validity".into(),
                        );
                    }
                    continue;
                }
            }
            // Both timers above may be due at once (a starved task): the
            // monotonic deadline passing is not a suspend.
            if Instant::now() >= lock.deadline.mono {
                return ran_out(silent);
            }
            if lock.deadline.passed_on_boot_clock() {
                return HoldEnd::Lost("the host was suspended past the lock's validity".into());
            }
            silent = !heard();
            if silent {
                extend_at = Instant::now() + HEARD_POLL;
                continue;
            }
            let started = Instant::now();
            // Boxed: a held session's future stays small between extensions.
            // The session knows its fence from the grant.
            let claim = Claim::own(lock.epoch);
            match Box::pin(self.extend_lease(&lock.resource, &lock.token, ttl, claim)).await {
                Ok((_, extended)) => {
                    lock.validity = extended.validity;
                    lock.deadline = extended.deadline;
                    extend_at = started + period;
                    on_extended(lock);
                }
                Err(LockError::NotHeld(tally)) => {
                    return HoldEnd::Lost(format!(
                        "the lock is no longer held on a majority of masters ({tally})"
                    ));
                }
                Err(error @ LockError::Superseded(_)) => {
                    return HoldEnd::Lost(error.to_string());
                }
                Err(error) => {
                    // Try again soon, while there is validity left to save.
                    let left = lock.deadline.left();
                    if left <= self.settings.node_timeout * 2 {
                        return HoldEnd::Lost(format!("extension failed: {error}"));
                    }
                    tracing::debug!(resource = %lock.resource, %error, "extension failed; retrying");
                    extend_at =
                        Instant::now() + self.settings.retry.delay(&mut rand::rng(), left / 4);
                }
            }
        }
    }
}

/// How a held lock ends when its validity ran out: its extensions failed,
/// or they were held back while its client was silent.
fn ran_out(silent: bool) -> HoldEnd {
    if silent {
        HoldEnd::Unheard
    } else {
        HoldEnd::Lost("the lock's validity ran out before an extension succeeded".into())
    }
}

/// What a session whose client went silent is told (if it ever reads it).
pub(crate) const UNHEARD: &str =
    "the client was not heard from (keepalive) before the lock's validity ran out";
