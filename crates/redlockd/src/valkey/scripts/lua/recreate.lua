
local lim = redis.call('HGET', KEYS[2], 'lim')
local function permits_held(base, limit)
  local ks = {}
  for i = 0, tonumber(limit) - 1 do ks[i + 1] = base .. '\31' .. i end
  return redis.call('EXISTS', unpack(ks)) > 0
end
if ARGV[3] ~= '0' then
  if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
  if lim and lim ~= ARGV[3] and permits_held(KEYS[3], lim) then return 0 end
elseif lim and permits_held(KEYS[1], lim) then
  return 0
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  raise(ARGV[2])
  if ARGV[3] ~= '0' then
    redis.call('HSET', KEYS[2], 'lim', ARGV[3])
    if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[4]) then redis.call('PEXPIRE', KEYS[2], ARGV[4]) end
  end
  return 1
end
return 0
