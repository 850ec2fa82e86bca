"""The one batch judge: every store's batches are judged here, by ``_rules``.

A store offers a narrow index transaction (``stores._base.IndexTransaction``):
the newest members of each band key, a stored post by serial, recording the
batch's novel posts, commit. The judge does the rest, for a whole batch at
once:

1. it looks every band key of the batch up in one call, and counts for each
   post the stored posts that share keys with it (``_stored_sharers``);
2. it keeps the batch's own novel posts under the keys a later post of the
   batch holds too, so a post sees the ones recorded before it in its batch,
   and a key offers its newest ``max_candidates_per_band`` posts wherever the
   batch boundaries fall, and its oldest ``OLDEST_PER_KEY`` (stored posts
   give way to the batch's newer ones: ``_InBatch``);
3. it ranks and verifies the candidates (``_rules.rank_candidates``,
   ``_rules.best_match``, ``_rules.referenced``).

Where the compiled kernel is built, its Ranker does steps 1 and 2 and the
ranking (``_Ranking`` is the Python it is tested against), and
``Ranker.judge`` runs the loop of ``_py_judge_candidates`` over the whole batch, verifying
with the kernel's best_match: the Python loop is what it is tested against,
judgement for judgement.

So a batch of any size gives the verdicts of judging its posts one at a time,
and every store gives the same verdicts; a differential test holds them to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from . import _rules
from ._compiled import chosen, kernel
from ._exceptions import StoreError
from ._rules import OLDEST_PER_KEY
from ._values import CachedPost, Judgement, Match, Matches, Sketch, Sketches, recorded_post
from .stores._base import BandStore, IndexSettings, IndexTransaction, RetryBatch, is_same_post

__all__ = ["Judgement", "TransactionalStore", "judge_batch", "judge_in", "run_batch"]

# How many times a batch may begin again (RetryBatch) before the store is reported broken.
_MAX_ATTEMPTS = 100


def _stored_sharers(
    hit_query: npt.NDArray[np.int64],
    hit_serial: npt.NDArray[np.int64],
    inverse: npt.NDArray[np.int64],
    owner: npt.NDArray[np.int64],
    queries: int,
) -> dict[int, tuple[list[int], list[int]]]:
    """For each sketch that shares band keys with stored posts: (their
    serials, how many keys each shares), most keys first, then newest.

    ``hit_query``/``hit_serial`` are the stored members of each query (sorted
    by query); ``inverse``/``owner`` give each band key of the batch its query
    and its sketch.
    """
    if len(hit_serial) == 0:
        return {}
    per_query = np.bincount(hit_query, minlength=queries)
    first_hit = np.cumsum(per_query) - per_query
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
) -> list[int]:  # the ranking of ``_InBatch.candidates``
    """The candidate serials in rank order: ``stored`` (serials, shared keys)
    and the batch's own recorded posts that share keys (serial: keys).
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
    return _rules.rank_candidates(shared)


