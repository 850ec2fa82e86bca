-- One Redis: record a judged batch's novel posts, atomically. It answers
-- "changed" and records nothing when a record a verdict names is gone (the
-- batch is judged again). When other workers have recorded since the batch
-- read, the posts they filed under the band keys of a post to record may be
-- concurrent near-duplicates of it: such a post is held back, and the
-- answer is "check", the serial now and those posts with their records, for
-- the caller to verify and send again what is still novel; every other post
-- is recorded. Else it answers "recorded". ARGV: prefix, the serial the
-- batch read, its clock ('' for none), cap, the bits of a first slice, band
-- keys a post, the oldest live slice when the batch read ('' for all),
-- (unused), the records the verdicts name (per record: a u16 key length,
-- the key, the 6-byte member), then per novel post: its time slice, the low
-- 13 bits of its text's hash, its record, its band queries and the life in
-- ms of its slice's keys (0: none).
local prefix, read_serial, clock, cap = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])  -- cap: as read_batch.lua's
local first, entries = tonumber(ARGV[5]), tonumber(ARGV[6])
-- settings pinned when the index was opened and gone now: the server was
-- emptied under a running filter, and every post it held with them
if redis.call('EXISTS', prefix .. ':config') == 0 then return redis.error_reply('STREAMFILTER_INDEX_GONE') end
local named, at = ARGV[9], 1
while at <= #named do
  local length = struct.unpack('>H', named, at)
  local key = string.sub(named, at + 2, at + 1 + length)
  local member = string.sub(named, at + 2 + length, at + 7 + length)
  at = at + 8 + length
  if redis.call('HEXISTS', key, member) == 0 then return {'changed'} end
end
local serial_key = prefix .. ':serial'
local found, held = {}, {}  -- posts filed meanwhile (the answer); the posts they hold back, by number
if (redis.call('GET', serial_key) or '0') ~= read_serial then
  -- (A duplicate stays one whatever was recorded since: it matched a post
  -- that is still there.)
  local queries = {}
  for base = 10, #ARGV, 5 do queries[#queries + 1] = ARGV[base + 3] end
  local newer, seen = (tonumber(read_serial) + 1) * 2 ^ 13, {}
  local low = -math.huge
  if ARGV[7] ~= '' then low = tonumber(ARGV[7]) end
  each_entry(prefix, live_parts(prefix, low), table.concat(queries), cap, function(q, s, bits, v)
    for m = #v - 5, 1, -6 do -- newest last
      local member = string.sub(v, m, m + 5)
      local number = 0
      for c = 1, 6 do number = number * 256 + string.byte(member, c) end
      if number < newer then break end
      local post = math.floor((q - 1) / entries)
      if not seen[post .. member] then
        seen[post .. member] = true
        local rec = redis.call('HGET', prefix .. ':r:{' .. s .. ':' .. record_bucket(member, bits) .. '}', member)
        if rec then
          found[#found + 1] = struct.pack('>I', post) .. member .. struct.pack('>I', #rec) .. rec
          held[post] = true
        end
      end
    end
  end)
end
local filed, lives, keys = {}, {}, {}  -- band key -> its new entries, its life; the keys in order
local parts = {}  -- slice -> the part its posts go to (part_for)
for base = 10, #ARGV, 5 do
  if not held[(base - 10) / 5] then
    local low13, record = tonumber(ARGV[base + 1]), ARGV[base + 2]
    local queries, life = ARGV[base + 3], tonumber(ARGV[base + 4])
    local part = part_for(prefix, parts, ARGV[base], entries, first, 1)
    local s, bits = part[1], part[2]
    part[3] = part[3] + 1
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
end
for _, band_key in ipairs(keys) do file_entries(band_key, table.concat(filed[band_key]), lives[band_key]) end
if clock ~= '' then
  local clock_key = prefix .. ':clock'
  local current = tonumber(redis.call('GET', clock_key) or '')
  if not current or current < tonumber(clock) then redis.call('SET', clock_key, clock) end
end
if #found > 0 then return {'check', redis.call('GET', serial_key) or '0', table.concat(found)} end
return {'recorded'}
