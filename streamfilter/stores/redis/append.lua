-- Cluster: file entries in band buckets. ARGV per bucket: its key, the life
-- in ms of its slice's keys (0: none), and its new entries (10 bytes each).
for i = 0, #ARGV / 3 - 1 do
  file_entries(ARGV[i * 3 + 1], ARGV[i * 3 + 3], tonumber(ARGV[i * 3 + 2]))
end
return 1
