-- A post record (stores/_records.py): '<dB' (timestamp, marker), then the
-- id, then its 32-bit word hashes; on a Cluster a pinned record has one more
-- byte at the end.

-- A post record's timestamp, the id's bytes from its marker on (equal for
-- equal ids) and the position of its first word hash.
local function header(rec)
  local from = 1
  local ts, marker = struct.unpack('<dB', rec, from)
  local at = from + 9
  local last
  if marker == 255 then last = at + 7
  elseif marker == 253 then last = at + 15 + string.byte(rec, at + 15)
  elseif marker == 254 then last = at + 1 + struct.unpack('<H', rec, at)
  else last = at + marker - 1 end
  return ts, string.sub(rec, from + 8, last), last + 1
end
