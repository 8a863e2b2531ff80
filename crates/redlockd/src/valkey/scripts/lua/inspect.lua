
local t = redis.call('GET', KEYS[1])
if not t then return {''} end
local h = redis.call('HMGET', KEYS[2], 'holder', 'fence', 'owner', 'kind', 'at', 'pv')
return {t, redis.call('PTTL', KEYS[1]), h[1] or '', h[2] or '', h[3] or '', h[4] or '', h[5] or '', h[6] or ''}
