}
local out, k, a = {}, 2, 2
for i = 1, tonumber(ARGV[1]) do
  local op, nk, na = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  a = a + 3
  local ok, r = pcall(ops[op], k, a)
  if ok then out[i] = r else out[i] = {'!err', type(r) == 'table' and r.err or tostring(r)} end
  k, a = k + nk, a + na
end
if horizon > 0 then
  horizon = horizon + ALLOWANCE
  local left = redis.call('PTTL', KEYS[1])
  if left == -2 or (left >= 0 and left < horizon) then
    redis.call('SET', KEYS[1], '1', 'PX', horizon)
  end
end
return out
