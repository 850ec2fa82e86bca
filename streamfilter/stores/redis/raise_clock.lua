-- Raise the clock (KEYS[1]) to ARGV[1] unless it is higher already.
local current = tonumber(redis.call('GET', KEYS[1]) or '')
if not current or current < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
