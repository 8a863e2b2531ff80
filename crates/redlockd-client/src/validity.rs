//! What a Hold session knows about its lock, shared by the
//! [`Lease`](crate::Lease) and the task reading the session's events: the
//! validity as the events moved it, and how the session ended.
//!
//! Every way the lock can go away ends the lease once, with the first
//! reason ([`End`]): the daemon sends `lost`, or `released` (asked for or
//! not), the stream ends or breaks (unless the lease reattaches), an Extend
//! of the lease's own is refused, or the validity runs out on this
//! process's clock, less [`stop_margin`], with no extension. The events on
//! the way ([`LeaseEvent`]) go to whoever reads them.

use crate::end::{lost_error, reason_of, End};
use crate::error::Error;
use crate::events::{LeaseEnd, LeaseEvent, LeaseEvents, EVENTS_KEPT};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, watch};

/// How long before the last known validity ends a [`Lease`](crate::Lease)
/// counts its lock as lost when no extension arrived: a tenth of the ttl,
/// from 50 ms to 2 s (as redlockctl and the Go, Python, Node and Java
/// clients do). It covers an event's time in transit and the work's
/// reaction time.
///
/// ```
/// use std::time::Duration;
/// use redlockd_client::stop_margin;
/// assert_eq!(stop_margin(Duration::from_secs(10)), Duration::from_secs(1));
/// assert_eq!(stop_margin(Duration::from_millis(100)), Duration::from_millis(50));
/// ```
pub fn stop_margin(ttl: Duration) -> Duration {
    (ttl / 10).clamp(Duration::from_millis(50), Duration::from_secs(2))
}

/// What a [`Lease`](crate::Lease) and its session's event reader share.
pub(crate) struct Shared {
    resource: String,
    ttl: Duration,
    state: Mutex<State>,
    end: watch::Sender<Option<End>>,
    /// Set when this side asked for the release (release or drop).
    releasing: AtomicBool,
    /// The events' readers; dropped when the lease ends, which tells them.
    events: Mutex<Option<broadcast::Sender<LeaseEvent>>>,
}

/// The lock's validity as the session's events (and the lease's own
/// Extends) moved it.
struct State {
    validity: Duration,
    valid_until: Instant,
    /// When the grant or the last session event arrived: the next
    /// extension through the session is counted from there.
    last_event_at: Instant,
    /// When the last extension of any kind arrived: the next one is due a
    /// third of the ttl later.
    heard: Instant,
    extensions: u64,
    draining: bool,
    /// The lease keeps the lock with Extends of its own (the session
    /// broke or went silent).
    extending: bool,
}

impl Shared {
    /// A session whose grant is valid until `valid_until`, its event read
    /// at `now`.
    pub(crate) fn new(
        resource: String,
        ttl: Duration,
        validity: Duration,
        valid_until: Instant,
        now: Instant,
    ) -> Shared {
        Shared {
            resource,
            ttl,
            state: Mutex::new(State {
                validity,
                valid_until,
                last_event_at: now,
                heard: now,
                extensions: 0,
                draining: false,
                extending: false,
            }),
            end: watch::Sender::new(None),
            releasing: AtomicBool::new(false),
            events: Mutex::new(Some(broadcast::Sender::new(EVENTS_KEPT))),
        }
    }

    /// The time to live asked for.
    pub(crate) fn ttl(&self) -> Duration {
        self.ttl
    }

    /// When the lease counts as lost unless an extension comes first.
    pub(crate) fn stop_at(&self) -> Instant {
        let valid_until = self.state().valid_until;
        valid_until
            .checked_sub(stop_margin(self.ttl))
            .unwrap_or(valid_until)
    }

