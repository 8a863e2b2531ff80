
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local h = redis.call('HMGET', KEYS[2], 'holder', 'fence', 'pv', 'owner')
if h[1] ~= ARGV[1] or h[2] ~= ARGV[2] then return 0 end
local kept, want = 0, tonumber(ARGV[3])
if h[3] then
  local t, v = string.match(h[3], '^(%d+):(%d+)$')
  if t == ARGV[2] then kept = tonumber(v) end
end
if kept > want then return kept end
if kept == want then
  if h[4] == ARGV[4] then return want end
  return want + 1
end
redis.call('HSET', KEYS[2], 'owner', ARGV[4], 'pv', ARGV[2] .. ':' .. ARGV[3])
return want
