//! The locks this replica has handed out and not seen end: what the
//! `redlock_locks_held` gauge counts, so an operator's dashboard shows how
//! many locks are held without scanning the masters.
//!
//! A lock is counted from the moment a caller receives it (an Acquire's
//! answer, a Hold session's `acquired`) or this replica extends it, until
//! it is released through this replica or its guaranteed validity runs
//! out. Summed over the replicas (`sum(redlock_locks_held)`), that is the
//! fleet's held locks, with two approximations, both bounded by one
//! validity period:
//! - a lock extended through another replica is counted there from the
//!   Extend on, and here until the validity this replica computed ends
//!   (counted twice meanwhile);
//! - a lock released through another replica is counted here until that
//!   validity ends.
//!
//! Counting from the masters instead (a SCAN of every key under the
//! prefix, per replica, per scrape) would be exact but costs the masters
//! work proportional to the keys they hold, and the masters are the part
//! of a deployment that cannot scale out.
//!
//! Tokens are not kept: an entry is a keyed hash of the token (the hasher's
//! keys are random per process), so the table holds no secret.

use super::token::Token;
use super::validity::Deadline;
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;

/// Entries kept at most (about 32 bytes each, plus the table's overhead):
/// beyond it new grants are not counted until expired ones are pruned, and
/// the gauge reads "at least this many".
const MAX_TRACKED: usize = 1 << 20;

/// The table of locks handed out, by keyed hash of their token.
#[derive(Debug, Default)]
pub(crate) struct HeldLocks {
    deadlines: Mutex<HashMap<u64, Deadline>>,
    keys: RandomState,
}

impl HeldLocks {
    /// A lock was handed to its caller, or extended, until `deadline`.
    pub(crate) fn hold(&self, token: &Token, deadline: Deadline) {
        let key = self.keys.hash_one(token.expose());
        let Ok(mut deadlines) = self.deadlines.lock() else {
            return;
        };
        if deadlines.len() >= MAX_TRACKED && !deadlines.contains_key(&key) {
            deadlines.retain(|_, d| !d.left().is_zero());
            if deadlines.len() >= MAX_TRACKED {
                return;
            }
        }
        deadlines.insert(key, deadline);
    }

    /// The lock of `token` was released through this replica (or its
    /// release was attempted: either way it is no longer held by the
    /// caller).
    pub(crate) fn forget(&self, token: &Token) {
        let key = self.keys.hash_one(token.expose());
        if let Ok(mut deadlines) = self.deadlines.lock() {
            deadlines.remove(&key);
        }
    }

    /// How many are still within their validity; drops those that are not.
    pub(crate) fn count(&self) -> usize {
        let Ok(mut deadlines) = self.deadlines.lock() else {
            return 0;
        };
        deadlines.retain(|_, d| !d.left().is_zero());
        deadlines.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redlock::validity::Started;
    use std::time::Duration;

    fn deadline(ttl: Duration) -> Deadline {
        let (_, deadline) = Started::now()
            .validity(ttl, 0.0)
            .expect("a positive ttl leaves validity");
        deadline
    }

    #[tokio::test(start_paused = true)]
    async fn counts_until_released_or_expired() {
        let held = HeldLocks::default();
        let token = || Token::generate().expect("the OS gives random bytes");
        let (a, b, c) = (token(), token(), token());
        held.hold(&a, deadline(Duration::from_secs(10)));
        held.hold(&b, deadline(Duration::from_secs(1)));
        held.hold(&c, deadline(Duration::from_secs(10)));
        assert_eq!(held.count(), 3);

        held.forget(&c);
        assert_eq!(held.count(), 2, "a release ends the count at once");

        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(held.count(), 1, "an expired lock is no longer counted");

        // An extension moves the deadline instead of counting twice.
        held.hold(&a, deadline(Duration::from_secs(30)));
        tokio::time::advance(Duration::from_secs(20)).await;
        assert_eq!(held.count(), 1);
        held.forget(&a);
        assert_eq!(held.count(), 0);
    }
}
