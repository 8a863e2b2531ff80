
local n = tonumber(ARGV[a + 2])
local maxes, wait, held, delayed, marks = {}, 0, false, false, {}
for i = 0, n - 1 do
  local lock, fence = KEYS[k + 2 * i], KEYS[k + 2 * i + 1]
  local f = redis.call('HMGET', fence, 'max', 'nb', 'lim', 'wm')
  maxes[i + 1] = f[1] or '0'
  local lim = f[3]
  if lim then
    local ks = {}
    for j = 0, tonumber(lim) - 1 do ks[j + 1] = lock .. '\31' .. j end
    if redis.call('EXISTS', unpack(ks)) > 0 then
      held = true
      wait = -1
      marks[#marks + 1] = {fence, f[4]}
    elseif not held then
      local left = permits_delay(fence, lim)
      if left > 0 then
        delayed = true
        if left > wait then wait = left end
      end
    end
  end
  local pttl = redis.call('PTTL', lock)
  if pttl ~= -2 then
    held = true
    marks[#marks + 1] = {fence, f[4]}
    if pttl == -1 or wait == -1 then wait = -1 elseif pttl > wait then wait = pttl end
  elseif f[2] and not held then
    local left = tonumber(f[2]) - now_ms()
    if left > 0 then
      delayed = true
      if left > wait then wait = left end
    end
  end
end
if held then
  if ARGV[a + 3] ~= '0' then
    local done = {}
    for _, m in ipairs(marks) do
      if not done[m[1]] then
        done[m[1]] = true
        mark(m[1], ARGV[a + 3], m[2])
      end
    end
  end
  return {0, tostring(wait)}
end
if delayed then return {0, string.format('%d', wait), 'delay'} end
for i = 0, n - 1 do
  redis.call('SET', KEYS[k + 2 * i], ARGV[a], 'PX', ARGV[a + 1])
end
local out = {1, now_micros()}
for i = 1, n do out[i + 2] = maxes[i] end
return out
