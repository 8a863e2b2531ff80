
local held = redis.call('GET', KEYS[1])
if held and held ~= 'shared' then return {0} end
local s = redis.call('ZSCORE', KEYS[3], ARGV[1])
if not s or tonumber(s) <= nowm then return {2} end
local r = redis.call('HMGET', KEYS[2], 'r:' .. ARGV[1], 'e:' .. ARGV[1], 'ft')
local mode, ep = string.sub(ARGV[5], 1, 1), string.sub(ARGV[5], 2)
if mode == 'o' and r[2] and r[2] ~= ep then return {3} end
raise(ARGV[2])
prune()
redis.call('ZADD', KEYS[3], string.format('%d', nowm + tonumber(ARGV[2])), ARGV[1])
cover()
if mode == 't' then redis.call('HSET', KEYS[2], 'e:' .. ARGV[1], ep) end
if redis.call('PEXPIRE', KEYS[2], ARGV[3]) == 1 and r[3] ~= ARGV[3] then redis.call('HSET', KEYS[2], 'ft', ARGV[3]) end
return {1, r[1] or '0'}
