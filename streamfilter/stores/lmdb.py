"""The embedded default: an LMDB environment on disk.

Named sub-databases:

- ``posts``: serial -> timestamp, post id and the post's word hashes in
  order, 32 bits each (the verification data: the set verification
  compares is rebuilt from them, see below). Serials only grow, so posts
  are appended at the end and purged from the front. A decimal id (Twitter,
  Mastodon) is stored as 8 bytes, any other id as its UTF-8 text.
- ``runs``: the band index, log-structured. A run is one value: its first and
  last serial and its entry count, then that many sorted 40-bit band keys
  (32 bits each, the top bits implied by the run's fence, see _Run) and as
  many serial offsets from the first serial, 2, 3 or 4 bytes each as the
  run's span of serials needs. Every batch appends one run for its novel
  posts; runs of similar size are merged, which drops purged posts, so a
  stream keeps a handful of runs, O(log n) of them. A run's key is its first
  serial, then the id of the write transaction that made it, so no key is
  ever used twice (see _RunCache); indexes written before that have keys of
  the first serial alone, and both are read.
- ``meta``: the pinned signature settings, the clock and the next serial.

A batch looks its band keys up in every run at once (numpy ``searchsorted``
over the keys of a run under a million entries, rebuilt once into memory; a
binary search through the fence of a larger one, read in place from the
map; see _Run.find), so the work per batch is a few
vectorised searches and a few writes, instead of a B-tree look-up and insert
per band per post. Band keys are cut to 40 bits: a key that matches by chance
only proposes a candidate, and every candidate is verified by exact Jaccard
over the stored word hashes. (With 32 bits, chance matches grew with the
index: at 4 M posts, a quarter of novel posts had one to read and verify.)

Why a post's words, 32 bits each, suffice for verification. The set that
verification compares, words and word pairs, has about twice as many
members as the post has words, so the record keeps the words instead, in
order, and verification rebuilds the set from them (``verification_set``).
Words are hashed to 32 bits for MinHash as well, so two distinct words that
share a hash (odds of 2**-32 per pair of words) look alike to both: posts
that differ only in such words match.

Every batch is one write transaction: LMDB allows one writer at a time across
all processes that open the directory, and lookups happen inside that
transaction, so two processes can never both let copies of a text through.
When the map fills, the transaction is aborted, the map doubled, and the batch
run again; nothing of the failed attempt is kept.

Expiry. A post is invisible as soon as its timestamp falls ``ttl`` behind the
clock (the highest timestamp seen). Purging walks ``posts`` from the front
(the oldest serial) and deletes while the post there has expired, at most
``purge_limit`` a batch; a post that arrived with a newer timestamp than the
ones recorded after it holds the walk until it expires too. Runs that hold
only purged serials are deleted, and merges drop purged entries.
"""

from __future__ import annotations

import errno
import functools
import json
import math
import os
import struct
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import lmdb
import numpy as np
import numpy.typing as npt

from .._exceptions import StoreError, StoreFullError
from ._base import (
    CachedPost,
    IndexSettings,
    Match,
    PostCache,
    Sketch,
    best_match,
    check_fingerprint,
    referenced,
)

__all__ = ["LMDBStore"]

_U64 = struct.Struct(">Q")
_CLOCK = struct.Struct("<d")
_TIMESTAMP = struct.Struct("<d")  # the first field of a post record
_RUN_HEADER = struct.Struct("<QQQQ")  # first serial, last serial, entries, fence bits | offset bytes << 8
_RUN_KEY = struct.Struct(">QQ")  # first serial, id of the write transaction that made the run
_CONFIG_KEY = b"config"
_CLOCK_KEY = b"clock"
_SERIAL_KEY = b"next_serial"
_FORMAT_KEY = b"format"
_PROGRESS_KEY = b"progress"
# 7: Bluesky post URIs packed in post records (_pack_at_uri); 6: 40-bit band
# keys, their top bits implied by the fence. A format-6 index is read and
# written as format 6: its records never hold a packed URI.
_FORMAT = b"streamfilter-lmdb-7"
_FORMAT_6 = b"streamfilter-lmdb-6"
# Merging stops at this many entries a run (64 MB): beyond it, runs are only
# dropped whole when every post in them has been purged.
_MAX_MERGED_ENTRIES = 1 << 23
# A batch's own transaction merges runs only while the result stays this small
# (about 1 ms); larger merges run on the store's merge thread (_Merger), so a
# batch never waits for one: a merge of 336 k entries held a batch 17 ms.
_INLINE_MERGED_ENTRIES = 1 << 15
# A post sharing band keys with more earlier posts than this is verified
# against the ones that share the most bands with it.
_MAX_VERIFIED = 64
# Bits of a band key that the runs keep: the top 40 of its 64 (see _Run).
_KEY_BITS = 40
_NO_KEYS = np.zeros(0, dtype=np.uint64)
_NO_STORED = np.zeros(0, dtype=np.uint32)
# A run's fence splits its key space into 2**bits buckets: 2**8 (so that the
# 32 bits an entry stores, with its bucket, make the whole key), and in a run
# searched through its fence (see _SEARCHED_WHOLE) buckets of about this many
# entries each (half a byte of fence an entry), so a look-up searches one
# bucket, not the whole run.
_ENTRIES_PER_BUCKET = 8
_MIN_FENCE_BITS = _KEY_BITS - 32
# each value of a key's top 8 bits, in place above the 32 a run stores
_TOP_BITS = np.arange(1 << _MIN_FENCE_BITS, dtype=np.uint64) << np.uint64(32)
# Runs with fewer entries are searched whole, their keys rebuilt once into
# one array of 8 bytes an entry (measured on 32-bit keys: 0.3 ms for 17k keys
# in 2k entries against 1.3 ms through the fence; at 4M entries, 4.8 against
# 5.1 ms); larger ones through the fence, in place. Below a million entries,
# at most a few runs of up to 8 MB each.
_SEARCHED_WHOLE = 1 << 20
# The key filter's size at most: 2**30 bits, 128 MB, enough for ~130 M entries.
_MAX_FILTER_BITS = 30
# Runs of at least this many entries are in the run masks, smaller ones in the key filter's bits (see _KeyFilter).
_FILTERED_RUN = 1 << 20
# The run masks' table at most: 2**26 slots of 16 bits, 128 MB, 8 slots an
# entry for the largest run merging makes (_MAX_MERGED_ENTRIES).
_MAX_MASK_BITS = 26
# A run's keys go into the run masks this many at a time (bounded temporaries).
_MASK_CHUNK = 1 << 20
# Runs whose value takes at least this many bytes stay decoded across
# transactions (see _RunCache): far more than the half page above which LMDB
# puts a value on overflow pages of its own.
_CACHED_RUN_BYTES = 1 << 16


_RECORD_HEADER = struct.Struct("<dB")  # timestamp, then the id's length, or one of:
_NUMERIC_ID = 255  # a decimal id of up to 19 digits follows as 8 bytes
_LONG_ID = 254  # a 2-byte length and the id's UTF-8 follow
_AT_URI = 253  # format 7: a Bluesky post's URI follows, packed (_pack_at_uri); in format 6, a length
_ID_NUMBER = struct.Struct("<Q")
_ID_LENGTH = struct.Struct("<H")
# A Bluesky post's id: at://did:plc:<24 letters of base32>/app.bsky.feed.post/<record key>
_AT_PREFIX = "at://did:plc:"
_AT_COLLECTION = "/app.bsky.feed.post/"
_PLC_LETTERS = 24  # 15 bytes as base32
_PLC_BYTES = 15
_RKEY_AT = len(_AT_PREFIX) + _PLC_LETTERS + len(_AT_COLLECTION)


# did:plc identifiers are written in base32's letters (RFC 4648, in lower
# case); as int() reads base 32 in the digits 0-9 and a-v, those are mapped
# to these, and back two letters (10 bits) at a time.
_PLC_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"
_PLC_LETTERS_SET = frozenset(_PLC_ALPHABET)
_TO_INT_DIGITS = str.maketrans(_PLC_ALPHABET, "0123456789abcdefghijklmnopqrstuv")
_LETTER_PAIRS = [first + second for first in _PLC_ALPHABET for second in _PLC_ALPHABET]


def _pack_at_uri(post_id: str) -> bytes | None:
    """A Bluesky post URI in 16 bytes and its record key (30 in all for the
    usual 13-letter key, against 69 as text): the did:plc identifier's 24
    base32 letters as 15 bytes, then the key's length and UTF-8. None for
    any other id."""
    if not post_id.startswith(_AT_PREFIX) or post_id[_RKEY_AT - len(_AT_COLLECTION) : _RKEY_AT] != _AT_COLLECTION:
        return None
    letters = post_id[len(_AT_PREFIX) : len(_AT_PREFIX) + _PLC_LETTERS]
    rkey = post_id[_RKEY_AT:].encode("utf-8")
    if not rkey or len(rkey) > 0xFF or not _PLC_LETTERS_SET.issuperset(letters):
        return None
    return int(letters.translate(_TO_INT_DIGITS), 32).to_bytes(_PLC_BYTES, "big") + bytes((len(rkey),)) + rkey


