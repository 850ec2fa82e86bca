"""`streamfilter consume`: many workers split one Redis stream through a
consumer group, on real redis-server processes (a single server and a Cluster)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from streamfilter._redis_client import close_client

from .conftest import distinct_text, replay_command, unique_prefix
from .redis_servers import free_port
from .test_metrics import scrape

_streams = count(1)


def campaign(clusters: int, copies: int = 3, seed: int = 5) -> list[bytes]:
    """Each text posted ``copies`` times with another mention and link (a
    campaign), shuffled; whichever copy a worker judges first is the novel one."""
    rng = random.Random(seed)
    records = [
        json.dumps(
            {"id": f"{n}-{c}", "text": f"@u{rng.randrange(999)} {distinct_text(n)} https://t.co/{rng.randrange(10**6)}"}
        ).encode()
        for n in range(clusters)
        for c in range(copies)
    ]
    rng.shuffle(records)
    return records


def cluster_of(record: bytes) -> str:
    return str(json.loads(record)["id"]).split("-")[0]


_opened: list[Any] = []  # the clients a test opened, closed after it (_close_clients)


def client(url: str) -> Any:
    import redis
    import redis.cluster

    opened: Any = redis.Redis.from_url(url)
    if opened.info("cluster").get("cluster_enabled"):
        opened.close()
        opened = redis.cluster.RedisCluster.from_url(url)
    _opened.append(opened)
    return opened


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    # a client left open is closed by the collector, whenever it runs: its
    # ResourceWarning then failed whichever test was running, or the session
    yield
    while _opened:
        close_client(_opened.pop())


def consume(url: str, stream: str, store: str, verdicts: Path, *extra: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "streamfilter", "consume", f"{url}?stream={stream}&group=dedup"]
    command += ["--store", store, "--out-stream", f"{stream}:novel", "--verdicts", str(verdicts)]
    command += ["--batch-size", "32", "--stats-interval", "0", *extra]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def wait_ready(process: subprocess.Popen[bytes]) -> None:
    """Wait for the line a consumer writes once it has joined its group."""
    assert process.stderr is not None
    said = []
    while True:
        line = process.stderr.readline()
        said.append(line)
        if not line:
            raise AssertionError(f"consume exited before it was ready: {b''.join(said).decode()}")
        if b"consuming " in line:
            return


def lines_in(paths: list[Path]) -> int:
    return sum(path.read_bytes().count(b"\n") for path in paths if path.exists())


def wait_until(done: Any, processes: list[subprocess.Popen[bytes]], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return
        for process in processes:
            if process.poll() is not None:
                raise AssertionError(process.stderr.read().decode() if process.stderr else "consume exited")
        time.sleep(0.05)
    raise AssertionError("timed out")


@pytest.fixture(params=["redis", "redis-cluster"])
def server_url(request: pytest.FixtureRequest) -> str:
    server = request.getfixturevalue("redis_server" if request.param == "redis" else "redis_cluster")
    return str(server.url)


@pytest.mark.parametrize("workers", [2, 4])
def test_workers_of_one_group_pass_exactly_what_one_replay_passes(
    tmp_path: Path, server_url: str, workers: int
) -> None:
    records = campaign(400)
    invalid = [b'{"id": "cut', b"[1, 2]"]
    stream = f"posts{next(_streams)}"
    redis_client = client(server_url)
    redis_client.xgroup_create(stream, "dedup", id="0", mkstream=True)
    entries = len(records) + len(invalid) + 1

    stream_file = tmp_path / "stream.jsonl"
    stream_file.write_bytes(b"\n".join(records) + b"\n")
    replayed = tmp_path / "replayed.jsonl"
    subprocess.run(replay_command(str(stream_file), "--out", str(replayed)), check=True, capture_output=True)
    replay_novel = [cluster_of(line) for line in replayed.read_bytes().splitlines()]

    verdicts = [tmp_path / f"verdicts{n}.jsonl" for n in range(workers)]
    store = unique_prefix(server_url)
    processes = [consume(server_url, stream, store, path, "--consumer", f"w{n}") for n, path in enumerate(verdicts)]
    try:
        for process in processes:
            wait_ready(process)  # every consumer reads before any entry is added, so all share the work
        for record in records[:500] + invalid + records[500:]:
            redis_client.xadd(stream, {"data": record})
        redis_client.xadd(stream, {"body": b"no data field"})
        wait_until(lambda: lines_in(verdicts) >= entries, processes)
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            _, stderr = process.communicate(timeout=60)
            assert process.returncode == 143, stderr.decode()
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.communicate()

    passed = [cluster_of(fields[b"data"]) for _, fields in redis_client.xrange(f"{stream}:novel")]
    assert sorted(passed) == sorted(replay_novel)  # one copy of each text, as one replay passes
    assert redis_client.xpending(stream, "dedup")["pending"] == 0  # every entry acknowledged
    judged = [json.loads(line) for path in verdicts for line in path.read_bytes().splitlines()]
    assert len(judged) == entries
    reasons = [v["reason"] for v in judged if v["verdict"] == "invalid"]
    assert len(reasons) == 3 and any("no field 'data'" in reason for reason in reasons)
    assert sum(1 for v in judged if v["verdict"] == "novel") == len(replay_novel)
    assert len({path for path in verdicts if path.stat().st_size}) > 1  # the work was shared


def test_entries_of_a_consumer_killed_mid_batch_are_claimed_by_another(tmp_path: Path, server_url: str) -> None:
    records = campaign(1500)
    stream = f"posts{next(_streams)}"
    redis_client = client(server_url)
    for start in range(0, len(records), 500):
        pipe = redis_client.pipeline(transaction=False)
        for record in records[start : start + 500]:
            pipe.xadd(stream, {"data": record})
        pipe.execute()
    store = unique_prefix(server_url)
    first_verdicts, second_verdicts = tmp_path / "first.jsonl", tmp_path / "second.jsonl"

    first = consume(server_url, stream, store, first_verdicts, "--consumer", "doomed")
    wait_until(lambda: lines_in([first_verdicts]) >= 300, [first])
    first.kill()
    first.communicate(timeout=10)
    held = redis_client.xpending(stream, "dedup")
    assert held["pending"] > 0 and held["consumers"][0]["name"] == b"doomed"  # it died holding entries

    port = free_port()
    second = consume(
        server_url, stream, store, second_verdicts, "--consumer", "heir", "--claim-idle", "1s",
        "--metrics", f"127.0.0.1:{port}",
    )  # fmt: skip
    wait_until(
        lambda: (
            redis_client.xpending(stream, "dedup")["pending"] == 0 and redis_client.xinfo_groups(stream)[0]["lag"] == 0
        ),
        [second],
    )
    # every entry acknowledged: each was judged and written before (the metrics count at commit)
    samples = scrape(f"http://127.0.0.1:{port}/metrics")
    assert samples["streamfilter_source_connected"] == 1
    judged_here = second_verdicts.read_bytes().count(b"\n")
    assert sum(v for k, v in samples.items() if k.startswith("streamfilter_posts_total")) == judged_here
    second.send_signal(signal.SIGINT)
    _, stderr = second.communicate(timeout=60)
    assert second.returncode == 130, stderr.decode()
    assert "claimed" in stderr.decode()

    passed = [cluster_of(fields[b"data"]) for _, fields in redis_client.xrange(f"{stream}:novel")]
    assert set(passed) == {cluster_of(record) for record in records}  # nothing lost
    assert len(passed) - len(set(passed)) <= 32  # repeats: at most the batch in flight when it died
    judged = lines_in([first_verdicts, second_verdicts])
    assert judged >= len(records)


@pytest.mark.parametrize(
    ("query", "extra", "says"),
    [
        ("?stream=posts", [], b"names no group"),
        ("?group=g", [], b"names no stream"),
        ("?stream=posts&group=g", ["--claim-idle", "0"], b"--claim-idle must be above 0"),
        ("?stream=posts&group=g", ["--out", "x", "--out-stream", "y"], b"--out or --out-stream, not both"),
        ("?stream=posts&group=g&retry_for=nan", [], b"retry_for must be a finite number"),
    ],
)
def test_usage_errors_are_said_before_anything_runs(
    redis_server: Any, query: str, extra: list[str], says: bytes
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "streamfilter", "consume", f"{redis_server.url}{query}", *extra],
        capture_output=True,
        timeout=60,
        env={**os.environ},
    )
    assert done.returncode == 2, done.stderr
    assert says in done.stderr


def test_a_restarted_consumer_appends_to_its_outputs(tmp_path: Path, redis_server: Any) -> None:
    stream = f"posts{next(_streams)}"
    redis_client = client(redis_server.url)
    out, verdicts = tmp_path / "out.jsonl", tmp_path / "verdicts.jsonl"
    records = campaign(40, copies=1)
    for run in range(2):
        for record in records[20 * run : 20 * (run + 1)]:
            redis_client.xadd(stream, {"data": record})
        command = [sys.executable, "-m", "streamfilter", "consume", f"{redis_server.url}?stream={stream}&group=g"]
        command += ["--db", str(tmp_path / "db"), "--out", str(out), "--verdicts", str(verdicts)]
        process = subprocess.Popen([*command, "--stats-interval", "0"], stderr=subprocess.PIPE)
        wait_until(lambda run=run: lines_in([verdicts]) >= 20 * (run + 1), [process])
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    # the first run's posts were acknowledged and will never come again: they must still be there
    assert sorted(out.read_bytes().splitlines()) == sorted(records)


@pytest.mark.anyio
async def test_the_library_source_acknowledges_what_was_committed(redis_server: Any) -> None:
    import anyio

    from streamfilter import CommitHooks, StreamFilter
    from streamfilter.redis_streams import StreamGroup

    stream = f"posts{next(_streams)}"
    redis_client = client(redis_server.url)
    records = campaign(10)  # 10 texts, 3 copies each
    for record in records:
        redis_client.xadd(stream, {"data": record})
    redis_client.xadd(stream, {"other": b"x"})
    group = StreamGroup(f"{redis_server.url}?stream={stream}&group=lib", block=0.1)
    kinds: list[str] = []
    with anyio.fail_after(30):
        async with StreamFilter() as sf:
            hooks = CommitHooks(after_commit=group.acknowledge)
            async for verdicts in sf.judge_batches(group, hooks):
                kinds += [verdict.kind.value for verdict in verdicts]
                if len(kinds) == len(records) + 1:
                    group.stop()
    await group.aclose()
    assert kinds.count("novel") == 10 and kinds.count("duplicate") == 20 and kinds.count("invalid") == 1
    assert redis_client.xpending(stream, "lib")["pending"] == 0


@pytest.mark.anyio
async def test_a_closed_group_on_a_cluster_leaves_no_connection_open(redis_cluster: Any) -> None:
    # redis-py's Cluster client leaves its nodes' pools connected on close:
    # their sockets waited for the collector, which warned of each
    import gc
    import warnings

    from streamfilter.redis_streams import StreamGroup

    stream = f"posts{next(_streams)}"
    client(redis_cluster.url).xadd(stream, {"data": campaign(1)[0]})
    group = StreamGroup(f"{redis_cluster.url}?stream={stream}&group=lib", block=0.1)
    async for _ in group:
        group.stop()
    group.acknowledge(1)
    await group.aclose()
    del group
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        gc.collect()
    assert not [warning for warning in caught if "unclosed <socket" in str(warning.message)]


def test_a_consumer_stopped_under_load_leaves_nothing_pending(tmp_path: Path, server_url: str) -> None:
    """SIGTERM while batches are buffered: what was read is judged and acknowledged
    (it crashed on 'NoneType' has no 'xack' and left up to 3,072 entries pending)."""
    records = campaign(1500)
    stream = f"posts{next(_streams)}"
    redis_client = client(server_url)
    pipe = redis_client.pipeline(transaction=False)
    for record in records:
        pipe.xadd(stream, {"data": record})
    pipe.execute()
    verdicts = tmp_path / "v.jsonl"
    process = consume(server_url, stream, unique_prefix(server_url), verdicts, "--batch-size", "16")
    try:
        wait_until(lambda: lines_in([verdicts]) >= 200, [process])
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143, stderr.decode()
    assert b"unexpected" not in stderr
    assert redis_client.xpending(stream, "dedup")["pending"] == 0
    judged = lines_in([verdicts])
    assert 200 <= judged < len(records)  # stopped mid-stream, every entry it read judged


def test_an_entry_over_the_record_limit_is_invalid_and_never_read_whole(tmp_path: Path, server_url: str) -> None:
    stream = f"posts{next(_streams)}"
    redis_client = client(server_url)
    records = campaign(3, copies=1)
    redis_client.xadd(stream, {"data": records[0]})
    redis_client.xadd(stream, {"data": b'{"id": "big", "text": "' + b"x" * (5 << 20) + b'"}'})
    redis_client.xadd(stream, {"data": records[1]})
    verdicts = tmp_path / "v.jsonl"
    process = consume(server_url, stream, unique_prefix(server_url), verdicts)
    try:
        wait_until(lambda: lines_in([verdicts]) >= 3, [process])
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    judged = [json.loads(line) for line in verdicts.read_bytes().splitlines()]
    assert [v["verdict"] for v in judged] == ["novel", "invalid", "novel"]
    assert judged[1]["reason"] == f"the entry's field 'data' is {(5 << 20) + 25:,} bytes, over the 4194304 byte limit"
    assert redis_client.xpending(stream, "dedup")["pending"] == 0