    /// An extension with `validity`, read at `now`. It is pushed, not asked
    /// for, so there is no request of ours to count it from: the daemon
    /// sent it after the event before it, so it counts from when that one
    /// arrived. One read after the lease's stop time cannot revive it (its
    /// guarantee lapsed while the process was paused, say): that ends it.
    pub(crate) fn extended(&self, validity: Duration, now: Instant) {
        if now >= self.stop_at() {
            self.finish(End::unconfirmed(
                "the validity ran out before the extension was read",
            ));
            return;
        }
        let mut state = self.state();
        state.validity = validity;
        state.valid_until = state.valid_until.max(state.last_event_at + validity);
        state.last_event_at = now;
        state.heard = now;
        state.extensions += 1;
        state.extending = false;
        drop(state);
        self.emit(LeaseEvent::Extended { validity });
    }

    /// An Extend of the lease's own, sent at `sent`, answered `validity` at
    /// `now`: counted from when it was sent, as any call's answer. Like an
    /// event, one read after the stop time cannot revive the lease.
    pub(crate) fn extended_by_call(&self, validity: Duration, sent: Instant, now: Instant) {
        if now >= self.stop_at() {
            self.finish(End::unconfirmed(
                "the validity ran out before the Extend's answer was read",
            ));
            return;
        }
        let mut state = self.state();
        state.validity = validity;
        state.valid_until = state.valid_until.max(sent + validity);
        state.heard = now;
        state.extensions += 1;
    }

    /// When the last extension of any kind arrived.
    pub(crate) fn heard(&self) -> Instant {
        self.state().heard
    }

    /// Whether the lease keeps the lock with Extends of its own.
    pub(crate) fn extending(&self) -> bool {
        self.state().extending
    }

    /// The lease keeps the lock with Extends of its own from now.
    pub(crate) fn set_extending(&self) {
        self.state().extending = true;
    }

    /// Tells the events' readers, if any.
    pub(crate) fn emit(&self, event: LeaseEvent) {
        if let Some(sender) = self.events_sender().as_ref() {
            // No reader is not an error: events are for whoever listens.
            let _ = sender.send(event);
        }
    }

    /// The events from now on (none once the lease has ended).
    pub(crate) fn events(&self) -> LeaseEvents {
        match self.events_sender().as_ref() {
            Some(sender) => LeaseEvents::new(sender.subscribe()),
            None => LeaseEvents::ended(),
        }
    }

    /// The daemon said it is stopping (the lock stays held and extended
    /// until the drain ends). Not a point to count the next extension
    /// from: the daemon may have begun that extension before it sent this.
    pub(crate) fn draining(&self) {
        self.state().draining = true;
        self.emit(LeaseEvent::Draining);
    }

    /// Ends the lease with `end`, unless it already ended; whether it did.
    /// The events' readers then get `None`.
    pub(crate) fn finish(&self, end: End) -> bool {
        let ended = self.end.send_if_modified(|current| {
            if current.is_some() {
                return false;
            }
            *current = Some(end);
            true
        });
        if ended {
            self.events_sender().take();
        }
        ended
    }

    /// How the lease ended, for its holder, if it did.
    pub(crate) fn lease_end(&self) -> Option<LeaseEnd> {
        let end = self.ended()?;
        Some(LeaseEnd {
            reason: reason_of(Some(&end)),
            gone: end.gone(),
            valid_until: self.state().valid_until,
        })
    }

    /// How the lease ended, if it did.
    pub(crate) fn ended(&self) -> Option<End> {
        self.end.borrow().clone()
    }

    /// Whether this side asked for the release.
    pub(crate) fn releasing(&self) -> bool {
        self.releasing.load(Ordering::SeqCst)
    }

    /// Ends the lease now if its validity ran out on this process's clock.
    pub(crate) fn lapse_if_due(&self) {
        if Instant::now() >= self.stop_at() {
            self.finish(End::unconfirmed(
                "no extension arrived before the validity ran out",
            ));
        }
    }

    /// Marks the release as asked for by this side (release or drop).
    pub(crate) fn set_releasing(&self) {
        self.releasing.store(true, Ordering::SeqCst);
    }

