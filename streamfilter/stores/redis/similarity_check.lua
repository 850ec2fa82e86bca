-- For tests: the similarity of pairs of records as this Lua computes it.
-- ARGV: the rules (read_rules: 7 values), then per pair: record, its cut
-- flag ("1" or "0"), the other record. Returns each similarity as text.
local rules = read_rules(1)
local out = {}
for base = 8, #ARGV, 3 do
  local rec, cut, other = ARGV[base], ARGV[base + 1] == '1', ARGV[base + 2]
  local _, _, first = header(rec)
  local _, _, ofirst = header(other)
  local query, qn = runs(rec, first, rules.k)
  local sim = similarity(rules, rec, first, query, qn, nil, cut, other, ofirst)
  out[#out + 1] = string.format('%.17g', sim)
end
return out
