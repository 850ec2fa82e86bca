"""The LMDB store's runs: a look-up through the fence finds what a plain binary search finds, and serials take the bytes their span needs."""

from __future__ import annotations

import numpy as np
import pytest

from streamfilter.stores.lmdb import _decode_run, _encode_run, _merge_entries


@pytest.mark.parametrize("size", [1, 5, 31, 32, 33, 1000, 70_000, (1 << 22) + 5000])
def test_fence_lookup_equals_a_binary_search_of_the_whole_run(size: int) -> None:
    rng = np.random.default_rng(size)
    # keys drawn from a small pool too, so equal keys (several posts under one band) occur
    keys = np.concatenate(
        [rng.integers(0, 2**32, size=size - size // 3, dtype=np.uint32), rng.choice([0, 7, 2**32 - 1], size // 3)]
    ).astype(np.uint32)
    run = _decode_run(b"run", _encode_run(keys, np.arange(size, dtype=np.uint32), 1000))
    assert np.all(np.diff(run.keys.astype(np.int64)) >= 0)
    queries = np.unique(
        np.concatenate(
            [
                keys[: size // 2],
                rng.integers(0, 2**32, size=500, dtype=np.uint32),
                np.array([0, 1, 2**31, 2**32 - 1], dtype=np.uint32),
            ]
        )
    )
    found, first = run.find(queries)
    expected_first = np.searchsorted(run.keys, queries, side="left")
    present = (expected_first < len(run.keys)) & (run.keys[np.minimum(expected_first, len(run.keys) - 1)] == queries)
    assert found.tolist() == np.flatnonzero(present).tolist()
    assert first.tolist() == expected_first[present].tolist()
    # equal keys keep serial order, oldest first
    for query in queries[found][:50]:
        positions = np.flatnonzero(run.keys == query)
        assert np.all(np.diff(run.serials(positions)) > 0)


@pytest.mark.parametrize(
    ("span", "entry_bytes"),
    [(100, 6), ((1 << 16) - 1, 6), (1 << 16, 7), ((1 << 24) - 1, 7), (1 << 24, 8), ((1 << 32) - 1, 8)],
)
def test_a_run_stores_each_serial_in_as_few_bytes_as_its_span_needs(span: int, entry_bytes: int) -> None:
    rng = np.random.default_rng(span)
    first = 5_000_000_000
    serials = np.concatenate([[first, first + span], first + rng.integers(0, span + 1, size=998)]).astype(np.uint64)
    keys = rng.integers(0, 2**32, size=len(serials), dtype=np.uint32)
    value = _encode_run(keys, (serials - first).astype(np.uint32), first)
    run = _decode_run(b"run", value)
    assert (run.first, run.last) == (first, first + span)
    assert len(value) == 32 + 8 + entry_bytes * len(serials)  # the header, an empty fence, the entries
    order = np.argsort(keys, kind="stable")
    assert run.keys.tolist() == keys[order].tolist()
    assert run.serials().tolist() == serials[order].astype(np.int64).tolist()
    picked = np.array([0, 7, len(serials) - 1])
    assert run.serials(picked).tolist() == serials[order][picked].astype(np.int64).tolist()


@pytest.mark.parametrize("first_live", [0, 1000, 1025, 1050, (1 << 20) + 1010, (1 << 20) + 2000, 1 << 33])
def test_a_merge_keeps_the_entries_of_posts_not_purged_under_their_serials(first_live: int) -> None:
    rng = np.random.default_rng(first_live)
    runs = [
        # 50 posts of 10 band keys each from serial 1000, then 50 more a million serials later
        _decode_run(b"run", _encode_run(rng.integers(0, 2**32, 500, dtype=np.uint32), np.repeat(offsets, 10), base))
        for base, offsets in [(1000, np.arange(50, dtype=np.uint32)), (1 << 20, np.arange(1000, 1050, dtype=np.uint32))]
    ]
    expected = sorted(
        (key, serial)
        for run in runs
        for key, serial in zip(run.keys.tolist(), run.serials().tolist(), strict=True)
        if serial >= first_live
    )
    keys, offsets, base = _merge_entries(runs, first_live)
    if not expected:
        assert len(keys) == 0
        return
    merged = _decode_run(b"merged", _encode_run(keys, offsets, base))
    assert sorted(zip(merged.keys.tolist(), merged.serials().tolist(), strict=True)) == expected
    assert (merged.first, merged.last) == (min(s for _, s in expected), max(s for _, s in expected))
