//! Each script's effect on one master, one function per Lua script, in the
//! order its Lua body runs (the line quoted in each comment is the Lua it
//! stands for). A script runs atomically on its master: here, one call on
//! one [`Store`]. Sources: `crates/redlockd/src/valkey/scripts/mod.rs` (ACQUIRE,
//! COMMIT_FENCE, EXTEND, RELEASE, RECREATE), `valkey/scripts/semaphore.rs`
//! (ACQUIRE_PERMIT), `valkey/scripts/rw.rs` (ACQUIRE_SHARED, COMMIT_SHARED,
//! EXTEND_SHARED, RECREATE_SHARED, RELEASE_SHARED) and `valkey/scripts/multi.rs`
//! (ACQUIRE_ALL, reduced to one resource).
//!
//! Left out of every script: the lock-delay (`nb`, `delay`), the
//! hold-at-least (`lu`), the waiter marker (`wm`) and the writer-waiting
//! marker (`ww`): each only ever refuses a grant or lengthens a key, so
//! leaving them out keeps every behaviour that could break exclusion or
//! fence order. The master's clock (`TIME`) is the model's ghost clock
//! (see the crate doc, "Time").

use crate::store::{Holder, LockVal, Stamp, Store, Token};

/// Which kind of grant a token is, which picks its scripts and keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A plain (mutex) lock on `lock:R`.
    Plain,
    /// A shared (read) grant: a member of `readers:R`, the sentinel in
    /// `lock:R`.
    Shared,
    /// Permit `index` of the semaphore of `limit` on `R`: `lock:R<0x1f>i`.
    Permit {
        /// The semaphore's limit.
        limit: u8,
        /// The permit's index (below `limit`).
        index: u8,
    },
    /// A lock on several resources, reduced to its effect on `R`: acquired
    /// by ACQUIRE_ALL, then committed, extended, re-created and released
    /// with the plain scripts.
    Multi,
}

impl Kind {
    /// Whether grants of the two kinds may never stand together:
    /// everything conflicts with an exclusive grant, permits with shared
    /// grants, permits of different limits with each other, and permits of
    /// one limit when they are the same permit.
    pub fn conflicts(self, other: Kind) -> bool {
        match (self, other) {
            (Kind::Shared, Kind::Shared) => false,
            (Kind::Permit { limit: a, index: i }, Kind::Permit { limit: b, index: j }) => {
                a != b || i == j
            }
            _ => true,
        }
    }
}

/// The behaviours before the two fixes, each switched on alone to show the
/// model finds its defect (see the crate doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Counterfactuals {
    /// D2 unfixed: RECREATE puts a permit key back without the limit
    /// record (`lim`), and EXTEND does not repair a missing `lim`.
    pub recreate_without_limit: bool,
    /// D3 unfixed: a permit's acquire reads, and its commit raises, the
    /// permit's own hash's `max` instead of the resource's.
    pub per_kind_fences: bool,
    /// D4 unfixed (the scripts as they are in main): RECREATE looks only
    /// at its own key, so a permit key goes back beside a plain holder's
    /// key (or the readers' sentinel), and a plain or shared key beside
    /// held permits. Fixed (a proposal of this model, not in main yet):
    /// RECREATE refuses where the kind's acquire would answer a conflict.
    pub recreate_across_kinds: bool,
}

/// An acquire script's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AcquireReply {
    /// `{1, max, now, took}`: set here; `max` as read before the SET, and
    /// whether the proposal was taken (then `max` is now the proposal).
    Granted {
        /// The counter as read.
        max: u8,
        /// The one-round proposal was taken.
        took: bool,
        /// The master's clock (`now_micros`), for the fence's floor.
        now: u8,
    },
    /// `{0, pttl}`: held here.
    Refused,
    /// `{0, '0', 'limit', ..}`: another kind or limit holds the resource.
    Conflict,
}

/// An extend script's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ExtendReply {
    /// `{0}`: someone else holds the key.
    NotHeld,
    /// `{2}`: the key is gone (expired, or lost with a restart).
    Missing,
    /// `{1, fence}`: extended; the fence recorded beside the token here
    /// (0: none).
    Extended {
        /// The recorded fence, 0 when this master has no record for it.
        fence: u8,
    },
}

