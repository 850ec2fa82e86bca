-- Cluster: claim record keys. ARGV per key: key, stored value (serial and
-- record), horizon, life in ms (0: none), made-up-id flag. A key is set unless it holds a live record of
-- another post, which is returned.
local out = {}
for i = 1, #ARGV / 5 do
  local key, rec, horizon = ARGV[i * 5 - 4], ARGV[i * 5 - 3], tonumber(ARGV[i * 5 - 2])
  local life, made_up = tonumber(ARGV[i * 5 - 1]), ARGV[i * 5] == '1'
  local old = redis.call('GET', key)
  out[i] = false
  if old then
    local ots, oid = header(old, SERIAL + 1)
    local ts, id = header(rec, SERIAL + 1)
    local same = oid == id and (ots == ts or not made_up)
    if ots > horizon and not same then out[i] = old end
  end
  if not out[i] then
    if life > 0 then redis.call('SET', key, rec, 'PX', life) else redis.call('SET', key, rec) end
  end
end
return out
