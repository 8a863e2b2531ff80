//! When to read an election again: the wait `Observe` and the gateway's
//! long-polled `Leader` share. Listening starts before the first read, so
//! a change during a read ends the next wait at once.

use super::elected;
use crate::redlock::changes::Listener;
use crate::redlock::{HeldLock, LockError, Redlock};
use std::sync::Arc;
use std::time::Duration;

/// One reader of one election.
pub(super) struct Watch {
    engine: Arc<Redlock>,
    resource: String,
    changes: Listener,
}

impl Watch {
    /// Watches the election whose leadership is the lock on `resource`.
    pub(super) fn new(engine: &Arc<Redlock>, resource: String) -> Watch {
        Watch {
            changes: engine.changes().listen(),
            engine: Arc::clone(engine),
            resource,
        }
    }

    /// The leader, read from a majority (see [`elected`]).
    pub(super) async fn read(&self) -> Result<Option<HeldLock>, LockError> {
        self.engine.inspect(&self.resource).await.map(elected)
    }

    /// Completes when the election may have changed since a read that found
    /// `held`: this replica heard of a change (`crate::redlock::changes`:
    /// a new leader or a release, on any replica), the leader's validity ran
    /// out unextended (a change nobody announces), or
    /// `redlock.wait_fallback` passed (a notice lost on its way).
    pub(super) async fn changed(&mut self, held: Option<&HeldLock>) {
        let mut next_read = self.engine.settings().wait_fallback;
        if let Some(held) = held {
            next_read = next_read.min(held.remaining + Duration::from_millis(1));
        }
        tokio::select! {
            () = self.changes.changed(&self.resource) => {}
            () = tokio::time::sleep(next_read) => {}
        }
    }
}
