"""A batch's index transaction on Redis: read for the judge, then record.

The judge (``_judge``) ranks and verifies what ``RedisTransaction.members``
and ``post`` read (keys: ``_layout``). Recording is where one Redis and a
Cluster differ (see ``_store`` for the protocol and what it guarantees):

- on one Redis, one script reads everything a batch needs (``read_batch.lua``),
  and one records its novel posts (``commit.lua``) unless a record a verdict
  names is gone (the batch is judged anew: ``RetryBatch``). A post under
  whose band keys other workers filed posts meanwhile is held back, the
  others recorded: those posts are verified here, a held post with a
  near-duplicate among them becomes its duplicate, and the rest are sent
  again;
- on a Cluster no script can span slots, so the novel posts claim their texts,
  are filed under their band keys, read those again (the recheck), and pin
  and drop, one script per node a step.
"""

from __future__ import annotations

import functools
import hashlib
import math
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ... import _rules
from ..._clock import checked_clock
from ..._exceptions import StoreError
from ..._rules import CachedPost, Match
from ..._values import Matches, Sketches
from .._base import IndexSettings, RetryBatch, Sketch, by_query_newest_first, is_same_post, key_bytes, offered
from .._records import decode_record, encode_record, id_end
from ._layout import MEMBER_BYTES, Layout, member_order, member_orders, parse_parts, split_members
from ._scripts import script

if TYPE_CHECKING:
    from ..._values import Judgement
    from ._operations import RedisOperations

__all__ = ["RedisTransaction"]

_NO_HITS = np.zeros(0, dtype=np.int64)
_COUNT = struct.Struct(">H")
_LENGTH = struct.Struct(">I")
_PART = struct.Struct(">d")
# How many times a batch on one Redis commits anew when other workers
# recorded posts under its keys, none of them similar, before it is judged again.
_CHECKS = 8
# What the scripts answer when the index's pinned settings are gone.
_INDEX_GONE = "STREAMFILTER_INDEX_GONE"


def _emptied(location: str) -> str:
    return (
        f"Redis at {location} lost the index's pinned settings mid-run: the server was emptied "
        "(restarted without persistence, or flushed), and the posts it held are gone, so later copies "
        "of them would pass; start again on a fresh prefix, or enable persistence on the server"
    )


def _decode_record(value: bytes) -> tuple[float, str, memoryview]:
    """(timestamp, post id, word hashes) of a stored record, which may carry a pin byte."""
    if (len(value) - id_end(value)) % 4:
        value = value[:-1]
    return decode_record(value)


def text_hash(shingles: np.ndarray) -> bytes:
    """A hash of a post's verification set: copies of one normalised text share it."""
    return hashlib.blake2b(shingles.astype("<u8").tobytes(), digest_size=8).digest()


def slice_life_ms(layout: Layout, slice_: int, clock: float, ttl: float) -> int:
    """Redis TTL in ms for a slice's keys; 0 for none (no TTL), -1 when the slice is dead."""
    if ttl <= 0:
        return 0
    life = (layout.slice_end(slice_) + ttl - clock) * 1000
    return int(life) + 1000 if life > 0 else -1


