//! The local queue of callers waiting for a resource, first come first served.
//!
//! Only the waiter at the front of a resource's queue tries to acquire it, so
//! one daemon replica never stampedes the masters with its own waiters, and
//! the longest-waiting caller gets the lock next. The front waiter is woken
//! when the holder releases (through this replica or, via pub/sub, another
//! one); when it leaves the queue, the next waiter becomes the front and is
//! told when the lock it waits behind can expire at the latest.

use super::Tally;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

/// Why a waiter was woken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// The resource was released. `at_once`: the release went through this
    /// replica, so no other replica's waiter can be ahead: try immediately.
    /// Otherwise (a notice from another replica, or the cleanup of a failed
    /// attempt) try after a small random jitter that breaks ties between
    /// replicas woken by the same release.
    Released {
        /// Try without the tie-breaking jitter.
        at_once: bool,
        /// The release's notice id (`super::notices`): lets a waiter tell
        /// the clean-up of its own attempt from a holder's release.
        notice: u64,
    },
    /// This waiter is now the front of the queue. `holder_expires` is when
    /// the lock just granted to its predecessor expires at the latest (none
    /// when the predecessor gave up without the lock).
    Front {
        /// Latest expiry of the lock the new front waits behind.
        holder_expires: Option<Instant>,
    },
}

/// A configured limit on waiting was hit; becomes RESOURCE_EXHAUSTED.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WaitLimit {
    /// `limits.max_waiters_per_resource`.
    #[error("too many waiters on this resource (limits.max_waiters_per_resource = {0})")]
    PerResource(usize),
    /// `limits.max_waiters`.
    #[error("too many waiters in this daemon (limits.max_waiters = {0})")]
    Total(usize),
}

struct Slot {
    id: u64,
    wake: mpsc::UnboundedSender<Wake>,
}

#[derive(Default)]
struct Queues {
    by_resource: HashMap<String, Queue>,
    total: usize,
    next_id: u64,
}

/// One resource's waiters, and what its front waiter's latest attempt ran
/// into when that was an outage.
#[derive(Default)]
struct Queue {
    slots: VecDeque<Slot>,
    /// The latest failed attempt's counts, when too few masters answered
    /// (none after a refusal): a waiter that gives up without having
    /// attempted itself tells its caller this, not "held".
    outage: Option<Tally>,
    /// Whether the front waiter has an attempt under way.
    attempting: bool,
    /// Told when the front's attempt ends (failed, or it left the queue):
    /// a waiter whose wait ends during that attempt learns what it found
    /// (see [`Place::attempt_ended`]).
    ended: Arc<Notify>,
}

/// All local waiters of one engine, by resource.
pub(crate) struct Waiters {
    queues: Mutex<Queues>,
    max_per_resource: usize,
    max_total: usize,
}

impl Waiters {
    /// An empty set of queues with the configured limits.
    pub(crate) fn new(max_per_resource: usize, max_total: usize) -> Waiters {
        Waiters {
            queues: Mutex::new(Queues::default()),
            max_per_resource,
            max_total,
        }
    }

    /// Number of callers waiting, all resources together.
    pub(crate) fn len(&self) -> usize {
        self.lock().total
    }

    /// True when nobody waits.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes a place at the back of `resource`'s queue.
    pub(crate) fn join(self: &Arc<Self>, resource: &str) -> Result<Place, WaitLimit> {
        let (wake, woken) = mpsc::unbounded_channel();
        let mut queues = self.lock();
        let queued_here = queues
            .by_resource
            .get(resource)
            .map_or(0, |queue| queue.slots.len());
        if queued_here >= self.max_per_resource {
            return Err(WaitLimit::PerResource(self.max_per_resource));
        }
        if queues.total >= self.max_total {
            return Err(WaitLimit::Total(self.max_total));
        }
        let id = queues.next_id;
        queues.next_id += 1;
        let queue = queues.by_resource.entry(resource.to_owned()).or_default();
        queue.slots.push_back(Slot { id, wake });
        let front = queue.slots.len() == 1;
        queues.total += 1;
        Ok(Place {
            waiters: Arc::clone(self),
            resource: resource.to_owned(),
            id,
            front,
            woken,
            granted_until: None,
        })
    }