class _InBatch:
    """The posts a batch records, as the later posts of the same batch see them.

    A sketch looks for posts recorded earlier in its batch only under the keys
    an earlier sketch holds too, and files itself only under the keys a later
    sketch holds too; small batches mostly share no key at all. Under each
    such key it keeps the serials of the batch's recorded posts, oldest first:
    like the index, recorded posts only, so a campaign's thousand copies in one
    batch are checked against its one original. A key offers its newest
    ``limit`` posts and its oldest ``OLDEST_PER_KEY`` wherever the batch
    boundaries fall (``_rules.offered_per_key``): under a key that holds
    recorded posts of this batch, the stored ones fill only what is left of
    the newest, oldest dropped first, and the oldest stay; where the key has
    fewer stored posts than that, the batch's first ones are its oldest.
    """

    def __init__(
        self,
        inverse: npt.NDArray[np.int64],
        owner: npt.NDArray[np.int64],
        queries: int,
        count: int,
        hits: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]],
        limit: int,
    ) -> None:
        self.limit = limit
        self.lookup_keys: list[int] = []
        self.filed_keys: list[int] = []
        self.lookup_ends = self.filed_ends = [0] * (count + 1)
        self.recorded_under: list[list[int] | None] = [None] * queries  # key (its index) -> serials
        # a key's stored hits are hit_serials[hit_starts[q]:][:hit_counts[q]], newest first
        per_query = np.bincount(hits[0], minlength=queries)
        self.hit_counts = per_query.tolist()
        self.hit_starts = (np.cumsum(per_query) - per_query).tolist()
        self.hit_serials = hits[1].tolist()
        if queries == len(inverse):
            return
        first_holder = np.full(queries, count, dtype=np.int64)
        last_holder = np.full(queries, -1, dtype=np.int64)
        np.minimum.at(first_holder, inverse, owner)
        np.maximum.at(last_holder, inverse, owner)
        looked_up = np.flatnonzero(owner > first_holder[inverse])
        self.lookup_keys = inverse[looked_up].tolist()
        self.lookup_ends = [0, *np.cumsum(np.bincount(owner[looked_up], minlength=count)).tolist()]
        filed = np.flatnonzero(owner < last_holder[inverse])
        self.filed_keys = inverse[filed].tolist()
        self.filed_ends = [0, *np.cumsum(np.bincount(owner[filed], minlength=count)).tolist()]

    def candidates(self, index: int, stored: tuple[list[int], list[int]] | None) -> list[int] | None:
        """Sketch ``index``'s candidate serials in rank order, with the batch's
        recorded posts that share its keys; None when it has none."""
        ends = self.lookup_ends
        if ends[index] == ends[index + 1]:
            return _first(stored)
        in_batch: dict[int, int] = {}
        crowded_out: dict[int, int] = {}  # stored serial: keys it no longer counts under
        for query in self.lookup_keys[ends[index] : ends[index + 1]]:
            under = self.recorded_under[query]
            if under is None:
                continue
            for serial in under:
                in_batch[serial] = in_batch.get(serial, 0) + 1
            # the stored hits (newest first) that are neither among the newest
            # ``limit`` with the batch's nor among the oldest
            start = self.hit_starts[query]
            first = start + max(0, self.limit - len(under))
            for serial in self.hit_serials[first : start + max(0, self.hit_counts[query] - OLDEST_PER_KEY)]:
                crowded_out[serial] = crowded_out.get(serial, 0) + 1
        if not in_batch:
            return _first(stored)
        return _with_batch_sharers(stored, in_batch, crowded_out)

    def file(self, index: int, serial: int) -> None:
        """Sketch ``index`` is recorded as ``serial``: later sketches see it."""
        for query in self.filed_keys[self.filed_ends[index] : self.filed_ends[index + 1]]:
            under = self.recorded_under[query]
            if under is None:
                self.recorded_under[query] = [serial]
            else:
                under.append(serial)
                # like the index's look-ups: the newest ``limit`` a key, and
                # the first ones while the key has fewer stored than its oldest
                kept_first = max(0, OLDEST_PER_KEY - self.hit_counts[query])
                if len(under) > max(self.limit, 1) + kept_first:
                    del under[kept_first]


class _Ranking:
    """A batch's candidates, ranked: ``_stored_sharers`` and ``_InBatch`` in
    Python, what the kernel's Ranker computes where it is built."""

    def __init__(self, stored: dict[int, tuple[list[int], list[int]]], batch: _InBatch) -> None:
        self._stored = stored  # ``_stored_sharers``' answer
        self._batch = batch

    def candidates(self, index: int, recorded: bool) -> list[int] | None:
        """Sketch ``index``'s candidate serials in rank order, or None;
        ``recorded``: whether the batch filed a sketch yet."""
        stored = self._stored.get(index)
        return self._batch.candidates(index, stored) if recorded else _first(stored)

    def file(self, index: int, serial: int) -> None:
        self._batch.file(index, serial)


def _c_distinct(keys: npt.NDArray[np.uint64]) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
    """``_py_distinct``, in C: the keys told apart by hashing, and the distinct ones sorted."""
    distinct, inverse = kernel.distinct(np.ascontiguousarray(keys, dtype=np.uint64))
    return np.frombuffer(distinct, dtype=np.uint64), np.frombuffer(inverse, dtype=np.int64)


def _py_distinct(keys: npt.NDArray[np.uint64]) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
    """``np.unique(keys, return_inverse=True)``; for the few keys of a post or
    two, in fewer steps (a search for each key costs more than numpy's own
    inverse for a batch's thousands)."""
    if len(keys) > _FEW_KEYS:
        return np.unique(keys, return_inverse=True)
    ordered = np.sort(keys)
    first = np.empty(len(ordered), dtype=np.bool_)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    distinct = ordered[first]
    return distinct, np.searchsorted(distinct, keys)


