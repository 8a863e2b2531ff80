
local held = redis.call('GET', KEYS[1])
if held and held ~= 'shared' then return 0 end
prune()
if redis.call('ZSCORE', KEYS[3], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[3], string.format('%d', nowm + tonumber(ARGV[2])), ARGV[1])
cover()
raise(ARGV[2])
return 1
