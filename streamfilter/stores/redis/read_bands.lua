-- Cluster: read band buckets of many slots on one node. ARGV: cap, then
-- per bucket: its key, a count n, and n 4-byte fields. Returns per bucket one
-- string: per field, a u32 length and the newest ``cap`` members filed under it.
local cap, out, at = tonumber(ARGV[1]), {}, 2
while at <= #ARGV do
  local blob, n = redis.call('GET', ARGV[at]) or '', tonumber(ARGV[at + 1])
  local parts = {}
  for i = 1, n do
    local members = members_in(blob, ARGV[at + 1 + i], cap)
    parts[i] = struct.pack('>I', #members) .. members
  end
  out[#out + 1] = table.concat(parts)
  at = at + 2 + n
end
return out
