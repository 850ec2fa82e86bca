"""The Redis store on a Cluster: a batch in steps, each one script per node.

See ``_store`` for the protocol (read and verify, claim, append, recheck,
pin and drop) and what it guarantees.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ... import _rules
from ..._exceptions import StoreError
from ..._rules import Match
from ..._shingle import verification_set
from .._base import IndexSettings, Sketch, key_bytes
from .._records import decode_record, id_end
from ._scripts import script

__all__ = ["ClusterProtocol"]


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
    # the members of each band key when the batch read them: a post among
    # them was a candidate already, and is no concurrent near-duplicate
    seen: dict[bytes, list[bytes]]
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
    serial: bytes  # the order it was recorded in (SERIAL digits, as record.lua reads them)


# A stored value is the serial a post was recorded under, in this many
# decimal digits, then its record (record.lua's SERIAL).
SERIAL_DIGITS = 16


def serial_text(serial: int) -> bytes:
    return b"%016d" % serial


def _decode_record(value: bytes) -> tuple[float, str, memoryview]:
    """(timestamp, post id, word hashes) of a stored value, which may carry a pin byte."""
    record = value[SERIAL_DIGITS:]
    if (len(record) - id_end(record)) % 4:
        record = record[:-1]
    return decode_record(record)


# What batch.lua answers when the index's pinned settings are gone.
_INDEX_GONE = "STREAMFILTER_INDEX_GONE"


def _emptied(location: str) -> str:
    return (
        f"Redis at {location} lost the index's pinned settings mid-run: the server was emptied "
        "(restarted without persistence, or flushed), and the posts it held are gone, so later copies "
        "of them would pass; start again on a fresh prefix, or enable persistence on the server"
    )


class ClusterProtocol:
    """The Cluster steps of ``RedisStore``, which sets these attributes."""

    _client: Any
    _settings: IndexSettings | None
    _post_prefix: bytes
    _band_prefix: bytes
    _clock_key: bytes
    _config_key: bytes
    _serial_key: bytes
    _raise_clock: Any

    @property
    def location(self) -> str:  # RedisStore's
        raise NotImplementedError

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
            pinned = self._on_nodes(script("pin"), [self._post_prefix + t for t in targets], lambda _: [])
            there = {t: bool(p) for t, p in zip(targets, pinned, strict=True)}
        droppable = [index for index, (other, _) in wants_drop.items() if there.get(other)]
        if droppable:
            kept = self._on_nodes(script("drop"), [self._post_prefix + records[i][2] for i in droppable], lambda _: [])
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
        values = self._on_nodes(script("read"), [self._band_prefix + k for k in band_keys], lambda _: [])
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
            values = self._on_nodes(script("read"), [self._post_prefix + m for m in wanted], lambda _: [])
            for suffix, value in zip(wanted, values, strict=True):
                if value is not None:
                    timestamp, post_id, words = _decode_record(value)
                    verified = verification_set(words.tolist(), shingle_size)
                    words_array = np.frombuffer(words, dtype=np.uint32)
                    stored[suffix] = _Stored(timestamp, post_id, verified, words_array, value[:SERIAL_DIGITS])
        return members, stored

    def _judge_on_cluster(
        self,
        sketches: Sequence[Sketch],
        records: list[tuple[bytes, list[bytes], bytes]],
        settings: IndexSettings,
    ) -> _Judged:
        ttl, threshold = settings.ttl_seconds, settings.jaccard_threshold
        limit = settings.max_candidates_per_band
        if self._client.get(self._config_key) is None:
            raise StoreError(_emptied(self.location))
        stored_clock = self._client.get(self._clock_key)
        clock = float(stored_clock) if stored_clock is not None else float("-inf")
        members, stored = self._read_on_cluster(
            list(dict.fromkeys(key for _, band_keys, _ in records for key in band_keys))
        )
        # serials for the batch's posts, in order, after every one recorded before
        last_serial = int(self._client.incrby(self._serial_key, len(sketches)))
        serials = [serial_text(last_serial - len(sketches) + 1 + index) for index in range(len(sketches))]
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
            shared: dict[bytes, int] = {}
            for key in band_keys:
                for member in _rules.newest_per_key([*members.get(key, ()), *local.get(key, ())], limit):
                    shared[member] = shared.get(member, 0) + 1
            candidates = dict.fromkeys(shared)
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
            # _rules.rank_candidates: most keys shared, then newest; those gone from Redis are no candidates
            present = {m: stored[m] for m in shared if m in stored}
            ranked = sorted(present, key=lambda m: (shared[m], present[m].serial), reverse=True)
            for candidate in ranked[: _rules.MAX_VERIFIED]:
                entry = present[candidate]
                if entry.timestamp <= horizon or _same_post(sketch, entry.timestamp, entry.post_id):
                    continue
                if np.array_equal(entry.words, sketch.words):  # the very same words: a match at once
                    best, matched[index] = Match(entry.post_id, 1.0), candidate
                    break
                similarity = _rules.judged_similarity(
                    sketch, query, entry.verified, entry.words, settings.shingle_size, threshold
                )
                if similarity >= threshold and (best is None or similarity > best.similarity):
                    best, matched[index] = Match(entry.post_id, similarity), candidate
                    if similarity == 1.0:
                        break
            results.append(best)
            if best is None:
                novel.append(index)
                stored[suffix] = _Stored(sketch.timestamp, sketch.post_id, query, sketch.words, serials[index])
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
                script("claim"),
                [self._post_prefix + records[i][2] for i in claims],
                lambda n: [
                    serials[claims[n]] + records[claims[n]][0],
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
                similarity = _rules.judged_similarity(
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
        return _Judged(results, matched, clock, lives, recorded, members, stale)

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
            self._on_nodes(script("append"), keys, lambda n: list(args[n]), leading=[cap])
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
        are in. A post recorded meanwhile (not under the key when the batch
        read it: one that was is a candidate the rules ranked, verified or
        left out) that matches it is concurrent: of the
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
            concurrent = (
                other
                for key in band_keys
                for other in members.get(key, ())
                if other not in judged.seen.get(key, ())  # recorded since the batch read this key
            )
            for other in concurrent:
                entry = stored.get(other)
                if entry is None or entry.timestamp <= horizon or _same_post(sketch, entry.timestamp, entry.post_id):
                    continue
                similarity = _rules.judged_similarity(
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
