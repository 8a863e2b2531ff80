
local holder = redis.call('GET', KEYS[1])
if holder ~= ARGV[1] then
  if holder then return {0} end
  return {2}
end
local h = redis.call('HMGET', KEYS[2], 'holder', 'fence', 'delay', 'ep', 'ft')
local mine = h[1] == ARGV[1]
local mode, ep = string.sub(ARGV[5], 1, 1), string.sub(ARGV[5], 2)
if mode == 'o' and mine and h[4] and h[4] ~= '0' and h[4] ~= ep then return {3} end
raise(ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if mode == 't' then
  if not mine then redis.call('HDEL', KEYS[2], 'fence', 'owner', 'kind', 'at', 'delay', 'nb', 'lu') end
  redis.call('HSET', KEYS[2], 'holder', ARGV[1], 'ep', ep)
end
if redis.call('PEXPIRE', KEYS[2], ARGV[3]) == 1 and h[5] ~= ARGV[3] then redis.call('HSET', KEYS[2], 'ft', ARGV[3]) end
if KEYS[3] ~= KEYS[2] then
  if ARGV[4] ~= '0' then redis.call('HSETNX', KEYS[3], 'lim', ARGV[4]) end
  redis.call('HSET', KEYS[3], 'ft', ARGV[3])
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
end
if not mine then return {1, '0'} end
if h[3] then
  redis.call('HSET', KEYS[2], 'nb', string.format('%d', now_ms() + tonumber(ARGV[2]) + tonumber(h[3])))
end
if h[2] then return {1, h[2]} end
return {1, '0'}
