-- Cluster: the parts the posts of time slices go to (index.lua's
-- part_for), each counted as taking ``posts`` more. KEYS: the slices hash;
-- ARGV: prefix, the bits of a first slice, band keys a post, then per time
-- slice: the slice and how many posts the batch records in it. Returns per
-- slice its part and the part's bits.
local out, parts = {}, {}
for i = 4, #ARGV, 2 do
  local posts = tonumber(ARGV[i + 1])
  local part = part_for(ARGV[1], parts, ARGV[i], tonumber(ARGV[3]), tonumber(ARGV[2]), posts)
  part[3] = part[3] + posts
  redis.call('HINCRBY', KEYS[1], 'n' .. part[1], posts)
  out[#out + 1] = {part[1], part[2]}
end
return out
