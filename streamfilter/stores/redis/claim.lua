-- Cluster: claim the texts of novel posts. ARGV per post: its claim key, its
-- record key (one hash slot), the hash of its text (the claim's field), its
-- member, its record, the horizon, the life in ms of its slice's keys (0:
-- none), and its made-up-id flag. A claim is taken unless it holds a live
-- record of another post, whose member and record are returned; taking it
-- records the post.
local out = {}
for i = 0, #ARGV / 8 - 1 do
  local claims, records, text = ARGV[i * 8 + 1], ARGV[i * 8 + 2], ARGV[i * 8 + 3]
  local member, rec, horizon = ARGV[i * 8 + 4], ARGV[i * 8 + 5], tonumber(ARGV[i * 8 + 6])
  local life, made_up = tonumber(ARGV[i * 8 + 7]), ARGV[i * 8 + 8] == '1'
  out[i + 1] = false
  local holder = redis.call('HGET', claims, text)
  local old = holder and redis.call('HGET', records, holder)
  if old and holder ~= member then
    local ots, oid = header(old)
    local ts, id = header(rec)
    local same = oid == id and (ots == ts or not made_up)
    if ots > horizon and not same then out[i + 1] = holder .. old end
  end
  if not out[i + 1] then
    local fresh = redis.call('EXISTS', records) == 0
    redis.call('HSET', claims, text, member)
    redis.call('HSET', records, member, rec)
    if fresh then
      created(records, life)
      created(claims, life)
    end
  end
end
return out
