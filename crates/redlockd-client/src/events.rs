//! What a [`Lease`](crate::Lease) reports about its lock besides its end:
//! the events of the way it is kept ([`LeaseEvent`], read through
//! [`LeaseEvents`]), for logs and progress messages; and, once it ended,
//! how ([`LeaseEnd`]), for a holder that must decide how hard to stop.

use std::time::{Duration, Instant};
use tokio::sync::broadcast;

/// How many events a slow reader may fall behind before the oldest are
/// skipped: events are for logs, never for safety (that is
/// [`Lease::lost`](crate::Lease::lost)'s).
pub(crate) const EVENTS_KEPT: usize = 16;

/// Something that happened to a lease's lock while it is kept. None of
/// them ends the lease: [`Lease::lost`](crate::Lease::lost) says when it
/// ends. The last four come only from a lease that
/// [reattaches](crate::Acquire::reattach).
///
/// ```no_run
/// # async fn demo(lease: redlockd_client::Lease) {
/// use redlockd_client::LeaseEvent;
/// let mut events = lease.events();
/// while let Some(event) = events.next().await {
///     if let LeaseEvent::SessionBroke { reason } = event {
///         eprintln!("keeping the lock through Extend: {reason}");
///     }
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseEvent {
    /// The daemon extended the lock through the session.
    Extended {
        /// The validity it reported.
        validity: Duration,
    },
    /// The daemon said it is stopping (see
    /// [`Lease::is_draining`](crate::Lease::is_draining)).
    Draining,
    /// No extension came through the session for `silent` (half the ttl,
    /// where one is due every third): the lease extends the lock itself,
    /// with Extend on a connection of its own, while the session stays
    /// open.
    Silent {
        /// How long since the last extension.
        silent: Duration,
    },
    /// The session ended or broke: the lease keeps the lock with Extend on
    /// a connection of its own, after a pause (see
    /// [`Acquire::reattach`](crate::Acquire::reattach)).
    SessionBroke {
        /// How it ended, in words.
        reason: String,
    },
    /// One of the lease's own Extends failed (not a refusal: that ends the
    /// lease); it tries again on a new connection until the validity, less
    /// the stop margin, runs out.
    ExtendFailed {
        /// Why, in words.
        reason: String,
    },
    /// After the session broke or an Extend failed, one of the lease's own
    /// Extends kept the lock (later routine ones are not reported).
    Reattached {
        /// The validity the daemon reported.
        validity: Duration,
    },
}

/// The events of a lease, from when [`Lease::events`](crate::Lease::events)
/// was called. A reader that falls far behind skips the oldest.
///
/// ```no_run
/// # async fn demo(lease: redlockd_client::Lease) {
/// let mut events = lease.events();
/// tokio::select! {
///     Some(event) = events.next() => println!("{event:?}"),
///     lost = lease.lost() => eprintln!("{lost}"),
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct LeaseEvents {
    receiver: broadcast::Receiver<LeaseEvent>,
}

impl LeaseEvents {
    /// Events from `receiver`.
    pub(crate) fn new(receiver: broadcast::Receiver<LeaseEvent>) -> LeaseEvents {
        LeaseEvents { receiver }
    }

    /// Events of a lease that already ended: none.
    pub(crate) fn ended() -> LeaseEvents {
        let (_, receiver) = broadcast::channel(1);
        LeaseEvents { receiver }
    }

    /// The next event; `None` once the lease has ended (after the events
    /// that came before its end). Cancel-safe: race it in a
    /// `tokio::select!` loop.
    ///
    /// ```no_run
    /// # async fn demo(lease: redlockd_client::Lease) {
    /// let mut events = lease.events();
    /// while let Some(event) = events.next().await {
    ///     println!("{event:?}");
    /// }
    /// println!("the lease has ended");
    /// # }
    /// ```
    pub async fn next(&mut self) -> Option<LeaseEvent> {
        loop {
            match self.receiver.recv().await {
                Ok(event) => return Some(event),
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

/// How a lease ended: what [`Lease::ended`](crate::Lease::ended) says
/// once [`Lease::lost`](crate::Lease::lost) resolved.
///
/// ```no_run
/// # async fn demo(lease: redlockd_client::Lease) {
/// let lost = lease.lost().await;
/// if let Some(end) = lease.ended() {
///     if !end.gone {
///         // The lock may still be held until end.valid_until; stop now if
///         // the stream broke (the daemon may have released it), else by then.
///         let left = end.valid_until.saturating_duration_since(std::time::Instant::now());
///         println!("{} ({left:?} left)", end.reason);
///     }
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseEnd {
    /// Why, in words (the message of the [`Error::Lost`](crate::Error::Lost)
    /// that [`Lease::lost`](crate::Lease::lost) gives, without its prefix).
    pub reason: String,
    /// Whether the daemon said the lock is no longer this lease's (it sent
    /// `lost` or `released`, or an Extend of the lease's own was refused):
    /// nothing is left to release. `false` when it ended without the
    /// daemon's word (the validity ran out on this process's clock, the
    /// stream broke, the daemon never answered): the lock may then still be
    /// held, at most until [`LeaseEnd::valid_until`].
    pub gone: bool,
    /// When the lock's last known validity ends, on this process's
    /// monotonic clock: work done under it must have stopped by then. The
    /// daemon grants it to no one else before then while this process is
    /// silent (frozen, cut off); but a stream this process saw break may
    /// have been ended by its own side (its connection closed, or a proxy
    /// in between reset it), which the daemon takes for a release: after
    /// a broken stream, stop at once.
    pub valid_until: Instant,
}
