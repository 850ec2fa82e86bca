-- Cluster: count the batches that file band entries, in one hash (KEYS[1],
-- ``{prefix}:filing``): "began", how many began, and per filing under way
-- "f<token>", the end of its lease in ms on the server's clock. ARGV:
-- "begin", a token and the lease in ms; "end" and the token; or "read".
-- Answers {how many began, how many are under way}. A filing whose lease
-- is over is not under way (its worker died), and its field goes.
local key, op = KEYS[1], ARGV[1]
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
if op == 'begin' then
  redis.call('HSET', key, 'f' .. ARGV[2], now + tonumber(ARGV[3]))
  return {redis.call('HINCRBY', key, 'began', 1), 1}
end
if op == 'end' then redis.call('HDEL', key, 'f' .. ARGV[2]) end
local fields, under_way = redis.call('HGETALL', key), 0
for i = 1, #fields, 2 do
  if string.sub(fields[i], 1, 1) == 'f' then
    if tonumber(fields[i + 1]) > now then
      under_way = under_way + 1
    else
      redis.call('HDEL', key, fields[i])
    end
  end
end
return {tonumber(redis.call('HGET', key, 'began') or '0'), under_way}