_FEW_KEYS = 256
_distinct = chosen(_c_distinct, _py_distinct)


class _Lookup(NamedTuple):
    """What a batch's band keys found: ``hits``, each query's stored members
    (``txn.members``); ``inverse`` and ``owner``, each band key's query and
    sketch; ``queries``, how many distinct keys were looked up."""

    hits: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]
    inverse: npt.NDArray[np.int64]
    owner: npt.NDArray[np.int64]
    queries: int


def judge_batch(txn: IndexTransaction, sketches: Sketches, settings: IndexSettings) -> Judgement:
    """Judge ``sketches`` in order against ``txn``'s index and each other (see the module docstring)."""
    count = len(sketches)
    if count == 0:
        return Judgement(Matches(), txn.clock, first_serial=txn.next_serial)
    every = txn.index_keys(sketches.keys)
    owner = np.zeros(len(every), dtype=np.int64) if count == 1 else sketches.owners()
    queries, inverse = _distinct(every)
    hits = txn.members(queries)
    # after the look-up, which may be what reads the clock (one Redis reads all at once)
    judgement = Judgement(Matches(), txn.clock, first_serial=txn.next_serial)
    _judge_candidates(txn, sketches, settings, judgement, _Lookup(hits, inverse, owner, len(queries)))
    return judgement


def _c_judge_candidates(
    txn: IndexTransaction, sketches: Sketches, settings: IndexSettings, judgement: Judgement, lookup: _Lookup
) -> None:
    """``_py_judge_candidates``, in C: the kernel's Ranker ranks, and judges the batch as that loop does."""
    arrays = [np.ascontiguousarray(array, dtype=np.int64) for array in (*lookup.hits, lookup.inverse, lookup.owner)]
    limit = settings.max_candidates_per_band
    ranker = kernel.Ranker(*arrays, lookup.queries, len(sketches), limit, _rules.MAX_VERIFIED, OLDEST_PER_KEY)
    judgement.full_buckets = ranker.full_buckets()
    (
        judgement.matches.duplicate_of,
        judgement.matches.similarity,
        judgement.matched,
        judgement.recorded,
        judgement.posts,
        judgement.clock,
        judgement.capped,
    ) = ranker.judge(
        sketches.columns(),
        txn.post,
        judgement.first_serial,
        judgement.clock,
        settings.ttl_seconds,
        settings.jaccard_threshold,
        settings.shingle_size,
        _rules._KERNEL_RULES,
        txn.replays_seen,
        getattr(txn, "recent_posts", None),
        getattr(txn, "record_reader", None),
    )


def _py_judge_candidates(
    txn: IndexTransaction, sketches: Sketches, settings: IndexSettings, judgement: Judgement, lookup: _Lookup
) -> None:
    """Rank each sketch's candidates (``lookup``) and verify them in order,
    into ``judgement``, recording the novel; count the keys whose buckets
    are full (``Judgement.full_buckets``)."""
    hits, inverse, owner, queries = lookup
    full = settings.max_candidates_per_band + OLDEST_PER_KEY  # the most members a key offers
    if len(hits[0]) >= full:  # fewer fill no bucket
        judgement.full_buckets = int(np.count_nonzero(np.bincount(hits[0]) >= full))
    ranking = _Ranking(
        _stored_sharers(*hits, inverse, owner, queries),
        _InBatch(inverse, owner, queries, len(sketches), hits, settings.max_candidates_per_band),
    )
    own_posts: dict[int, CachedPost] = {}  # serial -> post, of the batch's recorded posts
    clock = judgement.clock

    def posts(serials: list[int]) -> list[CachedPost | None]:
        fetch = txn.post
        return [found if (found := own_posts.get(serial)) is not None else fetch(serial) for serial in serials]

    for index in range(len(sketches)):
        sketch = sketches[index]
        clock = max(clock, sketch.timestamp)
        after = _rules.horizon(clock, settings.ttl_seconds)
        serials = ranking.candidates(index, bool(judgement.recorded))
        own: CachedPost | None = None
        found: tuple[Match, int] | None = None
        if sketch.refers_to is not None:
            newest = sorted(serials or (), reverse=True)
            found = _rules.referenced(zip(newest, posts(newest), strict=True), sketch.refers_to, after)
        elif serials is not None:
            own = recorded_post(sketch)
            ranked = serials[: _rules.MAX_VERIFIED]
            judgement.capped += len(serials) > _rules.MAX_VERIFIED
            candidates = posts(ranked)
            if txn.replays_seen:
                candidates = _without_itself(candidates, sketch)
            found = _rules.best_match(
                ranked, candidates, sketch, own, after, settings.jaccard_threshold, settings.shingle_size
            )
        if found is not None:
            judgement.matches.append(found[0])
            judgement.matched[index] = found[1]
            continue
        judgement.matches.append(None)
        if sketch.refers_to is not None:  # a reference is never recorded
            continue
        serial = judgement.first_serial + len(judgement.recorded)
        own_posts[serial] = own if own is not None else recorded_post(sketch)
        ranking.file(index, serial)
        judgement.recorded.append(index)
        judgement.posts.append(own_posts[serial])
    judgement.clock = clock


