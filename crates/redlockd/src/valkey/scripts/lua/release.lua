
local h = redis.call('HMGET', KEYS[2], 'holder', 'lu', 'nb', 'wm', 'ep')
local mine = h[1] == ARGV[1]
if OPT[6] ~= '0' and mine and h[5] and h[5] ~= '0' and h[5] ~= OPT[6] then return 0 end
if mine and OPT[5] == '1' and h[2] then
  local left = tonumber(h[2]) - now_ms()
  if left > 0 and redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], string.format('%d', left))
    raise(left)
    if h[3] then redis.call('HDEL', KEYS[2], 'nb') end
    return 1
  end
end
if ARGV[4] == '1' then
  if redis.call('DELIFEQ', KEYS[1], ARGV[1]) == 0 then return 0 end
elseif redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
else
  return 0
end
if mine and h[3] and OPT[5] ~= '2' then redis.call('HDEL', KEYS[2], 'nb') end
local wm = h[4]
if KEYS[3] ~= KEYS[2] then wm = redis.call('HGET', KEYS[3], 'wm') end
if wm then
  if tonumber(wm) > now_ms() then
    redis.call('PUBLISH', ARGV[2], ARGV[3])
  else
    redis.call('HDEL', KEYS[3], 'wm')
  end
end
return 1