/// ACQUIRE (plain lock), with the one-round proposal `proposal` (0: none).
pub fn acquire(s: &mut Store, stamp: Stamp, proposal: u8, clock: u8) -> AcquireReply {
    // local f = redis.call('HMGET', KEYS[2], 'max', 'nb', 'delay', 'lu', 'lim', 'wm')
    let max = s.fence.max;
    let lim = s.fence.lim;
    // if f[5] then ... if redis.call('EXISTS', unpack(ks)) > 0 then return {0, '0', 'limit', f[5]} end
    if let Some(lim) = lim {
        if s.permit_of_limit_held(lim) {
            return AcquireReply::Conflict;
        }
    }
    // if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then ... return {0, tostring(pttl)}
    if s.lock.is_some() {
        return AcquireReply::Refused;
    }
    s.lock = Some(LockVal::Token(stamp));
    // if f[5] then redis.call('HDEL', KEYS[2], 'lim') end
    s.fence.lim = None;
    // if p > tonumber(max) and p >= t and p <= t + tonumber(ARGV[4]) then
    //   HSET max F, holder token, fence F ... return {1, max, now, 1}
    if proposal > max && proposal >= clock {
        s.fence.max = proposal;
        s.fence.holder = Some(Holder {
            token: stamp.token,
            fence: proposal,
        });
        return AcquireReply::Granted {
            max,
            took: true,
            now: clock,
        };
    }
    // return {1, max, now, 0}
    AcquireReply::Granted {
        max,
        took: false,
        now: clock,
    }
}

/// ACQUIRE_ALL for one resource (`valkey/scripts/multi.rs`): all-or-none over the
/// lock's resources, here the one.
pub fn acquire_all(s: &mut Store, stamp: Stamp, clock: u8) -> AcquireReply {
    // local f = redis.call('HMGET', fence, 'max', 'nb', 'lim', 'wm')
    let max = s.fence.max;
    // if lim then ... if redis.call('EXISTS', unpack(ks)) > 0 then held = true
    let permit_held = s.fence.lim.is_some_and(|lim| s.permit_of_limit_held(lim));
    // local pttl = redis.call('PTTL', lock); if pttl ~= -2 then held = true
    if permit_held || s.lock.is_some() {
        // if held then ... return {0, tostring(wait)}
        return AcquireReply::Refused;
    }
    // redis.call('SET', KEYS[k + 2 * i], ARGV[a], 'PX', ARGV[a + 1])
    s.lock = Some(LockVal::Token(stamp));
    // {1, now_micros, max 1, ...}: no proposal (and `lim` is left as it is)
    AcquireReply::Granted {
        max,
        took: false,
        now: clock,
    }
}

/// ACQUIRE_PERMIT: permit `index` of the semaphore of `limit`.
pub fn acquire_permit(
    s: &mut Store,
    stamp: Stamp,
    (limit, index): (u8, u8),
    clock: u8,
    cf: Counterfactuals,
) -> AcquireReply {
    // if redis.call('EXISTS', KEYS[3]) == 1 then return {0, '0', 'limit', '0'} end
    if s.lock.is_some() {
        return AcquireReply::Conflict;
    }
    // local b = redis.call('HMGET', KEYS[4], 'lim', 'wm'); local lim = b[1]
    let lim = s.fence.lim;
    // if lim and lim ~= ARGV[3] then ... if EXISTS(..) > 0 then return {0, '0', 'limit', lim}
    if let Some(lim) = lim {
        if lim != limit && s.permit_of_limit_held(lim) {
            return AcquireReply::Conflict;
        }
    }
    let i = usize::from(index);
    // local f = redis.call('HMGET', KEYS[2], 'max', 'nb'): the permit's own
    // counter (D3 unfixed); fixed: the resource's `max`, read by the HMGET
    // of KEYS[4] above.
    let max = match cf.per_kind_fences {
        true => s.permit_fences[i].max,
        false => s.fence.max,
    };
    // if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    if s.permits[i].is_some() {
        // return {0, tostring(redis.call('PTTL', KEYS[1]))}
        return AcquireReply::Refused;
    }
    s.permits[i] = Some(stamp);
    // if lim ~= ARGV[3] then redis.call('HSET', KEYS[4], 'lim', ARGV[3]) end
    s.fence.lim = Some(limit);
    // return {1, max, now_micros()}
    AcquireReply::Granted {
        max,
        took: false,
        now: clock,
    }
}

