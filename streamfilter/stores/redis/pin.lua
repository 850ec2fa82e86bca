-- Cluster: pin record keys. A pinned post can no longer be dropped by its
-- own worker's recheck, because another post was judged a duplicate of it.
-- The pin is a trailing byte after the 4-byte word hashes. ARGV: the keys;
-- returns per key 1 when the record is there (now pinned), 0 when it is gone.
local out = {}
for i = 1, #ARGV do
  local v = redis.call('GET', ARGV[i])
  if v then
    local _, _, first = header(v, SERIAL + 1)
    if (#v - first + 1) % 4 == 0 then redis.call('SET', ARGV[i], v .. '\1', 'KEEPTTL') end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
