
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local r = redis.call('HMGET', KEYS[2], 'holder', 'ep', 'max')
if ARGV[9] ~= '0' and r[1] == ARGV[1] and r[2] and r[2] ~= '0' and r[2] ~= ARGV[9] then return 0 end
raise(ARGV[4])
local maxs, ft = r[3], nil
if KEYS[3] ~= KEYS[2] then maxs, ft = unpack(redis.call('HMGET', KEYS[3], 'max', 'ft')) end
local max = tonumber(maxs or '0')
local above = tonumber(ARGV[2]) > max
if KEYS[3] ~= KEYS[2] then
  if above then redis.call('HSET', KEYS[3], 'max', ARGV[2], 'ft', ARGV[3])
  elseif ft ~= ARGV[3] then redis.call('HSET', KEYS[3], 'ft', ARGV[3]) end
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
  above = false
end
if above then
  redis.call('HSET', KEYS[2], 'max', ARGV[2], 'holder', ARGV[1], 'fence', ARGV[2], 'owner', ARGV[5], 'kind', ARGV[6], 'at', now_micros(), 'ep', ARGV[9], 'ft', ARGV[3])
else
  redis.call('HSET', KEYS[2], 'holder', ARGV[1], 'fence', ARGV[2], 'owner', ARGV[5], 'kind', ARGV[6], 'at', now_micros(), 'ep', ARGV[9], 'ft', ARGV[3])
end
local nowm = now_ms()
if tonumber(ARGV[7]) > 0 then
  redis.call('HSET', KEYS[2], 'delay', ARGV[7], 'nb', string.format('%d', nowm + tonumber(ARGV[4]) + tonumber(ARGV[7])))
  redis.call('HDEL', KEYS[2], 'ww')
else
  redis.call('HDEL', KEYS[2], 'delay', 'nb', 'ww')
end
if tonumber(ARGV[8]) > 0 then
  redis.call('HSET', KEYS[2], 'lu', string.format('%d', nowm + tonumber(ARGV[8])))
else
  redis.call('HDEL', KEYS[2], 'lu')
end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
