"""Runs: the log-structured band index of the LMDB store, and how a run is searched.

A run is one value in the ``runs`` sub-database: its first and last serial
and its entry count, then that many sorted 40-bit band keys (the low 32 bits
stored, the top ones implied by the run's fence) and as many serial offsets
from the first serial, 2, 3 or 4 bytes each as the run's span of serials
needs. A run's key is its first serial, then the id of the write transaction
that made it, so no key is ever used twice (see ``_caches.RunCache``).

Invariants the rest of the store relies on:

- within a run, entries are sorted by key, then by serial, so a key's newest
  entries are the last of its range;
- a run's contents are fixed by (first serial, last serial, entries), its
  ``identity``;
- a run's serials are less than 2**32 apart.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TypeVar

import lmdb
import numpy as np
import numpy.typing as npt

from ..._compiled import chosen, kernel

__all__ = [
    "KEY_BITS",
    "NO_KEYS",
    "RUN_HEADER",
    "Run",
    "decode_run",
    "encode_run",
    "encode_sorted",
    "key_order",
    "RUN_KEY",
    "SEARCHED_WHOLE",
    "put_run",
    "short_keys",
]

RUN_HEADER = struct.Struct("<QQQQ")  # first serial, last serial, entries, fence bits | offset bytes << 8
RUN_KEY = struct.Struct(">QQ")  # first serial, id of the write transaction that made the run
# Bits of a band key that the runs keep: the top 40 of its 64. A key that
# matches by chance only proposes a candidate, which verification rejects.
KEY_BITS = 40
NO_KEYS = np.zeros(0, dtype=np.uint64)
_NO_STORED = np.zeros(0, dtype=np.uint32)
# A run's fence splits its key space into 2**bits buckets: 2**8 (so that the
# 32 bits an entry stores, with its bucket, make the whole key), and in a run
# searched through its fence buckets of about this many entries each (half a
# byte of fence an entry), so a look-up searches one bucket, not the whole run.
_ENTRIES_PER_BUCKET = 8
_MIN_FENCE_BITS = KEY_BITS - 32
# each value of a key's top 8 bits, in place above the 32 a run stores
_TOP_BITS = np.arange(1 << _MIN_FENCE_BITS, dtype=np.uint64) << np.uint64(32)
# Runs with fewer entries are searched whole, their keys rebuilt once into one
# array of 8 bytes an entry; larger ones through the fence, in place in the
# map (docs/design/lmdb.md).
SEARCHED_WHOLE = 1 << 20


_ALL = slice(None)
_Offset = TypeVar("_Offset", np.int64, np.uint32)


@dataclass(slots=True)
class Run:
    """A run as read: its entries sorted by band key, then by serial.

    Keys are the top 40 bits of a post's 64-bit band keys. A run stores the
    low 32 bits of each; its fence, of 2**bits buckets (at least 2**8), holds
    the top ``bits``.
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
    # the fence the compiled search goes through, and its bits (``search_fence``)
    searched_through: tuple[npt.NDArray[np.uint32], int] | None = None

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
            return (self.whole[start:stop] >> np.uint64(KEY_BITS - width)).astype(np.uint32)
        low = self.stored[start:stop] >> np.uint32(KEY_BITS - width)  # the stored bits among them
        low |= np.repeat(np.arange(256, dtype=np.uint32) << np.uint32(width - 8), self._top_counts(start, stop))
        return low

    def tops(self) -> npt.NDArray[np.uint32]:
        """Where each of the 256 values of a key's top 8 bits starts, and the
        end (257 entries, from the fence): what the kernel's ``mark_run`` reads."""
        return np.ascontiguousarray(self.fence[:: 1 << (self.bits - _MIN_FENCE_BITS)])

    def _top_counts(self, start: int, stop: int) -> npt.NDArray[np.int64]:
        """How many of entries ``start`` to ``stop`` have each of the 256
        values of a key's top 8 bits, the bits above the 32 stored (the
        fence holds where each value starts)."""
        starts = self.fence[:: 1 << (self.bits - _MIN_FENCE_BITS)].astype(np.int64)
        bounded: npt.NDArray[np.int64] = np.clip(starts, start, max(start, stop))
        return np.diff(bounded)

    def search_fence(self) -> tuple[npt.NDArray[np.uint32], int]:
        """The fence the compiled search goes through, and its bits: buckets
        of about ``_ENTRIES_PER_BUCKET`` entries. A run searched whole is
        stored with a fence of 256 buckets only, thousands of entries each in
        a run of a million: a search's dozen steps through a bucket would
        each miss the cache. Such a run gets a finer fence, built from its
        keys the first time it is searched and kept with it (the run cache
        keeps the run), half a byte an entry in memory and none on disk."""
        if self.searched_through is None:
            bits = _fence_bits(self.count)
            if bits <= self.bits:
                self.searched_through = (self.fence, self.bits)
            else:
                fence = np.zeros((1 << bits) + 1, dtype=np.uint32)
                np.cumsum(np.bincount(self.prefixes(bits), minlength=1 << bits), out=fence[1:])
                self.searched_through = (fence, bits)
        return self.searched_through

    def _c_find(
        self, queries: npt.NDArray[np.uint64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """``_py_find``, in C: a binary search per query inside its fence
        bucket, where the run's keys are stored (a pending run's are not)."""
        if len(self.stored) != self.count:
            return self._py_find(queries)
        found = np.empty(len(queries), dtype=np.int64)
        first = np.empty_like(found)
        end = np.empty_like(found)
        fence, bits = self.search_fence()
        count = kernel.find_in_run(self.stored, fence, bits, queries, found, first, end)
        return found[:count], first[:count], end[:count]

    def _py_find(
        self, queries: npt.NDArray[np.uint64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(indexes of the queries found, the position of each one's first
        entry, and of the entry after its last).

        A small run is searched whole; in a large one, a binary search per
        query, run for all queries at once, inside the query's fence bucket:
        a few cache lines of the map per query, where a search of the whole
        run would touch a page per step."""
        if self.count < SEARCHED_WHOLE:
            if self.whole is None:
                self.whole = self.keys()
            whole = self.whole
            first = np.searchsorted(whole, queries, side="left")
            found = np.flatnonzero(whole[np.minimum(first, self.count - 1)] == queries) if self.count else first[:0]
            return found, first[found], np.searchsorted(whole, queries[found], side="right")
        bucket = (queries >> np.uint64(KEY_BITS - self.bits)).astype(np.int64)
        rest = queries.astype(np.uint32)  # the low 32 bits, as stored
        start = self.fence[bucket].astype(np.int64)
        stop = self.fence[bucket + 1].astype(np.int64)
        first = self._search(rest, start, stop.copy(), right=False)
        found = np.flatnonzero((first < stop) & (self.stored[np.minimum(first, self.count - 1)] == rest))
        end = self._search(rest[found], first[found] + 1, stop[found], right=True)
        return found, first[found], end

    find = chosen(_c_find, _py_find)

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


def short_keys(band_keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """The keys the runs keep: the top ``KEY_BITS`` of each band key."""
    return band_keys >> _SHORT_SHIFT


# a 0-d array, not a numpy scalar, which sends numpy down a slower path
_SHORT_SHIFT = np.array(64 - KEY_BITS, dtype=np.uint64)


def decode_run(db_key: bytes | memoryview, value: bytes | memoryview | None, *, owned: bool = False) -> Run:
    """A run from its value; ``owned`` when the value is not in the map (see Run.owned)."""
    assert value is not None
    first, last, count, flags = RUN_HEADER.unpack_from(value)
    bits, width = flags & 0xFF, flags >> 8
    at = RUN_HEADER.size
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
    return Run(bytes(db_key), first, last, count, stored, fence, bits, low, high, owned=owned)


def key_order(keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """The stable sort order of ``keys`` (fewer than 2**32 of them), as
    ``np.argsort(keys, kind="stable")`` gives it.

    For keys in no order, such as a batch's: numpy's stable sort of 64-bit
    values is a merge sort, which pays off where the keys are sorted runs
    already (a merge's), and its quicksort is several times faster on the
    rest. So the quicksort's order, then each run of equal keys put back in
    position order, with one sort of (rank of the key, position).
    """
    order = np.argsort(keys)
    ordered = keys[order]
    new_key = np.empty(len(keys), dtype=bool)
    new_key[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new_key[1:])
    if new_key.all():  # no key twice: no ties to put in order
        return order
    ranked = np.cumsum(new_key, dtype=np.int64) << 32 | order
    ranked.sort()
    return ranked & 0xFFFFFFFF


def encode_run(keys: npt.NDArray[np.uint64], offsets: npt.NDArray[np.uint32], base: int) -> memoryview:
    """The value of a run over these entries (see encode_sorted)."""
    return encode_sorted(keys, offsets, base)[0]


def encode_sorted(
    keys: npt.NDArray[np.uint64], offsets: npt.NDArray[np.uint32], base: int
) -> tuple[memoryview, npt.NDArray[np.uint64] | None]:
    """The value of a run over these entries, the serial of each being
    ``base`` plus its offset; sorts them by key, stably. Offsets take 2
    bytes an entry while the run spans fewer than 65,536 serials, 3 below
    2**24, else 4: the runs of a batch and their early merges need 2, the
    largest runs 3.

    Every part is written in place into the one buffer returned, and serials
    travel as 32-bit offsets: fresh memory is costly to fault in, and merges
    of millions of entries would otherwise allocate each part and join them.

    Also returns the sorted keys of a run that is searched whole (None for
    a larger one), so that the run written need not rebuild them.
    """
    count = len(keys)
    low, high = (int(offsets.min()), int(offsets.max())) if count else (0, 0)
    first, last, span = base + low, base + high, high - low
    width = 2 if span < 1 << 16 else 3 if span < 1 << 24 else 4
    # a run searched whole needs only the fence that holds its keys' top 8 bits (1 KB)
    bits = _fence_bits(count) if count >= SEARCHED_WHOLE else _MIN_FENCE_BITS  # half a byte of fence an entry
    shift = np.uint64(KEY_BITS - bits)
    fence_at = RUN_HEADER.size + 4 * count
    offsets_at = fence_at + 4 * ((1 << bits) + 1)
    value = np.empty(offsets_at + width * count, dtype=np.uint8)
    RUN_HEADER.pack_into(value, 0, first, last, count, bits | width << 8)  # type: ignore[arg-type]
    order = np.argsort(keys, kind="stable")
    # each key's low 32 bits (in a large run, a few of them are its bucket's too)
    low_words = np.ascontiguousarray(keys, dtype="<u8").view("<u4")[::2]
    np.take(low_words, order, out=value[RUN_HEADER.size : fence_at].view("<u4"))
    whole = np.take(keys, order) if count < SEARCHED_WHOLE else None
    fence = value[fence_at:offsets_at].view("<u4")
    fence[0] = 0
    if whole is not None:  # 256 buckets: where each starts in the sorted keys, at 30x a bincount's speed
        fence[1:-1] = np.searchsorted(whole, _TOP_BITS[1:])
        fence[-1] = count
    else:
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


def _fence_bits(count: int) -> int:
    """The bits of a fence of buckets of about ``_ENTRIES_PER_BUCKET`` of ``count`` entries."""
    return max(_MIN_FENCE_BITS, min(24, (count // _ENTRIES_PER_BUCKET).bit_length()))


def put_run(txn: lmdb.Transaction, db: lmdb._Database, value: memoryview) -> bytes:
    """Write a run under a key no other run has had or will have; returns the key."""
    db_key = RUN_KEY.pack(RUN_HEADER.unpack_from(value)[0], txn.id())
    txn.put(db_key, value, db=db)
    return db_key
