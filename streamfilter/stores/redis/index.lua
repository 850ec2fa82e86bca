-- The index's keys (``_layout``): time slices, each kept in one or more
-- parts (``slice * 8 + generation``), each part with its bucket bits, in one
-- hash ``{prefix}:slices`` (field b<part>: bits; n<part>: posts).

-- The parts, oldest first, as {name, bits, posts} triples.
local function all_parts(prefix)
  local meta = redis.call('HGETALL', prefix .. ':slices')
  local by_name, parts = {}, {}
  for i = 1, #meta, 2 do
    local name = string.sub(meta[i], 2)
    local part = by_name[name]
    if not part then
      part = {name, nil, 0}
      by_name[name] = part
    end
    if string.sub(meta[i], 1, 1) == 'b' then part[2] = tonumber(meta[i + 1]) else part[3] = tonumber(meta[i + 1]) end
  end
  for _, part in pairs(by_name) do
    if part[2] then parts[#parts + 1] = part end
  end
  table.sort(parts, function(a, b) return tonumber(a[1]) < tonumber(b[1]) end)
  return parts
end

-- A part is named slice * PARTS + generation (``_layout.GENERATION_BITS``).
local PARTS = 8

-- The time slice a part belongs to.
local function slice_of_part(name)
  return math.floor(tonumber(name) / PARTS)
end

-- The parts of the time slices at or after ``low`` (a number).
local function live_parts(prefix, low)
  local live = {}
  for _, part in ipairs(all_parts(prefix)) do
    if slice_of_part(part[1]) >= low then live[#live + 1] = part end
  end
  return live
end

-- The members filed under ``field`` in a band bucket's value (``blob``:
-- 10-byte entries, a 4-byte field then a 6-byte member, oldest first), from
-- byte ``from`` on (1: all of it): the oldest OLDEST_PER_KEY (set by
-- _scripts.py) and the newest ``cap`` of them, oldest first, as one string.
local function members_in(blob, field, cap, from)
  local hit = string.find(blob, field, from or 1, true)
  if not hit then return '' end  -- most keys of novel posts: no table made
  local found, at = {}, hit
  while true do
    hit = string.find(blob, field, at, true)
    if not hit then break end
    if (hit - 1) % 10 == 0 then
      found[#found + 1] = string.sub(blob, hit + 4, hit + 9)
      at = hit + 10
    else
      at = hit + 1
    end
  end
  -- the oldest OLDEST_PER_KEY and the newest cap (_rules.offered_per_key)
  if #found > cap + OLDEST_PER_KEY then
    return table.concat(found, '', 1, OLDEST_PER_KEY) .. table.concat(found, '', #found - cap + 1)
  end
  return table.concat(found)
end

-- The first byte of the entries in a band bucket's value whose member (as
-- a number) is ``newer`` or more; past its end when there are none. A bucket
-- is written in the order members are given (a batch files its posts in
-- order, one batch at a time), so they rise through the value.
local function newer_from(blob, newer)
  local low, high = 0, #blob / 10  -- entries before low are older; from high on, newer
  while low < high do
    local mid = math.floor((low + high) / 2)
    local b1, b2, b3, b4, b5, b6 = string.byte(blob, mid * 10 + 5, mid * 10 + 10)
    if ((((b1 * 256 + b2) * 256 + b3) * 256 + b4) * 256 + b5) * 256 + b6 < newer then low = mid + 1 else high = mid end
  end
  return low * 10 + 1
end

-- How much of a band bucket's end a check for new entries reads first: 64 entries.
local TAIL_BYTES = 640

-- For each band query (6 bytes: two for the bucket, four for the field) and
-- each of ``parts``, ``visit(query number, part, bits, members)`` with the
-- members filed there, when there are any; only members ``newer`` or more
-- (as numbers), when it is given. Queries are taken in order, each bucket
-- read once.
local function each_entry(prefix, parts, queries, cap, visit, newer)
  local byte, sub, floor = string.byte, string.sub, math.floor  -- locals: read once, not per query
  for _, part in ipairs(parts) do
    local s, bits = part[1], part[2]
    local divisor, name = 2 ^ (16 - bits), prefix .. ':b:' .. s .. ':'
    local blobs, froms = {}, {}  -- bucket -> its value (false: nothing to search), where to search from
    for at = 1, #queries, 6 do
      local high, low = byte(queries, at, at + 1)
      local bucket = floor((high * 256 + low) / divisor)
      local blob = blobs[bucket]
      if blob == nil then
        local from = 1
        if newer then
          -- the newest entries, at the value's end; all of it when they may not be enough
          blob = redis.call('GETRANGE', name .. bucket, -TAIL_BYTES, -1)
          from = newer_from(blob, newer)
          if from == 1 and #blob == TAIL_BYTES then
            blob = redis.call('GET', name .. bucket)
            from = newer_from(blob, newer)
          end
        else
          blob = redis.call('GET', name .. bucket)
        end
        if not blob or from > #blob then blob = false end
        blobs[bucket], froms[bucket] = blob, from
      end
      if blob then
        local members = members_in(blob, sub(queries, at + 2, at + 5), cap, froms[bucket])
        if members ~= '' then visit((at + 5) / 6, s, bits, members) end
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

-- File entries (10 bytes each) in a band bucket, in one write, leaving the
-- value at its exact size (an APPEND alone leaves room to grow, up to as
-- much again). Given a ``scratch`` key, the entries are appended and the
-- value copied there and back (COPY makes it exact, TTL and all), which
-- never brings it into the script; without one (a Cluster: a scratch key
-- would need each bucket's hash slot), it is read and set anew.
local function file_entries(key, entries, life, scratch)
  if scratch then
    if redis.call('APPEND', key, entries) == #entries then
      created(key, life)
    else
      redis.call('COPY', key, scratch, 'REPLACE')
      redis.call('RENAME', scratch, key)
    end
    return
  end
  local old = redis.call('GET', key)
  if old then
    redis.call('SET', key, old .. entries, 'KEEPTTL')
  else
    redis.call('SET', key, entries)
    created(key, life)
  end
end

-- How many posts a part of ``bits`` bucket bits takes before its slice
-- opens the next: about 1024 band entries a bucket (``entries`` a post), and
-- 512 records a record hash, half the production guide's listpack limit.
local function part_capacity(bits, entries)
  return math.min(2 ^ bits * 1024 / entries, 2 ^ math.max(bits - 3, 3) * 512)
end

-- Whether ``adding`` more posts fit in ``part`` ({name, bits, posts}): an
-- empty part takes any number, and a slice's eighth part all that come.
local function fits(part, adding, entries)
  return part[3] == 0 or part[3] + adding <= part_capacity(part[2], entries) or tonumber(part[1]) % PARTS == PARTS - 1
end

-- Where ``adding`` posts of time slice ``s`` are recorded: {part name,
-- bits, posts} of the slice's newest part (``parts``: a table this script
-- keeps, slice -> that triple, which the caller counts its posts into). A
-- slice's first part is sized from the posts of the newest slice before it,
-- for about 256 band entries a bucket (else ``first`` bits; 6 to 16); when
-- they would overfill the newest part, the slice opens the next, with 4
-- times the buckets, up to 8 parts a slice.
local function part_for(prefix, parts, s, entries, first, adding)
  s = tonumber(s)
  local part = parts[s]
  if part and fits(part, adding, entries) then return part end
  local key = prefix .. ':slices'
  local newest, before, before_posts = nil, nil, 0
  for _, p in ipairs(all_parts(prefix)) do
    local of = slice_of_part(p[1])
    if of == s then
      newest = p
    elseif of < s then
      if before ~= of then before, before_posts = of, 0 end
      before_posts = before_posts + p[3]
    end
  end
  local name, bits
  if newest and fits(newest, adding, entries) then
    parts[s] = newest
    return newest
  elseif newest then
    name, bits = tonumber(newest[1]) + 1, math.min(16, newest[2] + 2)
  else
    name, bits = s * PARTS, first
    if before then
      bits = math.ceil(math.log(math.max(before_posts * entries / 256, 1)) / math.log(2))
      bits = math.max(6, math.min(16, bits))
    end
  end
  name = string.format('%d', name)
  -- another worker may have opened it first: its bits stand
  redis.call('HSETNX', key, 'b' .. name, bits)
  part = {name, tonumber(redis.call('HGET', key, 'b' .. name)), tonumber(redis.call('HGET', key, 'n' .. name) or '0')}
  parts[s] = part
  return part
end
