//! Per-identity quotas on what an identity can keep open for long: `Hold`
//! sessions (`limits.max_sessions_per_identity`) and waiting acquisitions
//! (`limits.max_waiters_per_identity`). The global caps
//! (`limits.max_sessions`, `limits.max_waiters`) protect the daemon; these
//! keep one identity's silent sessions and parked waiters from taking the
//! whole of them and making every other identity's calls
//! RESOURCE_EXHAUSTED. The identity is the `[auth]` client, or the peer IP
//! address when authentication is off (the rate limit's key, see
//! `auth::QuotaKey`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Counts per identity, each at most `max`.
#[derive(Debug)]
pub(crate) struct Quota {
    max: usize,
    counts: Arc<Mutex<HashMap<Arc<str>, usize>>>,
}

/// One counted place of an identity; given back on drop.
#[derive(Debug)]
pub(crate) struct QuotaSlot {
    key: Arc<str>,
    counts: Arc<Mutex<HashMap<Arc<str>, usize>>>,
}

impl Quota {
    /// At most `max` places per identity.
    pub(crate) fn new(max: usize) -> Quota {
        Quota {
            max,
            counts: Arc::default(),
        }
    }

    /// Takes a place for `key`; `Err(max)` when it has `max` already.
    pub(crate) fn take(&self, key: &Arc<str>) -> Result<QuotaSlot, usize> {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let count = counts.entry(Arc::clone(key)).or_insert(0);
        if *count >= self.max {
            return Err(self.max);
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
        let quota = Quota::new(2);
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
}