_judge_candidates = chosen(_c_judge_candidates, _py_judge_candidates)


def _first(stored: tuple[list[int], list[int]] | None) -> list[int] | None:
    return None if stored is None else stored[0]


def _without_itself(candidates: list[CachedPost | None], sketch: Sketch) -> list[CachedPost | None]:
    """``candidates`` without the sketch's own post, recorded by an earlier
    attempt at its batch (``is_same_post``): the post passes again, a repeat,
    never a loss."""
    return [
        None if post is not None and is_same_post(sketch, post.post_id, post.timestamp) else post for post in candidates
    ]


def run_batch(
    store: BandStore,
    sketches: Sequence[Sketch],
    *,
    progress: Mapping[str, int | str] | None = None,
    deliver: Callable[[Matches], None] | None = None,
    judged: Callable[[Judgement], None] | None = None,
) -> Matches:
    """Judge a batch in one index transaction and commit it with ``progress``;
    ``judged`` gets the Judgement of the attempt that committed.

    The steps are explicit: judge, record, ``deliver`` the results, commit.
    Whatever ``deliver`` writes out is on its way before the index says these
    posts were seen, so a crash between the two repeats a batch instead of
    losing it; if it raises, nothing commits. A store that must begin again
    (its map grew, another writer got in first) raises RetryBatch from any
    step, and the batch is judged anew.
    """
    if not sketches and not progress:  # nothing to judge or record
        if deliver is not None:
            deliver(Matches())
        return Matches()
    sketches = Sketches.of(sketches)
    for _ in range(_MAX_ATTEMPTS):
        txn = store.begin()
        try:
            judgement = judge_batch(txn, sketches, txn.settings)
            matches = txn.record(sketches, judgement)
            if deliver is not None:
                deliver(matches)
            txn.commit(progress)
            if judged is not None:
                judged(judgement)
            return matches
        except RetryBatch:
            continue
        except BaseException:
            txn.abort()
            raise
    raise StoreError(
        f"{type(store).__name__}: a batch had to begin again {_MAX_ATTEMPTS} times (the index kept changing "
        "under it, or kept needing a larger map); nothing of it was committed"
    )


def judge_in(txn: IndexTransaction, sketches: Sketches, judged: Callable[[Judgement], None]) -> Matches:
    """``run_batch``'s steps in a transaction that stays open: judge and
    record; the caller commits (``_group``, whose transactions judge one
    batch after another)."""
    judgement = judge_batch(txn, sketches, txn.settings)
    matches = txn.record(sketches, judgement)
    judged(judgement)
    return matches


class TransactionalStore:
    """What every store shares: judging a batch through its transactions."""

    # whether its transactions can hold the posts of batch after batch until
    # they commit (``hold``), as the sync API's group commit asks (``_group``)
    holds = False

    def check_and_insert(
        self,
        sketches: Sequence[Sketch],
        *,
        progress: Mapping[str, int | str] | None = None,
        deliver: Callable[[Matches], None] | None = None,
    ) -> Matches:
        """Judge the sketches in order, in one transaction, and commit
        (``_judge.run_batch``, which says what ``deliver`` is for).

        A sketch gets None when it is novel, and is then recorded, so a later
        sketch of the same batch sees it. Otherwise it gets the Match that
        made it a duplicate, and nothing is recorded.
        """
        return run_batch(self, sketches, progress=progress, deliver=deliver)  # type: ignore[arg-type]
