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
//! [`crate::node`]'s maximum size), so a master's answer time is its own.
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
use tokio::sync::{Semaphore, SemaphorePermit};

/// The bounds of admission, from `[limits]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionLimits {
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
    extensions: Semaphore,
    queued: AtomicUsize,
    max_queued: usize,
}

/// Counts one acquisition in the queue while it lives.
struct InQueue<'a>(&'a AtomicUsize);

impl Drop for InQueue<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Admission {
    /// Gates with `limits` (an in-flight bound of 0 is taken as 1).
    pub(crate) fn new(limits: AdmissionLimits) -> Admission {
        let permits = limits.max_in_flight.max(1);
        Admission {
            acquisitions: Semaphore::new(permits),
            extensions: Semaphore::new(permits),
            queued: AtomicUsize::new(0),
            max_queued: limits.max_queued,
        }
    }

    /// Waits for the right to send one acquisition attempt; the permit is
    /// held until the attempt (its clean-up included) is over. Refused at
    /// once when `max_queued` acquisitions wait already.
    pub(crate) async fn acquisition(&self) -> Result<SemaphorePermit<'_>, LockError> {
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
mod tests {
    use super::*;

    /// Past the in-flight bound callers queue in order; past the queue bound
    /// they are refused at once, and a freed permit goes to the queue's head.
    #[tokio::test]
    async fn queues_then_refuses() {
        let gate = Admission::new(AdmissionLimits {
            max_in_flight: 1,
            max_queued: 1,
        });
        let first = gate.acquisition().await.expect("a free permit");
        let mut second = Box::pin(gate.acquisition());
        assert!(futures::poll!(second.as_mut()).is_pending(), "queued");
        assert_eq!(gate.queued(), 1);
        match gate.acquisition().await {
            Err(LockError::Overloaded { max_queued: 1 }) => {}
            other => panic!("expected Overloaded, got {other:?}"),
        }
        assert_eq!(gate.queued(), 1, "the refused caller left the count");
        drop(first);
        let _second = second.await.expect("the queue's head is admitted");
        assert_eq!(gate.queued(), 0);
    }

    /// Extensions do not wait behind acquisitions.
    #[tokio::test]
    async fn extensions_have_their_own_permits() {
        let gate = Admission::new(AdmissionLimits {
            max_in_flight: 1,
            max_queued: 10,
        });
        let _acquiring = gate.acquisition().await.expect("a free permit");
        let _extending = gate.extension().await.expect("its own permit");
    }

    /// A caller that gives up while queued leaves no trace in the count.
    #[tokio::test]
    async fn cancelled_waiter_leaves_the_queue() {
        let gate = Admission::new(AdmissionLimits {
            max_in_flight: 1,
            max_queued: 10,
        });
        let first = gate.acquisition().await.expect("a free permit");
        {
            let mut waiting = Box::pin(gate.acquisition());
            assert!(futures::poll!(waiting.as_mut()).is_pending());
            assert_eq!(gate.queued(), 1);
        }
        assert_eq!(gate.queued(), 0);
        drop(first);
        let _again = gate.acquisition().await.expect("the permit came back");
    }
}
