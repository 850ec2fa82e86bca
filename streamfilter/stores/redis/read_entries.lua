-- Consume: read a consumer group's entries with every field value over the
-- record limit replaced, inside Redis, by a marker and its size, so that an
-- entry of any size costs the consumer a few bytes (see redis_streams).
-- KEYS[1]: the stream. ARGV: 'read' or 'claim', group, consumer, count,
-- the id to read after ('>' for new entries) or to claim from, the limit in
-- bytes, and for 'claim' the idle time in ms. Returns the entries as
-- XREADGROUP gives them ({id, {field, value, ...}}, fields false for an entry
-- deleted since), and for 'claim', {next cursor, entries}.
local limit = tonumber(ARGV[6])
local function clipped(entries)
  for _, entry in ipairs(entries) do
    local fields = entry[2]
    if type(fields) == 'table' then
      for i = 2, #fields, 2 do
        if #fields[i] > limit then fields[i] = '\0streamfilter-too-long:' .. #fields[i] end
      end
    end
  end
  return entries
end
if ARGV[1] == 'claim' then
  local reply = redis.call('XAUTOCLAIM', KEYS[1], ARGV[2], ARGV[3], ARGV[7], ARGV[5], 'COUNT', ARGV[4])
  return {reply[1], clipped(reply[2])}
end
local reply = redis.call('XREADGROUP', 'GROUP', ARGV[2], ARGV[3], 'COUNT', ARGV[4], 'STREAMS', KEYS[1], ARGV[5])
if not reply then return {} end
return clipped(reply[1][2])
