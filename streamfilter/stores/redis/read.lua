-- Cluster: read keys of many slots on one node. ARGV: the keys.
local out = {}
for i = 1, #ARGV do out[i] = redis.call('GET', ARGV[i]) end
return out
