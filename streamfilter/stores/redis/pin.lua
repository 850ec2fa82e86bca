-- Cluster: pin records. A pinned post can no longer be dropped by its own
-- worker's recheck, because another post was judged a duplicate of it. The
-- pin is a trailing byte after the 4-byte word hashes. ARGV per record: its
-- key and its member; returns per record 1 when it is there (now pinned),
-- 0 when it is gone.
local out = {}
for i = 0, #ARGV / 2 - 1 do
  local key, member = ARGV[i * 2 + 1], ARGV[i * 2 + 2]
  local v = redis.call('HGET', key, member)
  if v then
    local _, _, first = header(v)
    if (#v - first + 1) % 4 == 0 then redis.call('HSET', key, member, v .. '\1') end
    out[i + 1] = 1
  else
    out[i + 1] = 0
  end
end
return out
