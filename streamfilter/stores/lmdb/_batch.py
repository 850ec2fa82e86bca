"""Judging a batch inside one LMDB write transaction, and writing its run.

A batch looks its band keys up in every run at once (see ``_runs``) and
among its own earlier posts, ranks each post's candidates by the rules
(``_rules.rank_candidates``: most band keys shared, then newest, the newest
``max_candidates_per_band`` a key) with numpy, and verifies them with
``_rules.best_match``. The result equals the memory store's, which applies the
rules one post at a time; a differential test holds them to it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import lmdb
import numpy as np
import numpy.typing as npt

from ... import _rules
from ..._rules import CachedPost, Match
from .._base import IndexSettings, PostCache, Sketch
from .._records import encode_record
from ._caches import KeyFilter, NewRun, RunCache
from ._merging import merge_entries, mergeable, merged_inline, one_run_spans, pending_run
from ._runs import NO_KEYS, Run, decode_run, encode_sorted, put_run, short_keys
from ._tuning import LMDBTuning

__all__ = ["Batch", "StoreParts"]

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
    serials = _rules.rank_candidates(shared)
    return serials, [shared[serial] for serial in serials]


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
        # (serial key, record) of posts recorded and not yet written: written in one call (``write_posts``)
        self.unwritten: list[tuple[bytes, bytes]] = []
        self.merge_wanted = False  # a merge too large for this transaction is due (see compact)
        # the band keys of the posts this batch recorded, for ``compact`` to write (``_pending_run``)
        self.pending: Run | None = None
        self.written: dict[bytes, Run] = {}  # the runs this batch wrote, by db key

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
        query, its newest live serials, at most ``max_candidates_per_band``."""
        nothing = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        if len(queries) == 0:
            return nothing
        hit_queries: list[npt.NDArray[np.int64]] = []
        hit_serials: list[npt.NDArray[np.int64]] = []
        runs = self.runs()
        key_filter = self.parts.key_filter
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
        return self.txn.get(_U64.pack(serial), db=self.parts.posts)

    def write_posts(self) -> None:
        """Write the records of the posts judging recorded, in serial order at the end of the table."""
        with self.txn.cursor(self.parts.posts) as cursor:
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
        shingle_size = settings.shingle_size
        first_live = self.first_live_serial(next_serial)
        count = len(sketches)
        lengths = np.fromiter((len(sketch.band_keys) for sketch in sketches), dtype=np.int64, count=count)
        every = short_keys(np.concatenate([sketch.band_keys for sketch in sketches])) if count else NO_KEYS
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
                after = _rules.horizon(clock, ttl)
                serials = candidates[0] if candidates is not None else []
                if sketch.refers_to is not None:
                    newest_first = self.cache.posts(self.get_post, sorted(serials, reverse=True))
                    results.append(_rules.referenced(newest_first, sketch.refers_to, after))
                    continue
                own = CachedPost.of(sketch)
                ranked = self.cache.posts(self.get_post, serials[: _rules.MAX_VERIFIED])
                best = _rules.best_match(ranked, sketch, own, after, threshold, shingle_size)
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
                record = encode_record(sketch.timestamp, sketch.post_id, own.words)
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
        self.pending = pending_run(short_keys(np.concatenate(keys)), offsets, first_serial)

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
            written, replaced = self._write_pending(pending, sizes[-1] if sizes else None, first_live)
            if replaced:
                sizes[-1] = written
            else:
                sizes.append(written)
        while len(sizes) >= 2:
            (older, older_size), (newer, newer_size) = sizes[-2], sizes[-1]
            if not merged_inline(older_size, newer_size, self.parts.tuning):
                # too large for a batch: the merge thread's, once this batch has committed
                self.merge_wanted |= mergeable(older_size, newer_size, self.parts.tuning)
                break
            merged = self._merge(older, newer, first_live)
            sizes[-2:] = [merged] if merged is not None else []

    def _write_pending(
        self, pending: Run, newest: tuple[bytes, int] | None, first_live: int
    ) -> tuple[tuple[bytes, int], bool]:
        """Write the batch's run, merged at once with the newest run (db key,
        entries) when ``compact`` would merge the two: the same runs as
        writing it alone and then merging, without encoding, writing and
        reading it back in between (45 k of the 2.3 M instructions a
        transaction of a dozen posts took). Returns the run's (db key,
        entries) and whether it took the newest's place."""
        txn, db = self.txn, self.parts.runs
        parts = [pending]
        if newest is not None:
            newest_key, newest_size = newest
            if merged_inline(newest_size, pending.count, self.parts.tuning):
                older = self._run(newest_key)
                if one_run_spans(older, pending):
                    parts.insert(0, older)
        entries = merge_entries(parts, first_live)  # copies, made before a write moves the newest's value
        if len(parts) == 2:
            txn.delete(newest_key, db=db)
        run = self._put_entries(entries)
        # for the key filter: the batch's keys are fresh, the newest run's it may hold already
        fresh = np.sort(pending.keys()) if len(parts) == 2 else run.keys()  # alone, the run is its keys sorted
        self.new_runs.append((run, [part.identity for part in parts[:-1]], fresh))
        return (run.db_key, run.count), len(parts) == 2

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