class RedisTransaction:
    """One batch on a RedisStore (see ``IndexTransaction``)."""

    # a batch whose reply was lost may be replayed: a stored record with the
    # same post id is the post itself (see ``_store``)
    replays_seen = True
    # The judge's serials for the batch's own posts: past every member, so
    # newer than any post read, whatever other workers record meanwhile.
    # Redis gives the posts their members when it records them.
    next_serial = 1 << 62

    def __init__(
        self,
        store: RedisOperations,
        settings: IndexSettings,
        depth: int = 0,
        cluster_recording: Callable[[RedisTransaction, Sketches, Judgement], Any] | None = None,
    ) -> None:
        self._store = store
        # how a Cluster batch records (_recording.ClusterRecording), handed in by the store
        self._cluster_recording = cluster_recording
        self.settings = settings
        self.layout: Layout = store._layout
        self._depth = depth  # how many times a Cluster batch was judged again within this one
        self.clock = float("-inf")
        self._read_serial = b"0"
        self.parts: dict[int, int] = {}  # every part of the index's slices -> its bucket bits
        # what the batch read: members under each band key (``seen``), and per member its record
        self._read: list[tuple[npt.NDArray[np.uint64], list[list[bytes]]]] = []
        self._members: dict[int, bytes] = {}  # serial (a member as a number) -> member
        self._parts: dict[int, int] = {}  # serial -> its part
        self._posts: dict[int, CachedPost] = {}
        self._raw: dict[int, bytes] = {}  # serial -> the record as stored
        self._ids: dict[str, list[float]] = {}  # post id -> the times of the records read with it
        self.filing = (0, 0)  # Cluster: batches that had begun filing when this one began, those under way
        if store.cluster:
            self._begin_on_cluster()

    def _begin_on_cluster(self) -> None:
        store = self._store
        client = store._client

        # the filings first: one that ended before this read is in what the batch reads
        filing = store._filing_key
        began, under_way = store._retrying("read the index", lambda: store._filing(keys=[filing], args=["read"]))
        self.filing = (int(began), int(under_way))

        def read() -> list[bytes | None]:
            return list(client.pipeline(transaction=False).get(store._config_key).get(store._clock_key).execute())

        config, clock = store._retrying("read the index", read)
        if config is None:
            raise StoreError(_emptied(store.location))
        self.clock = checked_clock(clock, store.clock_location)
        self.parts = store._parts()

    def live(self) -> list[tuple[int, int]]:
        """(part, bits) of the parts that may hold live posts, oldest first."""
        layout = self.layout
        low = layout.live_from(self.clock, self.settings.ttl_seconds)
        return sorted((part, bits) for part, bits in self.parts.items() if layout.slice_of_part(part) >= low)

    # -- what the judge reads --------------------------------------------------
    def index_keys(self, band_keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
        return band_keys

    def members(self, queries: npt.NDArray[np.uint64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        if self._store.cluster:
            found = self._read_on_cluster(queries)
            query_of = np.repeat(np.arange(len(found)), [len(members) for members in found])
            serials = member_orders(b"".join(member for members in found for member in members))
        else:
            query_of, serials = self._read_on_one(queries)
        # members whose record the batch read, by query, newest first; a member
        # filed twice under a key (by a retried step on a Cluster) counts once
        known = np.fromiter(self._posts, dtype=np.int64, count=len(self._posts))
        read = np.isin(serials, known)
        query_of, serials = query_of[read], serials[read]
        if len(serials) == 0:
            return _NO_HITS, _NO_HITS
        query_of, serials = by_query_newest_first(query_of, serials)
        once = np.concatenate(([True], (query_of[1:] != query_of[:-1]) | (serials[1:] != serials[:-1])))
        query_of, serials = query_of[once], serials[once]
        kept = offered(query_of, self.settings.max_candidates_per_band)
        return query_of[kept], serials[kept]

    def _read_on_one(self, queries: npt.NDArray[np.uint64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Everything the batch reads, in one script: the clock, the serial,
        and the members filed under each query, as (query, member as a number) pairs."""
        store, layout, settings = self._store, self.layout, self.settings
        band_queries = layout.queries(queries)
        cap = max(1, settings.max_candidates_per_band)
        args = [store.prefix, repr(float(settings.ttl_seconds)), repr(layout.slice_seconds), cap, band_queries]
        config, clock, self._read_serial, counts, members, records, names = store._retrying(
            "read the index", lambda: store._read_batch(keys=[], args=args)
        )
        if not config:
            raise StoreError(_emptied(store.location))
        self.clock = checked_clock(clock, store.clock_location)
        self.parts = parse_parts(names)
        per_query = np.frombuffer(counts, dtype=">u2").astype(np.int64)
        query_of = np.repeat(np.arange(len(per_query)), per_query)
        view, at = memoryview(records), 0
        while at < len(view):
            member = bytes(view[at : at + MEMBER_BYTES])
            (part,) = _PART.unpack_from(view, at + MEMBER_BYTES)
            (length,) = _LENGTH.unpack_from(view, at + MEMBER_BYTES + 8)
            start = at + MEMBER_BYTES + 12
            self._remember(member, int(part), bytes(view[start : start + length]))
            at = start + length
        return query_of, member_orders(members)

    def _read_on_cluster(self, queries: npt.NDArray[np.uint64]) -> list[list[bytes]]:
        """Per query, its members in every live part, then their records, one script a node each."""
        found, part_of = self.read_bands(queries)
        self._read.append((queries, found))
        for member, (_, record) in self.records(part_of).items():
            self._remember(member, part_of[member], record)
        return found

    def records(self, part_of: Mapping[bytes, int]) -> dict[bytes, tuple[bytes, bytes]]:
        """Member -> (its record key, its record), for those of ``part_of``'s
        members whose record is there; one script a node, and each record
        hash asked once for all its members."""
        asked: dict[bytes, list[bytes]] = {}  # record key -> its members
        for member, part in part_of.items():
            asked.setdefault(self.record_key(part, member), []).append(member)
        keys = list(asked)
        values = self._store._read_fields("read records", keys, [asked[key] for key in keys])
        return {
            member: (key, record)
            for key, records in zip(keys, values, strict=True)
            for member, record in zip(asked[key], records, strict=True)
            if record is not None
        }

    def seen(self) -> dict[bytes, list[bytes]]:
        """Band key -> the members the batch read under it. Only a batch that
        did not file alone asks (``ClusterRecording._recheck``), so it is
        built then, not at every read."""
        return {
            key: members
            for queries, found in self._read
            for key, members in zip(key_bytes(queries), found, strict=True)
        }

    def read_bands(self, band_keys: npt.NDArray[np.uint64]) -> tuple[list[list[bytes]], dict[bytes, int]]:
        """Per band key, its members in every live part, oldest part first; and each member's part."""
        store, layout = self._store, self.layout
        band_keys = np.asarray(band_keys, dtype=np.uint64)
        fields = layout.fields(band_keys)
        found: list[list[bytes]] = [[] for _ in range(len(band_keys))]
        part_of: dict[bytes, int] = {}
        keys: list[bytes] = []
        wanted: list[bytes] = []  # per bucket, the fields of its keys
        owners: list[int] = []  # per bucket, its part
        queried: list[npt.NDArray[np.intp]] = []  # per part, its keys in the order their fields are sent
        for part, bits in self.live() if len(band_keys) else ():
            buckets = layout.buckets(band_keys, bits)
            order = np.argsort(buckets, kind="stable")
            ordered, packed = buckets[order], fields[order].tobytes()
            starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1]))).tolist()
            for start, end in zip(starts, [*starts[1:], len(order)], strict=True):
                keys.append(layout.band_key(store._prefix_bytes, part, int(ordered[start])))
                wanted.append(packed[start * 4 : end * 4])
            queried.append(order)
            owners += [part] * len(starts)
        cap = max(1, self.settings.max_candidates_per_band)
        replies = store._on_nodes("read band keys", script("read_bands"), keys, lambda n: [wanted[n]], leading=[cap])
        if not replies:
            return found, part_of
        # Each reply: a u16 count per field it was sent, then the members,
        # field after field. Where every count and every field's members are:
        joined = b"".join(replies)
        data = np.frombuffer(joined, dtype=np.uint8)
        sizes = np.fromiter(map(len, replies), dtype=np.int64, count=len(replies))
        per_reply = np.fromiter((len(sent) // 4 for sent in wanted), dtype=np.int64, count=len(wanted))
        first = np.cumsum(per_reply) - per_reply  # each reply's first field, over all
        reply_at = np.repeat(np.cumsum(sizes) - sizes, per_reply)
        count_at = reply_at + 2 * (np.arange(len(reply_at)) - np.repeat(first, per_reply))
        counts = data[count_at].astype(np.int64) << 8 | data[count_at + 1]
        before = np.cumsum(counts) - counts  # members of the fields before, in every reply
        before -= np.repeat(before[first], per_reply)  # ... in the field's own reply
        member_at = (reply_at + 2 * np.repeat(per_reply, per_reply) + MEMBER_BYTES * before).tolist()
        query_of = np.concatenate(queried).tolist()
        part_of_field = np.repeat(owners, per_reply).tolist()
        counted = counts.tolist()
        for hit in np.flatnonzero(counts).tolist():
            start = member_at[hit]
            members = split_members(joined[start : start + counted[hit] * MEMBER_BYTES])
            found[query_of[hit]] += members
            for member in members:
                part_of[member] = part_of_field[hit]
        return found, part_of

    def record_key(self, part: int, member: bytes) -> bytes:
        bits = self.parts[part]
        return self.layout.record_key(self._store._prefix_bytes, part, self.layout.record_bucket(member, bits))

    def _remember(self, member: bytes, part: int, value: bytes) -> None:
        serial = member_order(member)
        timestamp, post_id, words = _decode_record(value)
        self._members[serial] = member
        self._parts[serial] = part
        self._posts[serial] = CachedPost(timestamp, post_id, bytes(words))
        self._raw[serial] = value
        self._ids.setdefault(post_id, []).append(timestamp)

    def stored_already(self, sketch: Sketch) -> bool:
        """Whether the batch read this very post's record (an earlier attempt
        at its batch recorded it): it passes again, and is not recorded twice."""
        return any(is_same_post(sketch, sketch.post_id, time) for time in self._ids.get(sketch.post_id, ()))

    def post(self, serial: int) -> CachedPost | None:
        return self._posts.get(serial)

    def record_key_of(self, serial: int) -> tuple[bytes, bytes, bytes]:
        """(record key, member, record as stored) of a post read."""
        member = self._members[serial]
        return self.record_key(self._parts[serial], member), member, self._raw[serial]

    # -- recording ---------------------------------------------------------------
    def record(self, sketches: Sketches, judgement: Judgement) -> Matches:
        if not self._store.cluster:
            self._record_on_one(sketches, judgement)
            return judgement.matches
        if self._cluster_recording is None:
            raise StoreError(f"Redis at {self._store.location}: a Cluster transaction was begun without its recording")
        matches: Matches = self._cluster_recording(self, sketches, judgement).run()
        return matches

    def _record_on_one(self, sketches: Sketches, judgement: Judgement) -> None:
        """Record the novel posts with ``commit.lua``, if nothing the batch read has changed."""
        store, settings, layout = self._store, self.settings, self.layout
        ttl, clock = settings.ttl_seconds, judgement.clock
        named = b"".join(
            _COUNT.pack(len(key)) + key + member
            for key, member, _ in (
                self.record_key_of(serial) for serial in judgement.matched.values() if serial < judgement.first_serial
            )
        )
        low = layout.live_from(self.clock, ttl)
        args: list[bytes | str | int] = [
            store.prefix,
            self._read_serial,
            repr(clock) if math.isfinite(clock) else "",
            max(1, settings.max_candidates_per_band),
            layout.first_bits,
            len(sketches[judgement.recorded[0]].band_keys) if judgement.recorded else 1,
            str(low) if math.isfinite(low) else "",
            "",
            named,
        ]
        posts: list[tuple[int, list[bytes | str | int]]] = []  # (sketch index, its arguments)
        for index, post in zip(judgement.recorded, judgement.posts, strict=True):
            sketch = sketches[index]
            slice_ = layout.slice_of(sketch.timestamp)
            life = slice_life_ms(layout, slice_, clock, ttl)
            if life < 0 or post.timestamp <= _rules.horizon(clock, ttl) or self.stored_already(sketch):
                continue  # past the horizon already (nothing could match it), or recorded before
            text = layout.text_bits(text_hash(sketch.shingles))
            record = encode_record(post.timestamp, post.post_id, post.words)
            posts.append((index, [str(slice_), text, record, layout.queries(sketch.band_keys), life]))
        if not posts and not math.isfinite(clock):
            return
        # posts of this batch that another post of it was judged a duplicate of
        named_here = {
            judgement.recorded[serial - judgement.first_serial]
            for serial in judgement.matched.values()
            if serial >= judgement.first_serial
        }
        for _ in range(_CHECKS):
            every = args + [value for _, values in posts for value in values]
            reply = store._retrying("record a batch", functools.partial(store._commit, keys=[], args=every))
            if reply[0] == b"recorded":
                store._drop_dead(self.parts, clock)
                return
            if reply[0] == b"changed":
                raise RetryBatch
            # Another worker recorded posts under the keys of some of them
            # meanwhile, and those were held back (the others are recorded):
            # a post with a near-duplicate among them is a duplicate of it,
            # which came first, unless a post of this batch was judged a
            # duplicate of it; the rest are sent again.
            held, later = self._concurrent([sketches[index] for index, _ in posts], reply[2])
            if any(posts[number][0] in named_here for number in later):
                raise RetryBatch  # what was recorded passes again, as a replayed batch's posts do
            for number, match in later.items():
                judgement.matches[posts[number][0]] = match
            posts = [entry for number, entry in enumerate(posts) if number in held and number not in later]
            if not posts:
                store._drop_dead(self.parts, clock)
                return
            args[1] = reply[1]  # counting from what is there now
        raise RetryBatch

    def _concurrent(self, recording: Sequence[Sketch], found: bytes) -> tuple[set[int], dict[int, Match]]:
        """The posts (by number in ``recording``) that commit.lua held back,
        and those of them that a post another worker recorded meanwhile
        duplicates (``found``: commit.lua's post number, member, record),
        each with the most similar such post."""
        settings, view, at = self.settings, memoryview(found), 0
        threshold = settings.jaccard_threshold
        held: set[int] = set()
        matches: dict[int, Match] = {}
        while at < len(view):
            (number,) = _LENGTH.unpack_from(view, at)
            held.add(number)
            (length,) = _LENGTH.unpack_from(view, at + 4 + MEMBER_BYTES)
            start = at + 8 + MEMBER_BYTES
            timestamp, post_id, word_view = _decode_record(bytes(view[start : start + length]))
            at = start + length
            sketch = recording[number]
            if is_same_post(sketch, post_id, timestamp):
                continue  # the post itself, recorded by another attempt
            found_similarity = _rules.similarity_to_words(sketch, word_view.tolist(), settings.shingle_size, threshold)
            best = matches.get(number)
            if found_similarity >= threshold and (best is None or found_similarity >= best.similarity):
                matches[number] = Match(post_id, found_similarity)
        return held, matches

    def commit(self, progress: Mapping[str, int | str] | None) -> None:
        self._store._commit_progress(progress)

    def abort(self) -> None:
        """Nothing to undo: a batch writes only when it records, in one script on one Redis."""
