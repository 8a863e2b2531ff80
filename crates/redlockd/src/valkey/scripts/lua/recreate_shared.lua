
local held = redis.call('GET', KEYS[1])
if held and held ~= 'shared' then return 0 end
local lim = redis.call('HGET', KEYS[2], 'lim')
if lim then
  local ks = {}
  for i = 0, tonumber(lim) - 1 do ks[i + 1] = KEYS[1] .. '\31' .. i end
  if redis.call('EXISTS', unpack(ks)) > 0 then return 0 end
end
prune()
if redis.call('ZSCORE', KEYS[3], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[3], string.format('%d', nowm + tonumber(ARGV[2])), ARGV[1])
cover()
raise(ARGV[2])
return 1
