//! What W2's contenders saw, the bench's own ([`crate::w2`]) or a peer's
//! ([`crate::w2_peers`]): the hand-off figures are made of these alike.

use std::time::Duration;

/// One grant, its times on the run's clock.
pub(crate) struct Grant {
    pub contender: usize,
    pub acquire_sent: Duration,
    pub granted: Duration,
    pub release_sent: Duration,
    /// When the Release answered (None: it failed).
    pub release_done: Option<Duration>,
}

/// What one contender saw.
#[derive(Default)]
pub(crate) struct ContenderLog {
    pub grants: Vec<Grant>,
    /// Failed calls (a peer: also acquisitions that gave up, redsync's
    /// after its 32 tries).
    pub errors: u64,
    /// Releases that found the lock no longer held on a majority.
    pub not_held: u64,
    /// How long the Acquire dropped at the deadline had waited.
    pub cut_wait: Option<Duration>,
}
