"""The LMDB store's runs: a look-up through the fence finds what a plain binary search finds, keys keep 40 bits, and serials take the bytes their span needs."""

from __future__ import annotations

import numpy as np
import pytest

from streamfilter.stores.lmdb._merging import merge_entries, pending_run
from streamfilter.stores.lmdb._runs import KEY_BITS, decode_run, encode_run, key_order, short_keys

_TOP = np.uint64(1 << KEY_BITS)


@pytest.mark.parametrize("pool", [0, 3, 50, 1 << 40])
@pytest.mark.parametrize("size", [0, 1, 2, 17, 32_768])
def test_key_order_is_the_stable_sort_order(size: int, pool: int) -> None:
    rng = np.random.default_rng(size + pool)
    # drawn from a pool of ``pool`` keys: many ties, a few, or (almost) none
    keys = rng.integers(0, max(pool, 1), size=size, dtype=np.uint64)
    assert key_order(keys).tolist() == np.argsort(keys, kind="stable").tolist()


def test_a_batch_run_is_sorted_by_key_then_serial_and_keeps_its_last_serial() -> None:
    keys = np.array([9, 4, 9, 1, 4, 9], dtype=np.uint64)
    offsets = np.array([0, 0, 1, 1, 2, 2], dtype=np.uint32)
    run = pending_run(keys, offsets, 100)
    assert run.keys().tolist() == [1, 4, 4, 9, 9, 9]
    assert run.offsets(np.uint32).tolist() == [1, 0, 2, 0, 1, 2]
    assert (run.first, run.last, run.count) == (100, 102, 6)


@pytest.mark.parametrize("size", [1, 5, 31, 32, 33, 1000, 70_000, (1 << 22) + 5000])
def test_fence_lookup_equals_a_binary_search_of_the_whole_run(size: int) -> None:
    rng = np.random.default_rng(size)
    # keys drawn from a small pool too, so equal keys (several posts under one band) occur
    keys = np.concatenate(
        [
            rng.integers(0, 1 << KEY_BITS, size=size - size // 3, dtype=np.uint64),
            rng.choice(np.array([0, 7, (1 << KEY_BITS) - 1], dtype=np.uint64), size // 3),
        ]
    )
    run = decode_run(b"run", encode_run(keys, np.arange(size, dtype=np.uint32), 1000))
    whole = np.sort(keys)
    assert run.keys().tolist() == whole.tolist()
    assert run.keys(size // 3, size // 2 + 1).tolist() == whole[size // 3 : size // 2 + 1].tolist()
    # the key prefixes the key filter and the run masks are built from
    for width in (20, 26, 30):
        prefixes = (whole >> np.uint64(KEY_BITS - width)).astype(np.uint32)
        assert run.prefixes(width).tolist() == prefixes.tolist()
        assert run.prefixes(width, size // 3, size // 2 + 1).tolist() == prefixes[size // 3 : size // 2 + 1].tolist()
    sample = keys[: size // 2]
    queries = np.unique(
        np.concatenate(
            [
                sample,
                sample ^ np.uint64(1),  # the same top 32 bits, another key
                sample ^ np.uint64(1 << 20),
                rng.integers(0, 1 << KEY_BITS, size=500, dtype=np.uint64),
                np.array([0, 1, 1 << 31, 1 << 39, (1 << KEY_BITS) - 1], dtype=np.uint64),
            ]
        )
    )
    found, first, end = run.find(queries)
    expected_first = np.searchsorted(whole, queries, side="left")
    expected_end = np.searchsorted(whole, queries, side="right")
    present = expected_end > expected_first
    assert found.tolist() == np.flatnonzero(present).tolist()
    assert first.tolist() == expected_first[present].tolist()
    assert end.tolist() == expected_end[present].tolist()
    # equal keys keep serial order, oldest first
    for query in queries[found][:50]:
        positions = np.flatnonzero(whole == query)
        assert np.all(np.diff(run.serials(positions)) > 0)


def test_band_keys_that_share_their_top_32_bits_are_different_keys() -> None:
    # 32-bit keys matched by chance once an index held millions of posts; a
    # band key is now cut to 40 bits, and one that differs from a stored key
    # only in bits 33 to 40 finds nothing.
    band_keys = np.array([0xABCDEF01_23456789, 0x12345678_9ABCDEF0], dtype=np.uint64)
    run = decode_run(b"run", encode_run(short_keys(band_keys), np.arange(2, dtype=np.uint32), 1))
    near = band_keys ^ np.uint64(1 << 24)  # the lowest of the 40 bits kept
    assert np.array_equal(near >> np.uint64(32), band_keys >> np.uint64(32))
    assert len(run.find(np.sort(short_keys(near)))[0]) == 0
    beyond = band_keys ^ np.uint64(1 << 23)  # below the 40 bits: the same key
    assert len(run.find(np.sort(short_keys(beyond)))[0]) == 2


@pytest.mark.parametrize(
    ("span", "entry_bytes"),
    [(100, 6), ((1 << 16) - 1, 6), (1 << 16, 7), ((1 << 24) - 1, 7), (1 << 24, 8), ((1 << 32) - 1, 8)],
)
def test_a_run_stores_each_serial_in_as_few_bytes_as_its_span_needs(span: int, entry_bytes: int) -> None:
    rng = np.random.default_rng(span)
    first = 5_000_000_000
    serials = np.concatenate([[first, first + span], first + rng.integers(0, span + 1, size=998)]).astype(np.uint64)
    keys = rng.integers(0, 1 << KEY_BITS, size=len(serials), dtype=np.uint64)
    value = encode_run(keys, (serials - first).astype(np.uint32), first)
    run = decode_run(b"run", value)
    assert (run.first, run.last) == (first, first + span)
    # the header, a fence of 2**8 buckets (it holds each key's top 8 bits), the entries
    assert len(value) == 32 + 4 * 257 + entry_bytes * len(serials)
    order = np.argsort(keys, kind="stable")
    assert run.keys().tolist() == keys[order].tolist()
    assert run.serials().tolist() == serials[order].astype(np.int64).tolist()
    picked = np.array([0, 7, len(serials) - 1])
    assert run.serials(picked).tolist() == serials[order][picked].astype(np.int64).tolist()


@pytest.mark.parametrize("first_live", [0, 1000, 1025, 1050, (1 << 20) + 1010, (1 << 20) + 2000, 1 << 33])
def test_a_merge_keeps_the_entries_of_posts_not_purged_under_their_serials(first_live: int) -> None:
    rng = np.random.default_rng(first_live)
    runs = [
        # 50 posts of 10 band keys each from serial 1000, then 50 more a million serials later
        decode_run(
            b"run", encode_run(rng.integers(0, 1 << KEY_BITS, 500, dtype=np.uint64), np.repeat(offsets, 10), base)
        )
        for base, offsets in [(1000, np.arange(50, dtype=np.uint32)), (1 << 20, np.arange(1000, 1050, dtype=np.uint32))]
    ]
    expected = sorted(
        (key, serial)
        for run in runs
        for key, serial in zip(run.keys().tolist(), run.serials().tolist(), strict=True)
        if serial >= first_live
    )
    keys, offsets, base = merge_entries(runs, first_live)
    if not expected:
        assert len(keys) == 0
        return
    merged = decode_run(b"merged", encode_run(keys, offsets, base))
    assert sorted(zip(merged.keys().tolist(), merged.serials().tolist(), strict=True)) == expected
    assert (merged.first, merged.last) == (min(s for _, s in expected), max(s for _, s in expected))