    /// The lock's current validity, when it ends, how many extensions
    /// came, and whether the daemon is draining.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let state = self.state();
        Snapshot {
            validity: state.validity,
            valid_until: state.valid_until,
            extensions: state.extensions,
            draining: state.draining,
        }
    }

    /// A future that resolves with how the lease ended (see [`lost_error`]).
    /// It does not hold the shared state: once the lease and its session's
    /// reader are gone, the sender drops and it resolves.
    pub(crate) fn lost(&self) -> impl Future<Output = Error> + Send + 'static {
        let resource = self.resource.clone();
        let mut ends = self.end.subscribe();
        async move {
            let end = match ends.wait_for(Option::is_some).await {
                Ok(end) => end.clone(),
                Err(_) => None,
            };
            lost_error(&resource, end)
        }
    }

    /// Waits until the lease ends; how.
    pub(crate) async fn until_ended(&self) -> Option<End> {
        let mut ends = self.end.subscribe();
        let end = match ends.wait_for(Option::is_some).await {
            Ok(end) => end.clone(),
            Err(_) => None,
        };
        end
    }

    /// The error that says how the lease ended.
    pub(crate) fn lost_error(&self, end: Option<End>) -> Error {
        lost_error(&self.resource, end)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn events_sender(&self) -> MutexGuard<'_, Option<broadcast::Sender<LeaseEvent>>> {
        self.events.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What [`Shared::snapshot`] reads.
pub(crate) struct Snapshot {
    /// The daemon's last stated validity.
    pub(crate) validity: Duration,
    /// When it ends on this process's clock.
    pub(crate) valid_until: Instant,
    /// Extensions so far.
    pub(crate) extensions: u64,
    /// Whether the daemon said it is stopping.
    pub(crate) draining: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::{Code, Status};

    fn shared(ttl_ms: u64, valid_ms: u64) -> (Shared, Instant) {
        let now = Instant::now();
        let validity = Duration::from_millis(valid_ms);
        let s = Shared::new(
            "r".into(),
            Duration::from_millis(ttl_ms),
            validity,
            now + validity,
            now,
        );
        (s, now)
    }

    /// An extension counts from the previous event's arrival, never moves
    /// the validity back, and cannot revive a lapsed lease.
    #[test]
    fn extensions_count_from_the_previous_event() {
        let (s, t0) = shared(3_000, 2_900);
        let t1 = t0 + Duration::from_millis(1_000);
        s.extended(Duration::from_millis(2_950), t1);
        assert_eq!(s.state().valid_until, t0 + Duration::from_millis(2_950));
        assert_eq!(s.state().extensions, 1);
        let t2 = t1 + Duration::from_millis(1_000);
        s.extended(Duration::from_millis(2_950), t2);
        assert_eq!(s.state().valid_until, t1 + Duration::from_millis(2_950));
        assert!(s.ended().is_none());
        // Read after the stop time (valid_until - 300 ms): final.
        let late = t1 + Duration::from_millis(2_700);
        s.extended(Duration::from_millis(2_950), late);
        assert!(matches!(s.ended(), Some(End::Gone { .. })));
    }

    /// The first end wins; the error says which, with its code.
    #[test]
    fn first_end_wins() {
        let (s, _) = shared(3_000, 2_900);
        assert!(s.finish(End::broke("lost: x", Status::unavailable("gone"))));
        assert!(!s.finish(End::Released {
            was_held: true,
            requested: true
        }));
        let error = s.lost_error(s.ended());
        assert!(matches!(error, Error::Lost(_)));
        assert_eq!(error.code(), Code::Unavailable);
        assert!(error.to_string().contains("lost: x"), "{error}");
    }

    /// The margin is a tenth of the ttl, within [50 ms, 2 s].
    #[test]
    fn margins() {
        assert_eq!(stop_margin(Duration::from_secs(60)), Duration::from_secs(2));
        assert_eq!(
            stop_margin(Duration::from_secs(3)),
            Duration::from_millis(300)
        );
        assert_eq!(
            stop_margin(Duration::from_millis(10)),
            Duration::from_millis(50)
        );
    }
}
