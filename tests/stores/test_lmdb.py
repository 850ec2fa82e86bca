"""The LMDB store beyond the conformance suite: its layout, runs, merges, filters and formats.

Layout sizes are shrunk through ``LMDBTuning`` so that merges, kept runs and
filter rebuilds happen on streams of a few thousand posts. A few tests wrap
internal steps to count them; they name the module the step lives in.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import hypothesis
import numpy as np
import pytest
from hypothesis import strategies

from streamfilter import ConfigMismatchError, LMDBStore, MemoryStore, StoreError
from streamfilter.stores import Match
from streamfilter.stores._records import decode_record, encode_record, id_end
from streamfilter.stores.lmdb import LMDBTuning
from streamfilter.stores.lmdb._caches import KeyFilter, RunCache, RunMasks
from streamfilter.stores.lmdb._runs import KEY_BITS, Run, decode_run, encode_run

from ..conftest import distinct_text
from .test_conformance import CONFIG, TEXT, _mutated_stream, settings, sketch, spelled


def test_lmdb_config_mismatch_names_the_settings(tmp_path: Path) -> None:
    store = LMDBStore(tmp_path / "index")
    store.open(settings())
    store.close()
    other = dict(CONFIG.fingerprint(), shingle_size=3, num_perm=64)
    with pytest.raises(ConfigMismatchError) as caught:
        LMDBStore(tmp_path / "index").open(settings(fingerprint=other))
    message = str(caught.value)
    assert "shingle_size: index has 2, requested 3" in message
    assert "num_perm: index has 32, requested 64" in message
    assert "open it with the stored settings" in message
    assert LMDBStore(tmp_path / "index").pinned_settings() == CONFIG.fingerprint()


def test_lmdb_index_of_an_older_normaliser_asks_for_a_new_index(tmp_path: Path) -> None:
    fingerprint = CONFIG.fingerprint()
    older = dict(fingerprint, normalizer_version=int(str(fingerprint["normalizer_version"])) - 1)
    store = LMDBStore(tmp_path / "index")
    store.open(settings(fingerprint=older))
    store.close()
    with pytest.raises(ConfigMismatchError) as caught:
        LMDBStore(tmp_path / "index").open(settings())
    message = str(caught.value)
    assert "another version of streamfilter" in message and "use a new index" in message
    assert "open it with the stored settings" not in message  # no setting brings an old normaliser back


def test_lmdb_map_grows_when_full(tmp_path: Path) -> None:
    store = LMDBStore(tmp_path / "index", map_size=64 * 1024, durable=False)
    store.open(settings())
    initial = store.map_size()
    for batch in range(20):
        store.check_and_insert(
            [sketch(f"{batch}-{i}", batch, f"post {batch} {i} words {batch * 1000 + i} more {i}") for i in range(200)]
        )
    assert store.post_count() == 4000
    assert store.map_size() > initial
    store.close()


def test_lmdb_unusable_path_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError, match="is a file, not an index directory"):
        LMDBStore(blocker).open(settings())


def _run_count(path: Path) -> int:
    import lmdb

    env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=4)
    try:
        runs = env.open_db(b"runs", create=False)
        with env.begin() as txn:
            return int(txn.stat(runs)["entries"])
    finally:
        env.close()


def test_lmdb_runs_merge_and_the_oldest_post_still_matches(tmp_path: Path) -> None:
    # every batch writes a run; merging keeps a few, and merged runs still hold the first post
    store = LMDBStore(tmp_path / "index", durable=False)
    store.open(settings())
    store.check_and_insert([sketch("first", 1, TEXT)])
    for batch in range(300):
        store.check_and_insert(
            [sketch(f"{batch}-{i}", 2 + batch, f"post {batch} {i} about {batch * 7 + i}") for i in range(5)]
        )
    (match,) = store.check_and_insert([sketch("copy", 400, TEXT)])
    store.close()
    assert match is not None and match.duplicate_of == "first"
    assert _run_count(tmp_path / "index") <= 12  # 301 batches, log-structured


def test_lmdb_runs_of_purged_posts_are_dropped(tmp_path: Path) -> None:
    store = LMDBStore(tmp_path / "index", durable=False)
    store.open(settings(ttl=10))
    for batch in range(40):
        store.check_and_insert(
            [sketch(f"{batch}-{i}", batch, f"post {batch} {i} about {batch * 7 + i}") for i in range(5)]
        )
    assert store.post_count() == 5 * 10  # timestamps 30..39 are live at clock 39
    store.check_and_insert([sketch("late", 10_000, "a much later post that expires every other")])
    assert store.post_count() == 1
    store.close()
    assert _run_count(tmp_path / "index") == 1


@pytest.mark.parametrize("variant", ["default", "merge-thread", "kept-runs"])
@pytest.mark.parametrize("batch_size", [1, 7, 256])
def test_lmdb_judges_like_the_memory_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch_size: int, variant: str
) -> None:
    # same stream, same verdicts, whatever the batching: runs, merges and the
    # batch's own earlier posts agree with a store that looks up one post at a time.
    # With "merge-thread", every merge of more than 64 entries runs on the
    # store's merge thread, while later batches are judged. Runs are kept
    # decoded across batches, smaller ones as copies; "kept-runs" also keeps
    # every run of 4 KB or more in place in the map, while merges replace
    # them, purges drop them and the map, starting at 64 KB, grows several times.
    map_size = 64 << 20
    reused: list[int] = []
    tuning = LMDBTuning()
    if variant != "default":
        tuning = LMDBTuning(inline_merged_entries=64)
    if variant == "kept-runs":
        tuning = LMDBTuning(inline_merged_entries=64, cached_run_bytes=4096)
        map_size = 64 << 10
        listed = RunCache.listed

        def counted(cache: RunCache, txn: object, db: object) -> list[object]:
            known = set(cache._runs)
            runs = listed(cache, txn, db)  # type: ignore[arg-type]
            reused.append(sum(run.db_key in known for run in runs))
            return runs  # type: ignore[return-value]

        monkeypatch.setattr(RunCache, "listed", counted)
    stream = _mutated_stream(1500, seed=batch_size)
    verdicts: dict[str, list[bool]] = {}
    lmdb = LMDBStore(tmp_path / "index", durable=False, map_size=map_size, tuning=tuning)
    for name, store in (("memory", MemoryStore()), ("lmdb", lmdb)):
        store.open(settings(ttl=300, purge_limit=50))
        novel: list[bool] = []
        for start in range(0, len(stream), batch_size):
            novel.extend(match is None for match in store.check_and_insert(stream[start : start + batch_size]))
            if store is lmdb and variant == "kept-runs":
                lmdb._merger.settle()  # every merge due is made: runs large enough to keep, replaced often
        if store is lmdb:
            grown_to = lmdb._require_env().info()["map_size"]
        store.close()
        verdicts[name] = novel
    assert verdicts["lmdb"] == verdicts["memory"]
    assert 300 < sum(verdicts["lmdb"]) < 1200  # the stream holds both kinds
    if variant == "kept-runs":
        assert grown_to >= 4 * map_size and sum(reused) > 0  # the map grew, and kept runs were used


def test_lmdb_map_grows_only_once_no_read_transaction_is_open(tmp_path: Path) -> None:
    # LMDB may resize a process's map only while none of its transactions is
    # open (py-lmdb invalidates them): the merge thread's read, open while a
    # batch grows the map, broke off a 10 M-post replay at 1 M posts
    import time

    store = LMDBStore(tmp_path / "index", durable=False, map_size=1 << 20)
    store.open(settings())
    store.check_and_insert([sketch("first", 1, TEXT)])
    opened, seen = threading.Event(), []

    def read() -> None:
        with store._reading(buffers=True) as txn:
            opened.set()
            time.sleep(0.3)
            seen.append((int(txn.stat(store._posts)["entries"]), time.monotonic()))

    reader = threading.Thread(target=read)
    reader.start()
    opened.wait()
    store._grow(store._require_env(), 4 << 20)
    grown = time.monotonic()
    reader.join()
    (match,) = store.check_and_insert([sketch("copy", 2, TEXT)])
    store.close()
    assert seen and seen[0][0] == 1 and seen[0][1] <= grown  # the read finished first, unharmed
    assert match is not None and match.duplicate_of == "first"


def test_lmdb_index_of_the_old_layout_is_refused_by_name(tmp_path: Path) -> None:
    import lmdb

    env = lmdb.open(str(tmp_path / "index"), max_dbs=4)
    meta = env.open_db(b"meta")
    with env.begin(write=True) as txn:
        txn.put(b"format", b"streamfilter-lmdb-5", db=meta)  # the layout before 40-bit keys
    env.close()
    with pytest.raises(
        StoreError,
        match="format streamfilter-lmdb-5, this streamfilter reads streamfilter-lmdb-7 only",
    ):
        LMDBStore(tmp_path / "index").open(settings())


@pytest.mark.parametrize("variant", ["small-runs", "runs-with-own-filters", "kept-runs"])
def test_lmdb_runs_of_another_process_are_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variant: str) -> None:
    # each process keeps its own filter of the keys in the runs; runs written
    # (and merged) by another process must still be found. With
    # "runs-with-own-filters", every run of 32 entries or more (a batch of 10
    # posts has 170) is a large one, searched only for the keys its own bits
    # may hold. With "kept-runs", this process keeps runs of 4 KB or more
    # decoded across batches, while the other process merges them away.
    import subprocess

    tuning = LMDBTuning()
    if variant == "runs-with-own-filters":
        tuning = LMDBTuning(filtered_run=32)
    if variant == "kept-runs":
        tuning = LMDBTuning(cached_run_bytes=4096)

    texts = [
        f"post {i} x{spelled(i * 31)} y{spelled(i * 17)} z{spelled(i * 13)} w{spelled(i * 7)} about it"
        for i in range(240)
    ]
    store = LMDBStore(tmp_path / "index", durable=False, tuning=tuning)
    store.open(settings())
    writer = (
        "import sys; from tests.stores.test_conformance import LMDBStore, settings, sketch, spelled\n"
        "store = LMDBStore(sys.argv[1], durable=False); store.open(settings())\n"
        "start = int(sys.argv[2])\n"
        "for i in range(start, start + 40, 10):\n"
        "    texts = [f'post {j} x{spelled(j * 31)} y{spelled(j * 17)} z{spelled(j * 13)} w{spelled(j * 7)} about it' for j in range(i, i + 10)]\n"
        "    assert store.check_and_insert([sketch(f'a{j}', j, t) for j, t in zip(range(i, i + 10), texts)]) == [None] * 10\n"
    )
    for start in range(0, 240, 40):  # alternate with another process, so merges combine runs of both
        if (start // 40) % 2:
            subprocess.run([sys.executable, "-c", writer, str(tmp_path / "index"), str(start)], check=True)
        else:
            for i in range(start, start + 40, 10):
                batch = [sketch(f"a{j}", j, texts[j]) for j in range(i, i + 10)]
                assert store.check_and_insert(batch) == [None] * 10
        # this process's view, after every round
        (match,) = store.check_and_insert([sketch(f"copy{start}", 1000 + start, texts[start + 39])])
        assert match is not None and match.duplicate_of == f"a{start + 39}"
    matches = store.check_and_insert([sketch(f"copy-{i}", 2000 + i, texts[i]) for i in range(240)])
    store.close()
    assert [match.duplicate_of if match else None for match in matches] == [f"a{i}" for i in range(240)]


def test_lmdb_run_masks_never_lose_a_key_of_a_live_large_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # The table that says which large runs may hold a key must hold every key
    # of every live large run, whatever came and went before: more large runs
    # than planes (shared planes), runs gone (stale planes, cleared later),
    # and a run larger than the table was sized for (the table built again).
    # A key it lost would be a duplicate let through.
    import numpy as np

    rng = np.random.default_rng(7)

    def run(first: int, entries: int) -> Run:
        keys = rng.integers(0, 1 << KEY_BITS, entries, dtype=np.uint64)
        return decode_run(b"", encode_run(keys, np.arange(entries, dtype=np.uint32), first))

    masks = RunMasks(filtered_run=64)
    live: list[Run] = []
    sizes = [64, 500, 3000, 20000] * 10 + [300_000]  # the last outgrows a table sized for the others
    for step, entries in enumerate(sizes):
        live.append(run(step * 1_000_000, entries))
        if step % 3 == 2:
            live.pop(int(rng.integers(0, len(live))))  # a run merged away or purged
        small = run(999_000_000 + step, 10)  # below _FILTERED_RUN: never in the table
        masks.sync([*live, small])
        assert masks.bit_of(small) is None
        for each in live:
            bit = masks.bit_of(each)
            assert bit is not None
            found = masks.masks(each.keys())
            assert found is not None and np.all(found & bit), f"step {step}: a key of a live run is missing"
    assert len(live) > RunMasks.PLANES  # planes were shared
    # keys in no run pass for a run's plane about as often as its plane is set
    strangers = rng.integers(0, 1 << KEY_BITS, 100_000, dtype=np.uint64)
    found = masks.masks(strangers)
    assert found is not None
    for each in live:
        bit = masks.bit_of(each)
        assert bit is not None
        assert np.count_nonzero(found & bit) / len(strangers) < 0.15
    masks.sync([])
    assert masks.masks(strangers) is None  # no large run left: the table is freed


@pytest.mark.parametrize("merges", ["inline", "merge-thread"])
def test_lmdb_large_run_purged_small_is_still_searched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, merges: str
) -> None:
    # Large runs are in the run masks and small ones in the key filter's bits.
    # When purging makes a merge with a large run small, the merged run's keys
    # must go into the bits: the large run's were never there, and the posts
    # of it that are still live would never be found.
    tuning = LMDBTuning(filtered_run=600, inline_merged_entries=0 if merges == "merge-thread" else 1 << 15)
    texts = [
        f"post {i} x{spelled(i * 31)} y{spelled(i * 17)} z{spelled(i * 13)} w{spelled(i * 7)} about it"
        for i in range(60)
    ]
    store = LMDBStore(tmp_path / "index", durable=False, tuning=tuning)
    store.open(settings(ttl=55))
    # a large run: 40 posts, one a second, 18 keys each (720 entries)
    assert store.check_and_insert([sketch(f"a{i}", i, texts[i]) for i in range(40)]) == [None] * 40
    # at t=88 the posts up to t=33 are purged; two runs of 10 posts merge
    # (360 entries), then with the large one: 6 of its posts are left, 468 entries
    for start in (40, 50):
        assert store.check_and_insert([sketch(f"a{i}", 88, texts[i]) for i in range(start, start + 10)]) == [None] * 10
        store._merger.settle()
    with store._reading(buffers=True) as txn:
        sizes = [decode_run(key, value).count for key, value in txn.cursor(db=store._runs)]
    assert len(sketch("a0", 0, texts[0]).band_keys) == 18
    assert sizes == [26 * 18]  # the large run is gone into a small one
    matches = store.check_and_insert([sketch(f"copy{i}", 88, texts[i]) for i in range(34, 60)])
    store.close()
    assert [match.duplicate_of if match else None for match in matches] == [f"a{i}" for i in range(34, 60)]


def test_lmdb_run_of_an_aborted_batch_does_not_hide_another_process_run(tmp_path: Path) -> None:
    # The key filter takes in the runs this process writes only once they commit:
    # after an aborted batch, another process writes its own run at the same
    # serials, with as many entries, and that run's keys must still be searched
    import subprocess

    store = LMDBStore(tmp_path / "index", durable=False)
    store.open(settings())
    first = [
        sketch(f"a{i}", i, f"first batch post {i} x{spelled(i * 31)} y{spelled(i * 17)} about it") for i in range(10)
    ]
    assert store.check_and_insert(first) == [None] * 10

    def fail(matches: Sequence[Match | None]) -> None:
        raise RuntimeError("the verdicts could not be written")

    with pytest.raises(RuntimeError):
        store.check_and_insert([sketch("lost", 20, "an aborted post that no reader ever saw")], deliver=fail)
    writer = (
        "import sys; from tests.stores.test_conformance import LMDBStore, settings, sketch, spelled\n"
        "store = LMDBStore(sys.argv[1], durable=False); store.open(settings())\n"
        "assert store.check_and_insert([sketch('other', 21, 'written by another process instead')]) == [None]\n"
    )
    subprocess.run([sys.executable, "-c", writer, str(tmp_path / "index")], check=True)
    (match,) = store.check_and_insert([sketch("copy", 22, "written by another process instead")])
    (again,) = store.check_and_insert([sketch("copy2", 23, "an aborted post that no reader ever saw")])
    store.close()
    assert match is not None and match.duplicate_of == "other"
    assert again is None


def test_lmdb_key_filter_at_its_size_cap_is_not_rebuilt_every_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # once the live keys outnumber the filter's capped bits, a rebuild must not repeat every batch
    rebuilds: list[int] = []
    original = KeyFilter._rebuild

    def counting(self: object, runs: list[object], live: int) -> None:
        rebuilds.append(live)
        original(self, runs, live)  # type: ignore[arg-type]

    monkeypatch.setattr(KeyFilter, "_rebuild", counting)
    # 4096 bits, outgrown by ~30 posts
    store = LMDBStore(tmp_path / "index", durable=False, tuning=LMDBTuning(max_filter_bits=12))
    store.open(settings())
    for batch in range(60):
        store.check_and_insert(
            [sketch(f"{batch}-{i}", batch, f"post {batch} {i} about {batch * 7 + i}") for i in range(20)]
        )
    (match,) = store.check_and_insert([sketch("copy", 100, "post 3 4 about 25")])
    store.close()
    assert match is not None and match.duplicate_of == "3-4"
    assert len(rebuilds) < 60 // 2  # every few batches, as keys a quarter of the bits are added; never each one


BLUESKY_POST = "at://did:plc:dclwtltrt2ggsryagfzk7dp4/app.bsky.feed.post/3mptbyoeyc22k"


# Bluesky post URIs and near misses (letters outside base32, other lengths and
# collections, empty and long record keys), other text ids, decimal ids.


@hypothesis.settings(max_examples=500, deadline=None)
@hypothesis.given(
    strategies.one_of(
        strategies.builds(
            lambda letters, collection, rkey: f"at://did:plc:{letters}{collection}{rkey}",
            strategies.text("abcdefghijklmnopqrstuvwxyz234567018ABZ", min_size=22, max_size=26),
            strategies.sampled_from(["/app.bsky.feed.post/", "/app.bsky.feed.repost/", "/app.bsky.feed.post"]),
            strategies.text(max_size=300),
        ),
        strategies.text(max_size=300),
        strategies.integers(0, 10**20).map(str),
    )
)
@hypothesis.example(BLUESKY_POST)
@hypothesis.example(BLUESKY_POST.replace("dclwtl", "DCLWTL"))  # base32 either way, but not the same text
@hypothesis.example(BLUESKY_POST.replace("dclwtl", "dc1wtl"))  # not base32
@hypothesis.example(BLUESKY_POST.rsplit("/", 1)[0] + "/")  # no record key
@hypothesis.example(BLUESKY_POST + "é" * 200)  # a record key longer than a byte can count
def test_records_give_back_every_id(post_id: str) -> None:
    try:
        post_id.encode("utf-8")
    except UnicodeEncodeError:
        return  # lone surrogates: no record holds them
    hashes = np.arange(5, dtype="<u4").tobytes()
    record = encode_record(1.5, post_id, hashes)
    timestamp, decoded, words = decode_record(record)
    assert (timestamp, decoded, bytes(words)) == (1.5, post_id, hashes)
    assert id_end(record) == len(record) - len(hashes)  # the id's bytes, which the Redis scripts compare


def test_lmdb_packs_bluesky_post_uris_and_refuses_other_formats(tmp_path: Path) -> None:
    import json

    import lmdb

    text, other = distinct_text(1, 12), distinct_text(2, 12)
    long_id = "x" * 253  # the first length that needs the long-id marker

    def shortest_record(path: Path) -> int:
        with lmdb.open(str(path), max_dbs=4, readonly=True, lock=False) as env:
            with env.begin(db=env.open_db(b"posts", create=False)) as txn:
                return min(len(value) for _, value in txn.cursor())

    path = tmp_path / "new"
    store = LMDBStore(path)
    store.open(settings())
    assert store.check_and_insert([sketch(BLUESKY_POST, 1, text), sketch(long_id, 2, other)]) == [None, None]
    store.close()
    store = LMDBStore(path)  # read back from the file, not from the cache
    store.open(settings())
    again = store.check_and_insert([sketch("p1", 3, text), sketch("p2", 4, other)])
    assert [match.duplicate_of if match else None for match in again] == [BLUESKY_POST, long_id]
    store.close()
    words = len(sketch(BLUESKY_POST, 1, text).words) * 4
    # packed: 15 bytes of did:plc, the key's length and the key
    assert shortest_record(path) == 9 + 16 + 13 + words

    old = tmp_path / "format-6"
    env = lmdb.open(str(old), max_dbs=4)
    with env.begin(write=True, db=env.open_db(b"meta")) as txn:  # as a development build left it
        txn.put(b"format", b"streamfilter-lmdb-6")
        txn.put(b"config", json.dumps(CONFIG.fingerprint(), sort_keys=True).encode())
    env.close()
    with pytest.raises(StoreError, match="format streamfilter-lmdb-6.*replay the stream into a new --db directory"):
        LMDBStore(old).open(settings())


def test_an_index_another_process_is_creating_is_waited_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # LMDB makes lock.mdb, then data.mdb, and only then writes data.mdb's
    # header under its lock: a replay that looks in between must not take
    # the file for a user's empty one (several replays started at once on
    # one new index failed so). Here the "other process" finishes the file
    # while this one waits, at its first pause.
    from streamfilter.stores.lmdb import _header

    made = tmp_path / "made"
    store = LMDBStore(made)
    store.open(settings())
    store.close()
    creating = tmp_path / "creating"
    creating.mkdir()
    (creating / "lock.mdb").write_bytes((made / "lock.mdb").read_bytes())
    (creating / "data.mdb").write_bytes(b"")
    pauses = []

    def finish_the_file(seconds: float) -> None:
        pauses.append(seconds)
        (creating / "data.mdb").write_bytes((made / "data.mdb").read_bytes())

    monkeypatch.setattr(time, "sleep", finish_the_file)  # as _header sleeps while a file is being made
    store = LMDBStore(creating)
    store.open(settings())  # waited for the header, then opened
    store.close()
    assert len(pauses) == 1
    # a creation that never finishes is refused once the wait is over
    (creating / "data.mdb").write_bytes(b"")
    monkeypatch.setattr(_header, "_CREATION_WAIT", 0.0)
    with pytest.raises(StoreError, match="data.mdb is empty \\(0 bytes\\)"):
        LMDBStore(creating).open(settings())


def test_an_empty_or_damaged_index_file_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "data.mdb").write_bytes(b"")
    with pytest.raises(StoreError, match="data.mdb is empty \\(0 bytes\\), so it is no LMDB index"):
        LMDBStore(empty).open(settings())
    with pytest.raises(StoreError, match="is empty"):
        LMDBStore(empty).pinned_settings()

    damaged = tmp_path / "damaged"
    store = LMDBStore(damaged)
    store.open(settings())
    texts = [f"post {i} x{spelled(i * 31)} y{spelled(i * 17)} z{spelled(i * 13)} about it" for i in range(300)]
    assert store.check_and_insert([sketch(f"a{i}", i, texts[i]) for i in range(300)]) == [None] * 300
    store.close()
    data = bytearray((damaged / "data.mdb").read_bytes())
    for at in range(2 * 4096, len(data), 61):  # every page past the two meta pages, scribbled on
        data[at] ^= 0x5A
    (damaged / "data.mdb").write_bytes(bytes(data))
    with pytest.raises(StoreError, match="damaged"):
        store = LMDBStore(damaged)
        store.open(settings())
        store.check_and_insert([sketch(f"copy{i}", 400 + i, texts[i]) for i in range(300)])


@pytest.mark.parametrize("damage", [b"\x00", b"\x01"])  # too short for any record; words not whole uint32s
def test_a_damaged_post_record_is_a_clear_error_and_commits_nothing(tmp_path: Path, damage: bytes) -> None:
    # the judge fetches a copy's candidates from the posts table as it goes
    # (the compiled loop, through the transaction); a record it cannot read
    # stops the batch with the store's error, and none of the batch is kept
    import lmdb

    store = LMDBStore(tmp_path / "index")
    store.open(settings())
    texts = [f"post {i} x{spelled(i * 31)} y{spelled(i * 17)} z{spelled(i * 13)} about it" for i in range(40)]
    assert store.check_and_insert([sketch(f"a{i}", i, texts[i]) for i in range(40)]) == [None] * 40
    store.close()
    env = lmdb.open(str(tmp_path / "index"), max_dbs=4, subdir=True)
    with env.begin(write=True, db=env.open_db(b"posts")) as txn:
        for key, value in list(txn.cursor()):
            txn.put(key, b"\x00" if damage == b"\x00" else value + damage)
    env.close()
    store = LMDBStore(tmp_path / "index")
    store.open(settings())
    try:
        with pytest.raises(StoreError, match="damaged"):
            store.check_and_insert([sketch(f"copy{i}", 100 + i, texts[i]) for i in range(40)])
        assert store.post_count() == 40
    finally:
        store.close()
