//! Admission: work reaches the masters at the pace they can answer it.
//!
//! Why: every round gives each master `node_timeout` to answer. When a burst
//! of callers arrives at once (a fleet reconnecting after a replica
//! restarted), sending all their commands at once puts thousands of
//! operations in each master's queue; the last ones are answered after
//! `node_timeout`, counted as failed masters, and the callers are told
//! UNAVAILABLE although every master is healthy. UNAVAILABLE invites an
//! immediate retry, which feeds the herd.
//!
//! So at most `max_in_flight` acquisition attempts, and as many extensions,
//! are out at the masters at once; the rest wait here, in arrival order,
//! *before* their round starts. A round's `node_timeout` and a grant's
//! validity are therefore measured from the moment its commands are sent,
//! never across the daemon's own queue. With the in-flight work bounded,
//! each master's batch queue is bounded too (a few batches of
//! [`crate::valkey`]'s maximum size), so a master's answer time is its own.
//!
//! The bound adapts to the masters (additive increase, multiplicative
//! decrease, as TCP's congestion window does): an attempt whose first round
//! took more than half of `node_timeout` is a sign that the masters (or the
//! machine they share) fall behind, and cuts the acquisition bound by a
//! quarter, at most once per `node_timeout`; every `limit` attempts answered
//! briskly raise it by one, up to `max_in_flight`, never below
//! [`FLOOR`]. So a burst on a busy machine is admitted at the pace the
//! masters answer in, not at the pace that times them out ([`Aimd`], pure
//! and tested).
//!
//! Extensions have their own permits: a burst of new acquisitions cannot
//! delay the extensions that keep held locks alive. Releases and validations
//! are not admitted: a release must go out at once (it frees the resource
//! for others), and both are single cheap rounds.
//!
//! Past `max_queued` waiting acquisitions, a new one is refused at once with
//! [`LockError::Overloaded`] (RESOURCE_EXHAUSTED: the daemon is the
//! bottleneck, not the masters), which bounds the memory a burst can take.

use super::LockError;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant;

/// The acquisition bound never adapts below this (or below
/// `max_in_flight`, if that is smaller).
pub(crate) const FLOOR: usize = 8;

/// Where the bound starts (or at `max_in_flight`, if that is smaller): a
/// burst that arrives before anything was measured must not put the
/// ceiling's worth of work on the masters at once.
pub(crate) const START: usize = 32;

/// The adaptive bound on acquisitions in flight: additive increase,
/// multiplicative decrease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Aimd {
    /// The bound now.
    limit: usize,
    floor: usize,
    ceiling: usize,
    /// Brisk attempts since the last change.
    brisk: usize,
    /// When the bound was last cut.
    cut_at: Option<Instant>,
}

/// What an outcome does to the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// Nothing.
    Keep,
    /// One permit more.
    Grow,
    /// This many permits fewer.
    Shrink(usize),
}

impl Aimd {
    /// Starts at [`START`], and grows towards `ceiling` while the masters
    /// answer briskly.
    pub(crate) fn new(ceiling: usize) -> Aimd {
        let ceiling = ceiling.max(1);
        Aimd {
            limit: START.min(ceiling),
            floor: FLOOR.min(ceiling),
            ceiling,
            brisk: 0,
            cut_at: None,
        }
    }

    /// The bound now.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// One attempt's outcome: `slow` when its round took more than half of
    /// `node_timeout`. Cuts by a quarter at most once per `cooldown` (the
    /// attempts in flight when the masters fell behind all report it);
    /// grows by one every quarter of `limit` brisk attempts (from 32 to 128
    /// in about 2,000 attempts, well under a second of a busy daemon).
    pub(crate) fn outcome(&mut self, slow: bool, now: Instant, cooldown: Duration) -> Change {
        if slow {
            self.brisk = 0;
            let cooling = self.cut_at.is_some_and(|at| now < at + cooldown);
            if cooling || self.limit <= self.floor {
                return Change::Keep;
            }
            let cut = (self.limit / 4).max(1).min(self.limit - self.floor);
            self.limit -= cut;
            self.cut_at = Some(now);
            return Change::Shrink(cut);
        }
        self.brisk += 1;
        if self.brisk < (self.limit / 4).max(1) || self.limit >= self.ceiling {
            return Change::Keep;
        }
        self.brisk = 0;
        self.limit += 1;
        Change::Grow
    }
}

