"""The LMDB index's compiled loops (_kernel_lmdb.c) do what their numpy references do, value for value."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamfilter.stores._base import by_query_newest_first, offered
from streamfilter.stores.lmdb import LMDBTuning, _batch, _caches
from streamfilter.stores.lmdb._caches import KeyFilter, NewRun
from streamfilter.stores.lmdb._held import HeldPosts
from streamfilter.stores.lmdb._runs import KEY_BITS, SEARCHED_WHOLE, Run, decode_run, encode_run


def _run_of(keys: np.ndarray, first: int = 1000) -> Run:
    return decode_run(b"", encode_run(keys, np.arange(len(keys), dtype=np.uint32), first))


def _finds_agree(run: Run, queries: np.ndarray) -> int:
    found, first, end = run.find(queries)
    expected = run._py_find(queries)
    assert [part.tolist() for part in (found, first, end)] == [part.tolist() for part in expected]
    return len(found)


@settings(max_examples=200, deadline=None)
@given(
    pool=st.lists(st.integers(0, 2**40 - 1), min_size=1, max_size=50, unique=True),
    picks=st.lists(st.integers(0, 49), max_size=300),
    strangers=st.lists(st.integers(0, 2**40 - 1), max_size=50),
)
def test_a_run_search_finds_what_numpy_finds(kernel, pool: list[int], picks: list[int], strangers: list[int]) -> None:  # type: ignore[no-untyped-def]
    # a run whose keys repeat (a key's entries are a range), searched for its
    # own keys, their neighbours, and keys it does not hold
    keys = np.array([pool[pick % len(pool)] for pick in picks], dtype=np.uint64)
    run = _run_of(keys)
    near = [max(0, key - 1) for key in pool] + [min(2**40 - 1, key + 1) for key in pool]
    queries = np.array(pool + near + strangers, dtype=np.uint64)
    held = set(keys.tolist())
    assert _finds_agree(run, queries) == sum(query in held for query in queries.tolist())


def test_a_large_run_is_searched_through_its_fence_as_numpy_does(kernel) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(11)
    distinct = rng.integers(0, 1 << 40, SEARCHED_WHOLE // 2, dtype=np.uint64)
    keys = np.concatenate([distinct, distinct[: SEARCHED_WHOLE // 2 + 5000]])  # some keys twice
    run = _run_of(keys)
    assert run.bits > 8  # searched through a fence of more than 256 buckets
    queries = np.concatenate(
        [distinct[::97], distinct[::89] + np.uint64(1), rng.integers(0, 1 << 40, 5000, dtype=np.uint64)]
    )
    assert _finds_agree(run, queries) >= len(distinct[::97])


def test_a_run_stored_with_a_coarse_fence_is_searched_through_a_finer_one(kernel) -> None:  # type: ignore[no-untyped-def]
    # a run searched whole is stored with 256 fence buckets; the compiled
    # search builds a finer fence for it, and finds what numpy finds
    rng = np.random.default_rng(12)
    distinct = rng.integers(0, 1 << 40, 60_000, dtype=np.uint64)
    keys = np.concatenate([distinct, distinct[:9000], distinct[:300]])  # some keys two and three times
    run = _run_of(keys)
    assert run.bits == 8
    fence, bits = run.search_fence()
    assert bits > 8 and len(fence) == (1 << bits) + 1 and run.search_fence()[0] is fence  # built once
    queries = np.concatenate(
        [distinct[::7], distinct[::11] + np.uint64(1), rng.integers(0, 1 << 40, 3000, dtype=np.uint64)]
    )
    assert _finds_agree(run, queries) >= len(distinct[::7])
    everything = np.arange(len(queries), dtype=np.int64)
    query_of, serial_of = _batch.Hits().members([(run, 0)], queries, everything, None, 1000 + 5000, 2)
    assert (query_of.tolist(), serial_of.tolist()) == _members_in_numpy(
        [(run, everything, queries)], len(queries), 6000, 2
    )


def test_the_hits_buffers_grow_to_what_a_batch_finds(kernel, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    # room for one hit at first: while the runs find more than there is room
    # for, they are all searched again, into buffers twice as long
    monkeypatch.setattr(_batch, "_FIRST_ROOM", 1)
    keys = np.repeat(np.arange(1, 51, dtype=np.uint64) * np.uint64(7919), 9)  # 50 keys, 9 entries each
    runs = [_run_of(keys), _run_of(keys[: 9 * 20])]
    queries = np.unique(keys)
    everything = np.arange(len(queries), dtype=np.int64)
    searches = [(run, everything, queries) for run in runs]
    hits = _batch.Hits()
    query_of, serial_of = hits.members([(run, 0) for run in runs], queries, everything, None, 0, 4)
    assert (query_of.tolist(), serial_of.tolist()) == _members_in_numpy(searches, len(queries), 0, 4)
    assert len(query_of) == 50 * 6  # each key's newest 4 and oldest 2, across the two runs
    assert 70 * 6 <= hits._found.shape[1] < 2 * 70 * 6  # grew to what was found, no further


def test_a_bad_run_search_is_refused(kernel) -> None:  # type: ignore[no-untyped-def]
    out = np.empty(1, dtype=np.int64)
    stored = np.zeros(4, dtype=np.uint32)
    with pytest.raises(ValueError):  # a fence of the wrong size for its bits
        kernel.find_in_run(stored, np.zeros(3, dtype=np.uint32), 8, np.zeros(1, dtype=np.uint64), out, out, out)
    with pytest.raises(ValueError):  # outputs shorter than the queries
        kernel.find_in_run(stored, np.zeros(257, dtype=np.uint32), 8, np.zeros(2, dtype=np.uint64), out, out, out)


def _members_in_numpy(searches, queries: int, first_live: int, limit: int):  # type: ignore[no-untyped-def]
    found = [
        _batch.run_members_in_numpy(run, searched, passed, first_live, limit) for run, passed, searched in searches
    ]
    found = [part for part in found if len(part[0])]
    if not found:
        return [], []
    query_of = np.concatenate([part[0] for part in found])
    serial_of = np.concatenate([part[1] for part in found])
    query_of, serial_of = by_query_newest_first(query_of, serial_of)
    keep = offered(query_of, limit)
    return query_of[keep].tolist(), serial_of[keep].tolist()


@settings(max_examples=150, deadline=None)
@given(
    pool=st.lists(st.integers(0, 2**40 - 1), min_size=1, max_size=12, unique=True),
    runs=st.lists(
        st.tuples(st.lists(st.integers(0, 11), min_size=1, max_size=60), st.sampled_from([1, 300, 70_000, 1 << 25])),
        min_size=1,
        max_size=4,
    ),
    live_at=st.integers(0, 200),
    limit=st.integers(0, 9),
    filters=st.tuples(st.lists(st.integers(0, 3), min_size=4, max_size=4), st.lists(st.booleans(), min_size=13)),
    masks=st.none() | st.lists(st.integers(0, 15), min_size=13, max_size=13),
)
def test_what_runs_offer_a_batch_is_what_numpy_finds(  # type: ignore[no-untyped-def]
    kernel,
    pool: list[int],
    runs: list[tuple[list[int], int]],
    live_at: int,
    limit: int,
    filters: tuple[list[int], list[bool]],
    masks: list[int] | None,
) -> None:
    # runs of repeated keys, their serials 2, 3 or 4 bytes apart, some of
    # their oldest entries purged: each key's newest ``limit`` and oldest
    # live members, sorted by query, newest first, as numpy finds them;
    # each run searched for every query, or, as the key filter and the run
    # masks pick them, for those of the small runs' or of its plane's
    built, first = [], 1000
    for picks, spread in runs:
        keys = np.array([pool[pick % len(pool)] for pick in picks], dtype=np.uint64)
        offsets = (np.arange(len(keys), dtype=np.uint64) * spread // max(1, len(keys) - 1)).astype(np.uint32)
        built.append(decode_run(b"", encode_run(keys, offsets, first)))
        first += int(offsets[-1]) + 1
    first_live = 1000 + live_at * (first - 1000) // 200
    queries = np.array(pool + [pool[0] + 1 if pool[0] < 2**40 - 1 else 0], dtype=np.uint64)
    everything = np.arange(len(queries), dtype=np.int64)
    searches = [(run, everything, queries) for run in built if run.last >= first_live]
    planes = [(run, 0) for run in built if run.last >= first_live]
    query_of, serial_of = _batch.Hits().members(planes, queries, everything, None, first_live, limit)
    expected = _members_in_numpy(searches, len(queries), first_live, limit)
    assert (query_of.tolist(), serial_of.tolist()) == expected
    # a large run is searched for the queries whose mask has its bit, a small one for those ``maybe`` picks
    plane_bits, picked = filters
    planes = [(run, 0 if masks is None else (1 << bit) >> 1) for run, bit in zip(built, plane_bits, strict=False)]
    planes = [(run, bit) for run, bit in planes if run.last >= first_live]
    maybe = np.flatnonzero(np.array(picked[: len(queries)] + [False] * len(queries))[: len(queries)])
    mask_array = None if masks is None else np.array(masks[: len(queries)], dtype=np.uint16)
    query_of, serial_of = _batch.Hits().members(planes, queries, maybe, mask_array, first_live, limit)
    searched = _batch.searches_of(planes, queries, maybe, mask_array)
    expected = _members_in_numpy(searched, len(queries), first_live, limit)
    assert (query_of.tolist(), serial_of.tolist()) == expected
    assert all(serial >= first_live for serial in serial_of.tolist())


def test_bad_member_searches_are_refused(kernel) -> None:  # type: ignore[no-untyped-def]
    run = _run_of(np.array([5, 5, 9], dtype=np.uint64))
    queries, passed = np.array([5], dtype=np.uint64), np.zeros(1, dtype=np.int64)
    runs = [(run.stored, run.fence, run.bits, run.low, run.high, run.first, 0)]

    def members(room: int, *, masks: object = None, runs: object = runs, short: int = 0) -> int:
        found, offered = np.empty((2, room), dtype=np.int64), np.empty((2, room - short), dtype=np.int64)
        return kernel.members_in_runs(runs, queries, passed, masks, 0, 2, 2, *found, *offered)  # type: ignore[no-any-return]

    assert members(1) == -1  # no room for the key's two entries: it says so, and writes nothing past the end
    assert members(2) == 2
    with pytest.raises(ValueError):  # outputs of two lengths
        members(2, short=1)
    with pytest.raises(ValueError):  # masks of another length than the queries
        members(2, masks=np.zeros(2, dtype=np.uint16))
    with pytest.raises(ValueError):  # a fence of the wrong size for its bits
        members(2, runs=[(run.stored, run.fence[:3], *runs[0][2:])])
    # a key filter's pick of no query is no query: nothing is searched for
    # it, though the memory beside the queries holds a key the run has
    beside = np.full(8, 5, dtype=np.uint64)
    one_query, picks = beside[1:2], np.array([5, -1, 0], dtype=np.int64)
    assert kernel.members_in_runs(runs, one_query, picks, None, 0, 2, 2, *np.empty((4, 6), dtype=np.int64)) == 2


def _filters_agree(runs: list[Run], taken: list[NewRun], tuning: LMDBTuning) -> int:
    """A key filter marked by the kernel and one marked by numpy, given the
    same runs, pass the same keys: every slot of the bits and of the run
    masks is probed. Returns how many slots of the bits are set."""
    filters = []
    for in_c in (True, False):
        with pytest.MonkeyPatch.context() as patched:
            if not in_c:  # marked and read in numpy
                patched.setattr(_caches, "_mark_run", _caches._py_mark_run)
                patched.setattr(_caches._Bits, "add_keys", _caches._Bits._py_add_keys)
                patched.setattr(_caches._Bits, "might_hold", _caches._Bits._py_might_hold)
            key_filter = KeyFilter(tuning)
            key_filter.sync(runs)
            key_filter.taken_in(taken)
            filters.append(key_filter)
    compiled, reference = filters
    assert compiled._bits.width == reference._bits.width
    width = compiled._bits.width
    every_slot = np.arange(1 << width, dtype=np.uint64) << np.uint64(KEY_BITS - width)
    passed = compiled.might_hold(every_slot)
    assert passed.tolist() == reference._bits._py_might_hold(every_slot).tolist()
    within = np.random.default_rng(width).integers(0, 1 << (KEY_BITS - width), len(every_slot), dtype=np.uint64)
    assert compiled.might_hold(every_slot | within).tolist() == passed.tolist()  # a slot's every key
    masks, expected = compiled.run_masks.masks(every_slot), reference.run_masks.masks(every_slot)
    assert (masks is None and expected is None) or (
        masks is not None and expected is not None and masks.tolist() == expected.tolist()
    )
    return len(passed)


@settings(max_examples=100, deadline=None)
@given(
    pool=st.lists(st.integers(0, 2**40 - 1), min_size=1, max_size=400, unique=True),
    sizes=st.lists(st.integers(1, 300), min_size=1, max_size=5),
    filtered_run=st.integers(1, 400),
    max_bits=st.integers(8, 21),
)
def test_a_key_filter_marked_by_the_kernel_passes_what_numpy_passes(  # type: ignore[no-untyped-def]
    kernel, pool: list[int], sizes: list[int], filtered_run: int, max_bits: int
) -> None:
    # runs small and large (the bits and the run masks), the last one taken
    # in as this process's own write with its fresh keys
    keys = np.array(pool, dtype=np.uint64)
    runs = [_run_of(keys[np.arange(size) * 7 % len(keys)], first=step * 1000) for step, size in enumerate(sizes)]
    *read, written = runs
    fresh = np.unique(written.keys())
    tuning = LMDBTuning(filtered_run=filtered_run, max_filter_bits=max_bits)
    taken: list[NewRun] = [(written, [run.identity for run in read], fresh)]
    assert _filters_agree(read, taken, tuning) > 0 or not any(run.count < filtered_run for run in runs)


def test_a_large_runs_keys_are_marked_through_its_fence_as_numpy_marks_them(kernel) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(5)
    large = _run_of(rng.integers(0, 1 << 40, SEARCHED_WHOLE + 3000, dtype=np.uint64))
    assert large.bits > 8  # a fence of more than 256 buckets: the tops are every few of them
    small = _run_of(rng.integers(0, 1 << 40, 50_000, dtype=np.uint64), first=10**7)
    as_large = LMDBTuning(filtered_run=100_000)  # the large run in the run masks, the small one in the bits
    as_small = LMDBTuning(filtered_run=SEARCHED_WHOLE * 2)  # both in the bits
    for tuning in (as_large, as_small):
        assert _filters_agree([large, small], [], tuning) > 0


def test_bad_marks_are_refused(kernel) -> None:  # type: ignore[no-untyped-def]
    stored, tops = np.zeros(4, dtype=np.uint32), np.zeros(257, dtype=np.uint32)
    bits, masks = np.zeros(1 << 17, dtype=np.uint8), np.zeros(1 << 20, dtype=np.uint16)
    with pytest.raises(ValueError):  # bits for another width
        kernel.mark_run(bits, 21, -1, stored, tops)
    with pytest.raises(ValueError):  # no such plane
        kernel.mark_run(masks, 20, 16, stored, tops)
    with pytest.raises(ValueError):  # tops of the wrong length
        kernel.mark_run(bits, 20, -1, stored, tops[:256])
    with pytest.raises(ValueError):  # a key past the 40 bits a run keeps
        kernel.mark_keys(bits, 20, -1, np.array([1 << 40, 1], dtype=np.uint64))
    with pytest.raises(TypeError):  # read-only marks
        kernel.mark_keys(bits.tobytes(), 20, -1, np.zeros(1, dtype=np.uint64))
    with pytest.raises(ValueError):  # bits read for another width
        kernel.marked(bits, 21, np.zeros(1, dtype=np.uint64))
    with pytest.raises(ValueError):  # a key past the 40 bits
        kernel.marked(bits, 20, np.array([1, 1 << 40], dtype=np.uint64))
    assert not bits.any() and not masks.any()
    kernel.mark_run(masks, 20, 3, stored, np.full(257, 4, dtype=np.uint32))  # tops past the run: read no further
    assert not masks.any()


@settings(max_examples=300, deadline=None)
@given(
    held=st.lists(st.lists(st.integers(1, 40), max_size=30), min_size=1, max_size=12),
    stored=st.lists(st.lists(st.integers(1, 10**6), max_size=12), min_size=1, max_size=12),
    limit=st.integers(1, 9),
)
def test_held_posts_are_filed_in_as_the_python_loop_files_them(  # type: ignore[no-untyped-def]
    kernel, held: list[list[int]], stored: list[list[int]], limit: int
) -> None:
    # a group's held posts (serials under keys, oldest first, or one serial
    # alone; some keys with none, some with more than a key offers) after each query's stored hits
    # (newest first), cut to what a key offers: the compiled with_held and
    # the Python loop give the same arrays, or both leave the hits as they are
    count = max(len(held), len(stored))
    queries = np.arange(100, 100 + count, dtype=np.uint64)
    posts = HeldPosts(first=10**7, limit=limit)
    for key, serials in zip(queries.tolist(), held, strict=False):
        if serials:
            filed = [10**7 + serial for serial in sorted(set(serials))]
            posts._under[key] = filed if len(filed) > 1 else filed[0]  # one held post: its serial alone
    query_of = [index for index, serials in enumerate(stored[:count]) for _ in set(serials)]
    serial_of = [serial for serials in stored[:count] for serial in sorted(set(serials), reverse=True)]
    hits = (np.array(query_of, dtype=np.int64), np.array(serial_of, dtype=np.int64))
    compiled, reference = posts._c_with_held(queries, hits), posts._py_with_held(queries, hits)
    assert compiled[0].tolist() == reference[0].tolist() and compiled[1].tolist() == reference[1].tolist()
    assert (compiled is hits) == (reference is hits) == (not any(held[:count]))
