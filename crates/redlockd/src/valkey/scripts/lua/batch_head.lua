local now
local function now_micros()
  if not now then
    local t = redis.call('TIME')
    now = t[1] .. string.format('%06d', tonumber(t[2]))
  end
  return now
end
local function now_ms()
  return math.floor(tonumber(now_micros()) / 1000)
end
local function mark(h, ttl, cur)
  local t, nowm = tonumber(ttl), now_ms()
  if cur and tonumber(cur) - nowm >= t / 2 then return end
  redis.call('HSET', h, 'wm', string.format('%d', nowm + t))
  if redis.call('PTTL', h) < t then redis.call('PEXPIRE', h, ttl) end
end
local horizon = 0
local function raise(ttl)
  ttl = tonumber(ttl)
  if ttl and ttl > horizon then horizon = ttl end
end
local ops = {
