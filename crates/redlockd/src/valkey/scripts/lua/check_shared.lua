
if redis.call('GET', KEYS[1]) ~= 'shared' then return -3 end
local s = redis.call('ZSCORE', KEYS[3], ARGV[1])
if not s then return -3 end
local left = tonumber(s) - nowm
if left <= 0 then return -3 end
return left