def _unpack_plc(packed: bytes) -> str:
    """The 24 base32 letters of a did:plc identifier packed by ``_pack_at_uri``."""
    number = int.from_bytes(packed, "big")
    return "".join([_LETTER_PAIRS[(number >> shift) & 0x3FF] for shift in range(110, -1, -10)])


def _encode_record(timestamp: float, post_id: str, hashes: bytes, pack_uris: bool) -> bytes:
    """A post's record: its time, its id and ``hashes``, its word hashes as
    little-endian uint32. ``pack_uris`` is False for a format-6 index."""
    if post_id.isdigit() and post_id.isascii() and len(post_id) <= 19 and (post_id[0] != "0" or len(post_id) == 1):
        return _RECORD_HEADER.pack(timestamp, _NUMERIC_ID) + _ID_NUMBER.pack(int(post_id)) + hashes
    if pack_uris and (packed := _pack_at_uri(post_id)) is not None:
        return _RECORD_HEADER.pack(timestamp, _AT_URI) + packed + hashes
    encoded = post_id.encode("utf-8")[:0xFFFF]
    if len(encoded) < (_AT_URI if pack_uris else _LONG_ID):
        return _RECORD_HEADER.pack(timestamp, len(encoded)) + encoded + hashes
    return _RECORD_HEADER.pack(timestamp, _LONG_ID) + _ID_LENGTH.pack(len(encoded)) + encoded + hashes


def _decode_record(value: bytes | memoryview, packed_uris: bool) -> tuple[float, str, memoryview]:
    """(timestamp, post id, the word hashes as a uint32 memoryview);
    ``packed_uris`` is False for a format-6 index."""
    timestamp, marker = _RECORD_HEADER.unpack_from(value)
    start = _RECORD_HEADER.size
    if marker == _NUMERIC_ID:
        post_id = str(_ID_NUMBER.unpack_from(value, start)[0])
        start += _ID_NUMBER.size
    elif marker == _AT_URI and packed_uris:
        letters = _unpack_plc(bytes(value[start : start + _PLC_BYTES]))
        length = value[start + _PLC_BYTES]
        start += _PLC_BYTES + 1
        rkey = bytes(value[start : start + length]).decode("utf-8", "replace")
        post_id = f"{_AT_PREFIX}{letters}{_AT_COLLECTION}{rkey}"
        start += length
    else:
        length = marker
        if marker == _LONG_ID:
            length = _ID_LENGTH.unpack_from(value, start)[0]
            start += _ID_LENGTH.size
        post_id = bytes(value[start : start + length]).decode("utf-8", "replace")
        start += length
    return timestamp, post_id, memoryview(value)[start:].cast("I")


_ALL = slice(None)
_Offset = TypeVar("_Offset", np.int64, np.uint32)


@dataclass(slots=True)
class _Run:
    """A run as read: its entries sorted by band key, then by serial.

    Keys are the top 40 bits of a post's 64-bit band keys. A run stores the
    low 32 bits of each; its fence, of 2**bits buckets (at least 2**8), holds
    the top ``bits``. With 32-bit keys, a key
    of a novel post matched a stored one by chance once the index held a few
    million posts (at 4 M posts, 68 M entries: 1.6% of its keys, a quarter
    of novel posts), and each such match cost reading and verifying a post
    record, a fifth of a batch's time at that size.
    """

    db_key: bytes
    first: int
    last: int
    count: int
    stored: npt.NDArray[np.uint32]  # each entry's key's low 32 bits
    fence: npt.NDArray[np.uint32]  # fence[b]: the first entry whose key's top ``bits`` bits are >= b
    bits: int
    # each entry's serial minus ``first``: the low 16 or all 32 bits, and the
    # high 8 bits of a 3-byte offset (None for 2 or 4 bytes)
    low: npt.NDArray[np.uint16] | npt.NDArray[np.uint32]
    high: npt.NDArray[np.uint8] | None
    # the whole keys, rebuilt once for a run searched whole, or a pending run's keys in post order
    whole: npt.NDArray[np.uint64] | None = None
    # its arrays are in memory of its own (a copy, or the buffer it was encoded
    # into), not in the map: still valid after a write moves the map's pages
    owned: bool = False

    @property
    def identity(self) -> tuple[int, int, int]:
        """(first serial, last serial, entries): fixes a run's contents."""
        return self.first, self.last, self.count

    def offsets(self, dtype: type[_Offset], positions: npt.NDArray[np.int64] | slice = _ALL) -> npt.NDArray[_Offset]:
        """Each serial minus the run's first, of the entries at ``positions`` (all by default)."""
        offsets = self.low[positions].astype(dtype)
        if self.high is not None:
            offsets |= self.high[positions].astype(dtype) << dtype(16)
        return offsets

    def serials(self, positions: npt.NDArray[np.int64] | slice = _ALL) -> npt.NDArray[np.int64]:
        """The serials of the entries at ``positions`` (all by default)."""
        return self.offsets(np.int64, positions) + self.first

    def keys(self, start: int = 0, stop: int | None = None) -> npt.NDArray[np.uint64]:
        """The whole keys of entries ``start`` to ``stop`` (all by default),
        sorted: a new array, or a view of ``whole`` where the run keeps one."""
        stop = self.count if stop is None else min(stop, self.count)
        if self.whole is not None:
            return self.whole[start:stop]
        keys = np.repeat(_TOP_BITS, self._top_counts(start, stop))
        keys |= self.stored[start:stop]
        return keys

    def prefixes(self, width: int, start: int = 0, stop: int | None = None) -> npt.NDArray[np.uint32]:
        """The top ``width`` bits (8 < width <= 32) of the keys of entries
        ``start`` to ``stop``, sorted; in 32-bit arithmetic, without
        rebuilding the keys (for the key filter and the run masks)."""
        stop = self.count if stop is None else min(stop, self.count)
        if self.whole is not None:
            return (self.whole[start:stop] >> np.uint64(_KEY_BITS - width)).astype(np.uint32)
        low = self.stored[start:stop] >> np.uint32(_KEY_BITS - width)  # the stored bits among them
        low |= np.repeat(np.arange(256, dtype=np.uint32) << np.uint32(width - 8), self._top_counts(start, stop))
        return low

    def _top_counts(self, start: int, stop: int) -> npt.NDArray[np.int64]:
        """How many of entries ``start`` to ``stop`` have each of the 256
        values of a key's top 8 bits, the bits above the 32 stored (the
        fence holds where each value starts)."""
        starts = self.fence[:: 1 << (self.bits - _MIN_FENCE_BITS)].astype(np.int64)
        bounded: npt.NDArray[np.int64] = np.clip(starts, start, max(start, stop))
        return np.diff(bounded)

    def find(
        self, queries: npt.NDArray[np.uint64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(indexes of the queries found, the position of each one's first
        entry, and of the entry after its last).

        A small run is searched whole. In a large one, a binary search per
        query, run for all queries at once, inside the query's fence bucket:
        a few cache lines of the map per query, where a search of the whole
        run would touch a page per step.
        """
        if self.count < _SEARCHED_WHOLE:
            if self.whole is None:
                self.whole = self.keys()
            whole = self.whole
            first = np.searchsorted(whole, queries, side="left")
            found = np.flatnonzero(whole[np.minimum(first, self.count - 1)] == queries) if self.count else first[:0]
            return found, first[found], np.searchsorted(whole, queries[found], side="right")
        bucket = (queries >> np.uint64(_KEY_BITS - self.bits)).astype(np.int64)
        rest = queries.astype(np.uint32)  # the low 32 bits, as stored
        start = self.fence[bucket].astype(np.int64)
        stop = self.fence[bucket + 1].astype(np.int64)
        first = self._search(rest, start, stop.copy(), right=False)
        found = np.flatnonzero((first < stop) & (self.stored[np.minimum(first, self.count - 1)] == rest))
        end = self._search(rest[found], first[found] + 1, stop[found], right=True)
        return found, first[found], end

    def _search(
        self, rest: npt.NDArray[np.uint32], low: npt.NDArray[np.int64], high: npt.NDArray[np.int64], *, right: bool
    ) -> npt.NDArray[np.int64]:
        """For each query, the first position in [low, high) whose stored
        value is >= (``right``: >) its ``rest``; ``low`` is updated in place."""
        stored = self.stored
        active = np.flatnonzero(low < high)
        while len(active):
            middle = (low[active] + high[active]) >> 1
            below = stored[middle] <= rest[active] if right else stored[middle] < rest[active]
            low[active[below]] = middle[below] + 1
            high[active[~below]] = middle[~below]
            active = active[low[active] < high[active]]
        return low


def _short_keys(band_keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """The keys the runs keep: the top ``_KEY_BITS`` of each band key."""
    return band_keys >> np.uint64(64 - _KEY_BITS)


def _rank_in_group(groups: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Each element's position within its run of equal values (``groups`` sorted)."""
    count = len(groups)
    starts = np.flatnonzero(np.concatenate(([True], groups[1:] != groups[:-1])))
    return np.arange(count) - np.repeat(starts, np.diff(np.append(starts, count)))


def _stored_sharers(
    hit_serial: npt.NDArray[np.int64],
    per_query: npt.NDArray[np.int64],
    first_hit: npt.NDArray[np.int64],
    inverse: npt.NDArray[np.int64],
    owner: npt.NDArray[np.int64],
) -> dict[int, tuple[list[int], list[int]]]:
    """For each sketch of a batch that shares band keys with stored posts:
    (their serials, how many keys each shares), most keys first, then newest.

    ``hit_serial`` holds ``members``' hits, by query: query q's are the
    ``per_query[q]`` from ``first_hit[q]`` on. ``inverse``/``owner`` give each
    band key of the batch its query and sketch.
    """
    if len(hit_serial) == 0:
        return {}
    per_key = per_query[inverse]  # hits under each band key of each sketch
    total = int(per_key.sum())
    if total == 0:
        return {}
    key_start = np.cumsum(per_key) - per_key
    positions = np.repeat(first_hit[inverse] - key_start, per_key) + np.arange(total)
    sketch = np.repeat(owner, per_key)
    serial = hit_serial[positions]
    order = np.lexsort((serial, sketch))
    sketch, serial = sketch[order], serial[order]
    starts = np.flatnonzero(np.concatenate(([True], (sketch[1:] != sketch[:-1]) | (serial[1:] != serial[:-1]))))
    shared = np.diff(np.append(starts, total))
    sketch, serial = sketch[starts], serial[starts]
    order = np.lexsort((-serial, -shared, sketch))
    sketches, serials, counts = sketch[order].tolist(), serial[order].tolist(), shared[order].tolist()
    bounds = np.flatnonzero(np.diff(sketch[order])).tolist()
    result: dict[int, tuple[list[int], list[int]]] = {}
    for start, end in zip([0, *[b + 1 for b in bounds]], [*[b + 1 for b in bounds], len(sketches)], strict=True):
        result[sketches[start]] = (serials[start:end], counts[start:end])
    return result


def _with_batch_sharers(
    stored: tuple[list[int], list[int]] | None, in_batch: dict[int, int], crowded_out: dict[int, int]
) -> tuple[list[int], list[int]]:
    """``stored`` (serials, shared keys) and the batch's own recorded posts
    that share keys (serial: keys), in one order: most keys, then newest.
    ``crowded_out`` says under how many keys a stored serial gave way to the
    batch's newer posts; one left under none is no candidate."""
    shared = dict(zip(*stored, strict=True)) if stored is not None else {}
    for serial, keys in crowded_out.items():
        remaining = shared.get(serial, 0) - keys
        if remaining > 0:
            shared[serial] = remaining
        else:
            shared.pop(serial, None)
    shared.update(in_batch)  # serials of this batch are new: none is in ``stored``
    serials = sorted(shared, key=lambda serial: (shared[serial], serial), reverse=True)
    return serials, [shared[serial] for serial in serials]


def _mergeable(older: int, newer: int) -> bool:
    """Whether two adjacent runs of these entry counts are merged: of similar size, and not too large together."""
    return older <= 2 * newer and older + newer <= _MAX_MERGED_ENTRIES


def _merged_inline(older: int, newer: int) -> bool:
    """Whether a batch's own transaction merges two adjacent runs of these
    entry counts; a larger merge that is due is the merge thread's."""
    return _mergeable(older, newer) and older + newer <= _INLINE_MERGED_ENTRIES


def _one_run_spans(*runs: _Run) -> bool:
    """Whether one run can hold the entries of ``runs``: their serials less
    than 2**32 apart, so that offsets fit 32 bits."""
    return max(run.last for run in runs) - min(run.first for run in runs) < 1 << 32


def _merge_plan(runs: list[_Run]) -> int | None:
    """The index in ``runs`` (live ones, oldest first) of the older run of the
    newest adjacent pair that is for the merge thread: too large to merge
    inline, and with offsets that fit 32 bits; None when there is none."""
    for at in range(len(runs) - 2, -1, -1):
        older, newer = runs[at], runs[at + 1]
        entries = older.count + newer.count
        if _mergeable(older.count, newer.count) and entries > _INLINE_MERGED_ENTRIES and _one_run_spans(older, newer):
            return at
    return None


def _live_entries(run: _Run, first_live: int, base: int) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint32]]:
    """(keys, serials minus ``base``) of a run's entries that are not purged;
    copies, valid after its transaction. ``base`` is at most ``run.first``,
    and the run's serials less than 2**32 past it."""
    offsets = run.offsets(np.uint32)
    if run.first > base:
        offsets += np.uint32(run.first - base)
    if run.first >= first_live:  # nothing purged: no mask to build and apply
        return run.keys().copy(), offsets
    if run.last < first_live:  # all purged (and ``first_live - base`` may not fit 32 bits)
        return _NO_KEYS.copy(), offsets[:0]
    live = offsets >= np.uint32(first_live - base)
    return run.keys()[live], offsets[live]


