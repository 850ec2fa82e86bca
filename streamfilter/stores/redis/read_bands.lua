-- Cluster: read band buckets of many slots on one node. ARGV: cap, then
-- per bucket: its key and its fields, 4 bytes each. Returns per bucket one
-- string: per field a u16 count, then the members: the newest ``cap``
-- filed under each field, field after field.
local cap, out = tonumber(ARGV[1]), {}
for at = 2, #ARGV, 2 do
  local blob, fields = redis.call('GET', ARGV[at]) or '', ARGV[at + 1]
  local counts, members = {}, {}
  for f = 1, #fields, 4 do
    local found = members_in(blob, string.sub(fields, f, f + 3), cap)
    counts[#counts + 1] = struct.pack('>H', #found / 6)
    if found ~= '' then members[#members + 1] = found end
  end
  out[#out + 1] = table.concat(counts) .. table.concat(members)
end
return out
