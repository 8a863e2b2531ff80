
local f = redis.call('HMGET', KEYS[2], 'max', 'nb', 'delay', 'lu', 'lim', 'wm', 'ww', 'holder', 'ft')
local max = f[1] or '0'
if f[5] then
  local ks = {}
  for i = 0, tonumber(f[5]) - 1 do ks[i + 1] = KEYS[1] .. '\31' .. i end
  if redis.call('EXISTS', unpack(ks)) > 0 then return {0, '0', 'limit', f[5]} end
  local left = permits_delay(KEYS[2], f[5])
  if left > 0 then return {0, string.format('%d', left), 'delay'} end
end
if f[2] and redis.call('EXISTS', KEYS[1]) == 0 then
  local left = tonumber(f[2]) - now_ms()
  if left > 0 then return {0, string.format('%d', left), 'delay'} end
end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local pttl = redis.call('PTTL', KEYS[1])
  if OPT[10] ~= '0' and redis.call('GET', KEYS[1]) == ARGV[1] then return {0, tostring(pttl), 'own'} end
  if OPT[9] ~= '0' and redis.call('GET', KEYS[1]) == 'shared' then
    redis.call('HSET', KEYS[2], 'ww', string.format('%d', now_ms() + tonumber(OPT[9])))
    if redis.call('PTTL', KEYS[2]) < 0 then redis.call('PEXPIRE', KEYS[2], OPT[9]) end
  end
  if OPT[6] ~= '0' then mark(KEYS[2], OPT[6], f[6]) end
  return {0, tostring(pttl)}
end
if f[5] then redis.call('HDEL', KEYS[2], 'lim') end
if OPT[10] ~= '0' and f[8] == ARGV[1] then redis.call('HSET', KEYS[2], 'ep', OPT[10]) end
-- one-round fence: take the proposal ARGV[3] if it fits
local p, m, now = tonumber(ARGV[3]), tonumber(max), now_micros()
local t = now_us()
if p > m and p >= t and p <= t + PROPOSAL_WINDOW_US then
  raise(ARGV[2])
  redis.call('HSET', KEYS[2], 'max', ARGV[3], 'holder', ARGV[1], 'fence', ARGV[3], 'owner', ARGV[4], 'kind', ARGV[5], 'at', now, 'ep', OPT[10], 'ft', 'FENCE_TTL_MS')
  local nowm = now_ms()
  if OPT[7] ~= '0' and tonumber(OPT[7]) > 0 then
    redis.call('HSET', KEYS[2], 'delay', OPT[7], 'nb', string.format('%d', nowm + tonumber(ARGV[2]) + tonumber(OPT[7])))
  elseif f[2] or f[3] then
    redis.call('HDEL', KEYS[2], 'delay', 'nb')
  end
  if OPT[8] ~= '0' and tonumber(OPT[8]) > 0 then
    redis.call('HSET', KEYS[2], 'lu', string.format('%d', nowm + tonumber(OPT[8])))
  elseif f[4] then
    redis.call('HDEL', KEYS[2], 'lu')
  end
  if f[7] then redis.call('HDEL', KEYS[2], 'ww') end
  if f[9] ~= 'FENCE_TTL_MS' or math.floor(p / FENCE_REFRESH_US) ~= math.floor(m / FENCE_REFRESH_US) then redis.call('PEXPIRE', KEYS[2], 'FENCE_TTL_MS') end
  return {1, max, now, 1}
end
return {1, max, now, 0}