/// The bounds of admission, from `[limits]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AdmissionLimits {
    /// Acquisition attempts out at the masters at once (and, separately,
    /// extensions).
    pub max_in_flight: usize,
    /// Acquisitions waiting for admission at most; past it they are refused.
    pub max_queued: usize,
}

/// The gates in front of the masters: one for acquisition attempts, one
/// for extensions.
#[derive(Debug)]
pub(crate) struct Admission {
    acquisitions: Semaphore,
    /// The adaptive bound and the permits still to take back after a cut
    /// (permits in use are forgotten as they come back).
    bound: Mutex<(Aimd, usize)>,
    extensions: Semaphore,
    queued: AtomicUsize,
    max_queued: usize,
    /// Half of it is "slow"; the cool-down between two cuts.
    node_timeout: Duration,
}

/// The right to have one acquisition attempt out at the masters; given
/// back when dropped (or kept back, after a cut).
#[derive(Debug)]
pub(crate) struct Admitted<'a> {
    gate: &'a Admission,
    permit: Option<SemaphorePermit<'a>>,
}

impl Admitted<'_> {
    /// Tells the gate how long the attempt's first round took.
    pub(crate) fn round_took(&self, elapsed: Duration) {
        self.gate.outcome(elapsed > self.gate.node_timeout / 2);
    }
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        let mut bound = self.gate.lock_bound();
        if bound.1 > 0 {
            bound.1 -= 1;
            permit.forget();
        }
    }
}

/// Counts one acquisition in the queue while it lives.
struct InQueue<'a>(&'a AtomicUsize);

impl Drop for InQueue<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Admission {
    /// Gates with `limits` (an in-flight bound of 0 is taken as 1), for
    /// masters given `node_timeout` to answer.
    pub(crate) fn new(limits: AdmissionLimits, node_timeout: Duration) -> Admission {
        let permits = limits.max_in_flight.max(1);
        let bound = Aimd::new(permits);
        Admission {
            acquisitions: Semaphore::new(bound.limit()),
            bound: Mutex::new((bound, 0)),
            extensions: Semaphore::new(permits),
            queued: AtomicUsize::new(0),
            max_queued: limits.max_queued,
            node_timeout,
        }
    }

    fn lock_bound(&self) -> std::sync::MutexGuard<'_, (Aimd, usize)> {
        // Plain numbers: usable even if a holder panicked.
        self.bound.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies one attempt's outcome to the bound.
    fn outcome(&self, slow: bool) {
        let mut bound = self.lock_bound();
        match bound.0.outcome(slow, Instant::now(), self.node_timeout) {
            Change::Keep => {}
            Change::Grow if bound.1 > 0 => bound.1 -= 1,
            Change::Grow => self.acquisitions.add_permits(1),
            Change::Shrink(cut) => {
                let taken = self.acquisitions.forget_permits(cut);
                bound.1 += cut - taken;
            }
        }
    }

    /// The acquisition bound now.
    pub(crate) fn limit(&self) -> usize {
        self.lock_bound().0.limit()
    }

    /// Waits for the right to send one acquisition attempt; it is held
    /// until the attempt (its clean-up included) is over. Refused at once
    /// when `max_queued` acquisitions wait already.
    pub(crate) async fn acquisition(&self) -> Result<Admitted<'_>, LockError> {
        let permit = self.acquisition_permit().await?;
        Ok(Admitted {
            gate: self,
            permit: Some(permit),
        })
    }

    async fn acquisition_permit(&self) -> Result<SemaphorePermit<'_>, LockError> {
        // Free permits are only left over when nobody waits (tokio's
        // semaphore hands a released permit to the first waiter), so this
        // never overtakes the queue.
        if let Ok(permit) = self.acquisitions.try_acquire() {
            return Ok(permit);
        }
        let ahead = self.queued.fetch_add(1, Ordering::Relaxed);
        let _in_queue = InQueue(&self.queued);
        if ahead >= self.max_queued {
            return Err(LockError::Overloaded {
                max_queued: self.max_queued,
            });
        }
        self.acquisitions
            .acquire()
            .await
            .map_err(|_| LockError::Internal("the admission gate was closed"))
    }

    /// Waits for the right to send one extension.
    pub(crate) async fn extension(&self) -> Result<SemaphorePermit<'_>, LockError> {
        self.extensions
            .acquire()
            .await
            .map_err(|_| LockError::Internal("the admission gate was closed"))
    }

    /// Acquisitions waiting for admission now.
    pub(crate) fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests;
