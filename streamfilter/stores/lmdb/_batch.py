"""One batch inside one LMDB write transaction: its look-ups and its run.

A batch looks its band keys up in every run at once (see ``_runs``) for the
one batch judge (``_judge``), writes the records of the posts it recorded,
and appends their band keys as one run, merged with the newest runs while
they are of similar size (``_merging``).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import lmdb
import numpy as np
import numpy.typing as npt

from ..._compiled import chosen, kernel
from ..._rules import OLDEST_PER_KEY, CachedPost
from ..._values import BandKeys
from .._base import IndexSettings, PostCache, by_query_newest_first, offered
from .._records import encode_record
from ._caches import KeyFilter, NewRun, RunCache
from ._merging import merge_entries, mergeable, merged_inline, one_run_spans, pending_run
from ._runs import Run, decode_run, encode_sorted, put_run, short_keys
from ._tuning import LMDBTuning

__all__ = ["Batch", "StoreParts", "Hits", "run_members_in_numpy"]

_NO_HITS = np.zeros(0, dtype=np.int64)

_U64 = struct.Struct(">Q")
_TIMESTAMP = struct.Struct("<d")  # the first field of a post record


@dataclass(frozen=True, slots=True)
class StoreParts:
    """What a batch uses of its store: the sub-databases and what the store keeps across batches."""

    posts: lmdb._Database
    runs: lmdb._Database
    cache: PostCache
    run_cache: RunCache
    key_filter: KeyFilter
    tuning: LMDBTuning
    hits: Hits


class Batch:
    """One batch inside one write transaction (buffers on: runs are read in place)."""

    def __init__(self, parts: StoreParts, txn: lmdb.Transaction, settings: IndexSettings) -> None:
        self.parts = parts
        self.txn = txn
        self.settings = settings
        self.cache = parts.cache
        # runs written here, for the key filter once the transaction commits (_KeyFilter.taken_in)
        self.new_runs: list[NewRun] = []
        # the runs as judging read them, once the key filter is in step with them, then this batch's own
        self.read: list[Run] | None = None
        self.merge_wanted = False  # a merge too large for this transaction is due (see compact)
        # the band keys of the posts this batch recorded, for ``compact`` to write (``_pending_run``)
        self.pending: Run | None = None
        self.written: dict[bytes, Run] = {}  # the runs this batch wrote, by db key
        # ``members``' live planes for (``read``, first live serial): the same
        # for every look-up of a group of one-record calls until it commits
        self._planes: tuple[list[Run], int, list[tuple[Run, int]]] | None = None

    # -- reading ---------------------------------------------------------------
    def runs(self) -> list[Run]:
        """The runs, oldest first; their arrays are valid until the next write."""
        return self.parts.run_cache.listed(self.txn, self.parts.runs)

    def first_live_serial(self, next_serial: int) -> int:
        cursor = self.txn.cursor(self.parts.posts)
        return _U64.unpack(cursor.key())[0] if cursor.first() else next_serial

    def members(
        self, queries: npt.NDArray[np.uint64], first_live: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(query index, serial) of each hit, by query, newest first: for each
        query, the live serials it offers (``_base.offered``)."""
        if len(queries) == 0:
            return (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        key_filter = self.parts.key_filter
        runs = self.read
        if runs is None:  # nothing is written before compact: a second look-up reads the same runs
            runs = self.runs()
            key_filter.sync(runs)
            self.read = runs
        # most keys of a novel post are in no run at all
        maybe = key_filter.might_hold(queries)  # in a small run
        masks = key_filter.run_masks.masks(queries)  # in which large runs
        if len(maybe) == 0 and (masks is None or not masks.any()):  # no run is searched for any
            return (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        return self._searched(self._live_planes(runs, first_live), queries, maybe, masks, first_live)

    def _live_planes(self, runs: list[Run], first_live: int) -> list[tuple[Run, int]]:
        """Each live run of ``runs``, and its plane's bit (0: a small run)."""
        if self._planes is not None and self._planes[0] is runs and self._planes[1] == first_live:
            return self._planes[2]
        run_masks = self.parts.key_filter.run_masks
        planes: list[tuple[Run, int]] = []
        for run in runs:
            if run.last >= first_live and run.count:
                bit = run_masks.bit_of(run)
                planes.append((run, 0 if bit is None else int(bit)))
        self._planes = (runs, first_live, planes)
        return planes

    def _c_searched(
        self,
        planes: Sequence[tuple[Run, int]],
        queries: npt.NDArray[np.uint64],
        maybe: npt.NDArray[np.int64],
        masks: npt.NDArray[np.uint16] | None,
        first_live: int,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """``_py_searched``, in C (``Hits.members``), where every run's keys are stored."""
        hits = self.parts.hits
        if not hits.searchable(planes):
            return self._py_searched(planes, queries, maybe, masks, first_live)
        return hits.members(planes, queries, maybe, masks, first_live, self.settings.max_candidates_per_band)

    def _py_searched(
        self,
        planes: Sequence[tuple[Run, int]],
        queries: npt.NDArray[np.uint64],
        maybe: npt.NDArray[np.int64],
        masks: npt.NDArray[np.uint16] | None,
        first_live: int,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """What the live runs offer each query (``members``): a small run
        (bit 0) is searched for the keys that ``maybe`` indexes, a large one
        for those whose mask has its plane's bit."""
        nothing = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        limit = self.settings.max_candidates_per_band
        hit_queries: list[npt.NDArray[np.int64]] = []
        hit_serials: list[npt.NDArray[np.int64]] = []
        for run, passed, searched in searches_of(planes, queries, maybe, masks):
            queries_of, serials_of = run_members_in_numpy(run, searched, passed, first_live, limit)
            if len(queries_of):
                hit_queries.append(queries_of)
                hit_serials.append(serials_of)
        if not hit_queries:
            return nothing
        query_of, serial_of = by_query_newest_first(np.concatenate(hit_queries), np.concatenate(hit_serials))
        if len(hit_queries) == 1:  # hits of one run: what each query offers already
            return query_of, serial_of
        keep = offered(query_of, limit)
        return query_of[keep], serial_of[keep]

    _searched = chosen(_c_searched, _py_searched)

    def get_post(self, serial: int) -> bytes | memoryview | None:  # for PostCache, which decodes it at once
        return self.txn.get(_U64.pack(serial), db=self.parts.posts)

    def record(self, keys: BandKeys, posts: Sequence[CachedPost], first_serial: int) -> None:
        """Write the records of the recorded posts, in serial order at the end
        of the table, and keep their band ``keys`` for ``compact``."""
        items = self._recorded_items(posts, first_serial)
        with self.txn.cursor(self.parts.posts) as cursor:
            cursor.putmulti(items, append=True)
        self.append_run(keys, first_serial)

    # -- writing -------------------------------------------------------------------

    def _c_recorded_items(self, posts: Sequence[CachedPost], first_serial: int) -> list[tuple[bytes, bytes]]:
        """``_py_recorded_items``, in one compiled call."""
        return kernel.recorded_items(list(posts), first_serial, self.cache.recent, encode_record)  # type: ignore[no-any-return]

    def _py_recorded_items(self, posts: Sequence[CachedPost], first_serial: int) -> list[tuple[bytes, bytes]]:
        """The (key, record) of each recorded post, serials from ``first_serial``,
        each kept among the recent posts."""
        for offset, post in enumerate(posts):
            self.cache.put(first_serial + offset, post)
        return [
            (_U64.pack(first_serial + offset), encode_record(post.timestamp, post.post_id, post.words))
            for offset, post in enumerate(posts)
        ]

    _recorded_items = chosen(_c_recorded_items, _py_recorded_items)

    def append_run(self, keys: BandKeys, first_serial: int) -> None:
        """Keep the band keys of the batch's recorded posts (end to end, and
        how many each has) for ``compact``, which writes them."""
        flat, counts = keys
        if not len(counts):
            return
        offsets = np.repeat(np.arange(len(counts), dtype=np.uint32), counts)
        self.pending = pending_run(short_keys(flat), offsets, first_serial)

    def purge(self, cutoff: float, limit: int) -> int:
        """Delete up to ``limit`` posts from the front while they have expired; how many were."""
        cursor = self.txn.cursor(self.parts.posts)
        removed = 0
        if not cursor.first():
            return 0
        while removed < limit:
            if _TIMESTAMP.unpack_from(cursor.value())[0] > cutoff:
                break
            removed += 1
            if not cursor.delete() or not cursor.key():
                break
        return removed

    def compact(self, first_live: int) -> None:
        """Write the batch's run; delete runs whose posts are all purged; merge
        the newest runs while they are of similar size."""
        txn, db = self.txn, self.parts.runs
        sizes: list[tuple[bytes, int]] = []  # (db key, entries)
        # Only the headers, as judging read them: reading a run's value again
        # costs a touch of each of its pages (py-lmdb preloads values).
        if self.read is not None:  # only their headers: their arrays may be stale after this batch's writes
            headers = [(run.db_key, run.last, run.count) for run in self.read]
        else:
            headers = [(run.db_key, run.last, run.count) for run in self.parts.run_cache.listed(txn, db)]
        for db_key, last, count in headers:  # read all before the first delete moves anything
            if last < first_live:
                txn.delete(db_key, db=db)
            else:
                sizes.append((db_key, count))
        pending = self.pending
        if pending is not None and pending.last >= first_live:
            if self._write_cascade(pending, sizes, first_live):
                return
            sizes.append(self._write_alone(pending, first_live))
        while len(sizes) >= 2:
            (older, older_size), (newer, newer_size) = sizes[-2], sizes[-1]
            if not merged_inline(older_size, newer_size, self.parts.tuning):
                # too large for a batch: the merge thread's, once this batch has committed
                self.merge_wanted |= mergeable(older_size, newer_size, self.parts.tuning)
                break
            merged = self._merge(older, newer, first_live)
            sizes[-2:] = [merged] if merged is not None else []

    def _write_cascade(self, pending: Run, sizes: list[tuple[bytes, int]], first_live: int) -> bool:
        """Write the batch's run merged at once with every newest run that
        writing it and then merging pairwise would take in (see compact): the
        same run, encoded once instead of once a step (a cascade of four
        merges encoded 60,000 entries for a run of 32,000). False, with
        nothing written, where it merges with none or the serials of the runs
        might not fit one run's offsets: compact then writes it alone and
        merges pair by pair."""
        tuning = self.parts.tuning
        group: list[Run] = []
        at, size = len(sizes), pending.count
        # Pairwise, each merge drops the purged entries, and the next test
        # takes the merged run's live ones. Purging drops the oldest serials,
        # and runs hold serials in order: only the oldest live run can hold
        # purged entries, and when it is merged, no older run is left to test.
        wanted = False
        while at:
            older_key, older_size = sizes[at - 1]
            if not merged_inline(older_size, size, tuning):
                wanted = mergeable(older_size, size, tuning)
                break
            group.insert(0, self._run(older_key))
            size += older_size
            at -= 1
        if not group or not one_run_spans(*group, pending):
            return False
        entries = merge_entries([*group, pending], first_live)  # copies, made before a write moves the runs
        for _ in group:
            self.txn.delete(sizes.pop()[0], db=self.parts.runs)
        run = self._put_entries(entries)
        # for the key filter: the batch's keys are fresh, the merged runs' it may hold already
        self.new_runs.append((run, [part.identity for part in group], pending.keys()))  # sorted (pending_run)
        self.merge_wanted |= wanted
        return True

    def _write_alone(self, pending: Run, first_live: int) -> tuple[bytes, int]:
        """Write the batch's run by itself; its (db key, entries)."""
        run = self._put_entries(merge_entries([pending], first_live))
        self.new_runs.append((run, [], run.keys()))  # for the key filter: its keys are fresh, and sorted
        return run.db_key, run.count

    def _merge(self, older: bytes, newer: bytes, first_live: int) -> tuple[bytes, int] | None:
        txn, db = self.txn, self.parts.runs
        runs = [self._run(db_key) for db_key in (older, newer)]
        # read before the first write moves them
        if one_run_spans(*runs):
            groups = [merge_entries(runs, first_live)]
        else:  # offsets must fit 32 bits: each is rewritten alone, without its purged entries
            groups = [merge_entries([run], first_live) for run in runs]
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

    def _run(self, db_key: bytes) -> Run:
        """The run under ``db_key``: as this batch or the batch before wrote
        it (decoded, its keys sorted), else decoded from the map."""
        run = self.written.get(db_key) or self.parts.run_cache.get(db_key)
        if run is not None and run.owned:
            return run
        return decode_run(db_key, self.txn.get(db_key, db=self.parts.runs))

    def _put_entries(self, entries: tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint32], int]) -> Run:
        """Write a run of (keys, offsets, base); decoded from its own buffer, so valid after the transaction."""
        value, whole = encode_sorted(*entries)
        run = decode_run(put_run(self.txn, self.parts.runs, value), value, owned=True)
        run.whole = whole
        self.written[run.db_key] = run
        return run


class Hits:
    """``Batch.members`` with the compiled kernel, into buffers kept from
    batch to batch: a flood's batches find hundreds of thousands of hits,
    and fresh buffers each time would cost a page fault for every few.
    They grow to the most hits a batch has found, not to the most its
    queries could find (each key's newest and oldest members, for every
    key of the batch): that much room, kept, was most of a replay's memory."""

    def __init__(self) -> None:
        # (query index, serial) of what each run offers, and the same sorted
        # and cut to what each query offers: each a row of a (2, room) array
        self._found = np.empty((2, _FIRST_ROOM), dtype=np.int64)
        self._offered = np.empty((2, _FIRST_ROOM), dtype=np.int64)
        # the kernel's description of the last ``planes`` searched (``Batch._live_planes``
        # gives a group's one-record calls the same list until it commits)
        self._described: tuple[Sequence[tuple[Run, int]], list[tuple[Any, ...]] | None] | None = None

    def searchable(self, planes: Sequence[tuple[Run, int]]) -> bool:
        """Whether every run of ``planes`` has its keys stored (a pending
        run's are not yet): the runs ``members`` can search."""
        return self._description(planes) is not None

    def _description(self, planes: Sequence[tuple[Run, int]]) -> list[tuple[Any, ...]] | None:
        """The kernel's description of ``planes``' runs, None unless searchable."""
        if self._described is None or self._described[0] is not planes:
            described = None
            if all(len(run.stored) == run.count for run, _ in planes):
                described = [(run.stored, *run.search_fence(), run.low, run.high, run.first, b) for run, b in planes]
            self._described = (planes, described)
        return self._described[1]

    def members(
        self,
        planes: Sequence[tuple[Run, int]],
        queries: npt.NDArray[np.uint64],
        maybe: npt.NDArray[np.int64],
        masks: npt.NDArray[np.uint16] | None,
        first_live: int,
        limit: int,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """What ``run_members_in_numpy`` of each of ``searches_of``, then
        ``by_query_newest_first`` and ``offered``, give: new arrays."""
        runs = self._description(planes)
        assert runs is not None, "a run's keys are not stored: searchable() said so"
        queries = np.ascontiguousarray(queries, dtype=np.uint64)
        maybe = np.ascontiguousarray(maybe, dtype=np.int64)
        masks = None if masks is None else np.ascontiguousarray(masks, dtype=np.uint16)
        while True:
            found, offered = self._found, self._offered
            kept = kernel.members_in_runs(
                runs, queries, maybe, masks, first_live, limit, OLDEST_PER_KEY, *found, *offered
            )  # fmt: skip
            if kept >= 0:
                query_of, serial_of = offered[:, :kept].copy()
                return query_of, serial_of
            # out of room: every run again, into twice as much
            self._found = np.empty((2, 2 * found.shape[1]), dtype=np.int64)
            self._offered = np.empty((2, 2 * found.shape[1]), dtype=np.int64)


_FIRST_ROOM = 1 << 14


def searches_of(
    planes: Sequence[tuple[Run, int]],
    queries: npt.NDArray[np.uint64],
    maybe: npt.NDArray[np.int64],
    masks: npt.NDArray[np.uint16] | None,
) -> list[tuple[Run, npt.NDArray[np.int64], npt.NDArray[np.uint64]]]:
    """(run, the indexes of the queries it is searched for, those queries)
    of each run that is searched for any: a small run's (bit 0) are those
    ``maybe`` indexes, a large run's those whose mask has its bit."""
    searches: list[tuple[Run, npt.NDArray[np.int64], npt.NDArray[np.uint64]]] = []
    maybe_queries = queries[maybe]
    for run, bit in planes:
        if bit == 0:
            passed, searched = maybe, maybe_queries
        else:
            assert masks is not None
            passed = np.flatnonzero(masks & np.uint16(bit))
            searched = queries[passed]
        if len(passed):
            searches.append((run, passed, searched))
    return searches


def run_members_in_numpy(
    run: Run, searched: npt.NDArray[np.uint64], passed: npt.NDArray[np.int64], first_live: int, limit: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``run_members`` without the kernel: the reference it is tested against."""
    hits, low, high = run.find(searched)
    if len(hits) == 0:
        return _NO_HITS, _NO_HITS
    hits = passed[hits]
    if run.first < first_live:  # its oldest entries may be purged: each key's live ones start later
        low = _first_at_least(run, low, high, first_live)
    newest = np.minimum(high - low, limit)
    oldest = np.minimum(high - low - newest, OLDEST_PER_KEY)
    counts = newest + oldest
    ends = np.cumsum(counts)
    if int(ends[-1]) == 0:
        return _NO_HITS, _NO_HITS
    within = np.arange(int(ends[-1])) - np.repeat(ends - counts, counts)
    positions = within + np.repeat(high - newest, counts)
    old = within >= np.repeat(newest, counts)
    positions[old] -= np.repeat(high - low, counts)[old]
    serials = run.serials(positions)
    live = serials >= first_live
    return np.repeat(hits, counts)[live], serials[live]


def _first_at_least(
    run: Run, low: npt.NDArray[np.int64], high: npt.NDArray[np.int64], serial: int
) -> npt.NDArray[np.int64]:
    """For each key's range of entries ``low`` to ``high`` in ``run`` (in
    serial order), the position of its first entry of ``serial`` or later
    (``high`` for none): a binary search of every range at once."""
    low, high = low.copy(), high.copy()
    while True:
        active = np.flatnonzero(low < high)
        if len(active) == 0:
            return low
        middle = (low[active] + high[active]) // 2
        before = run.serials(middle) < serial
        low[active[before]] = middle[before] + 1
        high[active[~before]] = middle[~before]
