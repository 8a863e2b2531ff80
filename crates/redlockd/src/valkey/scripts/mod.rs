//! The Lua scripts that make each Redlock step atomic on one master.
//!
//! They never travel alone: every command to a master is an operation in a
//! batch ([`batch_script`], sent by `super::super::batch`), so that one script call
//! carries the operations of every caller waiting for that master at that
//! moment. Key layout: see `crate::redlock::keys`.

pub(crate) mod multi;
pub(crate) mod rw;
pub(crate) mod semaphore;

use crate::config::Counterfactuals;
use fred::prelude::Value;
use std::time::Duration;

/// Which script a batched operation runs: its index (from 1) in the
/// batch script's table of operations, see [`batch_script`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// [`ACQUIRE`].
    Acquire = 1,
    /// [`COMMIT_FENCE`].
    CommitFence = 2,
    /// [`EXTEND`].
    Extend = 3,
    /// [`RECREATE`].
    Recreate = 4,
    /// [`RELEASE`].
    Release = 5,
    /// [`CHECK`].
    Check = 6,
    /// [`INSPECT`].
    Inspect = 7,
    /// [`semaphore::ACQUIRE_PERMIT`].
    AcquirePermit = 8,
    /// [`rw::ACQUIRE_SHARED`].
    AcquireShared = 9,
    /// [`rw::COMMIT_SHARED`].
    CommitShared = 10,
    /// [`rw::EXTEND_SHARED`].
    ExtendShared = 11,
    /// [`rw::RECREATE_SHARED`].
    RecreateShared = 12,
    /// [`rw::RELEASE_SHARED`].
    ReleaseShared = 13,
    /// [`rw::CHECK_SHARED`].
    CheckShared = 14,
    /// `multi::ACQUIRE_ALL` (a lock on several resources).
    AcquireAll = 15,
}

impl Op {
    /// Every operation, in the order of their codes.
    pub(crate) const ALL: [Op; 15] = [
        Op::Acquire,
        Op::CommitFence,
        Op::Extend,
        Op::Recreate,
        Op::Release,
        Op::Check,
        Op::Inspect,
        Op::AcquirePermit,
        Op::AcquireShared,
        Op::CommitShared,
        Op::ExtendShared,
        Op::RecreateShared,
        Op::ReleaseShared,
        Op::CheckShared,
        Op::AcquireAll,
    ];

    /// A short fixed name for metrics.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Op::Acquire => "acquire",
            Op::CommitFence => "commit_fence",
            Op::Extend => "extend",
            Op::Recreate => "recreate",
            Op::Release => "release",
            Op::Check => "check",
            Op::Inspect => "inspect",
            Op::AcquirePermit => "acquire_permit",
            Op::AcquireShared => "acquire_shared",
            Op::CommitShared => "commit_shared",
            Op::ExtendShared => "extend_shared",
            Op::RecreateShared => "recreate_shared",
            Op::ReleaseShared => "release_shared",
            Op::CheckShared => "check_shared",
            Op::AcquireAll => "acquire_all",
        }
    }

    /// The operation's Lua body as the batch script runs it: [`Op::lua`],
    /// with the fixed defects `counterfactuals` names put back
    /// (`crate::config::Counterfactuals`, for the safety checkers only).
    pub(crate) fn lua_with(self, counterfactuals: Counterfactuals) -> String {
        let mut body = self.lua().to_owned();
        for (op, on, fixed, defect) in COUNTERFACTUALS {
            let on = on(&counterfactuals);
            if *op == self && on {
                body = body.replace(fixed, defect);
            }
        }
        body
    }

    /// The operation's Lua body (it reads its own `KEYS` and `ARGV`).
    pub(crate) fn lua(self) -> &'static str {
        match self {
            Op::Acquire => ACQUIRE,
            Op::CommitFence => COMMIT_FENCE,
            Op::Extend => EXTEND,
            Op::Recreate => RECREATE,
            Op::Release => RELEASE,
            Op::Check => CHECK,
            Op::Inspect => INSPECT,
            Op::AcquirePermit => semaphore::ACQUIRE_PERMIT,
            Op::AcquireShared => rw::ACQUIRE_SHARED,
            Op::CommitShared => rw::COMMIT_SHARED,
            Op::ExtendShared => rw::EXTEND_SHARED,
            Op::RecreateShared => rw::RECREATE_SHARED,
            Op::ReleaseShared => rw::RELEASE_SHARED,
            Op::CheckShared => rw::CHECK_SHARED,
            Op::AcquireAll => multi::ACQUIRE_ALL,
        }
    }
}

