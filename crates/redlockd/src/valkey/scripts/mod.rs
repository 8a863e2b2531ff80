//! The Lua scripts that make each Redlock step atomic on one master.
//!
//! They never travel alone: every command to a master is an operation in a
//! batch ([`batch_script`], sent by `super::super::batch`), so that one script call
//! carries the operations of every caller waiting for that master at that
//! moment. Key layout: see `crate::redlock::keys`.

mod constants;
pub mod cost;
mod lock;
pub(crate) mod multi;
pub(crate) mod pack;
pub(crate) mod rw;
pub(crate) mod semaphore;

pub(crate) use constants::Constants;
pub(crate) use lock::{
    ACQUIRE, ANNOUNCE, CHECK, COMMIT_FENCE, EXTEND, INSPECT, PROCLAIM, RECREATE, RELEASE,
};

use crate::config::Counterfactuals;
use fred::prelude::Value;

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
    /// [`ANNOUNCE`].
    Announce = 16,
    /// [`PROCLAIM`].
    Proclaim = 17,
}

impl Op {
    /// Every operation, in the order of their codes.
    pub(crate) const ALL: [Op; 17] = [
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
        Op::Announce,
        Op::Proclaim,
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
            Op::Announce => "announce",
            Op::Proclaim => "proclaim",
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
            Op::Announce => ANNOUNCE,
            Op::Proclaim => PROCLAIM,
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
        "if KEYS[3] ~= KEYS[2] then maxs, ft = unpack(redis.call('HMGET', KEYS[3], 'max', 'ft')) end",
        "",
    ),
    (
        Op::CommitFence,
        |c| c.per_kind_fences,
        "if KEYS[3] ~= KEYS[2] then\n  if above",
        "if false then\n  if above",
    ),
    // A holder's release deleting the lock before its hold_at_least ran.
    (
        Op::Release,
        |c| c.release_ignores_hold_at_least,
        "if mine and OPT[5] == '1' and h[2] then",
        "if false then",
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
/// operation's keys in order. The arguments: the number of operations,
/// then per operation one header ([`header`]: its code, number of keys and
/// number of arguments in one number) and the arguments; a batch of
/// several operations sends them as one value, a packed array ([`pack`]),
/// which the script unpacks first into the table it reads as `ARGV` (one
/// argument: packed; a plain layout has at least two).
///
/// What a master parses is most of what it spends per operation (each
/// argument becomes a Lua string), so an operation sends only what varies:
/// - per-daemon constants are part of the script's text, set when it is
///   built ([`Constants`]): a body names them (`PROPOSAL_WINDOW_US`,
///   `FENCE_TTL_MS`, `FENCE_REFRESH_US`) where it would have read an
///   argument;
/// - trailing arguments that are usually zero are optional: a body reads
///   argument `n` as `OPT[n]`, which is `'0'` where the operation sent
///   fewer than `n` arguments (the sender drops trailing zeros, see
///   `super::ops`).
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
///
/// The permits' lock-delays: `permits_delay(fence hash, lim)` is the
/// longest lock-delay still to run (ms, 0 for none) among the `lim` permits
/// of the resource whose hash it is, each kept in its permit's own hash.
/// A plain, shared or multi-resource acquisition reads it where the
/// resource has a semaphore record (`lim`) and no permit is held, and is
/// refused as a delay while it runs: a lock-delay keeps the resource from
/// every kind, not only its own ([`semaphore::ACQUIRE_PERMIT`] reads a
/// plain holder's). One `HGET` per permit, only on that path.
pub(crate) fn batch_script(counterfactuals: Counterfactuals, constants: Constants) -> String {
    assemble(constants, |op| op.lua_with(counterfactuals))
}

/// The batch script with each operation's Lua body from `body`.
///
/// Each operation's function is made the first time a call runs an
/// operation of its code (`make_op(op)` in the script, kept in `ops` for the
/// rest of the call), not one per code on every call: a script's top-level
/// functions are closures made anew each time it runs, and seventeen of
/// them were about 1.5 µs of every call, most of a small batch's fixed cost
/// (docs/benchmarks.md, "Operations made on first use"). An unknown code
/// gets no function and answers `{'!err', ..}` as before.
fn assemble(constants: Constants, body: impl Fn(Op) -> String) -> String {
    let mut lua = String::from(include_str!("lua/batch_head.lua"));
    for op in Op::ALL {
        lua.push_str(&format!(
            "if op == {} then return function(k, a, na)\n",
            op as usize
        ));
        lua.push_str(&at_offsets(body(op).trim()));
        lua.push_str("\nend end\n");
    }
    lua.push_str(include_str!("lua/batch_tail.lua"));
    constants.write_into(&lua)
}

/// An operation's header in the batch: its code, its number of keys and
/// its number of arguments in one number, `code + 100 × keys + 1,000,000 ×
/// arguments` (the batch script takes it apart). One number instead of
/// three is two fewer values for the master to parse per operation.
/// `None` where a count does not fit (the batch script could not take it
/// apart): more than 9,999 keys.
pub(crate) fn header(op: Op, keys: usize, args: usize) -> Option<i64> {
    if keys > 9_999 {
        return None;
    }
    let code = i64::try_from(op as usize).ok()?;
    let keys = i64::try_from(keys).ok()?;
    let args = i64::try_from(args).ok()?.checked_mul(1_000_000)?;
    args.checked_add(keys * 100 + code)
}

/// The highest `KEYS`/`ARGV`/`OPT` index a script body may use ([`ACQUIRE`]
/// reads up to ten arguments).
const MAX_INDEX: usize = 12;

/// A script body with `KEYS[n]` and `ARGV[n]` read at the operation's
/// offsets `k` and `a` in the batch's arrays: no per-operation tables to
/// build (allocation was a good part of the masters' time). `OPT[n]`, an
/// optional argument, reads `ARGV[n]` where the operation sent at least
/// `n` arguments (`na`), else `'0'`: past its own arguments are the next
/// operation's.
fn at_offsets(body: &str) -> String {
    let mut out = body.to_owned();
    for n in 1..=MAX_INDEX {
        out = out
            .replace(&format!("KEYS[{n}]"), &format!("KEYS[k + {}]", n - 1))
            .replace(&format!("ARGV[{n}]"), &format!("ARGV[a + {}]", n - 1))
            .replace(
                &format!("OPT[{n}]"),
                &format!("(na >= {n} and ARGV[a + {}] or '0')", n - 1),
            );
    }
    out
}

/// The batch script, built and hashed once at start-up and shared by every
/// master's connection. Both forms are kept as values, so a batch shares
/// them instead of copying the text.
#[derive(Debug)]
pub(crate) struct BatchScript {
    /// [`batch_script`]'s text, for EVAL.
    pub lua: Value,
    /// Its SHA-1 in hex, for EVALSHA.
    pub sha: Value,
    /// The constants written into it.
    pub constants: Constants,
}

impl BatchScript {
    /// Builds and hashes [`batch_script`], with no counterfactual and the
    /// constants of the default settings.
    pub(crate) fn new() -> BatchScript {
        BatchScript::with(Counterfactuals::default(), Constants::defaults())
    }

    /// Builds and hashes [`batch_script`] with `counterfactuals` (the
    /// configuration's `[testing]`, for the safety checkers only) and the
    /// daemon's `constants`.
    pub(crate) fn with(counterfactuals: Counterfactuals, constants: Constants) -> BatchScript {
        let lua = batch_script(counterfactuals, constants);
        let sha = sha1_smol::Sha1::from(&lua).digest().to_string();
        BatchScript {
            lua: Value::from(lua),
            sha: Value::from(sha),
            constants,
        }
    }
}

impl Default for BatchScript {
    fn default() -> Self {
        BatchScript::new()
    }
}

#[cfg(test)]
mod tests;
