//! The master's side of a lock on several resources at once
//! (`crate::redlock::multi`): one script call takes every key of the lock
//! on this master, or none.

/// KEYS: lock 1, fence 1, lock 2, fence 2, ... ARGV:
/// token, ttl ms, the number of resources n, waiter marker ttl ms ('0':
/// the caller will not wait). Refused because some are held, a caller
/// that will wait marks each held resource's fence hash (`mark`,
/// `super::batch_script`: it waits in every resource's queue),
/// so that their releases announce
/// themselves. The grant keeps the commit round (no proposal). All or
/// none, atomically (one script): first every resource is read (the fence
/// hash's `max`, lock-delay `nb`, semaphore limit `lim` and waiter marker
/// `wm` in one `HMGET`, the lock key's PTTL, and whether a
/// semaphore's permit of it is held here: `lim` names a limit
/// and one of its permit keys exists, as `ACQUIRE` checks, answered as
/// held with no known expiry, so a plain or multi-resource lock never
/// stands beside a semaphore's permits); if any lock key exists, or any
/// free key's lock-delay
/// still runs (as in `ACQUIRE`), nothing is written and the answer is
/// `{0, wait}` (held: `wait` the longest PTTL among the held keys, -1 if
/// one has no expiry) or `{0, wait, 'delay'}` (only delays: the longest
/// one left). Else every key is `SET NX PX` (they are all free, the script
/// runs alone) and the answer is `{1, now_micros, max 1, ..., max n}`.
/// Reads before it writes, as `ACQUIRE`: an operation that raises (a key
/// of another type) leaves nothing behind. The body indexes `KEYS` and
/// `ARGV` from its offsets `k` and `a` itself (its key count varies), so
/// it uses no `KEYS[n]` that `at_offsets` would rewrite.
pub(crate) const ACQUIRE_ALL: &str = include_str!("lua/acquire_all.lua");
