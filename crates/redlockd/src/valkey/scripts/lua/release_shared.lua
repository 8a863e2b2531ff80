
local s = redis.call('ZSCORE', KEYS[3], ARGV[1])
if not s then return 0 end
if OPT[6] ~= '0' then
  local e = redis.call('HGET', KEYS[2], 'e:' .. ARGV[1])
  if e and e ~= OPT[6] then return 0 end
end
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[2], 'r:' .. ARGV[1], 'e:' .. ARGV[1])
prune()
if redis.call('GET', KEYS[1]) == 'shared' and not cover() then
  local wm = redis.call('HGET', KEYS[2], 'wm')
  if wm and tonumber(wm) > nowm then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
end
if tonumber(s) > nowm then return 1 end
return 0
