//! The Lua scripts that make each Redlock step atomic on one master.
//!
//! Each is sent with EVALSHA; a master that does not know it yet (fresh start,
//! `SCRIPT FLUSH`) answers NOSCRIPT and gets the full text with EVAL once,
//! which also caches it. Key layout: see `crate::redlock::keys`.

/// A script's text and its SHA-1, computed once.
#[derive(Debug, Clone)]
pub struct Script {
    /// The Lua source, sent with EVAL after a NOSCRIPT.
    pub lua: &'static str,
    /// Its SHA-1 in hex, sent with EVALSHA.
    pub sha: String,
}

impl Script {
    fn new(lua: &'static str) -> Script {
        Script {
            lua,
            sha: sha1_smol::Sha1::from(lua).digest().to_string(),
        }
    }
}

/// KEYS: lock, fence. ARGV: token, ttl ms.
/// Returns `{1, max, now_micros}` when the SET NX succeeded, else `{0, pttl}`.
/// Numbers travel as strings: a Lua number would lose nothing below 2^53,
/// but strings keep the conversion in one obvious place (Rust).
pub const ACQUIRE: &str = r#"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local max = redis.call('HGET', KEYS[2], 'max') or '0'
  local t = redis.call('TIME')
  return {1, max, t[1] .. string.format('%06d', tonumber(t[2]))}
end
return {0, tostring(redis.call('PTTL', KEYS[1]))}
"#;

/// KEYS: lock, fence. ARGV: token, fence, fence ttl ms.
/// Only where the token still holds the lock: raise `max` to the fence,
/// record the holder's fence, refresh the expiry. Returns 1 if done.
pub const COMMIT_FENCE: &str = r#"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local max = tonumber(redis.call('HGET', KEYS[2], 'max') or '0')
if tonumber(ARGV[2]) > max then redis.call('HSET', KEYS[2], 'max', ARGV[2]) end
redis.call('HSET', KEYS[2], 'holder', ARGV[1], 'fence', ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
"#;

/// KEYS: lock, fence. ARGV: token, ttl ms, fence ttl ms.
/// Compare-and-PEXPIRE. Returns `{0}` when someone else holds the key, `{2}`
/// when the key is gone (this master restarted and lost it, or it expired),
/// else `{1, fence}` where fence is '0' if this master did not take part in
/// the grant's commit.
pub const EXTEND: &str = r#"
local holder = redis.call('GET', KEYS[1])
if holder ~= ARGV[1] then
  if holder then return {0} end
  return {2}
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
local h = redis.call('HMGET', KEYS[2], 'holder', 'fence')
if h[1] == ARGV[1] and h[2] then return {1, h[2]} end
return {1, '0'}
"#;

/// KEYS: lock. ARGV: token, release channel, release notice.
/// Compare-and-delete, for servers without DELIFEQ; announces the release
/// on the channel when it deleted.
pub const RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
return 0
"#;

/// KEYS: lock. ARGV: token. The remaining PTTL if the token holds the lock, else -3.
pub const CHECK: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PTTL', KEYS[1]) end
return -3
"#;

/// All scripts, hashed once at start-up.
#[derive(Debug, Clone)]
pub struct Scripts {
    /// See [`ACQUIRE`].
    pub acquire: Script,
    /// See [`COMMIT_FENCE`].
    pub commit_fence: Script,
    /// See [`EXTEND`].
    pub extend: Script,
    /// See [`RELEASE`].
    pub release: Script,
    /// See [`CHECK`].
    pub check: Script,
}

impl Scripts {
    /// Hashes every script.
    pub fn new() -> Scripts {
        Scripts {
            acquire: Script::new(ACQUIRE),
            commit_fence: Script::new(COMMIT_FENCE),
            extend: Script::new(EXTEND),
            release: Script::new(RELEASE),
            check: Script::new(CHECK),
        }
    }
}

impl Default for Scripts {
    fn default() -> Self {
        Scripts::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SHA-1 of a known string, as Redis computes it for SCRIPT LOAD.
    #[test]
    fn sha_matches_redis() {
        assert_eq!(
            Script::new("return 1").sha,
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
    }
}
