"""A batch's index transaction on Redis: read for the judge, then record.

The judge (``_judge``) ranks and verifies what ``RedisTransaction.members``
and ``post`` read. Recording is where one Redis and a Cluster differ (see
``_store`` for the protocol and what it guarantees):

- on one Redis, one script (``commit.lua``) records the batch's novel posts
  only if no band key the batch read, and no record a verdict names, has
  changed since: otherwise the batch is judged anew (``RetryBatch``);
- on a Cluster no script can span slots, so the novel posts claim their record
  keys, are appended to their band keys, read those again (the recheck), and
  pin and drop, one script per node a step.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ... import _rules
from ..._exceptions import StoreError
from ..._rules import CachedPost, Match
from ..._shingle import verification_set
from .._base import IndexSettings, RetryBatch, Sketch, key_bytes
from .._records import decode_record, encode_record, id_end
from ._scripts import script

if TYPE_CHECKING:
    from ..._judge import Judgement
    from ._store import RedisStore

__all__ = ["RedisTransaction"]

# A stored value is the serial a post was recorded under, in this many
# decimal digits, then its record (record.lua's SERIAL).
SERIAL_DIGITS = 16
_NO_HITS = np.zeros(0, dtype=np.int64)


def serial_text(serial: int) -> bytes:
    return b"%016d" % serial


def _decode_record(value: bytes) -> tuple[float, str, memoryview]:
    """(timestamp, post id, word hashes) of a stored value, which may carry a pin byte."""
    record = value[SERIAL_DIGITS:]
    if (len(record) - id_end(record)) % 4:
        record = record[:-1]
    return decode_record(record)


# What the scripts answer when the index's pinned settings are gone.
_INDEX_GONE = "STREAMFILTER_INDEX_GONE"


def _emptied(location: str) -> str:
    return (
        f"Redis at {location} lost the index's pinned settings mid-run: the server was emptied "
        "(restarted without persistence, or flushed), and the posts it held are gone, so later copies "
        "of them would pass; start again on a fresh prefix, or enable persistence on the server"
    )


def _life_ms(timestamp: float, clock: float, ttl: float) -> int:
    """Redis TTL in ms for a post; 0 for none (ttl 0), -1 when already expired."""
    if ttl <= 0:
        return 0
    life = int((timestamp + ttl - clock) * 1000)
    return life if life > 0 else -1


class RedisTransaction:
    """One batch on a RedisStore (see ``IndexTransaction``)."""

    # a batch whose reply was lost may be replayed: a stored record with the
    # same post id is the post itself (see ``_store``)
    replays_seen = True

    def __init__(self, store: RedisStore, settings: IndexSettings, depth: int = 0) -> None:
        self._store = store
        self.settings = settings
        self._depth = depth  # how many times a Cluster batch was judged again within this one
        config, clock = self._read([store._config_key, store._clock_key])
        if config is None:
            raise StoreError(_emptied(store.location))
        self.clock = float(clock) if clock is not None else float("-inf")
        # The judge's serials for the batch's own posts: past every serial a
        # stored value can hold (SERIAL_DIGITS), so newer than any post read,
        # whatever other workers record meanwhile. Redis gives the posts their
        # own serials when it records them.
        self.next_serial = 10**SERIAL_DIGITS
        self._band_values: dict[bytes, bytes] = {}  # band key -> its value when the batch read it
        self._suffixes: dict[int, bytes] = {}  # serial -> record-key suffix, of the posts read
        self._posts: dict[int, CachedPost] = {}

    def _read(self, keys: Sequence[bytes]) -> list[Any]:
        """The values of ``keys``, in one round trip a node."""
        store = self._store
        if not keys:
            return []
        if store.cluster:
            return store._on_nodes("read the index", script("read"), keys)
        return list(store._retrying("read the index", lambda: store._client.mget(keys)))

    # -- what the judge reads --------------------------------------------------
    def index_keys(self, band_keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
        return band_keys

    def members(self, queries: npt.NDArray[np.uint64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        store = self._store
        band_keys = key_bytes(queries)
        values = self._read([store._band_prefix + key for key in band_keys])
        members: list[list[bytes]] = []
        for key, value in zip(band_keys, values, strict=True):
            value = value or b""
            self._band_values[key] = value
            members.append(_split(value))
        wanted = list(dict.fromkeys(m for found in members for m in found))
        serial_of: dict[bytes, int] = {}
        for suffix, value in zip(wanted, self._read([store._post_prefix + m for m in wanted]), strict=True):
            if value is None:
                continue  # expired or forgotten: no candidate
            serial = int(value[:SERIAL_DIGITS])
            timestamp, post_id, words = _decode_record(value)
            serial_of[suffix] = serial
            self._suffixes[serial] = suffix
            self._posts[serial] = CachedPost(timestamp, post_id, bytes(words))
        hit_query: list[int] = []
        hit_serial: list[int] = []
        limit = self.settings.max_candidates_per_band
        for index, found in enumerate(members):
            serials = sorted(
                (serial_of[m] for m in _rules.newest_per_key(found, limit) if m in serial_of), reverse=True
            )
            hit_query += [index] * len(serials)
            hit_serial += serials
        if not hit_serial:
            return _NO_HITS, _NO_HITS
        return np.array(hit_query, dtype=np.int64), np.array(hit_serial, dtype=np.int64)

    def post(self, serial: int) -> CachedPost | None:
        return self._posts.get(serial)

    # -- recording ---------------------------------------------------------------
    def record(self, sketches: Sequence[Sketch], judgement: Judgement) -> list[Match | None]:
        store = self._store
        if not store.cluster:
            self._record_on_one(sketches, judgement)
            return judgement.matches
        return _ClusterRecording(self, sketches, judgement).run()

    def _record_on_one(self, sketches: Sequence[Sketch], judgement: Judgement) -> None:
        """Record the novel posts with ``commit.lua``, if nothing the batch read has changed."""
        store, settings = self._store, self.settings
        ttl, clock = settings.ttl_seconds, judgement.clock
        named = [
            store._post_prefix + self._suffixes[serial]
            for serial in judgement.matched.values()
            if serial < judgement.first_serial  # a stored post: it must still be there
        ]
        args: list[bytes | str | int] = [
            store.prefix,
            max(1, settings.max_candidates_per_band),
            store._config_key,
            repr(clock) if clock > float("-inf") else "",
            len(self._band_values),
        ]
        for key, value in self._band_values.items():
            args += [key, value]
        args += [len(named), *named]
        for index, post in zip(judgement.recorded, judgement.posts, strict=True):
            sketch = sketches[index]
            life = _life_ms(sketch.timestamp, clock, ttl)
            if life < 0:
                continue  # past the horizon already: nothing could match it
            record = encode_record(post.timestamp, post.post_id, post.words)
            args += [record, b"".join(key_bytes(sketch.band_keys)), record_key_suffix(sketch.shingles), life]
        if store._commit_script(keys=[], args=args) == b"changed":
            raise RetryBatch

    def commit(self, progress: Any) -> None:
        self._store._commit_progress(progress)

    def abort(self) -> None:
        """Nothing to undo: a batch writes only when it records, in one script on one Redis."""


def record_key_suffix(shingles: np.ndarray) -> bytes:
    """The key a post's record is stored under: a hash of its verification set,
    so copies of one normalised text share it."""
    return hashlib.blake2b(shingles.astype("<u8").tobytes(), digest_size=8).digest()


class _ClusterRecording:
    """Claim, append, recheck, then pin and drop: a judged batch recorded on a Cluster.

    Every duplicate pins the record it matched, and every post that the
    recheck would drop pins the post it defers to, before any drop. A worker
    drops its own post only if nobody pinned it, atomically on its record key,
    so a verdict never names a post that did not pass. A duplicate whose match
    was dropped first is judged again.
    """

    def __init__(self, txn: RedisTransaction, sketches: Sequence[Sketch], judgement: Judgement) -> None:
        self.txn = txn
        self.store = txn._store
        self.settings = txn.settings
        self.sketches = sketches
        self.judgement = judgement
        self.results = list(judgement.matches)
        self.suffixes = [record_key_suffix(sketch.shingles) for sketch in sketches]
        # duplicate -> record-key suffix of the post it names
        self.matched: dict[int, bytes] = {}
        for index, serial in judgement.matched.items():
            offset = serial - judgement.first_serial
            self.matched[index] = txn._suffixes[serial] if offset < 0 else self.suffixes[judgement.recorded[offset]]
        self.claimed: list[int] = []  # posts whose record key this batch claimed
        # duplicates of a post of this batch that lost its claim (another worker
        # holds its text): they name a post that will not pass, so are judged again
        self.stale: list[int] = []

    def run(self) -> list[Match | None]:
        store = self.store
        lives = self._claim()
        # Bands go in before the output is written, to keep the window in
        # which a near-duplicate on another worker misses them short.
        self._append(lives)
        wants_drop = self._recheck()
        targets = list(dict.fromkeys([*self.matched.values(), *(other for other, _ in wants_drop.values())]))
        there: dict[bytes, bool] = {}
        if targets:
            pinned = store._on_nodes("pin posts", script("pin"), [store._post_prefix + t for t in targets])
            there = {t: bool(p) for t, p in zip(targets, pinned, strict=True)}
        droppable = [index for index, (other, _) in wants_drop.items() if there.get(other)]
        if droppable:
            keys = [store._post_prefix + self.suffixes[i] for i in droppable]
            kept = store._on_nodes("drop posts", script("drop"), keys)
            for index, pinned_by_others in zip(droppable, kept, strict=True):
                if not pinned_by_others:
                    self.results[index] = wants_drop[index][1]
        again = [index for index, target in self.matched.items() if not there.get(target)] + self.stale
        if again and self.txn._depth < 3:
            retried = store._judge_again([self.sketches[i] for i in again], self.txn._depth + 1)
            for index, result in zip(again, retried, strict=True):
                self.results[index] = result
        elif again:
            # Their matches kept vanishing: pass them (unindexed) rather than
            # name a post that did not pass. A repeat, never a loss.
            for index in again:
                self.results[index] = None
        return self.results

    def _claim(self) -> dict[int, int]:
        """Claim the record keys of the novel posts worth recording; their Redis TTLs in ms."""
        store, settings, sketches, judgement = self.store, self.settings, self.sketches, self.judgement
        ttl, threshold = settings.ttl_seconds, settings.jaccard_threshold
        clock = self.txn.clock
        horizons: dict[int, float] = {}
        recorded = set(judgement.recorded)
        for index, sketch in enumerate(sketches):
            clock = max(clock, sketch.timestamp)
            if index in recorded:
                horizons[index] = max(clock - ttl if ttl > 0 else float("-inf"), -1e300)
        lives = {index: _life_ms(sketches[index].timestamp, judgement.clock, ttl) for index in judgement.recorded}
        claims = [(i, post) for i, post in zip(judgement.recorded, judgement.posts, strict=True) if lives[i] >= 0]
        if not claims:
            return lives
        # serials for the batch's recorded posts, in order, after every one recorded before
        last = int(store._retrying("take serials", lambda: store._client.incrby(store._serial_key, len(claims))))
        values = [
            serial_text(last - len(claims) + 1 + n) + encode_record(post.timestamp, post.post_id, post.words)
            for n, (_, post) in enumerate(claims)
        ]
        holders = store._on_nodes(
            "claim record keys",
            script("claim"),
            [store._post_prefix + self.suffixes[i] for i, _ in claims],
            lambda n: [
                values[n],
                repr(horizons[claims[n][0]]),
                lives[claims[n][0]],
                "1" if sketches[claims[n][0]].made_up_id else "0",
            ],
        )
        lost: dict[bytes, str] = {}  # record key -> the id of this batch's post that lost it
        for (index, _), holder in zip(claims, holders, strict=True):
            if holder is None:
                self.claimed.append(index)
                continue
            # Another worker recorded the same normalised text first.
            _, post_id, words = _decode_record(holder)
            held_words = words.tolist()
            held = verification_set(held_words, settings.shingle_size)
            query = set(sketches[index].shingles.tolist())
            similarity = _rules.judged_similarity(
                sketches[index], query, held, held_words, settings.shingle_size, threshold
            )
            if similarity >= threshold:
                self.results[index], self.matched[index] = Match(post_id, similarity), self.suffixes[index]
                lost[self.suffixes[index]] = sketches[index].post_id
        # A later post of this batch may have matched the loser here, by
        # the same record key: its verdict would name a post that never passes.
        for index, target in list(self.matched.items()):
            result = self.results[index]
            if target in lost and result is not None and result.duplicate_of == lost[target]:
                del self.matched[index]
                self.stale.append(index)
        return lives

    def _append(self, lives: dict[int, int]) -> None:
        store = self.store
        keys: list[bytes] = []
        args: list[tuple[bytes, int]] = []
        for index in self.claimed:
            for key in key_bytes(self.sketches[index].band_keys):
                keys.append(store._band_prefix + key)
                args.append((self.suffixes[index], lives[index]))
        if keys:
            cap = max(1, self.settings.max_candidates_per_band)
            store._on_nodes("append to band keys", script("append"), keys, lambda n: list(args[n]), leading=[cap])
        clock = self.judgement.clock
        if clock > float("-inf"):
            store._retrying("raise the clock", lambda: store._raise_clock(keys=[store._clock_key], args=[repr(clock)]))

    def _recheck(self) -> dict[int, tuple[bytes, Match]]:
        """The claimed posts that defer to a near-duplicate recorded meanwhile
        by another worker, each with that post's record-key suffix and Match.

        Each claimed post reads its band keys again, now that its own entries
        are in. A post recorded meanwhile (not under the key when the batch
        read it: one that was is a candidate the rules ranked, verified or
        left out) that matches it is concurrent: of the two, the one that came
        second under the smallest band key they share defers. Both posts look
        at the same key, whose order never changes, so at most one of them
        defers; and the later of the two to append finds the other there, so
        one of them does.
        """
        if not self.claimed:
            return {}
        store, settings = self.store, self.settings
        ttl = settings.ttl_seconds
        horizon = self.judgement.clock - ttl if ttl > 0 else float("-inf")
        band_keys = list(dict.fromkeys(key for i in self.claimed for key in key_bytes(self.sketches[i].band_keys)))
        own = {self.suffixes[i] for i in self.claimed}
        values = self.txn._read([store._band_prefix + key for key in band_keys])
        members = {key: _split(value) for key, value in zip(band_keys, values, strict=True) if value}
        seen = {key: set(_split(value)) for key, value in self.txn._band_values.items()}
        wanted = list(dict.fromkeys(m for found in members.values() for m in found if m not in own))
        stored: dict[bytes, tuple[float, str, set[int], list[int]]] = {}
        for suffix, value in zip(wanted, self.txn._read([store._post_prefix + m for m in wanted]), strict=True):
            if value is not None:
                timestamp, post_id, word_view = _decode_record(value)
                word_list = word_view.tolist()
                stored[suffix] = (timestamp, post_id, verification_set(word_list, settings.shingle_size), word_list)
        wants_drop: dict[int, tuple[bytes, Match]] = {}
        for index in self.claimed:
            sketch, suffix = self.sketches[index], self.suffixes[index]
            own_keys = key_bytes(sketch.band_keys)
            query = set(sketch.shingles.tolist())
            concurrent = (
                other
                for key in own_keys
                for other in members.get(key, ())
                if other not in seen.get(key, ())  # recorded since the batch read this key
            )
            for other in concurrent:
                entry = stored.get(other)
                if entry is None:
                    continue
                timestamp, post_id, verified, other_words = entry
                if timestamp <= horizon or (
                    post_id == sketch.post_id and (timestamp == sketch.timestamp or not sketch.made_up_id)
                ):
                    continue
                similarity = _rules.judged_similarity(
                    sketch, query, verified, other_words, settings.shingle_size, settings.jaccard_threshold
                )
                if similarity < settings.jaccard_threshold:
                    continue
                # the smallest band key they share, from the other's stored words:
                # not from the lists read, which may not show all of its keys yet
                theirs = key_bytes(settings.rekey([np.array(other_words, dtype=np.uint32)], [post_id])[0])
                arbiter = min(set(own_keys).intersection(theirs), default=None)
                order = members.get(arbiter, []) if arbiter is not None else []
                if other in order and suffix in order and order.index(other) < order.index(suffix):
                    wants_drop[index] = (other, Match(post_id, similarity))
                    break
        return wants_drop


def _split(value: bytes) -> list[bytes]:
    """A band key's members: its 8-byte record-key suffixes."""
    return [value[at : at + 8] for at in range(0, len(value), 8)]
