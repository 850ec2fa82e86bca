-- Cluster: append post keys to band lists. ARGV: cap, then per key: band
-- key, post key suffix, life in ms (0: none).
local cap = tonumber(ARGV[1])
for i = 0, (#ARGV - 1) / 3 - 1 do
  add_member(ARGV[i * 3 + 2], ARGV[i * 3 + 3], cap, tonumber(ARGV[i * 3 + 4]))
end
return 1
