"""A band store that many workers share: Redis, or a Redis Cluster.

Keys, under a prefix (``sf`` unless the URL says ``?prefix=name``):

- ``{prefix}:config``, ``{prefix}:format``: the pinned signature settings
- ``{prefix}:clock``: the highest event time seen, in seconds
- ``{prefix}:progress:<host name>``: hash of input path -> lines done
- ``{prefix}:p:<8 bytes>``: one post's verification record (timestamp, id,
  its 32-bit word hashes in order; the scripts compare its runs of 1 to k
  words as byte strings), keyed by a 64-bit hash of that set, so copies of one
  normalised text share the key
- ``{prefix}:b:<8 bytes>``: the 8-byte record-key suffixes of the posts under
  one band key, newest last, at most ``max_candidates_per_band`` of them

**Atomicity.** On a single Redis one Lua script judges and records a whole
batch, so no two workers can both pass copies of a text, nor near-duplicates.
On a Cluster, keys live in different slots and no script can span them, so a
batch runs in steps, each one script per node over the keys that node holds:

1. read the band keys and the candidates' records, and verify;
2. *claim* each novel post's record key (set only when no live record of
   another post holds it). Copies of one normalised text all claim the same
   key, so exactly one of them passes, whichever workers they reach. A post
   that loses its claim becomes a duplicate of the holder, and a later post
   of its batch that was judged a duplicate of it is judged again;
3. append the novel posts to their band keys;
4. *recheck*: read those band keys again. A near-duplicate that another
   worker recorded meanwhile is concurrent; of the two, the one that came
   second under the smallest band key they share defers to the other. Both
   look at the same key, whose order never changes, so at most one defers,
   and the second to append always sees the first, so one does;
5. *pin* every post that a verdict names (each duplicate's match, and each
   post deferred to), then drop each deferring post unless it was pinned.
   Pin and drop are atomic on the record key, so a verdict never names a
   post that did not pass; a duplicate whose match was dropped first is
   judged again.

What can still race: a pinned post that wanted to defer stays, and both pass.
Nothing can make both posts of a pair drop.

**Expiry.** Redis's own: each record and band key gets a TTL, and nothing is
ever scanned. Event time decides visibility as in LMDB: a record is ignored
once its timestamp is older than the clock minus the TTL. The Redis TTL of a
record is what remains of its event-time life when it is written
(``timestamp + ttl - clock``); a band key lives as long as its longest-lived
post. A live stream, where event time follows the wall clock, expires in both
at once. A replay, which runs event time faster, hides posts by event time
first and frees their memory when their wall-clock remainder runs out.

**Failures.** A dropped connection is retried with exponential backoff and
jitter for ``retry_for`` seconds, then the batch fails with a StoreError. A
batch whose reply was lost may be replayed: a stored record with the same post
id is the post itself, recorded by that earlier attempt (or by a run killed
before its output was written), and the post passes again. That is the
at-least-once bound: a post is repeated, never lost. It also means that a
platform delivering one post id twice gets it passed twice, as any
at-least-once consumer must expect. Posts without an id get ``line:N``, which
repeats across inputs, so for them the timestamp must match as well.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

from .._exceptions import ConfigError, MissingDependencyError, StoreError
from .._shingle import verification_set
from ._base import (
    CUT_OFF_MIN_SIMILARITY,
    CUT_OFF_MIN_WORDS,
    EDIT_MAX_EDITS,
    EDIT_MIN_JACCARD,
    EDIT_MIN_WORDS,
    IndexSettings,
    Match,
    Sketch,
    check_fingerprint,
    decode_post,
    encode_words,
    judged_similarity,
    key_bytes,
)

__all__ = ["RedisStore"]

logger = logging.getLogger("streamfilter")

_FORMAT = b"streamfilter-redis-1"

# A band key's value is the 8-byte record-key suffixes of its posts, newest
# last, at most ``cap`` of them: a short string costs far less memory than a
# list. Adding a post again changes nothing but the TTL; the key lives as
# long as its longest-lived post.
_ADD_MEMBER = """
local function add_member(key, h, cap, life)
  local old = redis.call('GET', key) or ''
  local kept, present = {}, false
  for at = 1, #old, 8 do
    local m = string.sub(old, at, at + 7)
    kept[#kept + 1] = m
    if m == h then present = true end
  end
  -- a post added again (a retried batch) keeps its place: the order of a key
  -- is what settles which of two concurrent near-duplicates came first
  if not present then kept[#kept + 1] = h end
  local value = table.concat(kept, '', math.max(1, #kept - cap + 1))
  if life > 0 then
    local left = redis.call('PTTL', key)
    if left > life then life = left end
    redis.call('SET', key, value, 'PX', life)
  else
    redis.call('SET', key, value)
  end
end
"""

# Judges and records one batch on a single Redis. ARGV: prefix, ttl seconds
# (0: never), threshold, cap, k (the longest run of words compared), then per post: record, band keys (8 bytes
# each), record key suffix, two flags ("1" or "0": a made-up id, a text cut off
# by "…"), and the reposted id of a reference ('' for a post). Returns per
# post: "0" for novel, or "1", the matched post id and the similarity. Under
# the threshold, a cut post is also compared with the start of each
# candidate, and posts a word edit or two apart by their words in order, as
# ``_base.judged_similarity`` does.
_BATCH_SCRIPT = (
    (
        _ADD_MEMBER
        + """
local prefix, ttl, threshold = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local cap, k = tonumber(ARGV[4]), tonumber(ARGV[5])
local cut_words, cut_floor = CUT_OFF_MIN_WORDS, math.max(threshold, CUT_OFF_MIN_SIMILARITY)
local edit_words, edit_max, edit_jaccard = EDIT_MIN_WORDS, EDIT_MAX_EDITS, EDIT_MIN_JACCARD
-- the number of words of a record (4-byte hashes from byte ``from`` on; a
-- trailing pin byte is left out)
local function word_count(v, from)
  return math.floor((#v - from + 1) / 4)
end
-- the words of a record, in order, as 4-byte strings
local function words_of(v, from)
  local out = {}
  for s = from, from + 4 * word_count(v, from) - 1, 4 do out[#out + 1] = string.sub(v, s, s + 3) end
  return out
end
-- the word edit distance of a and b, or limit + 1 once it is over limit
-- (``_base.word_edits``: only the cells within limit of the diagonal)
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
-- the runs of 1 to k words of a record, or of its first ``words`` words, as
-- a set and its size
local function runs(v, from, words)
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
local clock_key = prefix .. ':clock'
local clock = tonumber(redis.call('GET', clock_key) or '') or -math.huge
local out = {}
for base = 6, #ARGV, 5 do
  local rec, keys, h = ARGV[base], ARGV[base + 1], ARGV[base + 2]
  local flags, refers = ARGV[base + 3], ARGV[base + 4]
  local made_up, cut = string.sub(flags, 1, 1) == '1', string.sub(flags, 2, 2) == '1'
  local ts, idlen = struct.unpack('<dH', rec)
  local pid = string.sub(rec, 11, 10 + idlen)
  local first = 11 + idlen
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
        local ots, olen = struct.unpack('<dH', other)
        if ots > horizon and string.sub(other, 11, 10 + olen) == refers then best_id, best_sim = refers, 1 end
      end
    end
  else
    local seen, query, qn, qlist = {}, nil, 0, nil
    for b = 0, #keys / 8 - 1 do
      local members = redis.call('GET', prefix .. ':b:' .. string.sub(keys, b * 8 + 1, b * 8 + 8)) or ''
      for at = 1, #members, 8 do
        local m = string.sub(members, at, at + 7)
        if not seen[m] then
          seen[m] = true
          local other = redis.call('GET', prefix .. ':p:' .. m)
          if other then
            local ots, olen = struct.unpack('<dH', other)
            local oid = string.sub(other, 11, 10 + olen)
            if ots > horizon and not (oid == pid and (ots == ts or not made_up)) then
              if not query then query, qn = runs(rec, first) end
              local theirs, on = runs(other, 11 + olen)
              local shared = 0
              for r in pairs(theirs) do
                if query[r] then shared = shared + 1 end
              end
              local sim = shared / (qn + on - shared)
              local whole = sim
              local qwords, owords = word_count(rec, first), word_count(other, 11 + olen)
              if cut and whole < threshold and qwords >= cut_words and owords > qwords then
                for size = qwords, qwords + 1 do
                  local start, sn = runs(other, 11 + olen, size)
                  shared = 0
                  for r in pairs(start) do
                    if query[r] then shared = shared + 1 end
                  end
                  local ssim = shared / (qn + sn - shared)
                  if ssim > sim and ssim >= cut_floor then sim = ssim end
                end
              end
              if whole < threshold and whole >= edit_jaccard and qwords >= edit_words and owords >= edit_words then
                if not qlist then qlist = words_of(rec, first) end
                local edits = word_edits(qlist, words_of(other, 11 + olen), edit_max)
                if edits <= edit_max then
                  local esim = 1 - edits / math.max(qwords, owords)
                  if esim > sim then sim = esim end
                end
              end
              if sim >= threshold and sim > best_sim then best_id, best_sim = oid, sim end
            end
          end
        end
      end
      if best_sim == 1 then break end
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
      if ttl > 0 then redis.call('SET', pkey, rec, 'PX', life) else redis.call('SET', pkey, rec) end
      for b = 0, #keys / 8 - 1 do
        add_member(prefix .. ':b:' .. string.sub(keys, b * 8 + 1, b * 8 + 8), h, cap, life)
      end
    end
  end
end
if clock > -math.huge then redis.call('SET', clock_key, string.format('%.17g', clock)) end
return out
"""
    )
    .replace("CUT_OFF_MIN_WORDS", str(CUT_OFF_MIN_WORDS))
    .replace("CUT_OFF_MIN_SIMILARITY", repr(CUT_OFF_MIN_SIMILARITY))
    .replace("EDIT_MIN_WORDS", str(EDIT_MIN_WORDS))
    .replace("EDIT_MAX_EDITS", str(EDIT_MAX_EDITS))
    .replace("EDIT_MIN_JACCARD", repr(EDIT_MIN_JACCARD))
)

# Cluster scripts run once per node and phase, over keys of many slots that
# all live on that node (allow-cross-slot-keys, Redis 7). Key names travel in
# ARGV: Redis routes declared keys by slot and refuses several slots in one
# call, while it lets a script reach any key its node holds. A key whose slot
# moved meanwhile makes the script fail, and the batch is retried on the new
# topology; each key still belongs to one post or one band, so nothing relies
# on keys sharing a node.
_READ_SCRIPT = """#!lua flags=allow-cross-slot-keys,no-writes
local out = {}
for i = 1, #ARGV do out[i] = redis.call('GET', ARGV[i]) end
return out
"""

# Claim record keys. ARGV per key: key, record, horizon, life in ms (0: none).
# A key is set unless it holds a live record of another post, which is returned.
_CLAIM_SCRIPT = """#!lua flags=allow-cross-slot-keys
local out = {}
for i = 1, #ARGV / 5 do
  local key, rec, horizon = ARGV[i * 5 - 4], ARGV[i * 5 - 3], tonumber(ARGV[i * 5 - 2])
  local life, made_up = tonumber(ARGV[i * 5 - 1]), ARGV[i * 5] == '1'
  local old = redis.call('GET', key)
  out[i] = false
  if old then
    local ots, olen = struct.unpack('<dH', old)
    local ts, idlen = struct.unpack('<dH', rec)
    local same = string.sub(old, 11, 10 + olen) == string.sub(rec, 11, 10 + idlen) and (ots == ts or not made_up)
    if ots > horizon and not same then out[i] = old end
  end
  if not out[i] then
    if life > 0 then redis.call('SET', key, rec, 'PX', life) else redis.call('SET', key, rec) end
  end
end
return out
"""

# Append post keys to band lists. ARGV: cap, then per key: band key, post key suffix, life in ms (0: none).
_APPEND_SCRIPT = (
    "#!lua flags=allow-cross-slot-keys\n"
    + _ADD_MEMBER
    + """
local cap = tonumber(ARGV[1])
for i = 0, (#ARGV - 1) / 3 - 1 do
  add_member(ARGV[i * 3 + 2], ARGV[i * 3 + 3], cap, tonumber(ARGV[i * 3 + 4]))
end
return 1
"""
)

# Pin record keys: a pinned post can no longer be dropped by its own worker's
# recheck, because another post was judged a duplicate of it. The pin is a
# trailing byte after the 4-byte word hashes. ARGV: the keys; returns
# per key 1 when the record is there (now pinned), 0 when it is gone.
_PIN_SCRIPT = """#!lua flags=allow-cross-slot-keys
local out = {}
for i = 1, #ARGV do
  local v = redis.call('GET', ARGV[i])
  if v then
    local _, idlen = struct.unpack('<dH', v)
    if (#v - 10 - idlen) % 4 == 0 then redis.call('SET', ARGV[i], v .. '\\1', 'KEEPTTL') end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
"""

# Drop record keys whose posts the recheck found to be concurrent
# near-duplicates, unless pinned. ARGV: the keys; returns per key 1 when kept
# (pinned), 0 when dropped (or already gone).
_DROP_SCRIPT = """#!lua flags=allow-cross-slot-keys
local out = {}
for i = 1, #ARGV do
  local v = redis.call('GET', ARGV[i])
  out[i] = 0
  if v then
    local _, idlen = struct.unpack('<dH', v)
    if (#v - 10 - idlen) % 8 == 1 then out[i] = 1 else redis.call('DEL', ARGV[i]) end
  end
end
return out
"""

_RAISE_CLOCK_SCRIPT = """
local current = tonumber(redis.call('GET', KEYS[1]) or '')
if not current or current < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
"""


def _import_redis() -> Any:
    try:
        import redis
        import redis.cluster
    except ImportError as exc:
        raise MissingDependencyError("the Redis store (redis-py)", "redis") from exc
    return redis


def _split_url(url: str) -> tuple[str, str, float | None]:
    """(url without our own query parameters, key prefix, retry_for if given)."""
    parts = urlsplit(url)
    prefix = "sf"
    retry_for: float | None = None
    kept = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name == "prefix":
            prefix = value
        elif name == "retry_for":
            try:
                retry_for = float(value)
            except ValueError:
                raise ConfigError(f"{url}: retry_for must be a number of seconds, got {value!r}") from None
        else:
            kept.append((name, value))
    if not prefix:
        raise ConfigError(f"{url}: the prefix parameter is empty")
    return urlunsplit(parts._replace(query=urlencode(kept))), prefix, retry_for


def _slots_moved(exc: BaseException) -> bool:
    """A Cluster answer that means: this key is served elsewhere now, or soon."""
    message = str(exc)
    return any(sign in message for sign in ("MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "non local key", "not served"))


def _same_post(sketch: Sketch, timestamp: float, post_id: str) -> bool:
    """Whether a stored record is this very post, recorded by an earlier attempt
    at its batch (a lost reply, or a run killed before its output was written).

    A post id from the platform says so alone: a post without a timestamp gets
    the wall clock, which differs on the second attempt. A made-up id
    ("line:N") repeats across inputs, so the timestamp must match too.
    """
    return post_id == sketch.post_id and (timestamp == sketch.timestamp or not sketch.made_up_id)


@dataclass
class _Judged:
    """A Cluster batch after the read, verify and claim steps."""

    results: list[Match | None]
    matched: dict[int, bytes]  # duplicate -> record-key suffix of the post it names
    clock: float
    lives: list[int]  # per post: Redis TTL in ms, 0 for none, -1 when past the horizon
    recorded: list[int]  # posts whose record key this batch claimed
    # duplicates of a post of this batch that lost its claim (another worker
    # holds its text): they name a post that will not pass, so are judged again
    stale: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Stored:
    """A post record read on a Cluster, or one this batch is recording."""

    timestamp: float
    post_id: str
    verified: set[int]  # its runs of 1 to k words
    words: np.ndarray


def _decode_record(value: bytes) -> tuple[float, str, memoryview]:
    """(timestamp, post id, word hashes) of a record that may carry a pin byte (Cluster only)."""
    timestamp, post_id, payload = decode_post(value)
    if len(payload) % 4:
        payload = payload[:-1]
    return timestamp, post_id, payload.cast("I")


def _record_key_suffix(shingles: np.ndarray) -> bytes:
    return hashlib.blake2b(shingles.astype("<u8").tobytes(), digest_size=8).digest()


class RedisStore:
    """A band store on Redis or Redis Cluster, shared by any number of workers.

    ``url`` is a redis-py URL (``redis://host:6379/0``, ``rediss://`` for TLS);
    ``?prefix=name`` keeps several indexes apart on one server. A Cluster is
    detected from the node the URL names. ``retry_for`` (or ``?retry_for=``
    in the URL, in seconds; 30 by default) is how long a dropped connection is
    retried before a batch fails.
    """

    def __init__(self, url: str, *, retry_for: float | None = None) -> None:
        self.url, self.prefix, from_url = _split_url(url)
        self.retry_for = retry_for if retry_for is not None else from_url if from_url is not None else 30.0
        self._redis: Any = None
        self._client: Any = None
        self.cluster = False
        self._settings: IndexSettings | None = None
        self._lock = threading.Lock()
        key = self.prefix.encode()
        self._config_key = key + b":config"
        self._format_key = key + b":format"
        self._clock_key = key + b":clock"
        # Input paths are only unique on one machine: each host keeps its own
        # progress, so workers elsewhere reading a file of the same name never
        # skip each other's lines on --resume.
        self._progress_key = key + b":progress:" + socket.gethostname().encode()
        self._post_prefix = key + b":p:"
        self._band_prefix = key + b":b:"

    @property
    def location(self) -> str:
        return f"{self.url} (prefix {self.prefix})"

    # -- opening -------------------------------------------------------------
    def _connect(self) -> None:
        if self._client is not None:
            return
        redis = self._redis = _import_redis()
        self._transient: tuple[type[BaseException], ...] = (
            redis.exceptions.ConnectionError,
            redis.exceptions.TimeoutError,
            redis.exceptions.ClusterDownError,
            redis.exceptions.TryAgainError,
        )
        try:
            client = redis.Redis.from_url(self.url, socket_timeout=30, socket_connect_timeout=5)
        except ValueError as exc:
            raise StoreError(f"bad Redis URL {self.url}: {exc}") from exc

        def probe() -> bool:
            info = client.info("cluster")
            return bool(info.get("cluster_enabled"))

        self.cluster = self._retrying("connect", probe)
        if self.cluster:
            client.close()
            client = redis.cluster.RedisCluster.from_url(self.url, socket_timeout=30, socket_connect_timeout=5)
            self._raise_clock = client.register_script(_RAISE_CLOCK_SCRIPT)
        else:
            self._batch = client.register_script(_BATCH_SCRIPT)
        self._client = client

    def open(self, settings: IndexSettings) -> None:
        self._connect()
        requested = dict(settings.fingerprint)
        encoded = json.dumps(requested, sort_keys=True).encode()

        def pin() -> tuple[bytes | None, bytes | None]:
            client = self._client
            client.set(self._format_key, _FORMAT, nx=True)
            client.set(self._config_key, encoded, nx=True)
            return client.get(self._format_key), client.get(self._config_key)

        stored_format, stored = self._retrying("open", pin)
        if stored_format != _FORMAT:
            raise StoreError(f"{self.location} holds keys of format {stored_format!r}, expected {_FORMAT!r}")
        check_fingerprint(self.location, json.loads(stored), requested)
        self._settings = settings

    @staticmethod
    def read_fingerprint(url: str) -> dict[str, int | str] | None:
        """The settings pinned at ``url``, or None when nothing is pinned there yet."""
        store = RedisStore(url)
        try:
            store._connect()
            stored = store._retrying("read the pinned settings", lambda: store._client.get(store._config_key))
        finally:
            store.close()
        return None if stored is None else dict(json.loads(stored))

    # -- the one operation ---------------------------------------------------
    def check_and_insert(
        self,
        sketches: Sequence[Sketch],
        *,
        progress: Mapping[str, int] | None = None,
        before_commit: Callable[[list[Match | None]], None] | None = None,
    ) -> list[Match | None]:
        settings = self._settings
        if settings is None:
            raise StoreError("the Redis store is not open")
        records = [
            (
                encode_words(s.timestamp, s.post_id, s.words),
                key_bytes(s.band_keys),
                _record_key_suffix(s.shingles),
            )
            for s in sketches
        ]
        with self._lock:
            if not records:
                results: list[Match | None] = []
            elif self.cluster:
                results = self._retrying("check a batch", lambda: self._cluster_batch(sketches, records, settings))
            else:
                results = self._retrying("check a batch", lambda: self._judge_on_one(sketches, records, settings))
            # Recorded already: output written here and lost in a crash comes
            # back when the batch is replayed (see the module docstring).
            if before_commit is not None:
                before_commit(results)
            if progress:
                self._retrying("record progress", lambda: self._client.hset(self._progress_key, mapping=progress))
        return results

    def _judge_on_one(
        self, sketches: Sequence[Sketch], records: list[tuple[bytes, list[bytes], bytes]], settings: IndexSettings
    ) -> list[Match | None]:
        args: list[bytes | str | float | int] = [
            self.prefix,
            repr(float(settings.ttl_seconds)),
            repr(float(settings.jaccard_threshold)),
            max(1, settings.max_candidates_per_band),
            settings.shingle_size,
        ]
        for (record, band_keys, suffix), sketch in zip(records, sketches, strict=True):
            refers = "" if sketch.refers_to is None else sketch.refers_to
            flags = ("1" if sketch.made_up_id else "0") + ("1" if sketch.cut_off else "0")
            args += [record, b"".join(band_keys), suffix, flags, refers]
        reply = self._batch(keys=[], args=args)
        results: list[Match | None] = []
        position = 0
        while position < len(reply):
            if reply[position] == b"1":
                results.append(Match(reply[position + 1].decode("utf-8", "replace"), float(reply[position + 2])))
                position += 3
            else:
                results.append(None)
                position += 1
        return results

    # -- Cluster: read, verify, claim; then append -----------------------------
    def _on_nodes(
        self, script: str, keys: Sequence[bytes], args_of: Callable[[int], list[Any]], leading: Sequence[Any] = ()
    ) -> list[Any]:
        """Run ``script`` once per node over the keys that node holds; replies in key order."""
        client = self._client
        groups: dict[str, tuple[Any, list[int]]] = {}
        for index, key in enumerate(keys):
            node = client.get_node_from_key(key)
            groups.setdefault(node.name, (node, []))[1].append(index)
        replies: list[Any] = [None] * len(keys)
        for node, indices in groups.values():
            connection = client.get_redis_connection(node)
            args = list(leading)
            for index in indices:
                args.append(keys[index])
                args += args_of(index)
            reply = connection.eval(script, 0, *args)
            if isinstance(reply, list):
                for index, value in zip(indices, reply, strict=True):
                    replies[index] = value
        return replies

    def _cluster_batch(
        self,
        sketches: Sequence[Sketch],
        records: list[tuple[bytes, list[bytes], bytes]],
        settings: IndexSettings,
        depth: int = 0,
    ) -> list[Match | None]:
        """Read, verify and claim; append the bands; recheck; then pin and drop.

        Every duplicate pins the record it matched, and every post that the
        recheck would drop pins the post it defers to, before any drop. A
        worker drops its own post only if nobody pinned it, atomically on its
        record key, so a verdict never names a post that did not pass. A
        duplicate whose match was dropped first is judged again.
        """
        judged = self._judge_on_cluster(sketches, records, settings)
        results = judged.results
        # Bands go in before the output is written, to keep the window in
        # which a near-duplicate on another worker misses them short.
        self._record_on_cluster(records, judged, settings)
        wants_drop = self._recheck_on_cluster(sketches, records, judged, settings)
        targets = list(dict.fromkeys([*judged.matched.values(), *(other for other, _ in wants_drop.values())]))
        there: dict[bytes, bool] = {}
        if targets:
            pinned = self._on_nodes(_PIN_SCRIPT, [self._post_prefix + t for t in targets], lambda _: [])
            there = {t: bool(p) for t, p in zip(targets, pinned, strict=True)}
        droppable = [index for index, (other, _) in wants_drop.items() if there.get(other)]
        if droppable:
            kept = self._on_nodes(_DROP_SCRIPT, [self._post_prefix + records[i][2] for i in droppable], lambda _: [])
            for index, pinned_by_others in zip(droppable, kept, strict=True):
                if not pinned_by_others:
                    results[index] = wants_drop[index][1]
        again = [index for index, target in judged.matched.items() if not there.get(target)] + judged.stale
        if again and depth < 3:
            retried = self._cluster_batch(
                [sketches[i] for i in again], [records[i] for i in again], settings, depth + 1
            )
            for index, result in zip(again, retried, strict=True):
                results[index] = result
        elif again:
            # Their matches kept vanishing: pass them (unindexed) rather than
            # name a post that did not pass. A repeat, never a loss.
            for index in again:
                results[index] = None
        return results

    def _read_on_cluster(
        self, band_keys: Sequence[bytes], skip: set[bytes] | frozenset[bytes] = frozenset()
    ) -> tuple[dict[bytes, list[bytes]], dict[bytes, _Stored]]:
        """The members of each band key (record-key suffixes, in order), and
        the records of those members not in ``skip``."""
        values = self._on_nodes(_READ_SCRIPT, [self._band_prefix + k for k in band_keys], lambda _: [])
        members = {
            key: [value[at : at + 8] for at in range(0, len(value), 8)]
            for key, value in zip(band_keys, values, strict=True)
            if value
        }
        wanted = list(dict.fromkeys(m for found in members.values() for m in found if m not in skip))
        stored: dict[bytes, _Stored] = {}
        assert self._settings is not None
        shingle_size = self._settings.shingle_size
        if wanted:
            values = self._on_nodes(_READ_SCRIPT, [self._post_prefix + m for m in wanted], lambda _: [])
            for suffix, value in zip(wanted, values, strict=True):
                if value is not None:
                    timestamp, post_id, words = _decode_record(value)
                    verified = verification_set(words.tolist(), shingle_size)
                    stored[suffix] = _Stored(timestamp, post_id, verified, np.frombuffer(words, dtype=np.uint32))
        return members, stored

    def _judge_on_cluster(
        self,
        sketches: Sequence[Sketch],
        records: list[tuple[bytes, list[bytes], bytes]],
        settings: IndexSettings,
    ) -> _Judged:
        ttl, threshold = settings.ttl_seconds, settings.jaccard_threshold
        limit = settings.max_candidates_per_band
        stored_clock = self._client.get(self._clock_key)
        clock = float(stored_clock) if stored_clock is not None else float("-inf")
        members, stored = self._read_on_cluster(
            list(dict.fromkeys(key for _, band_keys, _ in records for key in band_keys))
        )
        results: list[Match | None] = []
        matched: dict[int, bytes] = {}
        stale: list[int] = []
        local: dict[bytes, list[bytes]] = {}  # band key -> suffixes of this batch's novel posts
        novel: list[int] = []
        horizons: list[float] = []
        for index, (sketch, (_, band_keys, suffix)) in enumerate(zip(sketches, records, strict=True)):
            clock = max(clock, sketch.timestamp)
            horizon = clock - ttl if ttl > 0 else float("-inf")
            horizons.append(max(horizon, -1e300))
            # a key offers its newest ``limit`` posts, stored or recorded earlier in this batch,
            # as a band key's list does, so batch boundaries change no verdict
            candidates = dict.fromkeys(
                m for key in band_keys for m in [*members.get(key, ()), *local.get(key, ())][-limit:]
            )
            best: Match | None = None
            if sketch.refers_to is not None:
                # a repost without text: a duplicate when the post it reposts is live here
                for candidate in candidates:
                    entry = stored.get(candidate)
                    if entry is not None and entry.post_id == sketch.refers_to and entry.timestamp > horizon:
                        best, matched[index] = Match(sketch.refers_to, 1.0), candidate
                        break
                results.append(best)
                continue
            query = set(sketch.shingles.tolist())
            for candidate in candidates:
                entry = stored.get(candidate)
                if entry is None or entry.timestamp <= horizon or _same_post(sketch, entry.timestamp, entry.post_id):
                    continue
                similarity = judged_similarity(
                    sketch, query, entry.verified, entry.words, settings.shingle_size, threshold
                )
                if similarity >= threshold and (best is None or similarity > best.similarity):
                    best, matched[index] = Match(entry.post_id, similarity), candidate
            results.append(best)
            if best is None:
                novel.append(index)
                stored[suffix] = _Stored(sketch.timestamp, sketch.post_id, query, sketch.words)
                for key in band_keys:
                    under = local.setdefault(key, [])
                    under.append(suffix)
                    if len(under) > limit:  # only the newest ``limit`` are ever offered
                        del under[0]
        lives = [self._life_ms(sketch.timestamp, clock, ttl) for sketch in sketches]
        # Claim the record keys of the novel posts worth recording.
        claims = [i for i in novel if lives[i] >= 0]
        recorded = []
        if claims:
            holders = self._on_nodes(
                _CLAIM_SCRIPT,
                [self._post_prefix + records[i][2] for i in claims],
                lambda n: [
                    records[claims[n]][0],
                    repr(horizons[claims[n]]),
                    lives[claims[n]],
                    "1" if sketches[claims[n]].made_up_id else "0",
                ],
            )
            lost: dict[bytes, str] = {}  # record key -> the id of this batch's post that lost it
            for index, holder in zip(claims, holders, strict=True):
                if holder is None:
                    recorded.append(index)
                    continue
                # Another worker recorded the same normalised text first.
                _, post_id, words = _decode_record(holder)
                held_words = words.tolist()
                held = verification_set(held_words, settings.shingle_size)
                query = set(sketches[index].shingles.tolist())
                similarity = judged_similarity(
                    sketches[index], query, held, held_words, settings.shingle_size, threshold
                )
                if similarity >= threshold:
                    results[index], matched[index] = Match(post_id, similarity), records[index][2]
                    lost[records[index][2]] = sketches[index].post_id
            # A later post of this batch may have matched the loser here, by
            # the same record key: its verdict would name a post that never passes.
            for index, target in list(matched.items()):
                result = results[index]
                if target in lost and result is not None and result.duplicate_of == lost[target]:
                    del matched[index]
                    stale.append(index)
        return _Judged(results, matched, clock, lives, recorded, stale)

    def _record_on_cluster(
        self, records: list[tuple[bytes, list[bytes], bytes]], judged: _Judged, settings: IndexSettings
    ) -> None:
        keys: list[bytes] = []
        args: list[tuple[bytes, int]] = []
        for index in judged.recorded:
            _, band_keys, suffix = records[index]
            for key in band_keys:
                keys.append(self._band_prefix + key)
                args.append((suffix, judged.lives[index]))
        if keys:
            cap = max(1, settings.max_candidates_per_band)
            self._on_nodes(_APPEND_SCRIPT, keys, lambda n: list(args[n]), leading=[cap])
        if judged.clock > float("-inf"):
            self._raise_clock(keys=[self._clock_key], args=[repr(judged.clock)])

    def _recheck_on_cluster(
        self,
        sketches: Sequence[Sketch],
        records: list[tuple[bytes, list[bytes], bytes]],
        judged: _Judged,
        settings: IndexSettings,
    ) -> dict[int, tuple[bytes, Match]]:
        """The recorded posts that defer to a near-duplicate recorded meanwhile
        by another worker, each with that post's record-key suffix and Match.

        Each recorded post reads its band keys again, now that its own entries
        are in. A post recorded meanwhile that matches it is concurrent: of the
        two, the one that came second under the smallest band key they share
        defers. Both posts look at the same key, whose order never changes, so
        at most one of them defers; and the later of the two to append finds
        the other there, so one of them does.
        """
        if not judged.recorded:
            return {}
        ttl = settings.ttl_seconds
        horizon = judged.clock - ttl if ttl > 0 else float("-inf")
        members, stored = self._read_on_cluster(
            list(dict.fromkeys(key for i in judged.recorded for key in records[i][1])),
            skip={records[i][2] for i in judged.recorded},
        )
        wants_drop: dict[int, tuple[bytes, Match]] = {}
        for index in judged.recorded:
            sketch, (_, band_keys, suffix) = sketches[index], records[index]
            query = set(sketch.shingles.tolist())
            concurrent = (other for key in band_keys for other in members.get(key, ()))
            for other in concurrent:
                entry = stored.get(other)
                if entry is None or entry.timestamp <= horizon or _same_post(sketch, entry.timestamp, entry.post_id):
                    continue
                similarity = judged_similarity(
                    sketch, query, entry.verified, entry.words, settings.shingle_size, settings.jaccard_threshold
                )
                if similarity < settings.jaccard_threshold:
                    continue
                # the smallest band key they share, from the other's stored words:
                # not from the lists read, which may not show all of its keys yet
                theirs = key_bytes(settings.rekey([entry.words], [entry.post_id])[0])
                arbiter = min(set(band_keys).intersection(theirs), default=None)
                order = members.get(arbiter, []) if arbiter is not None else []
                if other in order and suffix in order and order.index(other) < order.index(suffix):
                    wants_drop[index] = (other, Match(entry.post_id, similarity))
                    break
        return wants_drop

    @staticmethod
    def _life_ms(timestamp: float, clock: float, ttl: float) -> int:
        """Redis TTL in ms for a post; 0 for none (ttl 0), -1 when already expired."""
        if ttl <= 0:
            return 0
        life = int((timestamp + ttl - clock) * 1000)
        return life if life > 0 else -1

    # -- retries ---------------------------------------------------------------
    def _retrying(self, what: str, operation: Callable[[], Any]) -> Any:
        started = time.monotonic()
        delay = 0.05
        attempt = 0
        while True:
            attempt += 1
            try:
                return operation()
            except self._redis.exceptions.RedisError as exc:
                moved = self.cluster and _slots_moved(exc)
                if not (moved or isinstance(exc, self._transient)):
                    raise StoreError(f"Redis at {self.location}: {what} failed: {exc}") from exc
                waited = time.monotonic() - started
                if waited + delay > self.retry_for:
                    raise StoreError(
                        f"Redis at {self.location} is unreachable: {what} failed {attempt} times "
                        f"over {waited:.1f} s ({exc}); committed batches are intact, rerun with --resume"
                    ) from exc
                pause = random.uniform(delay / 2, delay)
                logger.warning("Redis at %s: %s failed (%s); retrying in %.2f s", self.location, what, exc, pause)
                time.sleep(pause)
                delay = min(delay * 2, 5.0)
                if moved:
                    # Slots moved (resharding, failover): learn the new layout
                    # before running the batch's per-node scripts again.
                    self._client.nodes_manager.initialize()

    # -- facts ---------------------------------------------------------------
    def progress(self) -> dict[str, int]:
        stored = self._retrying("read progress", lambda: self._require_client().hgetall(self._progress_key))
        return {name.decode(): int(value) for name, value in stored.items()}

    def post_count(self) -> int:
        """Records still in Redis (live, or past event time and awaiting Redis expiry). Scans: for tests and stats."""
        client = self._require_client()
        pattern = self._post_prefix + b"*"
        return int(self._retrying("count posts", lambda: sum(1 for _ in client.scan_iter(match=pattern, count=1000))))

    def clock(self) -> float:
        """The newest event time the index has seen (-inf for none yet)."""
        client = self._require_client()
        stored = self._retrying("read the clock", lambda: client.get(self._clock_key))
        return float(stored) if stored is not None else float("-inf")

    def _require_client(self) -> Any:
        if self._client is None:
            raise StoreError("the Redis store is not open")
        return self._client

    def close(self) -> None:
        if self._client is not None:
            with self._lock:
                self._client.close()
                self._client = None
        self._settings = None