/// ACQUIRE_SHARED.
pub fn acquire_shared(s: &mut Store, stamp: Stamp, clock: u8) -> AcquireReply {
    // local f = redis.call('HMGET', KEYS[2], 'max', 'nb', 'ww', 'lim', 'wm')
    // if f[4] then ... if EXISTS(..) > 0 then return {0, '0', 'limit', f[4]} end
    if let Some(lim) = s.fence.lim {
        if s.permit_of_limit_held(lim) {
            return AcquireReply::Conflict;
        }
    }
    let max = s.fence.max;
    // local held = redis.call('GET', KEYS[1]); if held and held ~= 'shared' then return {0, pttl}
    if let Some(LockVal::Token(_)) = s.lock {
        return AcquireReply::Refused;
    }
    // prune(); ZADD KEYS[3] (now + ttl) token; cover()
    match s.reader(stamp.token) {
        Some(at) => s.readers.as_mut_slice()[at] = stamp,
        None => s.readers.push(stamp),
    }
    s.cover();
    // return {1, max, now_micros()}
    AcquireReply::Granted {
        max,
        took: false,
        now: clock,
    }
}

/// COMMIT_FENCE (plain, multi-resource and permit grants): writes `fence`
/// only where the token still holds its key.
pub fn commit_fence(
    s: &mut Store,
    token: Token,
    kind: Kind,
    fence: u8,
    cf: Counterfactuals,
) -> bool {
    let record = Some(Holder { token, fence });
    match kind {
        Kind::Permit { index, .. } => {
            let i = usize::from(index);
            // if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
            if s.permits[i].map(|p| p.token) != Some(token) {
                return false;
            }
            // if tonumber(ARGV[2]) > max then HSET max .. holder .. fence
            // (D3 unfixed: the permit's own `max`; fixed: the resource's)
            let max = match cf.per_kind_fences {
                true => &mut s.permit_fences[i].max,
                false => &mut s.fence.max,
            };
            *max = (*max).max(fence);
            s.permit_fences[i].holder = record;
        }
        Kind::Plain | Kind::Multi => {
            // if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
            if !matches!(s.lock, Some(LockVal::Token(t)) if t.token == token) {
                return false;
            }
            // local max = HGET max; if F > max then HSET max F, holder, fence else HSET holder, fence
            s.fence.max = s.fence.max.max(fence);
            s.fence.holder = record;
        }
        Kind::Shared => return commit_shared(s, token, fence),
    }
    true
}

/// COMMIT_SHARED.
fn commit_shared(s: &mut Store, token: Token, fence: u8) -> bool {
    // if not s or tonumber(s) <= nowm or GET KEYS[1] ~= 'shared' then return 0 end
    if s.reader(token).is_none() || s.lock != Some(LockVal::Shared) {
        return false;
    }
    // if tonumber(ARGV[2]) > max then HSET max ARGV[2] end
    s.fence.max = s.fence.max.max(fence);
    // HSET 'r:' .. token ARGV[2]
    s.fence.readers.retain(|(t, _)| *t != token);
    s.fence.readers.push((token, fence));
    s.fence.readers.sort();
    true
}

/// EXTEND (EXTEND_SHARED for a shared token): the key's expiry counts
/// from round `stamp.gen` if it is extended.
pub fn extend(s: &mut Store, stamp: Stamp, kind: Kind, cf: Counterfactuals) -> ExtendReply {
    let token = stamp.token;
    let (key, hash_holder) = match kind {
        Kind::Shared => return extend_shared(s, stamp),
        Kind::Permit { index, .. } => {
            let i = usize::from(index);
            (&mut s.permits[i], s.permit_fences[i].holder)
        }
        Kind::Plain | Kind::Multi => {
            // local holder = redis.call('GET', KEYS[1])
            // if holder ~= ARGV[1] then if holder then return {0} end return {2} end
            return match s.lock {
                Some(LockVal::Token(t)) if t.token == token => {
                    // PEXPIRE KEYS[1] ARGV[2]
                    s.lock = Some(LockVal::Token(stamp));
                    // local h = HMGET KEYS[2] holder fence; if h[1] ~= ARGV[1] then return {1, '0'} end
                    ExtendReply::Extended {
                        fence: recorded(s.fence.holder, token),
                    }
                }
                Some(_) => ExtendReply::NotHeld,
                None => ExtendReply::Missing,
            };
        }
    };
    match *key {
        Some(p) if p.token == token => {
            // PEXPIRE KEYS[1]; PEXPIRE KEYS[3] (the resource's hash, which keeps `lim`)
            *key = Some(stamp);
            if let Kind::Permit { limit, .. } = kind {
                // The fix of D2: a permit that finds `lim` missing where its
                // key stands writes it (the token carries its limit).
                if !cf.recreate_without_limit && s.fence.lim.is_none() {
                    s.fence.lim = Some(limit);
                }
            }
            ExtendReply::Extended {
                fence: recorded(hash_holder, token),
            }
        }
        Some(_) => ExtendReply::NotHeld,
        None => ExtendReply::Missing,
    }
}

