//! The scripts of shared (read) grants, one per step as for the mutex
//! (`super::scripts`), run through the same batch script. The design and
//! its safety argument: `crate::redlock::rw`.
//!
//! Keys: the lock key (which holds `'shared'`,
//! [`crate::redlock::keys::SHARED_SENTINEL`], while shared holders hold),
//! the fence hash (`max` is the one fence counter of the resource; `r:`
//! and a shared token: that holder's fence; `ww`: the writer-waiting
//! marker's end, ms on the master's clock) and the readers sorted set
//! (token -> expiry, ms on the master's clock). Every body keeps the
//! invariant: while the set has an unexpired member, the lock key holds
//! the sentinel and expires no earlier than the set's latest expiry.
//!
//! Every body reads before it writes where a wrong-typed key could raise,
//! like the mutex's scripts. They use only commands Redis 6.2, Redis 7 and
//! Valkey 9 all have (`ZRANGE .. WITHSCORES` with indexes, `ZRANGEBYSCORE`).

/// Lua shared by the bodies: `prune` drops expired members (and their
/// fences); `cover` makes the lock key's sentinel (and the set) live as
/// long as the latest member, or deletes the sentinel when none is left
/// (returns whether a member is left). Each body defines them itself (an
/// operation is a function of its own in the batch script).
macro_rules! with_helpers {
    ($($body:tt)*) => {
        concat!(include_str!("lua/shared_helpers.lua"), $($body)*)
    };
}

/// KEYS: lock, fence, readers. ARGV: token,
/// ttl ms, waiter marker ttl ms ('0': the caller will not wait).
/// One `HMGET` of the fence hash reads `max`, the lock-delay `nb`, the
/// writer-waiting marker `ww`, the semaphore limit `lim` and the waiter
/// marker `wm`.
/// A shared grant on this master: refused as [`super::ACQUIRE`]
/// refuses (`{0, '0', 'limit', limit}`) while a semaphore's permit of the
/// resource is held here; refused (`{0, pttl}`) while an exclusive
/// token holds the lock key, or while a writer-waiting marker runs (`{0,
/// left}`: until it ends), or, the key being free, while a lock-delay runs
/// (`{0, left, 'delay'}`, as [`super::ACQUIRE`]). Else adds the
/// token with expiry now + ttl and returns `{1, max, now_micros}` like
/// the exclusive acquire (no proposal: a shared grant keeps the commit
/// round). Refused by a holder or a writer-waiting marker, a caller that
/// will wait marks the resource as waited for (`wm`), as
/// [`super::ACQUIRE`] does.
pub(crate) const ACQUIRE_SHARED: &str = with_helpers!(include_str!("lua/acquire_shared.lua"));

/// KEYS: lock, fence, readers. ARGV: token, fence, fence ttl ms, lock ttl
/// ms (then owner, kind and the terms, unused: a shared grant records only
/// its fence), the acquisition's epoch ('0': none). Only where the token
/// is an unexpired member and no other epoch of it is recorded
/// (`e:<token>`, `crate::redlock::claim`): raise `max` to the fence, record
/// `r:<token>` = fence (and `e:<token>` = the epoch), refresh the hash's
/// expiry, raise the horizon to the lock's ttl. Returns 1 if done.
pub(crate) const COMMIT_SHARED: &str = with_helpers!(include_str!("lua/commit_shared.lua"));

/// KEYS: lock, fence, readers. ARGV: token, ttl ms, fence ttl ms, (the
/// limit, unused), the claim as [`super::EXTEND`] takes it.
/// `{0}` while an exclusive token holds the key, `{2}` when the token is
/// no unexpired member (lost or expired here), `{3}` for an own claim
/// where another epoch of the token is recorded (`e:<token>`), else resets
/// its expiry to now + ttl, re-covers, raises the horizon (a take records
/// its epoch) and returns `{1, fence}` ('0' when this master did not take
/// part in the commit).
pub(crate) const EXTEND_SHARED: &str = with_helpers!(include_str!("lua/extend_shared.lua"));

/// KEYS: lock, fence, readers. ARGV: token, ttl ms. Puts back a shared
/// grant that still holds on a majority on a master that lost it (see
/// `Master::recreate`): unless an exclusive token holds the key, a
/// semaphore's permit is held there (under `lim`, as the shared acquire
/// checks), or the token is already a member. Ignores the writer marker and the lock-delay: the
/// grant exists already. Returns 1 if added.
pub(crate) const RECREATE_SHARED: &str = with_helpers!(include_str!("lua/recreate_shared.lua"));

/// KEYS: lock, fence, readers (then the resource's fence hash again,
/// unused). ARGV: token, release
/// channel, release notice (then two flags of the exclusive release,
/// unused: a shared grant has no hold-at-least), and as `OPT[6]` the
/// releasing acquisition's epoch ('0' or not sent: a client's own). Removes nothing (0) where
/// another epoch of the token is recorded (`e:<token>`,
/// `crate::redlock::claim`). Removes the token, its fence and its epoch;
/// when it was the last member, deletes the sentinel and, where a
/// replica has waiters (the fence hash's waiter marker `wm` has not
/// passed, as for [`super::RELEASE`]), announces the release
/// (waiting writers wake), else re-covers. Returns 1 if the token was an
/// unexpired member.
pub(crate) const RELEASE_SHARED: &str = with_helpers!(include_str!("lua/release_shared.lua"));

/// KEYS: lock, fence, readers. ARGV: token. The token's remaining time
/// (ms) if it is an unexpired member and the sentinel stands, else -3.
pub(crate) const CHECK_SHARED: &str = with_helpers!(include_str!("lua/check_shared.lua"));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redlock::keys::SHARED_SENTINEL;

    /// Every shared script writes or compares the one sentinel value the
    /// exclusive side knows (`crate::redlock::keys`), and is in the batch.
    #[test]
    fn scripts_use_the_sentinel() {
        let sentinel = format!("'{SHARED_SENTINEL}'");
        let lua = super::super::BatchScript::new()
            .lua
            .into_string()
            .unwrap_or_default();
        for body in [
            ACQUIRE_SHARED,
            COMMIT_SHARED,
            EXTEND_SHARED,
            RECREATE_SHARED,
            RELEASE_SHARED,
            CHECK_SHARED,
        ] {
            assert!(body.contains(&sentinel));
            let first = body.trim().lines().next().unwrap_or_default();
            assert!(lua.contains(first));
        }
        assert!(super::super::ACQUIRE.contains(&sentinel));
    }
}
