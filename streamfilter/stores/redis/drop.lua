-- Cluster: drop record keys whose posts the recheck found to be concurrent
-- near-duplicates, unless pinned. ARGV: the keys; returns per key 1 when
-- kept (pinned), 0 when dropped (or already gone).
local out = {}
for i = 1, #ARGV do
  local v = redis.call('GET', ARGV[i])
  out[i] = 0
  if v then
    local _, _, first = header(v, SERIAL + 1)
    if (#v - first + 1) % 4 == 1 then out[i] = 1 else redis.call('DEL', ARGV[i]) end
  end
end
return out
