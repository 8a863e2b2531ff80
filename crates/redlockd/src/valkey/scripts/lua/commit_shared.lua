
local s = redis.call('ZSCORE', KEYS[3], ARGV[1])
if not s or tonumber(s) <= nowm or redis.call('GET', KEYS[1]) ~= 'shared' then return 0 end
local r = redis.call('HMGET', KEYS[2], 'max', 'e:' .. ARGV[1])
if ARGV[9] ~= '0' and r[2] and r[2] ~= ARGV[9] then return 0 end
raise(ARGV[4])
if tonumber(ARGV[2]) > tonumber(r[1] or '0') then redis.call('HSET', KEYS[2], 'max', ARGV[2]) end
redis.call('HSET', KEYS[2], 'r:' .. ARGV[1], ARGV[2], 'ft', ARGV[3])
if ARGV[9] ~= '0' then redis.call('HSET', KEYS[2], 'e:' .. ARGV[1], ARGV[9]) end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
