
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local h = redis.call('HMGET', KEYS[2], 'holder', 'fence')
if h[1] ~= ARGV[1] then return 2 end
if h[2] ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[2], 'owner', ARGV[4], 'pv', ARGV[2] .. ':' .. ARGV[3])
return 1
