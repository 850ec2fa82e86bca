-- One Redis: record a judged batch's novel posts, atomically, if nothing the
-- batch read has changed since; else answer "changed", and the batch is
-- judged again. ARGV: prefix, the serial the batch read, its clock ('' for
-- none), cap, the bits of a first slice, band keys a post, the oldest live
-- slice when the batch read ('' for all), the band queries (as
-- read_batch.lua takes them), the records the verdicts name (per record: a
-- u16 key length, the key, the 6-byte member), then per novel post: its
-- slice, the low 13 bits of its text's hash, its record, its band queries
-- and the life in ms of its slice's keys (0: none).
local prefix, read_serial, clock, cap = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])  -- cap: as read_batch.lua's
local first, entries = tonumber(ARGV[5]), tonumber(ARGV[6])
-- settings pinned when the index was opened and gone now: the server was
-- emptied under a running filter, and every post it held with them
if redis.call('EXISTS', prefix .. ':config') == 0 then return redis.error_reply('STREAMFILTER_INDEX_GONE') end
local serial_key = prefix .. ':serial'
if (redis.call('GET', serial_key) or '0') ~= read_serial then
  -- another worker recorded posts: did it file one under a key this batch read?
  local newer, changed = (tonumber(read_serial) + 1) * 2 ^ 13, false
  local low = -math.huge
  if ARGV[7] ~= '' then low = tonumber(ARGV[7]) end
  each_entry(prefix, live_slices(prefix, low), ARGV[8], cap, function(_, _, _, v)
    for m = 1, #v, 6 do
      local number = 0
      for c = m, m + 5 do number = number * 256 + string.byte(v, c) end
      if number >= newer then changed = true end
    end
  end)
  if changed then return 'changed' end
end
local named, at = ARGV[9], 1
while at <= #named do
  local length = struct.unpack('>H', named, at)
  local key = string.sub(named, at + 2, at + 1 + length)
  local member = string.sub(named, at + 2 + length, at + 7 + length)
  at = at + 8 + length
  if redis.call('HEXISTS', key, member) == 0 then return 'changed' end
end
local filed, lives, keys = {}, {}, {}  -- band key -> its new entries, its life; the keys in order
for base = 10, #ARGV, 5 do
  local s, low13, record = ARGV[base], tonumber(ARGV[base + 1]), ARGV[base + 2]
  local queries, life = ARGV[base + 3], tonumber(ARGV[base + 4])
  local bits = slice_bits(prefix, s, entries, first)
  local number = redis.call('INCR', serial_key) * 2 ^ 13 + low13
  local bytes = {}
  for i = 6, 1, -1 do
    bytes[i] = string.char(number % 256)
    number = math.floor(number / 256)
  end
  local member = table.concat(bytes)
  local key = prefix .. ':r:{' .. s .. ':' .. record_bucket(member, bits) .. '}'
  local fresh = redis.call('EXISTS', key) == 0
  redis.call('HSET', key, member, record)
  if fresh then created(key, life) end
  redis.call('HINCRBY', prefix .. ':slices', 'n' .. s, 1)
  local divisor = 2 ^ (16 - bits)
  for q = 1, #queries, 6 do
    local bucket = math.floor((string.byte(queries, q) * 256 + string.byte(queries, q + 1)) / divisor)
    local band_key = prefix .. ':b:' .. s .. ':' .. bucket
    if not filed[band_key] then
      filed[band_key] = {}
      lives[band_key] = life
      keys[#keys + 1] = band_key
    end
    table.insert(filed[band_key], string.sub(queries, q + 2, q + 5) .. member)
  end
end
for _, band_key in ipairs(keys) do file_entries(band_key, table.concat(filed[band_key]), lives[band_key]) end
if clock ~= '' then
  local clock_key = prefix .. ':clock'
  local current = tonumber(redis.call('GET', clock_key) or '')
  if not current or current < tonumber(clock) then redis.call('SET', clock_key, clock) end
end
return 'recorded'
