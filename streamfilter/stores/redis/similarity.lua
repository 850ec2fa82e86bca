-- The similarity of _rules.py, in Lua: a property test compares the two on
-- generated pairs. Words are 4-byte strings; ``rules`` holds the constants
-- the caller passes: k, threshold, cut_words, cut_floor, edit_words,
-- edit_max, edit_jaccard.

-- the number of words of a record from byte ``from`` on (a trailing pin byte left out)
local function word_count(v, from)
  return math.floor((#v - from + 1) / 4)
end

-- the words of a record, in order
local function words_of(v, from)
  local out = {}
  for s = from, from + 4 * word_count(v, from) - 1, 4 do out[#out + 1] = string.sub(v, s, s + 3) end
  return out
end

-- _rules.word_edits: the word edit distance of a and b, or limit + 1 once it
-- is over limit (only the cells within limit of the diagonal)
local function word_edits(a, b, limit)
  local over = limit + 1
  if math.abs(#a - #b) > limit then return over end
  local prev = {}
  for j = 0, math.min(#b, limit) do prev[j] = j end
  for i = 1, #a do
    local cur, smallest = {}, over
    if i <= limit then cur[0] = i; smallest = i end
    for j = math.max(1, i - limit), math.min(#b, i + limit) do
      local cost = 1
      if a[i] == b[j] then cost = 0 end
      local v = math.min((prev[j] or over) + 1, (cur[j - 1] or over) + 1, (prev[j - 1] or over) + cost)
      cur[j] = v
      if v < smallest then smallest = v end
    end
    if smallest > limit then return over end
    prev = cur
  end
  return math.min(prev[#b] or over, over)
end

-- the verification set (runs of 1 to k words) of a record, or of its first
-- ``words`` words, and its size
local function runs(v, from, k, words)
  local set, n = {}, 0
  local last = from + 4 * word_count(v, from) - 1
  if words then last = math.min(last, from + 4 * words - 1) end
  for s = from, last - 3, 4 do
    for size = 1, k do
      local e = s + 4 * size - 1
      if e > last then break end
      local r = string.sub(v, s, e)
      if not set[r] then set[r] = true; n = n + 1 end
    end
  end
  return set, n
end

local function shared_with(query, set)
  local shared = 0
  for r in pairs(set) do
    if query[r] then shared = shared + 1 end
  end
  return shared
end

-- _rules.judged_similarity of a post (record ``rec``, words from ``first``,
-- its set ``query`` of ``qn`` runs, its word list ``qlist`` or nil, cut off
-- or not) and a stored record (words from ``ofirst``). Returns the
-- similarity and the post's word list, built when first needed.
local function similarity(rules, rec, first, query, qn, qlist, cut, other, ofirst)
  local theirs, on = runs(other, ofirst, rules.k)
  local shared = shared_with(query, theirs)
  local whole = shared / (qn + on - shared)
  local sim = whole
  if whole >= rules.threshold then return sim, qlist end
  local qwords, owords = word_count(rec, first), word_count(other, ofirst)
  if cut and qwords >= rules.cut_words and owords > qwords then
    for size = qwords, qwords + 1 do
      local start, sn = runs(other, ofirst, rules.k, size)
      shared = shared_with(query, start)
      local ssim = shared / (qn + sn - shared)
      if ssim > sim and ssim >= rules.cut_floor then sim = ssim end
    end
  end
  if whole >= rules.edit_jaccard and qwords >= rules.edit_words and owords >= rules.edit_words then
    if not qlist then qlist = words_of(rec, first) end
    local edits = word_edits(qlist, words_of(other, ofirst), rules.edit_max)
    if edits <= rules.edit_max then
      local esim = 1 - edits / math.max(qwords, owords)
      if esim > sim then sim = esim end
    end
  end
  return sim, qlist
end

-- the rules' constants from ARGV[first] on: threshold, k, cut_words,
-- cut_min_similarity, edit_words, edit_max, edit_jaccard
local function read_rules(first)
  local threshold = tonumber(ARGV[first])
  return {
    threshold = threshold,
    k = tonumber(ARGV[first + 1]),
    cut_words = tonumber(ARGV[first + 2]),
    cut_floor = math.max(threshold, tonumber(ARGV[first + 3])),
    edit_words = tonumber(ARGV[first + 4]),
    edit_max = tonumber(ARGV[first + 5]),
    edit_jaccard = tonumber(ARGV[first + 6]),
  }
end
