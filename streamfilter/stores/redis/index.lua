-- The index's keys (``_layout``): time slices, each with its bucket bits,
-- in one hash ``{prefix}:slices`` (field b<slice>: bits; n<slice>: posts).

-- The slices, oldest first, as {name, bits} pairs, and the whole hash.
local function all_slices(prefix)
  local meta = redis.call('HGETALL', prefix .. ':slices')
  local slices = {}
  for i = 1, #meta, 2 do
    if string.sub(meta[i], 1, 1) == 'b' then
      slices[#slices + 1] = {string.sub(meta[i], 2), tonumber(meta[i + 1])}
    end
  end
  table.sort(slices, function(a, b) return tonumber(a[1]) < tonumber(b[1]) end)
  return slices
end

-- The slices at or after ``low`` (a number).
local function live_slices(prefix, low)
  local live = {}
  for _, slice in ipairs(all_slices(prefix)) do
    if tonumber(slice[1]) >= low then live[#live + 1] = slice end
  end
  return live
end

-- The members filed under ``field`` in a band bucket's value (``blob``:
-- 10-byte entries, a 4-byte field then a 6-byte member, oldest first): the
-- newest ``cap`` of them, oldest first, as one string.
local function members_in(blob, field, cap)
  local found, at = {}, 1
  while true do
    local hit = string.find(blob, field, at, true)
    if not hit then break end
    if (hit - 1) % 10 == 0 then
      found[#found + 1] = string.sub(blob, hit + 4, hit + 9)
      at = hit + 10
    else
      at = hit + 1
    end
  end
  if #found > cap then return table.concat(found, '', #found - cap + 1) end
  return table.concat(found)
end

-- For each band query (6 bytes: two for the bucket, four for the field) and
-- each live slice, ``visit(query number, slice, bits, members)`` with the
-- members filed there, when there are any.
local function each_entry(prefix, slices, queries, cap, visit)
  local count = #queries / 6
  for _, slice in ipairs(slices) do
    local s, bits = slice[1], slice[2]
    local divisor = 2 ^ (16 - bits)
    local groups, order = {}, {}
    for q = 1, count do
      local at = q * 6 - 5
      local bucket = math.floor((string.byte(queries, at) * 256 + string.byte(queries, at + 1)) / divisor)
      local group = groups[bucket]
      if not group then
        group = {}
        groups[bucket] = group
        order[#order + 1] = bucket
      end
      group[#group + 1] = q
    end
    for _, bucket in ipairs(order) do
      local blob = redis.call('GET', prefix .. ':b:' .. s .. ':' .. bucket)
      if blob then
        for _, q in ipairs(groups[bucket]) do
          local members = members_in(blob, string.sub(queries, q * 6 - 3, q * 6), cap)
          if members ~= '' then visit(q, s, bits, members) end
        end
      end
    end
  end
end

-- The record bucket of a member in a slice of ``bits`` bucket bits.
local function record_bucket(member, bits)
  return (string.byte(member, 5) * 256 + string.byte(member, 6)) % 2 ^ math.max(bits - 3, 3)
end

-- A key of a slice was created: it expires in wall time once (a backstop
-- for a stream that stops; the clock drops slices first).
local function created(key, life)
  if life > 0 then redis.call('PEXPIRE', key, life) end
end

-- File entries (10 bytes each) in a band bucket, in one write: the value
-- is set anew at its exact size (an APPEND would leave the string room to grow).
local function file_entries(key, entries, life)
  local old = redis.call('GET', key)
  if old then
    redis.call('SET', key, old .. entries, 'KEEPTTL')
  else
    redis.call('SET', key, entries)
    created(key, life)
  end
end

-- The bucket bits of slice ``s``, set when the slice is first used: from
-- the posts of the newest slice before it, about 256 band entries a bucket
-- (each post files ``entries``), else ``first``; 6 to 16 bits.
local function slice_bits(prefix, s, entries, first)
  local key = prefix .. ':slices'
  local bits = redis.call('HGET', key, 'b' .. s)
  if bits then return tonumber(bits) end
  local before
  for _, slice in ipairs(all_slices(prefix)) do
    if tonumber(slice[1]) < tonumber(s) then before = slice[1] end
  end
  bits = first
  if before then
    local posts = tonumber(redis.call('HGET', key, 'n' .. before) or '0')
    bits = math.ceil(math.log(math.max(posts * entries / 256, 1)) / math.log(2))
    bits = math.max(6, math.min(16, bits))
  end
  redis.call('HSETNX', key, 'b' .. s, bits)
  return tonumber(redis.call('HGET', key, 'b' .. s))
end
