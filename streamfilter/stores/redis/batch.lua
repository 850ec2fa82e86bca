-- Judges and records one batch on a single Redis, atomically.
-- ARGV: prefix, ttl seconds (0: never), cap (newest posts a band key keeps),
-- then the rules (read_rules: 7 values from ARGV[4]), the most candidates
-- verified (_rules.MAX_VERIFIED), the key of the pinned settings, then per post: record,
-- band keys (8 bytes each), record-key suffix, two flags ("1" or "0": a
-- made-up id, a text cut off by "…"), and the reposted id's bytes of a
-- reference ('' for a post).
-- Returns per post: "0" for novel, or "1", the matched id's bytes and the similarity.
local prefix, ttl, cap = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local rules = read_rules(4)
local max_verified = tonumber(ARGV[11])
-- settings pinned when the index was opened and gone now: the server was
-- emptied under a running filter, and every post it held with them
if redis.call('EXISTS', ARGV[12]) == 0 then return redis.error_reply('STREAMFILTER_INDEX_GONE') end
local serial_key = prefix .. ':serial'
local clock_key = prefix .. ':clock'
local clock = tonumber(redis.call('GET', clock_key) or '') or -math.huge
local out = {}
for base = 13, #ARGV, 5 do
  local rec, keys, h = ARGV[base], ARGV[base + 1], ARGV[base + 2]
  local flags, refers = ARGV[base + 3], ARGV[base + 4]
  local made_up, cut = string.sub(flags, 1, 1) == '1', string.sub(flags, 2, 2) == '1'
  local ts, pid, first = header(rec)
  if ts > clock then clock = ts end
  local horizon = -math.huge
  if ttl > 0 then horizon = clock - ttl end
  local best_id, best_sim = nil, -1
  if refers ~= '' then
    -- a repost without text: a duplicate when the post it reposts is live here
    local members = redis.call('GET', prefix .. ':b:' .. keys) or ''
    for at = 1, #members, 8 do
      local other = redis.call('GET', prefix .. ':p:' .. string.sub(members, at, at + 7))
      if other then
        local ots, oid = header(other, SERIAL + 1)
        if ots > horizon and oid == refers then best_id, best_sim = refers, 1 end
      end
    end
  else
    -- _rules: each band key offers its newest ``cap`` posts (all a key
    -- keeps); they are ranked by keys shared, then newest (the serial they
    -- were recorded under), and the first ``max_verified`` are verified
    local shared, found = {}, {}
    for b = 0, #keys / 8 - 1 do
      local members = redis.call('GET', prefix .. ':b:' .. string.sub(keys, b * 8 + 1, b * 8 + 8)) or ''
      for at = 1, #members, 8 do
        local m = string.sub(members, at, at + 7)
        if shared[m] then shared[m] = shared[m] + 1 else shared[m] = 1; found[#found + 1] = m end
      end
    end
    local stored, ranked = {}, {}
    for _, m in ipairs(found) do
      local v = redis.call('GET', prefix .. ':p:' .. m)
      if v then stored[m] = v; ranked[#ranked + 1] = m end
    end
    table.sort(ranked, function(a, b)
      if shared[a] ~= shared[b] then return shared[a] > shared[b] end
      return string.sub(stored[a], 1, SERIAL) > string.sub(stored[b], 1, SERIAL)
    end)
    local words = string.sub(rec, first)
    local query, qn, qlist = nil, 0, nil
    for i = 1, math.min(#ranked, max_verified) do
      local other = stored[ranked[i]]
      local ots, oid, ofirst = header(other, SERIAL + 1)
      if ots > horizon and not (oid == pid and (ots == ts or not made_up)) then
        if string.sub(other, ofirst) == words then
          best_id, best_sim = oid, 1  -- the very same words: a match at once
          break
        end
        if not query then query, qn = runs(rec, first, rules.k) end
        local sim
        sim, qlist = similarity(rules, rec, first, query, qn, qlist, cut, other, ofirst)
        if sim >= rules.threshold and sim > best_sim then
          best_id, best_sim = oid, sim
          if sim == 1 then break end
        end
      end
    end
  end
  if best_id then
    out[#out + 1] = '1'
    out[#out + 1] = best_id
    out[#out + 1] = string.format('%.17g', best_sim)
  else
    out[#out + 1] = '0'
    local life = 0
    if ttl > 0 then life = math.floor((ts + ttl - clock) * 1000) end
    if refers == '' and (ttl <= 0 or life > 0) then
      local pkey = prefix .. ':p:' .. h
      local value = string.format('%016d', redis.call('INCR', serial_key)) .. rec
      if ttl > 0 then redis.call('SET', pkey, value, 'PX', life) else redis.call('SET', pkey, value) end
      for b = 0, #keys / 8 - 1 do
        add_member(prefix .. ':b:' .. string.sub(keys, b * 8 + 1, b * 8 + 8), h, cap, life)
      end
    end
  end
end
if clock > -math.huge then redis.call('SET', clock_key, string.format('%.17g', clock)) end
return out
