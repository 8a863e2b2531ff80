
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  raise(ARGV[2])
  if ARGV[3] ~= '0' then
    redis.call('HSETNX', KEYS[2], 'lim', ARGV[3])
    if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[4]) then redis.call('PEXPIRE', KEYS[2], ARGV[4]) end
  end
  return 1
end
return 0
