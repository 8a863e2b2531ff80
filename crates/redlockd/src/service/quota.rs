//! Per-identity quotas on what an identity can keep open for long: `Hold`
//! sessions (`limits.max_sessions_per_identity`) and waiting acquisitions
//! (`limits.max_waiters_per_identity`). The global caps
//! (`limits.max_sessions`, `limits.max_waiters`) protect the daemon; these
//! keep one identity's silent sessions and parked waiters from taking the
//! whole of them and making every other identity's calls
//! RESOURCE_EXHAUSTED. The identity is the `[auth]` client, or the peer IP
//! address when authentication is off (the rate limit's key, see
//! `auth::QuotaKey`). A configured client can have its own quota
//! (`[[auth.clients]] max_sessions`, `max_waiters`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Counts per identity, each at most its own quota or `max`.
#[derive(Debug)]
pub(crate) struct Quota {
    max: usize,
    own: HashMap<Arc<str>, usize>,
    counts: Arc<Mutex<HashMap<Arc<str>, usize>>>,
}

/// One counted place of an identity; given back on drop.
#[derive(Debug)]
pub(crate) struct QuotaSlot {
    key: Arc<str>,
    counts: Arc<Mutex<HashMap<Arc<str>, usize>>>,
}

impl Quota {
    /// At most `max` places per identity, except the identities of `own`,
    /// which have their own quota.
    pub(crate) fn with_own(max: usize, own: HashMap<Arc<str>, usize>) -> Quota {
        Quota {
            max,
            own,
            counts: Arc::default(),
        }
    }

    /// Takes a place for `key`; `Err(quota)` when it has its quota already.
    pub(crate) fn take(&self, key: &Arc<str>) -> Result<QuotaSlot, usize> {
        let max = self.own.get(key).copied().unwrap_or(self.max);
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let count = counts.entry(Arc::clone(key)).or_insert(0);
        if *count >= max {
            return Err(max);
        }
        *count += 1;
        Ok(QuotaSlot {
            key: Arc::clone(key),
            counts: Arc::clone(&self.counts),
        })
    }
}

impl Drop for QuotaSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One identity at its quota leaves the others untouched; places come
    /// back on drop and empty entries are forgotten.
    #[test]
    fn per_identity() {
        let quota = Quota::with_own(2, HashMap::new());
        let a: Arc<str> = Arc::from("a");
        let b: Arc<str> = Arc::from("b");
        let a1 = quota.take(&a).unwrap();
        let _a2 = quota.take(&a).unwrap();
        assert_eq!(quota.take(&a).unwrap_err(), 2);
        let b1 = quota.take(&b).unwrap();
        drop(a1);
        assert!(quota.take(&a).is_ok());
        drop(b1);
        assert!(!quota.counts.lock().unwrap().contains_key(&b));
    }

    /// An identity with its own quota gets that one; the others the
    /// default.
    #[test]
    fn own_quota() {
        let big: Arc<str> = Arc::from("batch");
        let other: Arc<str> = Arc::from("web");
        let quota = Quota::with_own(1, HashMap::from([(Arc::clone(&big), 3)]));
        let held: Vec<_> = (0..3).map(|_| quota.take(&big).unwrap()).collect();
        assert_eq!(quota.take(&big).unwrap_err(), 3);
        let _w = quota.take(&other).unwrap();
        assert_eq!(quota.take(&other).unwrap_err(), 1);
        drop(held);
    }
}