def _merge_entries(runs: Sequence[_Run], first_live: int) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint32], int]:
    """(keys, offsets, base) of the entries of ``runs`` that are not purged,
    as ``_encode_run`` takes them (the runs' serials less than 2**32 apart);
    copies, valid after the runs' transaction."""
    base = min(run.first for run in runs)
    live = [_live_entries(run, first_live, base) for run in runs]
    return np.concatenate([keys for keys, _ in live]), np.concatenate([offsets for _, offsets in live]), base


def _pending_run(keys: npt.NDArray[np.uint64], offsets: npt.NDArray[np.uint32], first: int) -> _Run:
    """A batch's entries before they are written, as ``_merge_entries`` takes a
    run: keys in post order, not sorted, so never searched."""
    return _Run(b"", first, first + int(offsets[-1]), len(keys), _NO_STORED, _NO_STORED, 0, offsets, None, keys)


def _decode_run(db_key: bytes | memoryview, value: bytes | memoryview | None, *, owned: bool = False) -> _Run:
    """A run from its value; ``owned`` when the value is not in the map (see _Run.owned)."""
    assert value is not None
    first, last, count, flags = _RUN_HEADER.unpack_from(value)
    bits, width = flags & 0xFF, flags >> 8
    at = _RUN_HEADER.size
    stored = np.frombuffer(value, dtype="<u4", count=count, offset=at)
    at += 4 * count
    fence = np.frombuffer(value, dtype="<u4", count=(1 << bits) + 1, offset=at)
    at += 4 * len(fence)
    high = None
    if width == 4:
        low: npt.NDArray[np.uint16] | npt.NDArray[np.uint32] = np.frombuffer(value, dtype="<u4", count=count, offset=at)
    else:
        low = np.frombuffer(value, dtype="<u2", count=count, offset=at)
        if width == 3:
            high = np.frombuffer(value, dtype=np.uint8, count=count, offset=at + 2 * count)
    return _Run(bytes(db_key), first, last, count, stored, fence, bits, low, high, owned=owned)


def _encode_run(keys: npt.NDArray[np.uint64], offsets: npt.NDArray[np.uint32], base: int) -> memoryview:
    """The value of a run over these entries (see _encode_sorted)."""
    return _encode_sorted(keys, offsets, base)[0]