/// The `fence` field where `holder` is `token`, else 0 (`{1, '0'}`).
fn recorded(holder: Option<Holder>, token: Token) -> u8 {
    holder.filter(|h| h.token == token).map_or(0, |h| h.fence)
}

/// EXTEND_SHARED.
fn extend_shared(s: &mut Store, stamp: Stamp) -> ExtendReply {
    // if held and held ~= 'shared' then return {0} end
    if let Some(LockVal::Token(_)) = s.lock {
        return ExtendReply::NotHeld;
    }
    // if not s or tonumber(s) <= nowm then return {2} end
    let Some(at) = s.reader(stamp.token) else {
        return ExtendReply::Missing;
    };
    // ZADD KEYS[3] (now + ttl) token; cover()
    s.readers.as_mut_slice()[at] = stamp;
    s.cover();
    // return {1, HGET 'r:' .. token or '0'}
    let fence = s
        .fence
        .readers
        .as_slice()
        .iter()
        .find(|(t, _)| *t == stamp.token)
        .map_or(0, |(_, f)| *f);
    ExtendReply::Extended { fence }
}

/// RECREATE (RECREATE_SHARED for a shared token): puts a lost key back.
pub fn recreate(s: &mut Store, stamp: Stamp, kind: Kind, cf: Counterfactuals) -> bool {
    if !cf.recreate_across_kinds && other_kind_holds(s, kind) {
        // The fix of D4: the conflict checks of the kind's acquire script.
        return false;
    }
    match kind {
        Kind::Shared => {
            // if held and held ~= 'shared' then return 0 end
            if let Some(LockVal::Token(_)) = s.lock {
                return false;
            }
            // if redis.call('ZSCORE', KEYS[3], ARGV[1]) then return 0 end
            if s.reader(stamp.token).is_some() {
                return false;
            }
            // ZADD; cover()
            s.readers.push(stamp);
            s.cover();
            true
        }
        Kind::Permit { limit, index } => {
            // if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
            let key = &mut s.permits[usize::from(index)];
            if key.is_some() {
                return false;
            }
            *key = Some(stamp);
            // The fix of D2: the permit's limit record goes back with it.
            if !cf.recreate_without_limit {
                s.fence.lim = Some(limit);
            }
            true
        }
        Kind::Plain | Kind::Multi => {
            // if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
            if s.lock.is_some() {
                return false;
            }
            s.lock = Some(LockVal::Token(stamp));
            true
        }
    }
}

/// Whether a grant of another kind (or another limit) stands here, as the
/// acquire script of `kind` would see it: for a permit, `lock:R` exists
/// (a plain token or the readers' sentinel) or `lim` names another limit
/// one of whose permits is held (ACQUIRE_PERMIT's first checks); for the
/// others, `lim` names a limit one of whose permits is held (ACQUIRE's and
/// ACQUIRE_SHARED's first check; a plain key beside the sentinel, or the
/// converse, is already refused by RECREATE's own `SET NX` and
/// RECREATE_SHARED's `GET`).
fn other_kind_holds(s: &Store, kind: Kind) -> bool {
    let lim_held = |other: Option<u8>| {
        s.fence
            .lim
            .is_some_and(|lim| Some(lim) != other && s.permit_of_limit_held(lim))
    };
    match kind {
        Kind::Permit { limit, .. } => s.lock.is_some() || lim_held(Some(limit)),
        Kind::Plain | Kind::Multi | Kind::Shared => lim_held(None),
    }
}

/// RELEASE (RELEASE_SHARED for a shared token): compare-and-delete.
pub fn release(s: &mut Store, token: Token, kind: Kind) -> bool {
    match kind {
        Kind::Shared => {
            // local s = ZSCORE KEYS[3] token; if not s then return 0 end
            let Some(at) = s.reader(token) else {
                return false;
            };
            // ZREM; HDEL 'r:' .. token; if GET == 'shared' and not cover() then ..
            s.readers.remove(at);
            s.fence.readers.retain(|(t, _)| *t != token);
            s.cover();
            true
        }
        Kind::Permit { index, .. } => {
            // DELIFEQ KEYS[1] ARGV[1] (or GET, DEL)
            let key = &mut s.permits[usize::from(index)];
            if key.map(|p| p.token) != Some(token) {
                return false;
            }
            *key = None;
            true
        }
        Kind::Plain | Kind::Multi => {
            if !matches!(s.lock, Some(LockVal::Token(t)) if t.token == token) {
                return false;
            }
            s.lock = None;
            true
        }
    }
}