    /// Wakes the front waiter of `resource`, if any: it was released (the
    /// release's notice id is `notice`).
    pub(crate) fn released(&self, resource: &str, at_once: bool, notice: u64) {
        let queues = self.lock();
        if let Some(front) = queues
            .by_resource
            .get(resource)
            .and_then(|queue| queue.slots.front())
        {
            let _ = front.wake.send(Wake::Released { at_once, notice });
        }
    }

    fn leave(&self, resource: &str, id: u64, granted_until: Option<Instant>) {
        let mut queues = self.lock();
        let Some(queue) = queues.by_resource.get_mut(resource) else {
            return;
        };
        let Some(position) = queue.slots.iter().position(|slot| slot.id == id) else {
            return;
        };
        queue.slots.remove(position);
        if position == 0 {
            // Its attempt, if one was under way, ended with it.
            queue.attempting = false;
            queue.ended.notify_waiters();
            if let Some(next) = queue.slots.front() {
                let _ = next.wake.send(Wake::Front {
                    holder_expires: granted_until,
                });
            }
        }
        if queue.slots.is_empty() {
            queues.by_resource.remove(resource);
        }
        queues.total -= 1;
    }

    fn lock(&self) -> MutexGuard<'_, Queues> {
        // A panic while holding this lock cannot leave the queues half
        // updated in a way that matters more than losing the daemon.
        self.queues
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One caller's place in a resource's queue; leaving it (drop) lets the
/// next waiter move up.
pub(crate) struct Place {
    waiters: Arc<Waiters>,
    resource: String,
    id: u64,
    front: bool,
    woken: mpsc::UnboundedReceiver<Wake>,
    granted_until: Option<Instant>,
}

impl Place {
    /// Whether this waiter is the one allowed to try.
    pub(crate) fn is_front(&self) -> bool {
        self.front
    }

    /// Waits for the next wake-up addressed to this waiter.
    pub(crate) async fn woken(&mut self) -> Wake {
        match self.woken.recv().await {
            Some(wake) => {
                if matches!(wake, Wake::Front { .. }) {
                    self.front = true;
                }
                wake
            }
            // The sender lives in the queue until this place leaves it.
            None => std::future::pending().await,
        }
    }

    /// Records that this (front) waiter starts an attempt.
    pub(crate) fn attempting(&self) {
        if let Some(queue) = self.waiters.lock().by_resource.get_mut(&self.resource) {
            queue.attempting = true;
        }
    }

    /// Records what this (front) waiter's failed attempt ran into: the
    /// counts of an outage, or `None` for a refusal.
    pub(crate) fn attempted(&self, outage: Option<Tally>) {
        if let Some(queue) = self.waiters.lock().by_resource.get_mut(&self.resource) {
            queue.outage = outage;
            queue.attempting = false;
            queue.ended.notify_waiters();
        }
    }

    /// Waits for the front waiter's attempt under way, if there is one, to
    /// end; at once otherwise. Why: a waiter whose wait ends without its
    /// turn answers what stood in the way, and while the front's attempt
    /// runs (its masters silent for up to a round's deadline) the queue
    /// knows nothing yet. The caller bounds the wait.
    pub(crate) async fn attempt_ended(&self) {
        let ended = {
            let queues = self.waiters.lock();
            match queues.by_resource.get(&self.resource) {
                Some(queue) if queue.attempting => Arc::clone(&queue.ended),
                _ => return,
            }
        };
        let notified = ended.notified();
        tokio::pin!(notified);
        // Registered before the state is read again: an end between the
        // two is not missed.
        notified.as_mut().enable();
        let still = self
            .waiters
            .lock()
            .by_resource
            .get(&self.resource)
            .is_some_and(|queue| queue.attempting);
        if still {
            notified.await;
        }
    }

    /// The latest outage of this resource's front waiter's attempts, if
    /// its latest attempt failed for want of masters.
    pub(crate) fn outage(&self) -> Option<Tally> {
        self.waiters
            .lock()
            .by_resource
            .get(&self.resource)
            .and_then(|queue| queue.outage)
    }

    /// Leaves the queue with the lock, held until `expires` at the latest:
    /// the next waiter will not try before a release or that time.
    pub(crate) fn granted(mut self, expires: Instant) {
        self.granted_until = Some(expires);
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.waiters
            .leave(&self.resource, self.id, self.granted_until);
    }
}

#[cfg(test)]
mod tests;
