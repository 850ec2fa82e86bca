-- Cluster: drop records whose posts the recheck found to be concurrent
-- near-duplicates, unless pinned. ARGV per record: its key, its member, its
-- claim key and its text's hash. Returns per record 1 when kept (pinned),
-- 0 when dropped (or already gone); a dropped post gives its claim up.
local out = {}
for i = 0, #ARGV / 4 - 1 do
  local key, member = ARGV[i * 4 + 1], ARGV[i * 4 + 2]
  local claims, text = ARGV[i * 4 + 3], ARGV[i * 4 + 4]
  local v = redis.call('HGET', key, member)
  out[i + 1] = 0
  if v then
    local _, _, first = header(v)
    if (#v - first + 1) % 4 == 1 then
      out[i + 1] = 1
    else
      redis.call('HDEL', key, member)
      if redis.call('HGET', claims, text) == member then redis.call('HDEL', claims, text) end
    end
  end
end
return out
