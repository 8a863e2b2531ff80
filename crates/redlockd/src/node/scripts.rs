//! The Lua scripts that make each Redlock step atomic on one master.
//!
//! They never travel alone: every command to a master is an operation in a
//! batch ([`batch_script`], sent by `super::batch`), so that one script call
//! carries the operations of every caller waiting for that master at that
//! moment. Key layout: see `crate::redlock::keys`.

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
}

impl Op {
    /// Every operation, in the order of their codes.
    pub(crate) const ALL: [Op; 6] = [
        Op::Acquire,
        Op::CommitFence,
        Op::Extend,
        Op::Recreate,
        Op::Release,
        Op::Check,
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
        }
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
        }
    }
}

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
/// `max_ttl`. Why: `crate::node::horizon`. `PEXPIRE .. GT` would do in one
/// command, but not on Redis 6, and not on an absent key.
pub(crate) fn batch_script() -> String {
    let mut lua = String::from(
        r#"local now
local function now_micros()
  if not now then
    local t = redis.call('TIME')
    now = t[1] .. string.format('%06d', tonumber(t[2]))
  end
  return now
end
local horizon = 0
local function raise(ttl)
  ttl = tonumber(ttl)
  if ttl and ttl > horizon then horizon = ttl end
end
local ops = {
"#,
    );
    for op in Op::ALL {
        lua.push_str("function(k, a)\n");
        lua.push_str(&at_offsets(op.lua().trim()));
        lua.push_str("\nend,\n");
    }
    lua.push_str(
        r#"}
local out, k, a = {}, 2, 2
for i = 1, tonumber(ARGV[1]) do
  local op, nk, na = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  a = a + 3
  local ok, r = pcall(ops[op], k, a)
  if ok then out[i] = r else out[i] = {'!err', type(r) == 'table' and r.err or tostring(r)} end
  k, a = k + nk, a + na
end
if horizon > 0 then
  local left = redis.call('PTTL', KEYS[1])
  if left == -2 or (left >= 0 and left < horizon) then
    redis.call('SET', KEYS[1], '1', 'PX', horizon)
  end
end
return out
"#,
    );
    lua
}

/// A script body with `KEYS[n]` and `ARGV[n]` read at the operation's
/// offsets `k` and `a` in the batch's arrays: no per-operation tables to
/// build (allocation was a good part of the masters' time).
fn at_offsets(body: &str) -> String {
    let mut out = body.to_owned();
    for n in 1..=6 {
        out = out
            .replace(&format!("KEYS[{n}]"), &format!("KEYS[k + {}]", n - 1))
            .replace(&format!("ARGV[{n}]"), &format!("ARGV[a + {}]", n - 1));
    }
    out
}

/// KEYS: lock, fence, waiter marker. ARGV: token, ttl ms, proposed fence
/// (0: none), proposal window µs, fence ttl ms, waiter marker ttl ms ('0':
/// the caller will not wait in the queue). Where refused, a caller that will
/// wait sets the waiter marker, so that the holder's release announces
/// itself (see [`RELEASE`]).
/// Returns `{1, old max, now_micros, took}` when the SET NX succeeded, else
/// `{0, pttl}`. `took` is 1 where the proposal was taken: old max below it
/// and `now <= F <= now + window`; then `max`, `holder` and `fence` are
/// written, the hash's expiry refreshed and the horizon raised to the
/// lock's ttl, as the commit does (the one-round grant, see
/// `crate::redlock::fence`). The proposal block is the part after the
/// SET, kept apart so that other changes to the script merge easily.
/// Reads before it writes: the fence hash is read first and the `SET NX`
/// comes last, so an operation that raises (a fence key of another type:
/// WRONGTYPE) leaves nothing behind (issue 22 item 9).
/// Numbers travel as strings: a Lua number would lose nothing below 2^53,
/// but strings keep the conversion in one obvious place (Rust). The
/// master's clock is read once per batch (`now_micros`, defined by
/// [`batch_script`]): the batch runs atomically, so every operation in it
/// happens at that instant.
pub(crate) const ACQUIRE: &str = r#"
local max = redis.call('HGET', KEYS[2], 'max') or '0'
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if ARGV[6] ~= '0' then redis.call('SET', KEYS[3], '1', 'PX', ARGV[6]) end
  return {0, tostring(redis.call('PTTL', KEYS[1]))}
end
-- one-round fence: take the proposal ARGV[3] if it fits
local f, now = tonumber(ARGV[3]), now_micros()
local t = tonumber(now)
if f > tonumber(max) and f >= t and f <= t + tonumber(ARGV[4]) then
  redis.call('HSET', KEYS[2], 'max', ARGV[3], 'holder', ARGV[1], 'fence', ARGV[3])
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
  raise(ARGV[2])
  return {1, max, now, 1}
end
return {1, max, now, 0}
"#;

/// KEYS: lock, fence. ARGV: token, fence, fence ttl ms, lock ttl ms.
/// Only where the token still holds the lock: raise `max` to the fence,
/// record the holder's fence, refresh the expiry, raise the horizon to the
/// lock's ttl (a grant stands once a majority committed: see
/// `super::horizon`). Returns 1 if done.
pub(crate) const COMMIT_FENCE: &str = r#"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
raise(ARGV[4])
local max = tonumber(redis.call('HGET', KEYS[2], 'max') or '0')
if tonumber(ARGV[2]) > max then
  redis.call('HSET', KEYS[2], 'max', ARGV[2], 'holder', ARGV[1], 'fence', ARGV[2])
else
  redis.call('HSET', KEYS[2], 'holder', ARGV[1], 'fence', ARGV[2])
end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
"#;

/// KEYS: lock, fence. ARGV: token, ttl ms, fence ttl ms.
/// Compare-and-PEXPIRE; where extended, raises the horizon to the ttl. Returns `{0}` when someone else holds the key, `{2}`
/// when the key is gone (this master restarted and lost it, or it expired),
/// else `{1, fence}` where fence is '0' if this master did not take part in
/// the grant's commit.
pub(crate) const EXTEND: &str = r#"
local holder = redis.call('GET', KEYS[1])
if holder ~= ARGV[1] then
  if holder then return {0} end
  return {2}
end
raise(ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
local h = redis.call('HMGET', KEYS[2], 'holder', 'fence')
if h[1] == ARGV[1] and h[2] then return {1, h[2]} end
return {1, '0'}
"#;

/// KEYS: lock, waiter marker. ARGV: token, release channel, release
/// notice, '1' if the master has DELIFEQ (Valkey 9). Compare-and-delete;
/// when it deleted and a replica has waiters for the resource (the waiter
/// marker is there, see [`ACQUIRE`]), announces the release on the channel.
/// Returns 1 if it deleted.
pub(crate) const RELEASE: &str = r#"
if ARGV[4] == '1' then
  if redis.call('DELIFEQ', KEYS[1], ARGV[1]) == 0 then return 0 end
elseif redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
else
  return 0
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('PUBLISH', ARGV[2], ARGV[3])
end
return 1
"#;

/// KEYS: lock. ARGV: token, ttl ms. `SET NX PX`, for a lock that lost its
/// key on this master (see `Node::recreate`); where set, raises the
/// horizon to the ttl. Returns 1 if set.
pub(crate) const RECREATE: &str = r#"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  raise(ARGV[2])
  return 1
end
return 0
"#;

/// KEYS: lock. ARGV: token. The remaining PTTL if the token holds the lock, else -3.
pub(crate) const CHECK: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PTTL', KEYS[1]) end
return -3
"#;

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
    /// Builds and hashes [`batch_script`].
    pub fn new() -> BatchScript {
        let lua = batch_script();
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
        for op in Op::ALL {
            let body = at_offsets(op.lua());
            assert!(!body.contains("KEYS[1]") && !body.contains("ARGV[1]"));
        }
    }

    /// Every operation is in the batch script, at the index its code names.
    #[test]
    fn batch_script_holds_every_op_in_code_order() {
        let lua = batch_script();
        let mut from = 0;
        for (i, op) in Op::ALL.iter().enumerate() {
            assert_eq!(*op as usize, i + 1);
            let body = at_offsets(op.lua().trim());
            let at = lua[from..].find(&body).expect("op body present") + from;
            from = at + 1;
        }
    }
}
