end
local ops = {}
local out, k, a = {}, 2, 2
for i = 1, tonumber(ARGV[1]) do
  local h = tonumber(ARGV[a])
  local op, nk, na = h % 100, math.floor(h / 100) % 10000, math.floor(h / 1000000)
  a = a + 1
  local f = ops[op]
  if not f then
    f = make_op(op)
    ops[op] = f
  end
  local ok, r = pcall(f, k, a, na)
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
