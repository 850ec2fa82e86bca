-- Cluster: the bucket bits of slices, set on first use (index.lua's
-- slice_bits). KEYS: none; ARGV: prefix, the bits of a first slice, band
-- keys a post, then the slices. Returns their bits, in order.
local out = {}
for i = 4, #ARGV do out[#out + 1] = slice_bits(ARGV[1], ARGV[i], tonumber(ARGV[3]), tonumber(ARGV[2])) end
return out
