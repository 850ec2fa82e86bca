"""What only the Redis store does: its own expiry, shared use, dropped connections."""

from __future__ import annotations

import gc
import random
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from streamfilter import ConfigMismatchError, FilterConfig, MemoryStore, StoreError
from streamfilter.stores import BandStore
from streamfilter.stores.redis import RedisStore
from streamfilter.stores.redis._recording import ClusterRecording
from streamfilter.stores.redis._transaction import RedisTransaction

from ..conftest import distinct_text, unique_prefix
from ..redis_servers import free_port
from .test_conformance import CONFIG, TEXT, settings, sketch


@pytest.fixture(params=["redis", "redis-cluster"])
def server(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    return request.getfixturevalue("redis_server" if request.param == "redis" else "redis_cluster")


@pytest.fixture
def url(server) -> str:  # type: ignore[no-untyped-def]
    return unique_prefix(server.url)


def opened(url: str, ttl: float = 0, **kwargs: float) -> RedisStore:
    store = RedisStore(url, **kwargs)
    store.open(settings(ttl))
    return store


def keys_under(store: RedisStore) -> set[bytes]:
    client = store._client
    return set(client.scan_iter(match=store.prefix.encode() + b":*", count=1000))


def test_redis_expiry_leaves_nothing_behind(url: str) -> None:
    # 3 s, not 1: on a slow host the scan and the checks below took over a
    # second, and a key expired before its TTL was read (pttl -2)
    store = opened(url, ttl=3.0)
    store.check_and_insert([sketch(f"p{i}", 1000 + i * 0.001, distinct_text(i)) for i in range(20)])
    client = store._client
    records = [key for key in keys_under(store) if b":r:" in key]
    bands = [key for key in keys_under(store) if b":b:" in key]
    assert CONFIG.bands is not None
    assert store.post_count() == 20 and 0 < len(bands) <= 20 * (CONFIG.bands + 1)  # + the id key
    # every key of the posts' slice (0.75 s, a quarter of the TTL) expires a
    # TTL after the slice ends, and a second more
    assert all(0 < client.pttl(key) <= 1000 * (0.75 + 3 + 1) for key in records + bands)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(b":r:" in key or b":b:" in key for key in keys_under(store)):
        time.sleep(0.05)  # until Redis has expired them
    names = {key.split(b":")[1] for key in keys_under(store)}
    assert names <= {b"config", b"format", b"layout", b"clock", b"serial", b"slices", b"filing"}  # no record, no band
    store.close()


def test_event_time_rules_a_replay(url: str) -> None:
    # event time runs far ahead of the wall clock: the copy is judged by event time,
    # although Redis still holds the first post's keys
    store = opened(url, ttl=60)
    store.check_and_insert([sketch("a", 1000, TEXT)])
    (match,) = store.check_and_insert([sketch("b", 1030, TEXT)])
    assert match is not None
    (match,) = store.check_and_insert([sketch("c", 1061, TEXT)])
    assert match is None
    store.close()


def test_ttl_of_a_slice_is_what_remains_of_its_event_time_life(url: str) -> None:
    # slices of 25 s (a quarter of the TTL): a key lives until its slice's end,
    # plus the TTL, minus the clock, plus a second
    store = opened(url, ttl=100)
    store.check_and_insert([sketch("new", 5000, "the newest post moves the clock")])  # slice 5000-5025
    store.check_and_insert([sketch("older", 4950, TEXT)])  # slice 4950-4975: 75 s of life left
    client = store._client
    ttls = sorted(client.pttl(key) for key in keys_under(store) if b":r:" in key)
    assert 70_000 < ttls[0] <= 76_000 and 120_000 < ttls[1] <= 126_000
    store.close()


def test_a_replay_faster_than_the_wall_clock_keeps_only_the_live_window(url: str) -> None:
    # Event time runs 10 TTLs in a moment: Redis's own expiry (wall time) would
    # keep it all; slices behind the clock by a TTL are dropped whole.
    store = opened(url, ttl=60)
    for minute in range(10):
        batch = [sketch(f"{minute}-{i}", 1000 + minute * 60 + i, distinct_text(minute * 40 + i)) for i in range(40)]
        assert store.check_and_insert(batch) == [None] * 40
    # live: the last minute's 40 posts, and at most a slice (15 s) more
    assert 40 <= store.post_count() <= 40 + 15
    assert len({store._layout.slice_of_part(part) for part in store._parts()}) <= 60 // 15 + 2
    store.close()


def test_a_surge_after_a_quiet_slice_keeps_every_key_small(url: str) -> None:
    # A quiet slice sizes the next one for few posts; 500 times as many come.
    # The slice opens parts of more buckets as it fills, so record hashes stay
    # listpacks (the production guide's limit: 1024 entries; 1,250 in one part)
    # and band buckets near 1024 entries (2,650 in one part), and every post
    # is still found.
    store = opened(url, ttl=400)  # slices of 100 s
    assert store.check_and_insert([sketch(f"q{i}", 1000 + i, distinct_text(i)) for i in range(20)]) == [None] * 20
    assert store.check_and_insert([sketch(f"m{i}", 1100 + i, distinct_text(100 + i)) for i in range(20)])
    surge = [sketch(f"s{i}", 1200 + i * 0.005, distinct_text(1000 + i)) for i in range(10_000)]
    for start in range(0, len(surge), 1000):
        assert store.check_and_insert(surge[start : start + 1000]) == [None] * 1000
    client = store._client
    records = [key for key in keys_under(store) if b":r:" in key]
    bands = [key for key in keys_under(store) if b":b:" in key]
    assert max(client.hlen(key) for key in records) <= 1024
    assert max(client.strlen(key) for key in bands) <= 10 * 1280  # 10-byte entries
    copies = [sketch(f"c{i}", 1299, "@fan " + distinct_text(1000 + i)) for i in range(0, 10_000, 999)]
    assert [match and match.duplicate_of for match in store.check_and_insert(copies)] == [
        f"s{i}" for i in range(0, 10_000, 999)
    ]
    store.close()


def test_band_buckets_filed_into_batch_after_batch_hold_no_spare_room(url: str) -> None:
    # 40 batches file into the same band buckets. Each bucket's entries are
    # in the order posts were recorded. Each bucket keeps its
    # slice's TTL and takes no more memory than its value written once:
    # Redis grows an appended string to up to twice its length; left so, the
    # labelled stream of benchmarks/ took 80 to 100 more bytes a post.
    store = opened(url, ttl=3600)
    for batch in range(40):
        posts = [sketch(f"{batch}-{i}", 1000 + batch, distinct_text(batch * 25 + i)) for i in range(25)]
        assert store.check_and_insert(posts) == [None] * 25
    client = store._client
    bands = [key for key in keys_under(store) if b":b:" in key]
    assert bands and all(client.pttl(key) > 0 for key in bands)
    compared = 0
    for key in bands:
        value = client.get(key)
        # its posts' members rise through it, a batch's own posts in their
        # order too: the newest are last, which reads and rechecks rely on
        members = [value[at + 4 : at + 10] for at in range(0, len(value), 10)]
        assert members == sorted(members), key
        if len(value) <= 64:
            continue  # Redis keeps a short string in its object, written once or not
        as_filed = client.memory_usage(key)
        client.set(key, value, keepttl=True)  # the same value, written once
        assert as_filed == client.memory_usage(key), key
        compared += 1
    assert compared > len(bands) / 2
    assert not [key for key in keys_under(store) if b"scratch" in key]
    store.close()


def test_same_post_again_passes_again(url: str) -> None:
    # a batch replayed after a lost reply or a crash before its output: the post finds
    # its own record and passes again, so nothing is lost; another id is a duplicate
    store = opened(url)
    assert store.check_and_insert([sketch("a", 1000, TEXT)]) == [None]
    assert store.check_and_insert([sketch("a", 1000, TEXT)]) == [None]
    (match,) = store.check_and_insert([sketch("b", 1000, TEXT)])
    assert match is not None and match.duplicate_of == "a"
    assert store.post_count() == 1
    store.close()


def test_config_mismatch_names_the_settings(url: str) -> None:
    opened(url).close()
    other = dict(CONFIG.fingerprint(), shingle_size=3)
    store = RedisStore(url)
    with pytest.raises(ConfigMismatchError, match="shingle_size: index has 2, requested 3"):
        store.open(settings(fingerprint=other))
    store.close()
    assert RedisStore(url).pinned_settings() == CONFIG.fingerprint()


def test_an_open_that_fails_leaves_no_connection_behind(redis_server) -> None:  # type: ignore[no-untyped-def]
    # an index pinned with other settings: open raises, and the caller, who
    # never had an open store, has nothing to close; the server must not keep
    # the connection the failed open made
    import redis

    url = unique_prefix(redis_server.url)
    opened(url).close()
    watcher = redis.Redis.from_url(redis_server.url)
    try:
        before = watcher.info("clients")["connected_clients"]
        store = RedisStore(url)
        with pytest.raises(ConfigMismatchError):
            store.open(settings(fingerprint=dict(CONFIG.fingerprint(), shingle_size=3)))
        assert watcher.info("clients")["connected_clients"] == before
        assert store.pinned_settings() == CONFIG.fingerprint()  # the store is as before its open
    finally:
        watcher.close()


def test_two_stores_never_both_pass_copies(url: str) -> None:
    # two workers race the same texts through one index
    texts = [distinct_text(i) for i in range(200)]
    stores = [opened(url) for _ in range(2)]
    passed: list[list[str]] = [[], []]

    def work(n: int) -> None:
        for start in range(0, len(texts), 10):
            batch = [sketch(f"w{n}-{i}", 1000 + i, texts[i]) for i in range(start, start + 10)]
            for item, result in zip(batch, stores[n].check_and_insert(batch), strict=True):
                if result is None:
                    passed[n].append(item.post_id.split("-")[1])

    threads = [threading.Thread(target=work, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(passed[0] + passed[1], key=int) == [str(i) for i in range(200)]
    for store in stores:
        store.close()


def _batches() -> Iterator[list]:  # type: ignore[type-arg]
    for batch in range(60):
        yield [
            sketch(f"{batch}-{i}", 1000 + batch, distinct_text((batch * 10 + i) % 250) + f" copy {i % 3}")
            for i in range(10)
        ]


def test_dropped_connections_change_no_verdict(url: str, server) -> None:  # type: ignore[no-untyped-def]
    reference: BandStore = MemoryStore()
    reference.open(settings())
    expected = [reference.check_and_insert(batch) for batch in _batches()]

    store = opened(url)
    stop = threading.Event()
    nodes = getattr(server, "nodes", [server])

    def kill_connections() -> None:
        while not stop.is_set():
            for node in nodes:
                node.cli("CLIENT", "KILL", "TYPE", "normal")
            time.sleep(0.01)

    killer = threading.Thread(target=kill_connections)
    killer.start()
    try:
        got = [store.check_and_insert(batch) for batch in _batches()]
    finally:
        stop.set()
        killer.join()
    assert [[m and m.duplicate_of for m in batch] for batch in got] == [
        [m and m.duplicate_of for m in batch] for batch in expected
    ]
    store.close()


def test_redis_down_is_a_clear_error() -> None:
    port = free_port()
    store = RedisStore(f"redis://127.0.0.1:{port}/0", retry_for=0.5)
    started = time.monotonic()
    with pytest.raises(StoreError, match=rf"Redis at redis://127.0.0.1:{port}/0 .* is unreachable: connect failed"):
        store.open(settings())
    assert time.monotonic() - started < 5


def test_missing_extra_names_the_install() -> None:
    code = (
        "import sys; sys.modules['redis'] = None\n"
        "from streamfilter import RedisStore, StreamFilter\n"
        "try:\n"
        "    StreamFilter(store=RedisStore('redis://localhost:6379/0')).open()\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == (
        "MissingDependencyError the Redis store (redis-py) needs the optional extra 'redis'; install it with: "
        "pip install 'streamfilter[redis]', or in a clone of streamfilter: pip install -e '.[redis]'"
    )


def test_filter_config_defaults_are_pinned_on_redis_with_a_drawn_seed(url: str) -> None:
    # the first worker draws the seed and pins it; the next adopts it
    first, second = RedisStore(url), RedisStore(url)
    drawn = first.open(settings(fingerprint=FilterConfig().fingerprint()))
    assert isinstance(drawn["seed"], int)
    assert second.open(settings(fingerprint=FilterConfig().fingerprint())) == drawn
    first.close()
    second.close()
    assert RedisStore(url).pinned_settings() == {**FilterConfig().fingerprint(), "seed": drawn["seed"]}


def test_a_batch_lost_before_its_output_passes_again_on_resume(url: str) -> None:
    # the worker dies after Redis recorded the batch but before its output was written
    store = opened(url)

    def die(results: Sequence[Any]) -> None:
        raise KeyboardInterrupt("killed before the output was written")

    first = [sketch("a", 1000.0, TEXT), sketch("b", 1000.5, "another text, with words of its own")]
    with pytest.raises(KeyboardInterrupt):
        store.check_and_insert(first, deliver=die)
    store.close()
    # on resume, posts without a timestamp of their own get a new wall-clock time
    resumed = opened(url)
    again = [sketch("a", 2000.0, TEXT), sketch("b", 2000.5, "another text, with words of its own")]
    assert resumed.check_and_insert(again) == [None, None]
    (match,) = resumed.check_and_insert([sketch("c", 2001.0, TEXT)])
    assert match is not None and match.duplicate_of == "a"
    resumed.close()


def test_made_up_ids_are_the_same_post_only_with_the_same_timestamp(url: str) -> None:
    # "line:5" of one worker's input is not "line:5" of another's
    store = opened(url)
    mine = sketch("line:5", 1000.0, TEXT)
    mine.made_up_id = True
    assert store.check_and_insert([mine]) == [None]
    theirs = sketch("line:5", 1000.7, TEXT)
    theirs.made_up_id = True
    (match,) = store.check_and_insert([theirs])
    assert match is not None and match.duplicate_of == "line:5"
    assert store.check_and_insert([mine]) == [None]  # my own batch, replayed
    store.close()


def test_a_cluster_step_that_fails_on_one_node_leaves_no_answer_for_the_next(redis_cluster) -> None:  # type: ignore[no-untyped-def]
    # A step sends its script to every node, then reads their answers. When
    # the first answer read is an error, the others are still unread on their
    # connections, and must not be taken for the answers of the next step.
    store = opened(unique_prefix(redis_cluster.url))
    client = store._client
    by_node: dict[str, bytes] = {}
    for n in range(1000):
        key = f"{store.prefix}:probe{n}".encode()
        by_node.setdefault(client.get_node_from_key(key).name, key)
    assert len(by_node) == 3
    failing, *fine = by_node.values()
    client.set(failing, b"a string, not a hash")
    for key in fine:
        client.hset(key, mapping={b"first": b"1st", b"second": b"2nd"})
    with pytest.raises(StoreError, match="WRONGTYPE"):
        store._read_fields("read records", [failing, *fine], [[b"first"]] * 3)
    assert store._read_fields("read records", fine, [[b"second"]] * 2) == [[b"2nd"], [b"2nd"]]
    store.close()


def test_closing_a_cluster_store_closes_its_connections_to_every_node(redis_cluster) -> None:  # type: ignore[no-untyped-def]
    # redis-py's Cluster client leaves its nodes' pools connected on close:
    # their sockets waited for the collector, which warned of each
    store = opened(unique_prefix(redis_cluster.url))
    assert store.check_and_insert([sketch("a", 1000, TEXT)]) == [None]
    store.close()
    del store  # its scripts hold the client: with both gone, a socket still open warns as it is freed
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        gc.collect()
    assert not [warning for warning in caught if "unclosed <socket" in str(warning.message)]


def test_cluster_resharding_mid_stream_changes_no_verdict(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # slots move between nodes while a worker runs: its per-node scripts meet keys
    # that are served elsewhere now, relearn the layout and run the batch again
    from ..redis_servers import RedisCluster, redis_available

    if not redis_available():
        pytest.skip("redis-server is not installed (.ci/run installs it: apt-get install redis-server)")
    cluster = RedisCluster(tmp_path).start()
    try:
        reference: BandStore = MemoryStore()
        reference.open(settings())
        expected = [reference.check_and_insert(batch) for batch in _batches()]
        store = opened(unique_prefix(cluster.url))
        source, target = cluster.nodes[0], cluster.nodes[1]
        moved: list[subprocess.CompletedProcess[str]] = []

        def reshard() -> None:
            moved.append(
                subprocess.run(
                    ["redis-cli", "--cluster", "reshard", f"127.0.0.1:{source.port}",
                     "--cluster-from", source.cli("CLUSTER", "MYID"), "--cluster-to", target.cli("CLUSTER", "MYID"),
                     "--cluster-slots", "3000", "--cluster-yes", "--cluster-pipeline", "10"],
                    capture_output=True, text=True, timeout=120, check=False,
                )
            )  # fmt: skip

        mover = threading.Thread(target=reshard)
        got = []
        for n, batch in enumerate(_batches()):
            if n == 5:
                mover.start()
            got.append(store.check_and_insert(batch))
            time.sleep(0.02)
        mover.join()
        assert moved[0].returncode == 0, moved[0].stdout + moved[0].stderr
        assert [[m and m.duplicate_of for m in batch] for batch in got] == [
            [m and m.duplicate_of for m in batch] for batch in expected
        ]
        # and the index answers from the new layout
        (match,) = store.check_and_insert([sketch("late", 2000, distinct_text(7) + " copy 1")])
        assert match is not None
        store.close()
    finally:
        cluster.stop()


def test_progress_is_kept_per_host(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # two machines each read their own /data/part.jsonl into one index: neither's
    # --resume may skip lines by the other's progress
    here = opened(url)
    here.check_and_insert([], progress={"/data/part.jsonl": 100})
    monkeypatch.setattr("socket.gethostname", lambda: "another-machine")
    there = opened(url)
    assert there.progress() == {}
    there.check_and_insert([], progress={"/data/part.jsonl": 5})
    assert there.progress() == {"/data/part.jsonl": 5}
    assert here.progress() == {"/data/part.jsonl": 100}
    here.close()
    there.close()


def test_two_workers_racing_near_duplicates_pass_exactly_one_of_each(url: str) -> None:
    # the same messages reach two workers at once, one word changed on the second: on a
    # single Redis the script serialises them; on a Cluster the recheck after recording
    # settles each concurrent pair by the order of the band key both posts share
    rng = random.Random(7)
    words = [f"w{n}" for n in range(5000)]
    texts = [" ".join(rng.sample(words, 12)) + " this weekend" for _ in range(150)]
    variants = [text.replace("weekend", "week") for text in texts]
    stores = [opened(url) for _ in range(2)]
    passed: list[list[int]] = [[], []]
    barrier = threading.Barrier(2)

    def work(n: int, source: list[str]) -> None:
        for start in range(0, len(source), 10):
            batch = [sketch(f"w{n}-{i}", 1000 + i, source[i]) for i in range(start, start + 10)]
            barrier.wait()
            for item, result in zip(batch, stores[n].check_and_insert(batch), strict=True):
                if result is None:
                    passed[n].append(int(item.post_id.split("-")[1]))

    threads = [threading.Thread(target=work, args=(0, texts)), threading.Thread(target=work, args=(1, variants))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(passed[0] + passed[1]) == list(range(150))  # each message once: never both, never neither
    for store in stores:
        store.close()


def after_first_read(monkeypatch: pytest.MonkeyPatch, worker: RedisStore, meanwhile: Callable[[], None]) -> None:
    """Run ``meanwhile`` once, right after ``worker``'s first batch has read the
    index and before it records: another worker getting in between."""
    original_members = RedisTransaction.members
    reads = {"count": 0}

    def read_then_wait(txn, queries):  # type: ignore[no-untyped-def]
        result = original_members(txn, queries)
        if txn._store is worker:
            reads["count"] += 1
            if reads["count"] == 1:
                meanwhile()
        return result

    monkeypatch.setattr(RedisTransaction, "members", read_then_wait)


def test_a_post_that_loses_its_claim_is_named_by_no_verdict(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Worker A reads, finds nothing, and judges its two posts: a text, then a
    # near-copy of it, a duplicate of the first. Before A claims the first
    # post's record, worker B records the same text. A's first post then loses
    # its claim and never passes, so no verdict may name it.
    near_copy = TEXT.replace("lazy", "sleepy")
    first, second = sketch("a-first", 1, TEXT), sketch("a-second", 2, near_copy)
    worker_a, worker_b = opened(url), opened(url)

    def b_records() -> None:
        assert worker_b.check_and_insert([sketch("b-copy", 1, "@x " + TEXT)]) == [None]

    # On one Redis, A's commit script finds a band key it read changed, and A
    # judges its batch again; on a Cluster, A's first post loses its claim.
    after_first_read(monkeypatch, worker_a, b_records)
    results = worker_a.check_and_insert([first, second])
    assert [result.duplicate_of if result else None for result in results] == ["b-copy", "b-copy"]
    worker_a.close()
    worker_b.close()


@pytest.mark.parametrize(("filed_before", "filed_after"), [(0, 0), (0, 2000), (1000, 8000)])
def test_a_near_duplicate_recorded_by_another_worker_meanwhile_is_what_a_post_duplicates(
    url: str, monkeypatch: pytest.MonkeyPatch, filed_before: int, filed_after: int
) -> None:
    # A reads and finds nothing for its post; before A records it, B records a
    # near-copy. Only one of the two may pass: A's post names B's. With 2,000
    # other posts filed after the near-copy, about 30 entries land after it in
    # each band bucket, and what A finds when it records must still reach back
    # to it; with 8,000, about 125, more than the end of a bucket A reads first
    # (64 entries), behind the entries of the 1,000 posts filed before A read.
    worker_a, worker_b = opened(url), opened(url)
    before = [sketch(f"e{i}", 1, distinct_text(20_000 + i)) for i in range(filed_before)]
    assert worker_b.check_and_insert(before) == [None] * filed_before
    others = [sketch(f"o{i}", 1, distinct_text(5000 + i)) for i in range(filed_after)]

    def b_records() -> None:
        near_copy = sketch("b", 1, TEXT.replace("lazy", "sleepy"))
        assert worker_b.check_and_insert([near_copy, *others]) == [None] * (1 + filed_after)

    after_first_read(monkeypatch, worker_a, b_records)
    (match,) = worker_a.check_and_insert([sketch("a", 2, TEXT)])
    assert match is not None and match.duplicate_of == "b" and match.similarity >= CONFIG.jaccard_threshold
    worker_a.close()
    worker_b.close()


def test_a_cluster_batch_rechecks_when_another_began_filing_after_its_read(  # type: ignore[no-untyped-def]
    redis_cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A batch that files alone skips the recheck. Here B begins filing a
    # near-copy after A has read, and files it before A does, but has not
    # ended when A ends. A must still recheck, and defer: B's post is first
    # under their keys, and B's own recheck keeps it.
    url = unique_prefix(redis_cluster.url)
    worker_a, worker_b = opened(url), opened(url)
    b_filed, a_done = threading.Event(), threading.Event()
    results: dict[str, Any] = {}
    original_on_nodes = RedisStore._on_nodes

    def pause_b_after_filing(store, what, *args, **kwargs):  # type: ignore[no-untyped-def]
        reply = original_on_nodes(store, what, *args, **kwargs)
        if store is worker_b and what == "file band entries":
            b_filed.set()
            assert a_done.wait(60)
        return reply

    monkeypatch.setattr(RedisStore, "_on_nodes", pause_b_after_filing)

    def b_records() -> None:
        near_copy = sketch("b", 1, TEXT.replace("lazy", "sleepy"))
        thread = threading.Thread(target=lambda: results.setdefault("b", worker_b.check_and_insert([near_copy])))
        thread.start()
        results["thread"] = [thread]
        assert b_filed.wait(60)

    after_first_read(monkeypatch, worker_a, b_records)
    try:
        results["a"] = worker_a.check_and_insert([sketch("a", 2, TEXT)])
    finally:
        a_done.set()  # B goes on, whatever became of A
    results["thread"][0].join(60)
    assert results["b"] == [None]
    (match,) = results["a"]
    assert match is not None and match.duplicate_of == "b"
    worker_a.close()
    worker_b.close()


def test_a_cluster_filing_whose_worker_died_holds_up_no_batch_past_its_lease(  # type: ignore[no-untyped-def]
    redis_cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A batch that files alone skips its recheck. A filing under way makes
    # other batches recheck; one whose worker died (it never ends) stops
    # counting once its lease is over, and its entry goes.
    store = opened(unique_prefix(redis_cluster.url))
    rechecks: list[int] = []
    recheck = ClusterRecording._recheck

    def counted(self: ClusterRecording) -> Any:
        rechecks.append(1)
        return recheck(self)

    monkeypatch.setattr(ClusterRecording, "_recheck", counted)
    filing, client = store._filing_key, store._client
    assert store.check_and_insert([sketch("a", 1, distinct_text(1))]) == [None]
    assert rechecks == []  # alone
    store._filing(keys=[filing], args=["begin", "died", 600_000])  # a worker began filing, then died
    assert store.check_and_insert([sketch("b", 2, distinct_text(2))]) == [None]
    assert rechecks == [1]  # that filing may be under way
    client.hset(filing, b"fdied", 0)  # its lease is over
    assert store.check_and_insert([sketch("c", 3, distinct_text(3))]) == [None]
    assert rechecks == [1]  # alone again
    assert not client.hexists(filing, b"fdied")
    store.close()


def test_an_index_emptied_mid_run_stops_the_run_saying_so(url: str) -> None:
    # Redis restarted without persistence (here: the index's keys deleted)
    # would otherwise let every copy of what it held through
    store = opened(url)
    assert store.check_and_insert([sketch("a", 1, TEXT)]) == [None]
    client = store._client
    for key in keys_under(store):
        client.delete(key)
    with pytest.raises(StoreError, match="lost the index's pinned settings mid-run: the server was emptied"):
        store.check_and_insert([sketch("b", 2, TEXT)])
    store.close()


def test_a_wrong_password_fails_at_once_and_is_not_printed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from ..redis_servers import RedisServer, redis_available

    if not redis_available():  # as the shared servers' fixtures skip
        pytest.skip("redis-server is not installed (.ci/run installs it: apt-get install redis-server)")
    server = RedisServer(tmp_path / "locked").start()
    try:
        server.cli("CONFIG", "SET", "requirepass", "right-one")
        wrong = f"redis://:hunter2@127.0.0.1:{server.port}/0"
        started = time.monotonic()
        with pytest.raises(StoreError) as caught:
            RedisStore(wrong).open(settings())
        assert time.monotonic() - started < 5  # not retried as if the server were down
        assert "authentication failed" in str(caught.value) and "hunter2" not in str(caught.value)
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("prefx=typo", "Redis does not know the URL parameter 'prefx'"),
        ("retry_for=nan", "retry_for must be a finite number of seconds >= 0"),
        ("retry_for=-1", "retry_for must be a finite number of seconds >= 0"),
    ],
)
def test_bad_url_parameters_are_config_errors(redis_server, query: str, says: str) -> None:  # type: ignore[no-untyped-def]
    from streamfilter import ConfigError

    with pytest.raises(ConfigError, match=says):
        RedisStore(f"{redis_server.url}?{query}").open(settings())


@pytest.mark.parametrize("value", [b"1e400", b"soon", repr(time.time() + 30 * 86400).encode()])
def test_a_clock_key_set_by_hand_is_refused_naming_the_key(url: str, value: bytes) -> None:
    store = opened(url, ttl=3600)
    assert store.check_and_insert([sketch("a", time.time(), TEXT)]) == [None]
    store._client.set(store._clock_key, value)
    with pytest.raises(StoreError, match=r"clock in the key '.*:clock' at .* holds"):
        store.check_and_insert([sketch("b", time.time(), TEXT)])
    store.close()


@pytest.mark.parametrize(
    ("suffix", "value"),
    [(":config", b"{not json"), (":config", b"[1, 2]"), (":layout", b"\xff\xfe"), (":layout", b'{"nobits": 1}')],
)
def test_pinned_keys_edited_by_hand_are_refused_naming_the_key(url: str, suffix: str, value: bytes) -> None:
    store = opened(url)
    store._client.set(store._prefix_bytes + suffix.encode(), value)
    store.close()
    with pytest.raises(StoreError, match=rf"the key '.*{suffix}' at .* (is not|holds a)"):
        RedisStore(url).open(settings())
