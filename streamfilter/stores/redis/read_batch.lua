-- One Redis: everything a batch reads, in one call.
-- ARGV: prefix, the TTL and the slice length in seconds, cap (newest
-- members a band key offers), then the band queries, 6 bytes each (a band
-- key's first six). Returns {1 if the pinned
-- settings are there, the clock or false, the serial, counts, members,
-- records, every part}: counts holds a u16 per query, in order, how many
-- members are filed under it in every live part; members those 6-byte
-- members, query after query; records, per member
-- found, its 6 bytes, its part (a big-endian double), a u32 length and its
-- record (none for a member whose record is gone); every part as
-- "name:bits", space-separated.
local prefix, ttl, length = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local cap, queries = tonumber(ARGV[4]), ARGV[5]
local clock = redis.call('GET', prefix .. ':clock')
local low, number = -math.huge, clock and tonumber(clock)
-- a clock that is no number is returned as it is, for the store to refuse naming its key
if number and ttl > 0 and length > 0 then low = math.floor((number - ttl) / length) end
local values, record_key, slice_of, order = {}, {}, {}, {}
each_entry(prefix, live_parts(prefix, low), queries, cap, function(q, s, bits, v)
  values[q] = (values[q] or '') .. v
  for m = 1, #v, 6 do
    local member = string.sub(v, m, m + 5)
    if not record_key[member] then
      record_key[member] = prefix .. ':r:{' .. s .. ':' .. record_bucket(member, bits) .. '}'
      slice_of[member] = struct.pack('>d', tonumber(s))
      order[#order + 1] = member
    end
  end
end)
local counts, members, none = {}, {}, struct.pack('>H', 0)
for q = 1, #queries / 6 do
  local v = values[q]
  if v then
    counts[q] = struct.pack('>H', #v / 6)
    members[#members + 1] = v
  else
    counts[q] = none
  end
end
local by_key, keys = {}, {}
for _, member in ipairs(order) do
  local key = record_key[member]
  if not by_key[key] then by_key[key] = {}; keys[#keys + 1] = key end
  table.insert(by_key[key], member)
end
local records = {}
for _, key in ipairs(keys) do
  local members = by_key[key]
  local got = redis.call('HMGET', key, unpack(members))
  for i, member in ipairs(members) do
    if got[i] then records[#records + 1] = member .. slice_of[member] .. struct.pack('>I', #got[i]) .. got[i] end
  end
end
local names = {}
for _, part in ipairs(all_parts(prefix)) do names[#names + 1] = part[1] .. ':' .. part[2] end
return {redis.call('EXISTS', prefix .. ':config'), clock or false, redis.call('GET', prefix .. ':serial') or '0',
        table.concat(counts), table.concat(members), table.concat(records), table.concat(names, ' ')}
