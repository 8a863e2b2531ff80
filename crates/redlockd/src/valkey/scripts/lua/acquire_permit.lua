
if redis.call('EXISTS', KEYS[3]) == 1 then return {0, '0', 'limit', '0'} end
local b = redis.call('HMGET', KEYS[4], 'lim', 'wm', 'max', 'nb', 'ft')
local lim = b[1]
if lim and lim ~= ARGV[3] then
  local ks = {}
  for i = 0, tonumber(lim) - 1 do ks[i + 1] = KEYS[3] .. '\31' .. i end
  if redis.call('EXISTS', unpack(ks)) > 0 then return {0, '0', 'limit', lim} end
  local left = permits_delay(KEYS[4], lim)
  if left > 0 then return {0, string.format('%d', left), 'delay'} end
end
if b[4] then
  local left = tonumber(b[4]) - now_ms()
  if left > 0 then return {0, string.format('%d', left), 'delay'} end
end
local f = redis.call('HMGET', KEYS[2], 'max', 'nb')
local max = b[3] or '0'
if f[2] and redis.call('EXISTS', KEYS[1]) == 0 then
  local left = tonumber(f[2]) - now_ms()
  if left > 0 then return {0, string.format('%d', left), 'delay'} end
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if lim ~= ARGV[3] or b[5] ~= ARGV[4] then redis.call('HSET', KEYS[4], 'lim', ARGV[3], 'ft', ARGV[4]) end
  redis.call('PEXPIRE', KEYS[4], ARGV[4])
  return {1, max, now_micros()}
end
if ARGV[5] ~= '0' then mark(KEYS[4], ARGV[5], b[2]) end
return {0, tostring(redis.call('PTTL', KEYS[1]))}