/// A switch of [`Counterfactuals`], the operation it changes, the fixed
/// line and the defect's line that replaces it.
type Counterfactual = (Op, fn(&Counterfactuals) -> bool, &'static str, &'static str);

/// Each fixed defect a counterfactual puts back, as a textual change of one
/// line of one operation's body (`tests::counterfactuals_apply` checks that
/// every fixed line is still there to change).
const COUNTERFACTUALS: &[Counterfactual] = &[
    // A permit's key put back without its semaphore's limit record.
    (
        Op::Recreate,
        |c| c.recreate_without_limit,
        "  if ARGV[3] ~= '0' then\n    redis.call('HSET', KEYS[2], 'lim', ARGV[3])",
        "  if false then\n    redis.call('HSET', KEYS[2], 'lim', ARGV[3])",
    ),
    (
        Op::Extend,
        |c| c.recreate_without_limit,
        "  if ARGV[4] ~= '0' then redis.call('HSETNX', KEYS[3], 'lim', ARGV[4]) end\n",
        "",
    ),
    // A permit's fence from a counter of its own.
    (
        Op::AcquirePermit,
        |c| c.per_kind_fences,
        "local max = b[3] or '0'",
        "local max = f[1] or '0'",
    ),
    (
        Op::CommitFence,
        |c| c.per_kind_fences,
        "if KEYS[3] ~= KEYS[2] then maxs = redis.call('HGET', KEYS[3], 'max') end",
        "",
    ),
    (
        Op::CommitFence,
        |c| c.per_kind_fences,
        "if KEYS[3] ~= KEYS[2] then\n  if above",
        "if false then\n  if above",
    ),
];

/// The marker a batched operation's reply starts with when the operation
/// raised an error (`{'!err', message}`); no operation returns it.
pub(crate) const ERROR_MARKER: &str = "!err";

/// The one script every command to a master goes through: it runs a batch
/// of operations, each the body of one of the scripts below wrapped as a
/// function of its offsets into `KEYS` and `ARGV` (see [`at_offsets`]), so
/// a body reads as if it ran alone. An operation that fails (a key of the wrong type)
/// answers `{'!err', message}` and the others still run.
///
/// Layout: `KEYS[1]` is the master's horizon key, then come every
/// operation's keys in order; `ARGV[1]` the number of operations, then per
/// operation its code ([`Op`]), its number of keys, its number of
/// arguments, and the arguments.
///
/// The horizon: operations that make a lock stand here with a ttl (a fence
/// commit, an extension, a re-creation, each only where the token holds
/// the lock) call `raise(ttl)`; once the batch has run, the horizon key's
/// expiry is raised to the longest such ttl if it is shorter (absent: set).
/// A horizon without expiry (set by hand) is left alone; readers take it as
/// `max_ttl`. Why: `crate::valkey::horizon`. `PEXPIRE .. GT` would do in one
/// command, but not on Redis 6, and not on an absent key.
///
/// The waiter marker: an operation refused where its caller will wait in
/// the queue calls `mark(fence hash, marker ttl ms, current marker)`, which
/// sets the resource's fence hash's `wm` field to the master's now + ttl
/// (ms): some replica has a waiter for the resource until then, so a
/// release must announce itself (see [`RELEASE`]). A marker read by the
/// operation that still has at least half its ttl to run is left as it is
/// (no write: a contended resource's refusals cost no command for it):
/// half the ttl (`crate::redlock::wait`: twice the fallback pause plus four
/// node timeouts, plus a second) still outlasts the waiter's pause before
/// its next attempt, which marks again. The hash gets an expiry of at
/// least the marker's ttl when it has less (the marker may have created
/// it): `PTTL` and `PEXPIRE` rather than `PEXPIRE .. NX`, which Redis 6
/// (`crate::valkey::server_info::MIN_VERSION`) lacks.
pub(crate) fn batch_script(
    counterfactuals: Counterfactuals,
    horizon_allowance: Duration,
) -> String {
    let mut lua = String::from(include_str!("lua/batch_head.lua"));
    for op in Op::ALL {
        lua.push_str("function(k, a)\n");
        lua.push_str(&at_offsets(op.lua_with(counterfactuals).trim()));
        lua.push_str("\nend,\n");
    }
    lua.push_str(include_str!("lua/batch_tail.lua"));
    let allowance = horizon_allowance.as_millis().to_string();
    lua.replace("ALLOWANCE", &allowance)
}

