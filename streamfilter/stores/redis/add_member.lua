-- A band key's value is the 8-byte record-key suffixes of its posts, newest
-- last, at most ``cap`` of them. Adding a post again changes nothing but the
-- TTL; the key lives as long as its longest-lived post.
local function add_member(key, h, cap, life)
  local old = redis.call('GET', key) or ''
  local kept, present = {}, false
  for at = 1, #old, 8 do
    local m = string.sub(old, at, at + 7)
    kept[#kept + 1] = m
    if m == h then present = true end
  end
  -- a post added again (a retried batch) keeps its place: the order of a key
  -- is what settles which of two concurrent near-duplicates came first
  if not present then kept[#kept + 1] = h end
  local value = table.concat(kept, '', math.max(1, #kept - cap + 1))
  if life > 0 then
    local left = redis.call('PTTL', key)
    if left > life then life = left end
    redis.call('SET', key, value, 'PX', life)
  else
    redis.call('SET', key, value)
  end
end
