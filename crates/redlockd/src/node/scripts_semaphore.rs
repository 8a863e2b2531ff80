//! The script that acquires one permit of a semaphore on one master (see
//! `crate::redlock::semaphore`). It runs in the batch script like every
//! other operation (`super::scripts::batch_script`).

/// KEYS: the permit's lock, the permit's fence hash, the resource's plain
/// lock key, the resource's own fence hash. ARGV: token, ttl ms, limit,
/// fence ttl ms, waiter marker ttl ms ('0': the caller will not wait).
///
/// The semaphore's limit lives in the resource's own fence hash, field
/// `lim` (the plain acquire reads that hash anyway, so checking
/// the limit costs it no command). Semaphores were never released before
/// this layout (0.1.0, no tags), so no earlier layout (a separate
/// `limit:R` key) is read: no rolling upgrade from it is supported.
///
/// Refuses with `{0, '0', 'limit', held}` when the resource is held here
/// under another limit: its plain lock key exists (`held` = '0'), or `lim`
/// names another limit and one of that limit's permit keys exists (`held`
/// = that limit). A `lim` whose permits are all gone is stale and
/// overwritten. Otherwise it is [`super::scripts::ACQUIRE`] on the
/// permit's keys (lock-delay included), and where the `SET NX` succeeds it
/// writes `lim` (where it differs) and refreshes the resource's hash's
/// expiry to the fence ttl, above any lock's ttl; a permit's extension
/// refreshes it again ([`super::scripts::EXTEND`]), so `lim` outlives
/// every permit key. Reads before it writes, like `ACQUIRE`.
/// Refused because the permit is held, a caller that will wait marks the
/// resource's fence hash (`mark`, [`super::scripts::batch_script`]: waiters
/// queue per resource, not per permit), so that a permit's release
/// announces itself ([`super::scripts::RELEASE`] reads the resource's
/// hash). The permit's grant keeps the commit round: no proposal is taken
/// here. The fence counter it reports (`max`) is the resource's own, read
/// by the same `HMGET` as the limit: one fence sequence per resource, which
/// the commit raises ([`super::scripts::COMMIT_FENCE`]), so a permit's
/// fence is above every earlier grant's of the resource, plain, shared,
/// multi-resource or permit (`crate::redlock::fence`). (The permit's own
/// hash keeps its holder record and lock-delay; its `max` field, written
/// before fences were one sequence, is read only by the `per-kind-fences`
/// counterfactual, `super::counterfactual`.)
pub(crate) const ACQUIRE_PERMIT: &str = r#"
if redis.call('EXISTS', KEYS[3]) == 1 then return {0, '0', 'limit', '0'} end
local b = redis.call('HMGET', KEYS[4], 'lim', 'wm', 'max')
local lim = b[1]
if lim and lim ~= ARGV[3] then
  local ks = {}
  for i = 0, tonumber(lim) - 1 do ks[i + 1] = KEYS[3] .. '\31' .. i end
  if redis.call('EXISTS', unpack(ks)) > 0 then return {0, '0', 'limit', lim} end
end
local f = redis.call('HMGET', KEYS[2], 'max', 'nb')
local max = b[3] or '0'
if f[2] and redis.call('EXISTS', KEYS[1]) == 0 then
  local left = tonumber(f[2]) - now_ms()
  if left > 0 then return {0, string.format('%d', left), 'delay'} end
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if lim ~= ARGV[3] then redis.call('HSET', KEYS[4], 'lim', ARGV[3]) end
  redis.call('PEXPIRE', KEYS[4], ARGV[4])
  return {1, max, now_micros()}
end
if ARGV[5] ~= '0' then mark(KEYS[4], ARGV[5], b[2]) end
return {0, tostring(redis.call('PTTL', KEYS[1]))}
"#;