/// The highest `KEYS`/`ARGV` index a script body may use ([`ACQUIRE`] takes
/// ten arguments).
const MAX_INDEX: usize = 12;

/// A script body with `KEYS[n]` and `ARGV[n]` read at the operation's
/// offsets `k` and `a` in the batch's arrays: no per-operation tables to
/// build (allocation was a good part of the masters' time).
fn at_offsets(body: &str) -> String {
    let mut out = body.to_owned();
    for n in 1..=MAX_INDEX {
        out = out
            .replace(&format!("KEYS[{n}]"), &format!("KEYS[k + {}]", n - 1))
            .replace(&format!("ARGV[{n}]"), &format!("ARGV[a + {}]", n - 1));
    }
    out
}

/// KEYS: lock, fence. ARGV: token, ttl ms,
/// proposed fence (0: none), proposal window µs, fence ttl ms, waiter
/// marker ttl ms ('0': the caller will not wait in the queue), then the
/// holder and the grant's terms as [`COMMIT_FENCE`] takes them: owner,
/// kind, lock_delay ms, hold_at_least ms; then the writer mark ms; last,
/// the acquisition's epoch ('0': none; `crate::redlock::claim`), recorded
/// with the holder where the proposal is taken. Where the SET NX succeeds
/// and the record still names the token (left by an earlier acquisition of
/// the request id that ended: the key was free), the record takes this
/// epoch at once, so that the earlier one's stale epoch does not refuse
/// this acquisition's commit, while a take-over arriving after this SET
/// still does.
///
/// Everything the acquire needs to know before its `SET NX` is in the one
/// `HMGET` of the fence hash (no other key read in the common
/// cycle): `max`, the terms (`nb`, `delay`, `lu`), the semaphore limit
/// field `lim` and the waiter marker `wm`. First, before anything is
/// written: returns `{0, '0', 'limit', limit}` when a semaphore's permit of
/// the resource is held here (`lim` names its limit, and one of its permit
/// keys exists: `crate::redlock::semaphore`); a `lim` whose permits are all
/// gone is stale, and a grant here deletes it.
/// Returns `{1, old max, now_micros, took}` when the SET NX succeeded, else
/// `{0, pttl}`, or `{0, left, 'delay'}` when the key is free but a
/// lock-delay still runs (`left` ms until the master's clock reaches the
/// fence hash's `nb`, see [`COMMIT_FENCE`]), or `{0, pttl, 'own'}` when an
/// acquisition with a request id (an epoch) finds the key held by its own
/// token: an earlier acquisition of the request id holds it, and the
/// engine resumes that lock instead of cleaning up
/// (`crate::redlock::attempt`).
/// Where refused because the key is held, a caller that will wait marks
/// the resource as waited for (`mark`, see [`batch_script`]: the fence
/// hash's `wm`), so that the holder's release announces itself (see
/// [`RELEASE`] and `rw::RELEASE_SHARED`: the key may hold
/// shared holders' sentinel). Refused because shared holders hold here
/// (the lock key holds the sentinel, `crate::redlock::rw`), it also sets
/// the writer-waiting marker: the fence hash's `ww` = now + writer mark ms
/// (0: none), which refuses new shared grants until then.
/// `took` is 1 where the
/// proposal was taken: old max below it and `now <= F <= now + window`;
/// then the script writes what the commit would ([`COMMIT_FENCE`], with
/// `F` as the fence and the acquire's instant as `at`): `max`, `holder`,
/// `fence`, `owner`, `kind`, `at`, the lock-delay (`delay`, `nb`) and the
/// hold-at-least (`lu`), clears the writer-waiting marker (`ww`: the writer
/// it was set for is in, as the commit clears it), refreshes the hash's
/// expiry and raises the horizon to the lock's ttl (the one-round grant,
/// see `crate::redlock::fence`).
/// `nb` counts from now, the key's own start, so it is the key's expiry +
/// delay as with the commit. An earlier grant's terms are deleted only
/// where the first read found them (the script runs atomically, so that
/// read is current): in the common case, no terms then or now, the grant
/// costs `HMGET`, `SET`, `HSET` and `PEXPIRE`, with no `HDEL`. The proposal block is the part after the
/// SET, kept apart so that other changes to the script merge easily.
/// Reads before it writes: the fence hash is read first and the `SET NX`
/// comes last, so an operation that raises (a fence key of another type:
/// WRONGTYPE) leaves nothing behind.
/// Numbers travel as strings: a Lua number would lose nothing below 2^53,
/// but strings keep the conversion in one obvious place (Rust). The
/// master's clock is read once per batch (`now_micros`, defined by
/// [`batch_script`]): the batch runs atomically, so every operation in it
/// happens at that instant.
pub(crate) const ACQUIRE: &str = include_str!("lua/acquire.lua");

