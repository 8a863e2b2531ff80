local ARGV = ARGV
if #ARGV == 1 then ARGV = cmsgpack.unpack(ARGV[1]) end
local now, now_n, now_m
local function now_micros()
  if not now then
    local t = redis.call('TIME')
    local s, us = tonumber(t[1]), tonumber(t[2])
    now = t[1] .. string.format('%06d', us)
    now_n, now_m = s * 1000000 + us, s * 1000 + math.floor(us / 1000)
  end
  return now
end
local function now_us()
  now_micros()
  return now_n
end
local function now_ms()
  now_micros()
  return now_m
end
local function mark(h, ttl, cur)
  local t, nowm = tonumber(ttl), now_ms()
  if cur and tonumber(cur) - nowm >= t / 2 then return end
  redis.call('HSET', h, 'wm', string.format('%d', nowm + t))
  if redis.call('PTTL', h) < t then redis.call('PEXPIRE', h, ttl) end
end
local function permits_delay(fence, lim)
  local left = 0
  for i = 0, tonumber(lim) - 1 do
    local nb = redis.call('HGET', fence .. '\31' .. i, 'nb')
    if nb and tonumber(nb) - now_ms() > left then left = tonumber(nb) - now_ms() end
  end
  return left
end
local horizon = 0
local function raise(ttl)
  ttl = tonumber(ttl)
  if ttl and ttl > horizon then horizon = ttl end
end
local function make_op(op)
