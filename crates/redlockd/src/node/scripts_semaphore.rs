//! The script that acquires one permit of a semaphore on one master (see
//! `crate::redlock::semaphore`). It runs in the batch script like every
//! other operation (`super::scripts::batch_script`).

/// KEYS: the permit's lock, the permit's fence hash, the resource's plain
/// lock key, the resource's limit record, the resource's waiter marker.
/// ARGV: token, ttl ms, limit, limit record ttl ms, waiter marker ttl ms
/// ('0': the caller will not wait).
///
/// Refuses with `{0, '0', 'limit', held}` when the resource is held here
/// under another limit: its plain lock key exists (`held` = '0'), or the
/// limit record names another limit and one of that limit's permit keys
/// exists (`held` = that limit). A record whose permits are all gone is
/// stale and overwritten. Otherwise it is [`super::scripts::ACQUIRE`] on
/// the permit's keys (lock-delay included), and where the `SET NX`
/// succeeds it writes the limit record (the limit, expiring after the
/// record ttl, `fence_ttl`). Reads before it writes, like `ACQUIRE`.
/// Refused because the permit is held, a caller that will wait sets the
/// resource's waiter marker (waiters queue per resource, not per permit),
/// so that a permit's release announces itself ([`super::scripts::RELEASE`]
/// checks the same marker: a permit's keys carry the resource's). The
/// permit's grant keeps the commit round: no proposal is taken here.
pub(crate) const ACQUIRE_PERMIT: &str = r#"
if redis.call('EXISTS', KEYS[3]) == 1 then return {0, '0', 'limit', '0'} end
local lim = redis.call('GET', KEYS[4])
if lim and lim ~= ARGV[3] then
  local ks = {}
  for i = 0, tonumber(lim) - 1 do ks[i + 1] = KEYS[3] .. '\31' .. i end
  if redis.call('EXISTS', unpack(ks)) > 0 then return {0, '0', 'limit', lim} end
end
local f = redis.call('HMGET', KEYS[2], 'max', 'nb')
local max = f[1] or '0'
if f[2] and redis.call('EXISTS', KEYS[1]) == 0 then
  local left = tonumber(f[2]) - now_ms()
  if left > 0 then return {0, string.format('%d', left), 'delay'} end
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('SET', KEYS[4], ARGV[3], 'PX', ARGV[4])
  return {1, max, now_micros()}
end
if ARGV[5] ~= '0' then redis.call('SET', KEYS[5], '1', 'PX', ARGV[5]) end
return {0, tostring(redis.call('PTTL', KEYS[1]))}
"#;
