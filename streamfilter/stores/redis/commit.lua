-- One Redis: record a judged batch's novel posts, atomically, if nothing the
-- batch read has changed since; else answer "changed", and the batch is
-- judged again. ARGV: prefix, cap (newest posts a band key keeps), the key of
-- the pinned settings, the batch's clock ('' for none), then the count of
-- band keys read and each (band key, its value as read: '' for none), the
-- count of records the verdicts name and their keys, then per novel post:
-- record, band keys (8 bytes each), record-key suffix, life in ms (0: none).
local prefix, cap = ARGV[1], tonumber(ARGV[2])
-- settings pinned when the index was opened and gone now: the server was
-- emptied under a running filter, and every post it held with them
if redis.call('EXISTS', ARGV[3]) == 0 then return redis.error_reply('STREAMFILTER_INDEX_GONE') end
local at = 5
for _ = 1, tonumber(ARGV[at]) do
  if (redis.call('GET', prefix .. ':b:' .. ARGV[at + 1]) or '') ~= ARGV[at + 2] then return 'changed' end
  at = at + 2
end
at = at + 1
for _ = 1, tonumber(ARGV[at]) do
  if redis.call('EXISTS', ARGV[at + 1]) == 0 then return 'changed' end
  at = at + 1
end
local serial_key = prefix .. ':serial'
for base = at + 1, #ARGV, 4 do
  local rec, keys, h, life = ARGV[base], ARGV[base + 1], ARGV[base + 2], tonumber(ARGV[base + 3])
  local pkey = prefix .. ':p:' .. h
  local value = string.format('%016d', redis.call('INCR', serial_key)) .. rec
  if life > 0 then redis.call('SET', pkey, value, 'PX', life) else redis.call('SET', pkey, value) end
  for b = 0, #keys / 8 - 1 do
    add_member(prefix .. ':b:' .. string.sub(keys, b * 8 + 1, b * 8 + 8), h, cap, life)
  end
end
if ARGV[4] ~= '' then
  local clock_key = prefix .. ':clock'
  local current = tonumber(redis.call('GET', clock_key) or '')
  if not current or current < tonumber(ARGV[4]) then redis.call('SET', clock_key, ARGV[4]) end
end
return 'recorded'