/// KEYS: lock, fence, the resource's own fence hash (a permit's: its
/// resource's; else the same as fence). ARGV: token, fence, fence ttl ms,
/// lock ttl ms, owner, kind, lock_delay ms, hold_at_least ms, the
/// acquisition's epoch ('0': none). Refused (0) where the token's record
/// names another epoch: another acquisition of the same request id took
/// the lock over (`crate::redlock::claim`); else the epoch is recorded
/// with the holder.
/// Only where the token still holds the lock: raise the resource's `max`
/// to the fence (one fence sequence per resource, whatever the kind: a
/// permit's grant raises the same counter a plain grant reads, see
/// `crate::redlock::fence`), record the holder's fence, owner, session kind
/// and the master's time of
/// the commit (`at`, microseconds: when it was acquired, for `Inspect`),
/// refresh the expiry, raise the horizon to the
/// lock's ttl (a grant stands once a majority committed: see
/// `super::super::horizon`). Returns 1 if done. The owner rides on the commit
/// that every grant sends anyway: no extra command, one HSET as before.
///
/// The lock's terms, by the master's own clock (`TIME`, read
/// once per batch; scripts replicate their effects, the default since
/// Redis 5, so replicas get the values, not the call):
/// - a lock-delay records `delay` and `nb` (not before) = now + ttl +
///   delay, at or after the key's own expiry + delay (the key was set
///   earlier, by the acquire). [`EXTEND`] moves `nb` with the expiry, a
///   release clears it ([`RELEASE`]), and [`ACQUIRE`] refuses a free key
///   until the clock passes `nb`. So only a lock that ends by expiry keeps
///   the resource for the delay;
/// - a hold-at-least records `lu` (least until) = now + hold_at_least,
///   which a holder's release honours.
///
/// A commit also clears the writer-waiting marker (`ww`, see [`ACQUIRE`]):
/// the writer it was set for is in, and other writers still waiting set it
/// again when shared holders next refuse them (`crate::redlock::rw`). In
/// the same `HDEL` as the delay's fields: no extra command.
///
/// Clock jumps: a master whose clock jumps ahead ends a delay early, one
/// that jumps back keeps it longer (at most until the fence hash expires,
/// `fence_ttl`, which config validation keeps above every delay). Either
/// way only availability is at stake, never mutual exclusion: the delay
/// only ever *refuses* grants, and fences still order writers. One master
/// alone cannot hold a resource back: a grant needs a majority, and each
/// master judges by its own clock, so the delay a quorum enforces is the
/// quorum-th earliest. A record a failed attempt left on a minority is
/// cleared by its clean-up release.
pub(crate) const COMMIT_FENCE: &str = include_str!("lua/commit_fence.lua");

