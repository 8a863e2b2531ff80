//! One acquisition at a time per request id on this replica.
//!
//! All acquisitions made with one request id use one token (derived from
//! it), so two of them running at once can undo each other: a failed
//! attempt's clean-up, or the release of a grant whose caller left (past
//! its deadline, or its connection gone), deletes that token everywhere,
//! including the lock the other call just reported. A client retries with
//! the same request id only after its previous call ended on its side, but
//! the daemon's detached task of that call can still be finishing its
//! attempt in flight and releasing what it got. So each acquisition with a
//! request id takes its turn here first, and holds it until its outcome is
//! settled: delivered to its caller, or released. A retry through the same
//! replica therefore never overlaps the previous call's release. Through
//! another replica it can (see `Redlock::acquire_detached_as`).

use super::Token;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// The turn of one acquisition with a request id; dropping it lets the
/// next one with the same request id (and resource) start.
pub(crate) type Turn = tokio::sync::OwnedMutexGuard<()>;

/// One request id's turn: a fair (first come, first served) lock.
type Slot = tokio::sync::Mutex<()>;

/// The turn of each (resource, derived token) with an acquisition in
/// progress. Entries live as long as someone holds or waits for the turn.
#[derive(Default)]
pub(crate) struct Turns {
    slots: Mutex<HashMap<(String, Token), Weak<Slot>>>,
}

impl Turns {
    /// Waits for the turn of `token`'s acquisitions of `resource` (first
    /// come, first served).
    pub(crate) async fn take(&self, resource: &str, token: &Token) -> Turn {
        self.slot(resource, token).lock_owned().await
    }

    fn slot(&self, resource: &str, token: &Token) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        // Forget turns nobody holds or waits for any more: the map stays as
        // small as the acquisitions with a request id in progress.
        slots.retain(|_, slot| slot.strong_count() > 0);
        let key = (resource.to_owned(), token.clone());
        if let Some(slot) = slots.get(&key).and_then(Weak::upgrade) {
            return slot;
        }
        let slot = Arc::new(Slot::new(()));
        slots.insert(key, Arc::downgrade(&slot));
        slot
    }

    /// How many (resource, token) pairs have a turn held or awaited.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots
            .values()
            .filter(|slot| slot.strong_count() > 0)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A second taker of the same turn waits until the first drops it;
    /// another token or resource does not wait; nothing is kept after.
    #[tokio::test(start_paused = true)]
    async fn one_turn_at_a_time() {
        let turns = Turns::default();
        let token = Token::generate().expect("OS RNG");
        let other = Token::generate().expect("OS RNG");
        let first = turns.take("r", &token).await;
        let _independent = turns.take("r", &other).await;
        let _elsewhere = turns.take("s", &token).await;
        let second = turns.take("r", &token);
        tokio::pin!(second);
        let waited = tokio::time::timeout(Duration::from_secs(1), second.as_mut()).await;
        assert!(waited.is_err(), "the second taker waits for the first");
        drop(first);
        let turn = tokio::time::timeout(Duration::from_secs(1), second)
            .await
            .expect("the turn passes on once dropped");
        drop(turn);
        drop(_independent);
        drop(_elsewhere);
        assert_eq!(turns.len(), 0);
    }
}
