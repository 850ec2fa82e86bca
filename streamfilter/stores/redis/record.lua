-- Reading a post record (stores/_records.py): '<dB' (timestamp, marker),
-- then the id, then its 32-bit word hashes; on a Cluster a pinned record
-- has one more byte at the end.
-- Returns the timestamp, the id's bytes from its marker on (equal for equal
-- ids) and the position of the first word hash.
local function header(rec)
  local ts, marker = struct.unpack('<dB', rec)
  local at = 10
  local last
  if marker == 255 then last = at + 7
  elseif marker == 253 then last = at + 15 + string.byte(rec, at + 15)
  elseif marker == 254 then last = at + 1 + struct.unpack('<H', rec, at)
  else last = at + marker - 1 end
  return ts, string.sub(rec, 9, last), last + 1
end
