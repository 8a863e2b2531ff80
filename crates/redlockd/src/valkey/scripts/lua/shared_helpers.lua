
local nowm = now_ms()
local function prune()
  local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', nowm)
  if #gone > 0 then
    for _, t in ipairs(gone) do redis.call('HDEL', KEYS[2], 'r:' .. t, 'e:' .. t) end
    redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', nowm)
  end
end
local function cover()
  local top = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
  if top[2] then
    local left = string.format('%d', tonumber(top[2]) - nowm)
    redis.call('SET', KEYS[1], 'shared', 'PX', left)
    redis.call('PEXPIRE', KEYS[3], left)
    return true
  end
  redis.call('DEL', KEYS[1])
  return false
end