/// KEYS: lock, fence, the resource's own fence hash (a permit's: its
/// resource's; else the same as fence). ARGV: token, ttl ms, fence ttl ms,
/// the semaphore's limit ('0': not a permit), the claim (`0`, `o<epoch>`,
/// `t<epoch>`: `crate::redlock::claim::Claim`). An own claim is refused
/// (`{3}`) where the token's record names another epoch (another
/// acquisition of the request id took the lock over); a take records its
/// epoch with the holder (where the record was another token's or gone,
/// the record becomes the token's without a fence: the grant's fence is
/// on the other masters).
/// Compare-and-PEXPIRE; where extended, raises the horizon to the ttl. A
/// permit's extension also refreshes its resource's fence hash to the
/// fence ttl (above any lock's ttl), so that the semaphore's limit field
/// there (`lim`, see `semaphore::ACQUIRE_PERMIT`) lives at
/// least as long as the permit key: a permit kept for days by extensions
/// alone keeps refusing other limits and plain locks. Where the permit's
/// key stands but `lim` is gone (a key put back by an older daemon, or a
/// hash lost on its own), it writes `lim` back (`HSETNX`: a record naming
/// another limit is left as it is). Returns `{0}` when someone else holds the key, `{2}`
/// when the key is gone (this master restarted and lost it, or it expired),
/// else `{1, fence}` where fence is '0' if this master did not take part in
/// the grant's commit. Where the grant has a lock-delay, its end (`nb`)
/// moves with the new expiry (see [`COMMIT_FENCE`]).
pub(crate) const EXTEND: &str = include_str!("lua/extend.lua");

/// KEYS: lock, fence, the resource's own fence hash (a permit's: its
/// resource's, which holds the waiters' marker; else the same as fence).
/// ARGV: token, release channel, release
/// notice, '1' if the master has DELIFEQ (Valkey 9), '1' if the grant's
/// hold-at-least is honoured (a holder's release; not a failed attempt's
/// clean-up nor an operator's force-release), the releasing acquisition's
/// epoch ('0': a client's own Release, whatever the epoch). Deletes
/// nothing (0) where the token's record names another epoch: another
/// acquisition of the request id took the lock over
/// (`crate::redlock::claim`). Compare-and-delete; when it
/// deleted and a replica has waiters for the resource (the waiter marker
/// `wm` is in the resource's fence hash and its instant has not passed,
/// see [`ACQUIRE`] and `mark` in [`batch_script`]), announces the release on the channel. Returns 1 if it deleted, or if it
/// honoured a hold-at-least: then, where the token holds the key and the
/// master's clock is before `lu` ([`COMMIT_FENCE`]), the key is set to
/// expire at `lu` instead (a compare-and-PEXPIRE; longer than the key's
/// remaining time, too, if the holder asked for a minimum beyond its ttl),
/// and nothing is announced: nobody can take it before then. A release,
/// deleting or shortening, ends the lock-delay (`nb` cleared, where the
/// first read found it: no `HDEL` for the common grant without terms): an
/// orderly end is not a vanished holder. `lu` stays, so a repeated release
/// answers the same.
/// The marker is read by the same `HMGET` as the holder's fields (a plain
/// lock's fence hash is its resource's): the common release costs `HMGET`
/// and `DELIFEQ`. A permit's release reads its resource's hash after it
/// deleted (one `HGET`). A marker past its instant is deleted where found,
/// so that later releases of the resource do not read the clock for it.
pub(crate) const RELEASE: &str = include_str!("lua/release.lua");

/// KEYS: lock, the resource's own fence hash, the resource's plain lock
/// key. ARGV: token, ttl ms, the semaphore's limit ('0': not a permit),
/// fence ttl ms. `SET NX PX`, for a lock that lost its key on this master
/// (see `Node::recreate`); where set, raises the horizon to the ttl.
///
/// Never beside a holder the kind excludes: a permit's key is not put back
/// where the resource's plain key (or shared holders' sentinel) stands or
/// another limit's permit is held; a plain key not where a permit under
/// `lim` is held. This is the acquire's own conflict check: without it, a
/// plain grant that took this master while the permit's key was gone had
/// the permit's key put back beside it, and the permit's next extension
/// counted this master toward a majority its holder no longer had (two
/// holders; found by the model check, `tools/model`). A permit's key comes
/// back with its semaphore's limit record (`lim` in the resource's fence
/// hash, with the fence ttl as the hash's expiry where it has less): plain,
/// shared and multi-resource acquires find permits only through it, and a
/// master that restarted empty lost it with the key (see
/// `crate::redlock::semaphore`). Returns 1 if set.
pub(crate) const RECREATE: &str = include_str!("lua/recreate.lua");

