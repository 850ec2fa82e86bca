-- Cluster: read hash fields of keys in many slots on one node. ARGV per key:
-- the key, a count n, then n fields. Returns per key one string: per field,
-- a u32 length plus one (0 for none) and the value.
local out, at = {}, 1
while at <= #ARGV do
  local key, n = ARGV[at], tonumber(ARGV[at + 1])
  local got = redis.call('HMGET', key, unpack(ARGV, at + 2, at + 1 + n))
  local parts = {}
  for i = 1, n do
    local v = got[i]
    if v then parts[i] = struct.pack('>I', #v + 1) .. v else parts[i] = struct.pack('>I', 0) end
  end
  out[#out + 1] = table.concat(parts)
  at = at + 2 + n
end
return out
