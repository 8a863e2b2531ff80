
local f = redis.call('HMGET', KEYS[2], 'max', 'nb', 'ww', 'lim', 'wm')
if f[4] then
  local ks = {}
  for i = 0, tonumber(f[4]) - 1 do ks[i + 1] = KEYS[1] .. '\31' .. i end
  if redis.call('EXISTS', unpack(ks)) > 0 then return {0, '0', 'limit', f[4]} end
  local left = permits_delay(KEYS[2], f[4])
  if left > 0 then return {0, string.format('%d', left), 'delay'} end
end
local max = f[1] or '0'
local held = redis.call('GET', KEYS[1])
if held and held ~= 'shared' then
  if ARGV[3] ~= '0' then mark(KEYS[2], ARGV[3], f[5]) end
  return {0, tostring(redis.call('PTTL', KEYS[1]))}
end
if f[3] then
  local left = tonumber(f[3]) - nowm
  if left > 0 then
    if ARGV[3] ~= '0' then mark(KEYS[2], ARGV[3], f[5]) end
    return {0, string.format('%d', left)}
  end
end
if not held and f[2] then
  local left = tonumber(f[2]) - nowm
  if left > 0 then return {0, string.format('%d', left), 'delay'} end
end
prune()
redis.call('ZADD', KEYS[3], string.format('%d', nowm + tonumber(ARGV[2])), ARGV[1])
cover()
return {1, max, now_micros()}
