"""The LMDB store's merges: inline in a batch's transaction, and on the merge thread.

Layout sizes are shrunk through ``LMDBTuning`` so that merges happen on
streams of a few hundred posts. A few tests wrap internal steps to count
them; they name the module the step lives in.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from streamfilter import LMDBStore, StoreError
from streamfilter.stores.lmdb import LMDBTuning
from streamfilter.stores.lmdb import _store as lmdb_store_module
from streamfilter.stores.lmdb._batch import Batch
from streamfilter.stores.lmdb._runs import Run

from .test_conformance import settings, sketch, spelled


def test_lmdb_large_merges_run_on_the_merge_thread_and_keep_runs_few(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # no batch merges runs into more than _INLINE_MERGED_ENTRIES entries; the
    # merge thread does, and the index still keeps a few runs that find every post
    inline: list[int] = []  # the entries of each run a batch writes: its own, or merged
    put_entries = Batch._put_entries

    def counted(self: Batch, entries: tuple[np.ndarray, np.ndarray, int]) -> Run:
        run = put_entries(self, entries)
        inline.append(run.count)
        return run

    monkeypatch.setattr(Batch, "_put_entries", counted)
    store = LMDBStore(tmp_path / "index", durable=False, tuning=LMDBTuning(inline_merged_entries=200))
    store.open(settings())
    texts = [f"post {i} x{spelled(i * 31)} y{spelled(i * 17)} z{spelled(i * 13)} about it" for i in range(1000)]
    for start in range(0, 1000, 5):
        batch = [sketch(f"a{i}", i, texts[i]) for i in range(start, start + 5)]
        assert store.check_and_insert(batch) == [None] * 5
    store._merger.settle()
    with store._require_env().begin() as txn:
        runs = int(txn.stat(store._runs)["entries"])
    matches = store.check_and_insert([sketch(f"copy{i}", 2000 + i, texts[i]) for i in range(0, 1000, 37)])
    store.close()
    assert max(inline) <= 200 and max(inline) > 85  # batches merged small runs only (a batch's own is 85)
    assert runs <= 10  # 200 batches of 85 entries: the merge thread merged the rest
    assert [match.duplicate_of if match else None for match in matches] == [f"a{i}" for i in range(0, 1000, 37)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own nice value is Linux's")
def test_lmdb_merge_thread_runs_below_the_batches_priority(tmp_path: Path) -> None:
    # on busy cores a batch's thread runs before merges, which no verdict
    # waits for (docs/benchmarks.md, Streaming latency); the process keeps its own
    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    store = LMDBStore(tmp_path / "index", durable=False, tuning=LMDBTuning(inline_merged_entries=16))
    store.open(settings())
    try:
        for start in range(0, 200, 5):
            batch = [
                sketch(f"a{i}", i, f"post {i} x{spelled(i * 31)} y{spelled(i * 17)} about it")
                for i in range(start, start + 5)
            ]
            store.check_and_insert(batch)
        store._merger.settle()
        thread = store._merger._thread
        assert thread is not None and thread.native_id is not None  # merges ran on it
        assert os.getpriority(os.PRIO_PROCESS, thread.native_id) == min(19, own + 10)
        assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == own  # not the whole process
    finally:
        store.close()


def test_lmdb_merge_thread_error_is_raised_by_the_next_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a failed merge loses nothing: the next batch raises it before judging, and judged again it is novel

    def broken(runs: list[object], tuning: object) -> tuple[int, int] | None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(lmdb_store_module, "merge_plan", broken)
    store = LMDBStore(tmp_path / "index", durable=False, tuning=LMDBTuning(inline_merged_entries=100))
    store.open(settings())
    for start in range(0, 40, 5):  # 85 entries a batch: the second batch wants a merge of 170
        store.check_and_insert(
            [
                sketch(f"a{i}", i, f"post {i} x{spelled(i * 31)} y{spelled(i * 17)} about it")
                for i in range(start, start + 5)
            ]
        )
        store._merger.settle()
        if store._merger.error is not None:
            break
    last = [sketch("late", 100, "a post judged after the merge failed")]
    with pytest.raises(StoreError, match="merging runs of the LMDB index .* failed: .*No space left"):
        store.check_and_insert(last)
    assert store.check_and_insert(last) == [None]
    store.close()


def test_lmdb_batch_merges_a_cascade_at_once_into_the_runs_pairwise_merges_make(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A batch whose run would merge with the newest run, then the result with
    # the next, and so on, writes the final run at once. The index must be
    # the very one that merging pair by pair makes, purged posts and all.
    # (The merge thread is kept out: its transactions would number the runs.)
    tuning = LMDBTuning(inline_merged_entries=3000, max_merged_entries=3000)
    texts = [f"post {i} x{spelled(i * 31)} y{spelled(i * 17)} z{spelled(i * 13)} w{i % 7} about it" for i in range(600)]
    cascades: list[int] = []
    write_cascade = Batch._write_cascade

    def counted(self: Batch, pending: Run, sizes: list[tuple[bytes, int]], first_live: int) -> bool:
        before = len(sizes)
        written = write_cascade(self, pending, sizes, first_live)
        if written:
            cascades.append(before - len(sizes))  # the runs merged into the batch's
        return written

    contents = []
    for at_once in (True, False):
        with monkeypatch.context() as patched:
            patched.setattr(Batch, "_write_cascade", counted if at_once else lambda *args: False)
            store = LMDBStore(tmp_path / f"index-{at_once}", durable=False, tuning=tuning)
            store.open(settings(ttl=150))
            verdicts = []
            for start in range(0, 600, 6):  # a copy now and then, and posts purged as time goes on
                batch = [sketch(f"a{i}", i, texts[i if i % 9 else i // 2]) for i in range(start, start + 6)]
                verdicts += [match.duplicate_of if match else None for match in store.check_and_insert(batch)]
            with store._require_env().begin() as txn:
                runs = dict(txn.cursor(store._runs).iternext())
            store.close()
            contents.append((verdicts, runs))
    assert max(cascades) >= 3  # cascades of three runs and more were written at once
    assert contents[0] == contents[1]
    assert any(contents[0][0]) and len(contents[0][1]) > 1


def test_lmdb_runs_whose_serials_lie_2_to_the_32_apart_stay_apart(tmp_path: Path) -> None:
    # A run's serials are offsets of 32 bits at most from its first: runs
    # further apart than that (an index that lived through 4 G posts) must
    # never merge into one, however their sizes call for it, nor lose a post.
    store = LMDBStore(tmp_path / "index", durable=False, tuning=LMDBTuning(inline_merged_entries=3000))
    store.open(settings())
    texts = [f"post {i} x{spelled(i * 31)} y{spelled(i * 17)} z{spelled(i * 13)} about it" for i in range(40)]
    store.check_and_insert([sketch(f"a{i}", i, texts[i]) for i in range(10)])
    env = store._require_env()
    with env.begin(write=True) as txn:  # serials jump 2**32 ahead, as after 4 G posts
        serial = lmdb_store_module._U64.unpack(txn.get(lmdb_store_module._SERIAL_KEY, db=store._meta) or b"")[0]
        txn.put(lmdb_store_module._SERIAL_KEY, lmdb_store_module._U64.pack(serial + (1 << 32)), db=store._meta)
    for start in (10, 20, 30):  # of similar size: each would merge with the runs before it
        store.check_and_insert([sketch(f"a{i}", i, texts[i]) for i in range(start, start + 10)])
    with env.begin() as txn:
        spans = [(run.first, run.last) for run in store._run_cache.listed(txn, store._runs)]
    matches = store.check_and_insert([sketch(f"copy{i}", 100 + i, texts[i]) for i in (0, 9, 10, 25, 39)])
    store.close()
    assert len(spans) == 2 and all(last - first < 1 << 32 for first, last in spans)
    assert spans[0][1] < 1 << 32 <= spans[1][0]  # the old posts' run, and the newer posts' merged one
    assert [match.duplicate_of if match else None for match in matches] == ["a0", "a9", "a10", "a25", "a39"]


def test_lmdb_merge_thread_merges_a_carry_at_once_into_the_runs_pairs_make(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Where merging the newest large pair makes a run that merges with the run
    # before it, and so on, the merge thread merges them all in one swap. The
    # runs must be those that merging pair by pair makes, purges and all.
    plans: list[int] = []
    plan: Callable[[list[Run], LMDBTuning], tuple[int, int] | None]
    plan = getattr(lmdb_store_module, "merge_plan")  # noqa: B009 - imported there, where the test patches it

    def counted(runs: list[Run], tuning: LMDBTuning) -> tuple[int, int] | None:
        planned = plan(runs, tuning)
        if planned is not None:
            plans.append(planned[1] - planned[0])
        return planned

    def pairwise(runs: list[Run], tuning: LMDBTuning) -> tuple[int, int] | None:
        planned = plan(runs, tuning)
        return None if planned is None else (planned[1] - 2, planned[1])

    texts = [
        f"post {i} x{spelled(i * 31)} y{spelled(i * 17)} z{spelled(i * 13)} w{i % 7} about it" for i in range(1200)
    ]
    contents = []
    for planner in (counted, pairwise):
        with monkeypatch.context() as patched:
            patched.setattr(lmdb_store_module, "merge_plan", planner)
            store = LMDBStore(tmp_path / planner.__name__, durable=False, tuning=LMDBTuning(inline_merged_entries=200))
            store.open(settings(ttl=900))
            verdicts = []
            for start in range(0, 1200, 6):  # a copy now and then; the first posts purged at the end
                batch = [sketch(f"a{i}", i, texts[i if i % 9 else i // 2]) for i in range(start, start + 6)]
                verdicts += [match.duplicate_of if match else None for match in store.check_and_insert(batch)]
                store._merger.settle()  # every merge due is made before the next batch
            with store._require_env().begin() as txn:
                runs = sorted(bytes(value) for value in txn.cursor(store._runs).iternext(keys=False, values=True))
            store.close()
            contents.append((verdicts, runs))
    assert max(plans) >= 3  # carries of three runs and more were merged at once
    assert contents[0] == contents[1]
    assert any(contents[0][0]) and len(contents[0][1]) > 1
