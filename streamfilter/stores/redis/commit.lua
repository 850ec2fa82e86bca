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
local current_serial = redis.call('GET', serial_key) or '0'
if current_serial ~= read_serial then
  -- (A duplicate stays one whatever was recorded since: it matched a post
  -- that is still there.)
  local queries = {}
  for base = 10, #ARGV, 5 do queries[#queries + 1] = ARGV[base + 3] end
  local newer, seen = (tonumber(read_serial) + 1) * 2 ^ 13, {}
  local low = -math.huge
  if ARGV[7] ~= '' then low = tonumber(ARGV[7]) end
  each_entry(prefix, live_parts(prefix, low), table.concat(queries), cap, function(q, s, bits, v)
    for m = #v - 5, 1, -6 do -- newest first
      local member = string.sub(v, m, m + 5)
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
  end, newer)
end
local filed, keys = {}, {}  -- part -> bucket -> its new entries; per bucket filed in, {key, life, entries}
local parts = {}  -- slice -> the part its posts go to (part_for)
-- Records, counts and the serial are written once a script, not once a post:
local records, record_keys = {}, {}  -- record key -> {life, member, record, member, record, ...}; in order
local counted = {}  -- part -> posts recorded in it here, not yet in {prefix}:slices
local function count_posts()
  for name, n in pairs(counted) do redis.call('HINCRBY', prefix .. ':slices', 'n' .. name, n) end
  counted = {}
end
local serial = tonumber(current_serial)
local byte, sub, floor = string.byte, string.sub, math.floor
for base = 10, #ARGV, 5 do
  if not held[(base - 10) / 5] then
    local low13, record = tonumber(ARGV[base + 1]), ARGV[base + 2]
    local queries, life = ARGV[base + 3], tonumber(ARGV[base + 4])
    local part = parts[tonumber(ARGV[base])]
    if not (part and fits(part, 1, entries)) then
      count_posts()  -- part_for reads the counts
      part = part_for(prefix, parts, ARGV[base], entries, first, 1)
    end
    local s, bits = part[1], part[2]
    part[3] = part[3] + 1
    counted[s] = (counted[s] or 0) + 1
    serial = serial + 1
    local number = serial * 2 ^ 13 + low13
    local member = struct.pack('>I2I4', math.floor(number / 2 ^ 32), number % 2 ^ 32)
    local key = prefix .. ':r:{' .. s .. ':' .. record_bucket(member, bits) .. '}'
    local fields = records[key]
    if not fields then
      fields = {life}
      records[key] = fields
      record_keys[#record_keys + 1] = key
    end
    fields[#fields + 1] = member
    fields[#fields + 1] = record
    local divisor, buckets = 2 ^ (16 - bits), filed[s]
    if not buckets then
      buckets = {}
      filed[s] = buckets
    end
    for q = 1, #queries, 6 do
      local high, low = byte(queries, q, q + 1)
      local bucket = floor((high * 256 + low) / divisor)
      local into = buckets[bucket]
      if not into then
        into = {}
        buckets[bucket] = into
        keys[#keys + 1] = {prefix .. ':b:' .. s .. ':' .. bucket, life, into}
      end
      into[#into + 1] = sub(queries, q + 2, q + 5)
      into[#into + 1] = member
    end
  end
end
count_posts()
if serial ~= tonumber(current_serial) then redis.call('SET', serial_key, string.format('%d', serial)) end
for _, key in ipairs(record_keys) do
  local fields = records[key]
  local fresh = redis.call('EXISTS', key) == 0
  for at = 2, #fields, 1000 do  -- in parts: unpack's stack has a limit
    redis.call('HSET', key, unpack(fields, at, math.min(at + 999, #fields)))
  end
  if fresh then created(key, fields[1]) end
end
-- each bucket filed in, once, at its exact size (one Redis has a scratch key)
local scratch = prefix .. ':scratch'
for _, filing in ipairs(keys) do file_entries(filing[1], table.concat(filing[3]), filing[2], scratch) end
if clock ~= '' then
  local clock_key = prefix .. ':clock'
  local current = tonumber(redis.call('GET', clock_key) or '')
  if not current or current < tonumber(clock) then redis.call('SET', clock_key, clock) end
end
if #found > 0 then return {'check', redis.call('GET', serial_key) or '0', table.concat(found)} end
return {'recorded'}
