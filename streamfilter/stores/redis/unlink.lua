-- Cluster: drop keys of many slots on one node (a dead slice). ARGV: the keys.
for i = 1, #ARGV do redis.call('UNLINK', ARGV[i]) end
return #ARGV