def _encode_sorted(
    keys: npt.NDArray[np.uint64], offsets: npt.NDArray[np.uint32], base: int
) -> tuple[memoryview, npt.NDArray[np.uint64] | None]:
    """The value of a run over these entries, the serial of each being
    ``base`` plus its offset; sorts them by key, stably. Offsets take 2
    bytes an entry while the run spans fewer than 65,536 serials, 3 below
    2**24, else 4: the runs of a batch and their early merges need 2, the
    largest runs 3.

    Every part is written in place into the one buffer returned, and serials
    travel as 32-bit offsets: a merge of runs of millions of entries built
    64-bit serials, allocated each part and then joined them, twice, and on
    this machine fresh memory costs about 1.5 ms a MB to fault in.

    Also returns the sorted keys of a run that is searched whole (None for
    a larger one), so that the run written need not rebuild them.
    """
    count = len(keys)
    low, high = (int(offsets.min()), int(offsets.max())) if count else (0, 0)
    first, last, span = base + low, base + high, high - low
    width = 2 if span < 1 << 16 else 3 if span < 1 << 24 else 4
    # a run searched whole needs only the fence that holds its keys' top 8 bits (1 KB)
    bits = _MIN_FENCE_BITS
    if count >= _SEARCHED_WHOLE:  # searched through its fence: half a byte of it an entry
        bits = max(bits, min(24, (count // _ENTRIES_PER_BUCKET).bit_length()))
    shift = np.uint64(_KEY_BITS - bits)
    fence_at = _RUN_HEADER.size + 4 * count
    offsets_at = fence_at + 4 * ((1 << bits) + 1)
    value = np.empty(offsets_at + width * count, dtype=np.uint8)
    _RUN_HEADER.pack_into(value, 0, first, last, count, bits | width << 8)  # type: ignore[arg-type]
    order = np.argsort(keys, kind="stable")
    # each key's low 32 bits (in a large run, a few of them are its bucket's too)
    low_words = np.ascontiguousarray(keys, dtype="<u8").view("<u4")[::2]
    np.take(low_words, order, out=value[_RUN_HEADER.size : fence_at].view("<u4"))
    whole = np.take(keys, order) if count < _SEARCHED_WHOLE else None
    fence = value[fence_at:offsets_at].view("<u4")
    fence[0] = 0
    np.cumsum(np.bincount((keys >> shift).astype(np.intp), minlength=1 << bits), out=fence[1:])
    offsets = np.take(offsets, order)
    if low:
        offsets -= np.uint32(low)  # from the first serial
    if width == 3:
        np.copyto(value[offsets_at : offsets_at + 2 * count].view("<u2"), offsets, casting="unsafe")  # the low 16 bits
        np.copyto(value[offsets_at + 2 * count :], offsets >> np.uint32(16), casting="unsafe")
    else:
        np.copyto(value[offsets_at:].view("<u4" if width == 4 else "<u2"), offsets, casting="unsafe")
    return value.data, whole


def _put_run(txn: lmdb.Transaction, db: lmdb._Database, value: memoryview) -> bytes:
    """Write a run under a key no other run has had or will have; returns the key."""
    db_key = _RUN_KEY.pack(_RUN_HEADER.unpack_from(value)[0], txn.id())
    txn.put(db_key, value, db=db)
    return db_key


class _RunCache:
    """Large runs as decoded once, kept across transactions.

    py-lmdb touches every page of a value it returns, so reading a run costs
    a memory access per 4 KB page: at 10 M posts, with some fourteen runs of
    up to 50 MB read by every batch and every merge plan, that was about a
    tenth of the replay process's time, and it grew with the index.

    A run read once is valid later for two reasons. A run's key is never
    used again (it carries the id of the write transaction that made it),
    so a key listed now names the very value read before; and a value that
    large sits on overflow pages of its own, which LMDB does not write while
    the value exists (a smaller one lives in a page that is copied whenever
    a neighbour changes). Not kept: runs read by the transaction that wrote
    them (their pages are its private copies until it commits), and runs of
    older indexes, whose keys are the first serial alone. Growing the map
    moves it, so growth drops every kept run (``clear``, under _MapGuard).

    A smaller run is kept as a copy of its value, made when first read, so
    that a batch does not decode every small run again.
    """

    def __init__(self) -> None:
        self._runs: dict[bytes, _Run] = {}

    def listed(self, txn: lmdb.Transaction, db: lmdb._Database) -> list[_Run]:
        """The runs ``txn`` sees, oldest first, reading only the values of runs not kept."""
        known, kept = self._runs, {}
        runs = []
        cursor = txn.cursor(db)
        for listed_key in cursor.iternext(keys=True, values=False):  # keys only: no value is touched
            db_key = bytes(listed_key)
            run = known.get(db_key)
            keep = run is not None
            if run is None:
                value = cursor.value()
                # not this transaction's own, nor an older index's
                keep = len(db_key) == _RUN_KEY.size and _RUN_KEY.unpack(db_key)[1] < txn.id()
                owned = keep and len(value) < _CACHED_RUN_BYTES
                if owned:
                    value = bytes(value)  # a small run is kept as a copy (see above)
                run = _decode_run(db_key, value, owned=owned)
            if keep:
                kept[db_key] = run
            runs.append(run)
        self._runs = kept  # the runs no longer listed are gone for good
        return runs

    def get(self, db_key: bytes) -> _Run | None:
        return self._runs.get(db_key)

    def adopt(self, runs: Iterable[_Run]) -> None:
        """Keep runs this process wrote, from the buffers they were encoded
        into, once their transaction has committed: the next batch finds
        the newest run decoded, its keys rebuilt already (a batch of a dozen
        posts spent about a tenth of its transaction decoding the run the
        batch before it wrote and rebuilding its keys). A run merged away in
        the same transaction is never listed, and is dropped at the next listing."""
        for run in runs:
            self._runs[run.db_key] = run

    def clear(self) -> None:
        self._runs = {}


# A run a transaction wrote, for the key filter once it commits: the run
# (valid after the transaction), the identities of the runs it was merged
# from, and the keys that none of those held (None: none), sorted.
_NewRun = tuple[_Run, Sequence[tuple[int, int, int]], npt.NDArray[np.uint64] | None]


class _Bits:
    """One bit per key prefix, about 8 to 16 bits per key added; a key whose bit is clear was never added."""

    def __init__(self, keys: int) -> None:
        self.width = min(_MAX_FILTER_BITS, max(min(20, _MAX_FILTER_BITS), (keys * 8 - 1).bit_length()))
        self.bytes = np.zeros(1 << (self.width - 3), dtype=np.uint8)
        self.shift = np.uint64(_KEY_BITS - self.width)

    @property
    def capacity(self) -> int:
        return len(self.bytes) * 8

    def add(self, slots: npt.NDArray[np.uint32]) -> None:
        """Set the bits of these key prefixes (``width`` bits each)."""
        # sorted prefixes: the bits are set in order, 7x faster than at random
        np.bitwise_or.at(self.bytes, slots >> np.uint32(3), np.left_shift(1, slots & np.uint32(7)).astype(np.uint8))

    def might_hold(self, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
        """Indexes of the keys that may have been added."""
        slots = keys >> self.shift
        return np.flatnonzero((self.bytes[slots >> np.uint64(3)] >> (slots & np.uint64(7)).astype(np.uint8)) & 1)


def _large(entries: int) -> bool:
    """Whether a run of this many entries is in the run masks, not in the key filter's bits."""
    return entries >= _FILTERED_RUN


class _RunMasks:
    """Which large runs might hold a key: one table of 16-bit masks by key prefix, in this process.

    Each run of ``_FILTERED_RUN`` entries or more is given a plane, one bit
    of every slot, set where a key of the run falls. One look-up in the table
    answers for every large run at once, where bits of each large run's own
    cost a cache miss per run for every key that might be in one (at 6.5 M
    posts, with about a dozen large runs, a fifth of a batch's look-ups).
    With 8 slots an entry, a key not in a run passes for it 12% of the time,
    and is searched for in it. (Two slots a key, one at random or one in the
    same cache line, pass about 5%, but measured no faster, and adding a
    run's keys took 2 to 5 times as long.)

    With more than 16 large runs, a plane holds several, and a key that may
    be in any of them is searched for in each. A run that has gone (merged,
    or purged whole) leaves its keys set in its plane until the plane is
    cleared, which is done for all such planes at once, in one pass over the
    table, when a new run needs a plane: a superset, like the key filter's
    bits. The table is sized for 8 slots an entry of the largest run and
    built again (every large run added anew) when a larger one comes.
    """

    PLANES = 16

    def __init__(self) -> None:
        self._reset(0)

    def _reset(self, bits: int) -> None:
        self._table = np.zeros(1 << bits if bits else 0, dtype=np.uint16)
        self._shift = np.uint64(_KEY_BITS - bits)
        self._plane_of: dict[tuple[int, int, int], int] = {}
        self._stale = 0  # planes that hold keys of runs gone

    def sync(self, runs: list[_Run]) -> None:
        """Give the large runs in ``runs`` a plane each; forget the runs not among them."""
        large = {run.identity: run for run in runs if _large(run.count)}
        for identity in [identity for identity in self._plane_of if identity not in large]:
            self._stale |= 1 << self._plane_of.pop(identity)
        if not large:
            self._reset(0)  # free the table
            return
        new = [run for identity, run in large.items() if identity not in self._plane_of]
        if not new:
            return
        bits = min(_MAX_MASK_BITS, max(20, (max(run.count for run in new) * 8 - 1).bit_length()))
        if bits > _KEY_BITS - int(self._shift):  # the first large run, or one larger than the table is for
            self._reset(bits)
            new = list(large.values())
        for run in new:
            self._add(run, self._plane_for(large))

    def _plane_for(self, large: dict[tuple[int, int, int], _Run]) -> int:
        """A clean plane no run holds; else, once the stale planes are cleared,
        one of those, or the plane whose runs have the fewest entries."""
        while True:
            entries = [0] * self.PLANES
            held = [False] * self.PLANES
            for identity, plane in self._plane_of.items():
                entries[plane] += large[identity].count
                held[plane] = True
            for plane in range(self.PLANES):
                if not held[plane] and not self._stale >> plane & 1:
                    return plane
            if not self._stale:
                return min(range(self.PLANES), key=entries.__getitem__)
            self._clear_stale(large)

    def _clear_stale(self, large: dict[tuple[int, int, int], _Run]) -> None:
        """One pass over the table clears every plane that holds keys of runs
        gone; the live runs such a plane also holds are added back."""
        stale, self._stale = self._stale, 0
        self._table &= np.uint16(~stale & 0xFFFF)
        for identity, plane in list(self._plane_of.items()):
            if stale >> plane & 1:
                self._add(large[identity], plane)

    def _add(self, run: _Run, plane: int) -> None:
        bit = np.uint16(1 << plane)
        table, shift = self._table, self._shift
        for start in range(0, run.count, _MASK_CHUNK):  # bounded temporaries
            slots = run.prefixes(_KEY_BITS - int(shift), start, start + _MASK_CHUNK)
            # a slot repeated among the keys is written the same value each time
            table[slots] |= bit
        self._plane_of[run.identity] = plane

    def masks(self, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint16] | None:
        """Each key's mask of the planes that may hold it, or None without large runs."""
        return self._table[keys >> self._shift] if self._plane_of else None

    def bit_of(self, run: _Run) -> np.uint16 | None:
        """The bit of a large run's plane (the last ``sync`` must have seen it), or None for a small run."""
        if not _large(run.count):
            return None
        return np.uint16(1 << self._plane_of[run.identity])


class _KeyFilter:
    """Which band keys might be in some run, in this process: ``run_masks``
    for the runs of ``_FILTERED_RUN`` entries or more, and one bit per key
    prefix for the smaller runs.

    Both always hold every key of the runs they are for (a superset: a bit
    set for a key that has gone costs one search, never a verdict). Before
    any look-up, a transaction adds the runs it has not seen: those written
    by other processes. A run is known by (first serial, last serial,
    entries), which fixes its contents. The runs this process writes are
    taken in only once their transaction has committed (``taken_in``): a
    batch's new run with its keys, and a merged run with none but its fresh
    ones when its parts brought the rest in already. (Adding merged runs again
    was 8% of the store's time at 2 M posts, since each key is merged again
    about log2(posts / batch) times.) The bits are rebuilt from the live
    small runs when they outgrow them, and after a quarter as many keys were
    added as there are bits (so bits of purged posts do not pile up).
    Without them, every key of a novel post is searched for in every run;
    with ~8 bits per entry, about 88% of those searches are skipped.

    A 10 M-post index keeps about fourteen runs of millions of entries, and a
    copy's keys are in one of them: with one filter for all runs, each of its
    keys was searched for in every large run, a few cache misses each, and
    those searches grew to the largest part of a batch. The large runs are
    also most of the keys: had the bits held them too, they would have taken
    128 MB from about 6 M posts on, and rebuilding them took a second when a
    process opened such an index.
    """

    def __init__(self) -> None:
        self._bits = _Bits(0)
        self._empty = True
        self._seen: set[tuple[int, int, int]] = set()  # small runs whose keys are in the bits
        self._added = 0
        self.run_masks = _RunMasks()

    def sync(self, runs: list[_Run]) -> None:
        self.run_masks.sync(runs)
        small = [run for run in runs if not _large(run.count)]
        live = sum(run.count for run in small)
        capacity = self._bits.capacity
        outgrown = live * 8 > capacity and capacity < 1 << _MAX_FILTER_BITS
        # Bits of purged posts stay set: once a quarter as many keys were added
        # as there are bits, at most about a third of the bits are set, so rebuild.
        if self._empty or outgrown or self._added > capacity // 4:
            self._rebuild(small, live)
            return
        for run in small:
            if run.identity not in self._seen:
                self._add_run(run)
                self._seen.add(run.identity)

    def _rebuild(self, small: list[_Run], live: int) -> None:
        self._bits = _Bits(live)
        self._empty = False
        self._seen = {run.identity for run in small}
        for run in small:
            self._add_run(run)
        self._added = 0  # counts the keys added since: at the size cap, the live ones can exceed the bits

    def taken_in(self, new_runs: list[_NewRun]) -> None:
        """Runs that a committed transaction of this process wrote (a batch's,
        or the merge thread's). A small one's keys are added, or only its
        fresh ones when the bits hold the keys of every run it was merged
        from; a large one is the run masks' at the next sync."""
        for run, parts, fresh in new_runs:
            if _large(run.count):
                continue
            if not all(part in self._seen for part in parts):
                self._add_run(run)  # a part was another process's, or a large run
            elif fresh is not None:
                self._bits.add((fresh >> self._bits.shift).astype(np.uint32))
                self._added += len(fresh)
            self._seen.add(run.identity)

    def _add_run(self, run: _Run) -> None:
        self._bits.add(run.prefixes(self._bits.width))
        self._added += run.count

    def might_hold(self, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
        """Indexes of the keys that may be in a small run."""
        return self._bits.might_hold(keys)


class _Batch:
    """One batch inside one write transaction (buffers on: runs are read in place)."""

    def __init__(self, store: LMDBStore, txn: lmdb.Transaction, settings: IndexSettings) -> None:
        self.store = store
        self.txn = txn
        self.settings = settings
        self.cache = store._cache
        # runs written here, for the key filter once the transaction commits (_KeyFilter.taken_in)
        self.new_runs: list[_NewRun] = []
        # the runs as judging read them, once the key filter is in step with them, then this batch's own
        self.read: list[_Run] | None = None
        # (serial key, record) of posts recorded and not yet written: written in one call (``write_posts``)
        self.unwritten: list[tuple[bytes, bytes]] = []
        self.merge_wanted = False  # a merge too large for this transaction is due (see compact)
        # the band keys of the posts this batch recorded, for ``compact`` to write (``_pending_run``)
        self.pending: _Run | None = None
        self.written: dict[bytes, _Run] = {}  # the runs this batch wrote, by db key

    # -- reading ---------------------------------------------------------------
    def runs(self) -> list[_Run]:
        """The runs, oldest first; their arrays are valid until the next write."""
        return self.store._run_cache.listed(self.txn, self.store._runs)

    def first_live_serial(self, next_serial: int) -> int:
        cursor = self.txn.cursor(self.store._posts)
        return _U64.unpack(cursor.key())[0] if cursor.first() else next_serial

    def members(
        self, queries: npt.NDArray[np.uint64], first_live: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(query index, serial) of each hit, by query, newest first: for each
        query, its newest live serials, at most ``max_candidates_per_band``."""
        nothing = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        if len(queries) == 0:
            return nothing
        hit_queries: list[npt.NDArray[np.int64]] = []
        hit_serials: list[npt.NDArray[np.int64]] = []
        runs = self.runs()
        key_filter = self.store._key_filter
        key_filter.sync(runs)
        self.read = runs
        # most keys of a novel post are in no run at all
        maybe = key_filter.might_hold(queries)  # in a small run
        maybe_queries = queries[maybe]
        masks = key_filter.run_masks.masks(queries)  # in which large runs
        limit = self.settings.max_candidates_per_band
        for run in runs:
            if run.last < first_live or run.count == 0:
                continue
            bit = key_filter.run_masks.bit_of(run)
            if bit is None:
                passed, searched = maybe, maybe_queries
            else:
                assert masks is not None
                passed = np.flatnonzero(masks & bit)
                searched = queries[passed]
            if len(passed) == 0:
                continue
            hits, low, high = run.find(searched)
            if len(hits) == 0:
                continue
            hits = passed[hits]
            counts = np.minimum(high - low, limit)
            # the last ``counts`` entries of each key's range: its newest, since
            # equal keys sit in serial order within a run
            ends = np.cumsum(counts)
            positions = np.repeat(high - ends, counts) + np.arange(int(ends[-1]))
            serials = run.serials(positions)
            live = serials >= first_live
            hit_queries.append(np.repeat(hits, counts)[live])
            hit_serials.append(serials[live])
        if not hit_queries:
            return nothing
        query_of = np.concatenate(hit_queries)
        serial_of = np.concatenate(hit_serials)
        order = np.lexsort((-serial_of, query_of))  # by query, newest first
        query_of, serial_of = query_of[order], serial_of[order]
        if len(hit_queries) == 1:  # hits of one run: at most ``limit`` a query already
            return query_of, serial_of
        keep = _rank_in_group(query_of) < limit
        return query_of[keep], serial_of[keep]

    def get_post(self, serial: int) -> bytes | memoryview | None:  # for PostCache, which decodes it at once
        if self.unwritten:  # a post recorded in this batch and no longer in the cache (a batch of thousands)
            self.write_posts()
        return self.txn.get(_U64.pack(serial), db=self.store._posts)

    def write_posts(self) -> None:
        """Write the records of the posts judging recorded, in serial order at the end of the table."""
        with self.txn.cursor(self.store._posts) as cursor:
            cursor.putmulti(self.unwritten, append=True)
        self.unwritten.clear()

    # -- judging -----------------------------------------------------------------
    def judge(
        self, sketches: Sequence[Sketch], clock: float, next_serial: int
    ) -> tuple[list[Match | None], float, int, list[int]]:
        """Judge in order; returns (matches, clock, next serial, indexes of the recorded sketches).

        Band keys are looked up for the whole batch at once: in the runs, and
        among the batch's own earlier posts. Only the posts that share a key
        with something are judged one by one.
        """
        settings = self.settings
        ttl = settings.ttl_seconds
        threshold = settings.jaccard_threshold
        first_live = self.first_live_serial(next_serial)
        count = len(sketches)
        lengths = np.fromiter((len(sketch.band_keys) for sketch in sketches), dtype=np.int64, count=count)
        every = _short_keys(np.concatenate([sketch.band_keys for sketch in sketches])) if count else _NO_KEYS
        owner = np.repeat(np.arange(count), lengths)
        queries, inverse = np.unique(every, return_inverse=True)
        hit_query, hit_serial = self.members(queries, first_live)
        per_query = np.bincount(hit_query, minlength=len(queries))
        first_hit = np.cumsum(per_query) - per_query
        stored = _stored_sharers(hit_serial, per_query, first_hit, inverse, owner)
        # A sketch looks for posts recorded earlier in this batch only under the
        # keys an earlier sketch holds too, and files itself only under the keys
        # a later sketch holds too. Small batches mostly share no key at all.
        if len(queries) == len(every):
            lookup_keys = filed_keys = []
            lookup_ends = filed_ends = [0] * (count + 1)
        else:
            first_holder = np.full(len(queries), count, dtype=np.int64)
            last_holder = np.full(len(queries), -1, dtype=np.int64)
            np.minimum.at(first_holder, inverse, owner)
            np.maximum.at(last_holder, inverse, owner)
            looked_up = np.flatnonzero(owner > first_holder[inverse])
            lookup_keys = inverse[looked_up].tolist()
            lookup_ends = [0, *np.cumsum(np.bincount(owner[looked_up], minlength=count)).tolist()]
            filed = np.flatnonzero(owner < last_holder[inverse])
            filed_keys = inverse[filed].tolist()
            filed_ends = [0, *np.cumsum(np.bincount(owner[filed], minlength=count)).tolist()]
        # repeated key (its index in ``queries``) -> serials of the batch's
        # recorded sketches under it, oldest first; like the runs, it holds
        # recorded posts only, so a campaign's thousand copies in one batch
        # are checked against its one original
        recorded_under: list[list[int] | None] = [None] * len(queries)
        limit = settings.max_candidates_per_band
        # A key offers a post its newest ``limit`` recorded posts, wherever
        # the batch boundaries fall: under a key that holds recorded posts of
        # this batch, the stored ones fill only what is left, oldest dropped
        # first. A key's stored hits are hit_serials[hit_starts[q]:][:hit_counts[q]], newest first.
        hit_counts = per_query.tolist()
        hit_starts = first_hit.tolist()
        hit_serials = hit_serial.tolist()
        results: list[Match | None] = []
        recorded: list[int] = []
        unwritten = self.unwritten
        pack_uris = self.store._pack_uris
        for index, sketch in enumerate(sketches):
            clock = max(clock, sketch.timestamp)
            best: Match | None = None
            own: CachedPost | None = None
            candidates = stored.get(index)
            if recorded and lookup_ends[index] < lookup_ends[index + 1]:
                in_batch: dict[int, int] = {}
                crowded_out: dict[int, int] = {}  # stored serial: keys it no longer counts under
                for query in lookup_keys[lookup_ends[index] : lookup_ends[index + 1]]:
                    under = recorded_under[query]
                    if under is None:
                        continue
                    for serial in under:
                        in_batch[serial] = in_batch.get(serial, 0) + 1
                    crowded = len(under) + hit_counts[query] - limit
                    if crowded > 0:
                        end = hit_starts[query] + hit_counts[query]
                        for serial in hit_serials[end - crowded : end]:
                            crowded_out[serial] = crowded_out.get(serial, 0) + 1
                if in_batch:
                    candidates = _with_batch_sharers(candidates, in_batch, crowded_out)
            if candidates is not None or sketch.refers_to is not None:
                horizon = clock - ttl if ttl > 0 else float("-inf")
                serials = candidates[0] if candidates is not None else []
                if sketch.refers_to is not None:
                    newest_first = sorted(serials, reverse=True)
                    results.append(referenced(self, self.cache, newest_first, sketch.refers_to, horizon))
                    continue
                own = CachedPost.of(sketch)
                best = best_match(self, self.cache, serials[:_MAX_VERIFIED], sketch, own, horizon, threshold)
            if best is None:
                if own is None:
                    own = CachedPost.of(sketch)
                self.cache.put(next_serial, own)
                for query in filed_keys[filed_ends[index] : filed_ends[index + 1]]:
                    under = recorded_under[query]
                    if under is None:
                        recorded_under[query] = [next_serial]
                    else:
                        under.append(next_serial)
                        if len(under) > limit:  # like the runs' look-ups: the newest ``limit`` a key
                            del under[0]
                record = _encode_record(sketch.timestamp, sketch.post_id, own.words, pack_uris)
                unwritten.append((_U64.pack(next_serial), record))
                next_serial += 1
                recorded.append(index)
            results.append(best)
        if unwritten:
            self.write_posts()
        return results, clock, next_serial, recorded

    # -- writing -------------------------------------------------------------------
    def append_run(self, sketches: Sequence[Sketch], recorded: list[int], first_serial: int) -> None:
        """Keep the band keys of the batch's recorded posts for ``compact``, which writes them."""
        if not recorded:
            return
        keys = [sketches[index].band_keys for index in recorded]
        offsets = np.repeat(np.arange(len(recorded), dtype=np.uint32), [len(k) for k in keys])
        self.pending = _pending_run(_short_keys(np.concatenate(keys)), offsets, first_serial)

    def purge(self, cutoff: float, limit: int) -> None:
        """Delete up to ``limit`` posts from the front while they have expired."""
        cursor = self.txn.cursor(self.store._posts)
        removed = 0
        if not cursor.first():
            return
        while removed < limit:
            if _TIMESTAMP.unpack_from(cursor.value())[0] > cutoff:
                break
            removed += 1
            if not cursor.delete() or not cursor.key():
                break

    def compact(self, first_live: int) -> None:
        """Write the batch's run; delete runs whose posts are all purged; merge
        the newest runs while they are of similar size."""
        txn, db = self.txn, self.store._runs
        sizes: list[tuple[bytes, int]] = []  # (db key, entries)
        # Only the headers, as judging read them: reading a run's value again
        # costs a touch of each of its pages (py-lmdb preloads values), 5% of
        # a batch at 7 M posts.
        if self.read is not None:  # only their headers: their arrays may be stale after this batch's writes
            headers = [(run.db_key, run.last, run.count) for run in self.read]
        else:
            headers = [(run.db_key, run.last, run.count) for run in self.store._run_cache.listed(txn, db)]
        for db_key, last, count in headers:  # read all before the first delete moves anything
            if last < first_live:
                txn.delete(db_key, db=db)
            else:
                sizes.append((db_key, count))
        pending = self.pending
        if pending is not None and pending.last >= first_live:
            written, replaced = self._write_pending(pending, sizes[-1] if sizes else None, first_live)
            if replaced:
                sizes[-1] = written
            else:
                sizes.append(written)
        while len(sizes) >= 2:
            (older, older_size), (newer, newer_size) = sizes[-2], sizes[-1]
            if not _merged_inline(older_size, newer_size):
                # too large for a batch: the merge thread's, once this batch has committed
                self.merge_wanted |= _mergeable(older_size, newer_size)
                break
            merged = self._merge(older, newer, first_live)
            sizes[-2:] = [merged] if merged is not None else []

    def _write_pending(
        self, pending: _Run, newest: tuple[bytes, int] | None, first_live: int
    ) -> tuple[tuple[bytes, int], bool]:
        """Write the batch's run, merged at once with the newest run (db key,
        entries) when ``compact`` would merge the two: the same runs as
        writing it alone and then merging, without encoding, writing and
        reading it back in between (45 k of the 2.3 M instructions a
        transaction of a dozen posts took). Returns the run's (db key,
        entries) and whether it took the newest's place."""
        txn, db = self.txn, self.store._runs
        parts = [pending]
        if newest is not None:
            newest_key, newest_size = newest
            if _merged_inline(newest_size, pending.count):
                older = self._run(newest_key)
                if _one_run_spans(older, pending):
                    parts.insert(0, older)
        entries = _merge_entries(parts, first_live)  # copies, made before a write moves the newest's value
        if len(parts) == 2:
            txn.delete(newest_key, db=db)
        run = self._put_entries(entries)
        # for the key filter: the batch's keys are fresh, the newest run's it may hold already
        fresh = np.sort(pending.keys()) if len(parts) == 2 else run.keys()  # alone, the run is its keys sorted
        self.new_runs.append((run, [part.identity for part in parts[:-1]], fresh))
        return (run.db_key, run.count), len(parts) == 2

    def _merge(self, older: bytes, newer: bytes, first_live: int) -> tuple[bytes, int] | None:
        txn, db = self.txn, self.store._runs
        runs = [self._run(db_key) for db_key in (older, newer)]
        # read before the first write moves them
        if _one_run_spans(*runs):
            groups = [_merge_entries(runs, first_live)]
        else:  # offsets must fit 32 bits: each is rewritten alone, without its purged entries
            groups = [_merge_entries([run], first_live) for run in runs]
        txn.delete(older, db=db)
        txn.delete(newer, db=db)
        written = []
        for entries in groups:
            if len(entries[0]):
                run = self._put_entries(entries)
                # made of entries of other runs: no fresh keys
                self.new_runs.append((run, [part.identity for part in runs], None))
                written.append((run.db_key, run.count))
        return written[0] if len(groups) == 1 and written else None

    def _run(self, db_key: bytes) -> _Run:
        """The run under ``db_key``: as this batch or the batch before wrote
        it (decoded, its keys sorted), else decoded from the map."""
        run = self.written.get(db_key) or self.store._run_cache.get(db_key)
        if run is not None and run.owned:
            return run
        return _decode_run(db_key, self.txn.get(db_key, db=self.store._runs))

    def _put_entries(self, entries: tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint32], int]) -> _Run:
        """Write a run of (keys, offsets, base); decoded from its own buffer, so valid after the transaction."""
        value, whole = _encode_sorted(*entries)
        run = _decode_run(_put_run(self.txn, self.store._runs, value), value, owned=True)
        run.whole = whole
        self.written[run.db_key] = run
        return run


def _release_freed_memory() -> None:
    """Hand the pages that a large merge freed back to the system.

    glibc gives each thread that allocates a heap (arena) of its own and
    keeps what is freed there for reuse: the merge thread's arrays, hundreds
    of MB for runs of millions of entries, stayed resident between merges
    (a 3 M-post replay held 442 MB against 227 MB with one arena).
    ``malloc_trim`` returns the free pages of every arena; elsewhere than
    glibc this does nothing.
    """
    if not _malloc_trim:
        import ctypes

        try:
            _malloc_trim.append(ctypes.CDLL(None).malloc_trim)
        except (OSError, AttributeError):
            _malloc_trim.append(lambda pad: 0)
    _malloc_trim[0](0)


_malloc_trim: list[Callable[[int], int]] = []  # loaded by the first large merge


class _MapGuard:
    """Keeps this process's read transactions and the map's growth apart.

    LMDB lets a process resize its map only while no transaction of that
    process is open (py-lmdb also invalidates the open ones). Write
    transactions are kept apart by the store's lock; read transactions,
    such as the merge thread's, by this: growth waits for the open ones
    to end, and new ones wait for growth to end.
    """

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._readers = 0
        self._growing = False

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._condition:
            while self._growing:
                self._condition.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._condition:
                self._readers -= 1
                self._condition.notify_all()

    @contextmanager
    def growing(self) -> Iterator[None]:
        with self._condition:
            self._growing = True
            while self._readers:
                self._condition.wait()
        try:
            yield
        finally:
            with self._condition:
                self._growing = False
                self._condition.notify_all()


class _Merger:
    """The store's merge thread: merges of runs too large for a batch's transaction.

    A merge reads its two runs in a read transaction, builds the merged run
    outside any transaction, then swaps it in with a short write transaction
    of its own: two deletes and one put, if both runs are still there as they
    were read (a batch, here or in another process, may have merged or dropped
    them meanwhile; then the work is dropped and the next plan starts over).
    Merging never changes a verdict: look-ups take each key's newest entries
    across all runs, whatever their layout. A crash loses at most the merge
    under way, never a post. The thread starts with the first merge it is
    woken for; an error it meets is raised by the store's next batch.
    """

    def __init__(self, merge_step: Callable[[], bool]) -> None:
        self._merge_step = merge_step
        self._condition = threading.Condition()
        self._wanted = False
        self._busy = False
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def wake(self) -> None:
        with self._condition:
            if self._stopping or self.error is not None:
                return
            self._wanted = True
            self._condition.notify_all()
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="streamfilter-lmdb-merge", daemon=True)
                self._thread.start()

    def settle(self) -> None:
        """Wait until no merge is wanted or under way."""
        with self._condition:
            while (self._wanted or self._busy) and self._thread is not None:
                self._condition.wait()

    def stop(self) -> None:
        """Stop after the merge under way, if any; merges still due wait for a later batch."""
        with self._condition:
            self._stopping = True
            self._condition.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()
        with self._condition:
            self._thread = None
            self._stopping = self._wanted = False

    def _loop(self) -> None:
        while True:
            with self._condition:
                while not self._wanted and not self._stopping:
                    self._condition.wait()
                if self._stopping:
                    self._busy = False
                    self._condition.notify_all()
                    return
                self._wanted = False
                self._busy = True
            try:
                while not self._stopping and self._merge_step():
                    pass
            except BaseException as exc:  # raised by the store's next batch
                with self._condition:
                    self.error = exc
                    self._busy = self._wanted = False
                    self._thread = None
                    self._condition.notify_all()
                return
            with self._condition:
                self._busy = False
                self._condition.notify_all()


class LMDBStore:
    """A band store in an LMDB directory; the directory is created if needed.

    ``map_size`` is only the starting size: the map doubles whenever it fills.
    ``durable=False`` skips the fsync at each commit; a killed process still
    loses nothing, but a power cut may lose the last few batches.
    """

    def __init__(self, path: str | os.PathLike[str], *, map_size: int = 64 << 20, durable: bool = True) -> None:
        self.path = Path(path)
        self._initial_map_size = map_size
        self._durable = durable
        self._env: lmdb.Environment | None = None
        self._settings: IndexSettings | None = None
        self._lock = threading.Lock()
        self._cache = PostCache()
        self._use_format(pack_uris=True)  # until open() finds a format-6 index
        self._key_filter = _KeyFilter()
        self._merger = _Merger(self._merge_step)
        self._map_guard = _MapGuard()
        self._run_cache = _RunCache()

    # -- opening -------------------------------------------------------------
    def open(self, settings: IndexSettings) -> None:
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            env = lmdb.open(
                str(self.path),
                map_size=self._initial_map_size,
                max_dbs=4,
                subdir=True,
                sync=self._durable,
                # Without metasync a power cut may undo the last commit, but
                # never breaks the index; sync stays on, as NOSYNC could.
                metasync=False,
                writemap=False,
                readahead=False,
                lock=True,
            )
        except (OSError, lmdb.Error) as exc:
            raise _map_error(exc, f"cannot open LMDB index at {self.path}", self.path) from exc
        self._env = env
        # A process killed inside a read transaction (the merge thread's) leaves
        # its reader slot behind, and LMDB keeps every page that reader could
        # see until the slot is cleared: the file would grow after each kill.
        env.reader_check()
        self._cache.shingle_size = settings.shingle_size
        self._page_size = int(env.stat()["psize"])
        try:
            self._meta = env.open_db(b"meta")
            self._pin(settings)  # before anything else is created in an index of another format
            self._posts = env.open_db(b"posts")
            self._runs = env.open_db(b"runs")
        except BaseException:
            self.close()
            raise
        self._settings = settings

    def _use_format(self, pack_uris: bool) -> None:
        """Write and read post records as format 7 (Bluesky URIs packed) or format 6 (all as text)."""
        self._pack_uris = pack_uris
        self._cache.decode = functools.partial(_decode_record, packed_uris=pack_uris)

    def _pin(self, settings: IndexSettings) -> None:
        requested = dict(settings.fingerprint)

        def pin(txn: lmdb.Transaction) -> None:
            stored_format = txn.get(_FORMAT_KEY, db=self._meta)
            if stored_format is not None and bytes(stored_format) == _FORMAT_6:
                self._use_format(pack_uris=False)
            elif stored_format is not None and stored_format != _FORMAT:
                raise StoreError(
                    f"{self.path} holds an index of format {bytes(stored_format).decode(errors='replace')}, "
                    f"this streamfilter reads {_FORMAT_6.decode()} and {_FORMAT.decode()}: "
                    "it cannot be converted in place; replay into a new --db directory"
                )
            stored = txn.get(_CONFIG_KEY, db=self._meta)
            if stored is None:
                if stored_format is None:
                    txn.put(_FORMAT_KEY, _FORMAT, db=self._meta)
                txn.put(_CONFIG_KEY, json.dumps(requested, sort_keys=True).encode(), db=self._meta)
            else:
                check_fingerprint(str(self.path), json.loads(bytes(stored)), requested)

        self._write(pin)

    @staticmethod
    def read_fingerprint(path: str | os.PathLike[str]) -> dict[str, int | str] | None:
        """The pinned settings of the index at ``path``, or None when there is none yet."""
        if not (Path(path) / "data.mdb").exists():
            return None
        try:
            env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=4, subdir=True)
        except lmdb.Error as exc:
            raise _map_error(exc, f"cannot read LMDB index at {path}") from exc
        try:
            meta = env.open_db(b"meta", create=False)
            with env.begin(db=meta) as txn:
                stored = txn.get(_CONFIG_KEY)
        except lmdb.Error:
            return None
        finally:
            env.close()
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
            raise StoreError("the LMDB store is not open")
        self._raise_merge_error()

        def apply(txn: lmdb.Transaction) -> tuple[list[Match | None], list[_NewRun], bool]:
            clock_bytes = txn.get(_CLOCK_KEY, db=self._meta)
            clock = _CLOCK.unpack(clock_bytes)[0] if clock_bytes else float("-inf")
            serial_bytes = txn.get(_SERIAL_KEY, db=self._meta)
            first_serial = _U64.unpack(serial_bytes)[0] if serial_bytes else 1
            batch = _Batch(self, txn, settings)
            results, clock, next_serial, recorded = batch.judge(sketches, clock, first_serial)
            batch.append_run(sketches, recorded, first_serial)
            if settings.ttl_seconds > 0 and math.isfinite(clock):
                batch.purge(clock - settings.ttl_seconds, settings.purge_limit)
            batch.compact(batch.first_live_serial(next_serial))
            txn.put(_CLOCK_KEY, _CLOCK.pack(clock), db=self._meta)
            txn.put(_SERIAL_KEY, _U64.pack(next_serial), db=self._meta)
            if progress:
                stored = txn.get(_PROGRESS_KEY, db=self._meta)
                merged = dict(json.loads(bytes(stored))) if stored else {}
                merged.update(progress)
                txn.put(_PROGRESS_KEY, json.dumps(merged, sort_keys=True).encode(), db=self._meta)
            if before_commit is not None:
                before_commit(results)
            return results, batch.new_runs, batch.merge_wanted

        done: tuple[list[Match | None], list[_NewRun], bool] = self._write(
            apply, buffers=True, committed=lambda done: self._committed(done[1])
        )
        if done[2]:
            self._merger.wake()
        return done[0]

    def _committed(self, new_runs: list[_NewRun]) -> None:
        """After a batch's transaction: its runs go to the key filter, and the
        small ones to the run cache (see _RunCache.adopt)."""
        self._key_filter.taken_in(new_runs)
        self._run_cache.adopt(run for run, _, _ in new_runs if run.count <= _INLINE_MERGED_ENTRIES)

    def _raise_merge_error(self) -> None:
        error = self._merger.error
        if error is None:
            return
        self._merger.error = None
        if isinstance(error, StoreError):
            raise error
        raise StoreError(f"merging runs of the LMDB index at {self.path} failed: {error!r}") from error

    def _merge_step(self) -> bool:
        """One merge for the merge thread (see _Merger); False when none is due."""
        with self._reading(buffers=True) as txn:
            cursor = txn.cursor(self._posts)
            if not cursor.first():
                return False  # every post is purged: the next batch drops the runs
            first_live = _U64.unpack(cursor.key())[0]
            runs = [run for run in self._run_cache.listed(txn, self._runs) if run.last >= first_live]
            at = _merge_plan(runs)
            if at is None:
                return False
            parts = [(run.db_key, run.identity) for run in runs[at : at + 2]]
            entries = _merge_entries(runs[at : at + 2], first_live)
        value = _encode_run(*entries)
        merged = _decode_run(b"", value)

        def swap(txn: lmdb.Transaction) -> bool:
            for part_key, identity in parts:
                stored = txn.get(part_key, db=self._runs)
                if stored is None or _RUN_HEADER.unpack_from(stored)[:3] != identity:
                    return False  # merged or dropped meanwhile
            for part_key, _ in parts:
                txn.delete(part_key, db=self._runs)
            _put_run(txn, self._runs, value)
            return True

        def committed(swapped: bool) -> None:
            if swapped:
                self._key_filter.taken_in([(merged, [identity for _, identity in parts], None)])

        self._write(swap, buffers=True, committed=committed)
        if merged.count >= _FILTERED_RUN:
            _release_freed_memory()
        return True

    def _write(self, body, *, buffers: bool = False, committed=None):  # type: ignore[no-untyped-def]
        """``body(txn)`` in a write transaction, run again after the map grows;
        ``committed(result)`` runs once it has committed, still under the lock."""
        env = self._require_env()
        with self._lock:
            # Grow ahead of need: a map that fills at commit time forces the
            # batch to run again, and its output would be written twice.
            info = env.info()
            if (info["last_pgno"] + 1) * self._page_size > 0.7 * info["map_size"]:
                self._grow(env, info["map_size"] * 2)
            while True:
                try:
                    with env.begin(None, None, True, buffers) as txn:  # type: ignore[call-overload]
                        result = body(txn)
                    break
                except BaseException as exc:
                    # Posts cached from an aborted transaction may never have
                    # existed: their serials can be reused by another writer.
                    self._cache.clear()
                    if isinstance(exc, lmdb.MapFullError):
                        self._grow(env, env.info()["map_size"] * 2)
                    elif isinstance(exc, lmdb.MapResizedError):
                        self._remap(env, 0)  # another process grew the map: adopt its size
                    elif isinstance(exc, lmdb.Error | OSError) and not isinstance(exc, BrokenPipeError):
                        # (a closed stdout, from the caller's before_commit, is not the index's failure)
                        raise _map_error(exc, f"LMDB index at {self.path} failed", self.path) from exc
                    else:
                        raise
            if committed is not None:
                committed(result)
            return result

    def _grow(self, env: lmdb.Environment, size: int) -> None:
        try:
            self._remap(env, size)
        except lmdb.Error as exc:
            raise _map_error(exc, f"cannot grow the LMDB map of {self.path} to {size} bytes", self.path) from exc

    def _remap(self, env: lmdb.Environment, size: int) -> None:
        """Map the file anew at ``size`` (0: the size another process set); what was read before is gone."""
        with self._map_guard.growing():
            self._run_cache.clear()
            env.set_mapsize(size)

    @contextmanager
    def _reading(self, *, buffers: bool = False) -> Iterator[lmdb.Transaction]:
        """A read transaction, which the map's growth waits for (see _MapGuard)."""
        env = self._require_env()
        with self._map_guard.reading(), env.begin(None, None, False, buffers) as txn:  # type: ignore[call-overload]
            yield txn

    # -- facts ---------------------------------------------------------------
    def progress(self) -> dict[str, int]:
        with self._reading() as txn:
            stored = txn.get(_PROGRESS_KEY, db=self._meta)
        return {} if stored is None else {str(k): int(v) for k, v in json.loads(bytes(stored)).items()}

    def post_count(self) -> int:
        with self._reading() as txn:
            return int(txn.stat(self._posts)["entries"])

    def clock(self) -> float:
        """The newest event time the index has seen (-inf for none yet)."""
        with self._reading() as txn:
            stored = txn.get(_CLOCK_KEY, db=self._meta)
        return _CLOCK.unpack(stored)[0] if stored else -math.inf

    def map_size(self) -> int:
        return int(self._require_env().info()["map_size"])

    def _require_env(self) -> lmdb.Environment:
        if self._env is None:
            raise StoreError("the LMDB store is not open")
        return self._env

    def close(self) -> None:
        self._merger.stop()
        if self._env is not None:
            with self._lock:
                self._run_cache.clear()
                self._env.close()
                self._env = None


def _free_bytes(path: Path) -> int | None:
    try:
        stats = os.statvfs(path if path.exists() else path.parent)
    except OSError:
        return None
    return stats.f_bavail * stats.f_frsize


def _map_error(exc: BaseException, context: str, path: Path | None = None) -> StoreError:
    code = getattr(exc, "errno", None)
    message = str(exc).strip() or type(exc).__name__
    free = _free_bytes(path) if path is not None else None
    # LMDB reports a failed write of its pages as EIO on some filesystems
    # (tmpfs among them), so a near-empty disk is read as "full" too.
    if (
        code in (errno.ENOSPC, errno.EDQUOT)
        or "No space left" in message
        or (("Input/output error" in message or code == errno.EIO) and free is not None and free < (8 << 20))
    ):
        where = "" if free is None else f", {free} bytes free"
        return StoreFullError(
            f"{context}: the disk is full ({message}{where}); "
            "committed data is intact: free space, then rerun with --resume"
        )
    return StoreError(f"{context}: {message}")