/// KEYS: lock. ARGV: token. The remaining PTTL if the token holds the lock, else -3.
pub(crate) const CHECK: &str = include_str!("lua/check.lua");

/// KEYS: lock, fence. Read only: `{''}` when the lock key is absent, else
/// `{token, pttl, holder, fence, owner, kind, at}` (the fence hash's fields,
/// '' where absent), for `Inspect` and `List` (`crate::redlock::admin`).
pub(crate) const INSPECT: &str = include_str!("lua/inspect.lua");

/// The batch script, built and hashed once at start-up and shared by every
/// master's connection. Both forms are kept as values, so a batch shares
/// them instead of copying the text.
#[derive(Debug)]
pub struct BatchScript {
    /// [`batch_script`]'s text, for EVAL.
    pub lua: Value,
    /// Its SHA-1 in hex, for EVALSHA.
    pub sha: Value,
}

impl BatchScript {
    /// Builds and hashes [`batch_script`], with no counterfactual and the
    /// clock allowance of the default settings.
    pub fn new() -> BatchScript {
        let defaults = crate::config::Config::default().redlock;
        let allowance =
            crate::redlock::clock_allowance(defaults.node_timeout, defaults.max_clock_offset);
        BatchScript::with(Counterfactuals::default(), allowance)
    }

    /// Builds and hashes [`batch_script`] with `counterfactuals` (the
    /// configuration's `[testing]`, for the safety checkers only), raising
    /// horizons `horizon_allowance` beyond each lock's ttl.
    pub fn with(counterfactuals: Counterfactuals, horizon_allowance: Duration) -> BatchScript {
        let lua = batch_script(counterfactuals, horizon_allowance);
        let sha = sha1_smol::Sha1::from(&lua).digest().to_string();
        BatchScript {
            lua: Value::from(lua),
            sha: Value::from(sha),
        }
    }
}

impl Default for BatchScript {
    fn default() -> Self {
        BatchScript::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offsets replace every index the scripts use.
    #[test]
    fn offsets() {
        assert_eq!(
            at_offsets("GET KEYS[1] KEYS[2] ARGV[1] ARGV[4]"),
            "GET KEYS[k + 0] KEYS[k + 1] ARGV[a + 0] ARGV[a + 3]"
        );
        assert_eq!(at_offsets("ARGV[10] ARGV[1]"), "ARGV[a + 9] ARGV[a + 0]");
        for op in Op::ALL {
            let body = at_offsets(op.lua());
            // No index left unreplaced (one above MAX_INDEX would be).
            for n in 1..=MAX_INDEX * 2 {
                assert!(!body.contains(&format!("KEYS[{n}]")), "{body}");
                assert!(!body.contains(&format!("ARGV[{n}]")), "{body}");
            }
        }
    }

    /// Every counterfactual finds the fixed line it replaces (a rewrite of
    /// a script that moved the line would silently switch it off), and
    /// only its own switch applies it.
    #[test]
    fn counterfactuals_apply() {
        let all = Counterfactuals {
            recreate_without_limit: true,
            per_kind_fences: true,
        };
        for (op, on, fixed, defect) in COUNTERFACTUALS {
            assert!(op.lua().contains(fixed), "{op:?}: {fixed}");
            assert!(on(&all));
            assert!(!on(&Counterfactuals::default()));
            let changed = op.lua_with(all);
            assert!(!changed.contains(fixed), "{op:?}");
            assert!(changed.contains(defect), "{op:?}");
            assert_eq!(op.lua_with(Counterfactuals::default()), op.lua());
        }
    }

    /// Every operation is in the batch script, at the index its code names.
    #[test]
    fn batch_script_holds_every_op_in_code_order() {
        let lua = batch_script(Counterfactuals::default(), Duration::ZERO);
        let mut from = 0;
        for (i, op) in Op::ALL.iter().enumerate() {
            assert_eq!(*op as usize, i + 1);
            let body = at_offsets(op.lua().trim());
            let at = lua[from..].find(&body).expect("op body present") + from;
            from = at + 1;
        }
    }
}
