"""Restart-safe follow: a run killed with SIGKILL and started again with
--resume asks the server for the point its index committed, and no record is
lost (tests that really kill, against servers on loopback)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from streamfilter import StreamFilter

from .conftest import FIXTURES, distinct_text, replay_command, unique_prefix
from .live_servers import StreamServer

BATCH = 16
RECORDS = 240


def sse_posts() -> list[bytes]:
    """Mastodon statuses, as its streaming API sends them in "update" events."""
    return [
        json.dumps(
            {
                "id": f"s{n}",
                "created_at": f"2026-07-04T14:{n // 60:02d}:{n % 60:02d}.000Z",
                "content": f"<p>{distinct_text(n)}</p>",
                "account": {"acct": f"user{n}"},
                "reblog": None,
            }
        ).encode()
        for n in range(RECORDS)
    ]


def jetstream_posts() -> list[bytes]:
    """Jetstream commit events of new posts, in time_us order, as the firehose sends them."""
    events = []
    for n in range(RECORDS):
        created = f"2026-07-04T14:{n // 60:02d}:{n % 60:02d}.000Z"
        record: dict[str, object] = {"$type": "app.bsky.feed.post", "createdAt": created, "langs": ["en"]}
        record["text"] = distinct_text(n)
        commit = {"rev": f"r{n}", "operation": "create", "collection": "app.bsky.feed.post", "rkey": f"k{n}"}
        event = {"did": "did:plc:resume", "time_us": 1_783_175_888_000_000 + 1000 * n, "kind": "commit"}
        events.append(json.dumps(event | {"commit": commit | {"record": record, "cid": f"c{n}"}}).encode())
    return events


def post_id(line: bytes) -> str:
    record = json.loads(line)
    if "payload" in record:  # an SSE event, as follow wraps it
        return str(json.loads(record["payload"])["id"])
    return str(record.get("id") or record["commit"]["rkey"])


def start(url: str, db: Path | str, out: Path, verdicts: Path, *extra: str) -> subprocess.Popen[bytes]:
    where = ["--store", db] if isinstance(db, str) else ["--db", str(db)]
    command = [sys.executable, "-m", "streamfilter", "follow", url, *where, "--out", str(out)]
    command += ["--verdicts", str(verdicts), "--batch-size", str(BATCH), "--ttl", "0", *extra]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def wait_for_lines(path: Path, count: int, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        if process.poll() is not None:
            raise AssertionError(process.stderr.read().decode() if process.stderr else "follow exited")
        time.sleep(0.01)
    raise AssertionError(f"{path} did not reach {count} lines")


def committed_records(point: str) -> int:
    """How many records of the test streams a resume point covers."""
    kind, _, value = point.partition(":")
    return int(value) if kind == "last-event-id" else 1 + (int(value) - 1_783_175_888_000_000) // 1000


@pytest.mark.parametrize("kind", ["sse", "ws"])
def test_sigkill_then_resume_asks_for_the_committed_point_and_loses_nothing(tmp_path: Path, kind: str) -> None:
    records = sse_posts() if kind == "sse" else jetstream_posts()
    every = {post_id(line) for line in records}
    db, out, verdicts = tmp_path / "db", tmp_path / "out.jsonl", tmp_path / "verdicts.jsonl"
    kills = [RECORDS // 5, 2 * RECORDS // 5, 3 * RECORDS // 5]
    with StreamServer(kind, records, interval=0.004) as server:
        # --resume from the first start on, as a service unit runs it: the first finds no point
        process = start(server.url, db, out, verdicts, "--resume")
        for run, kill_at in enumerate(kills):
            wait_for_lines(verdicts, kill_at, process)
            process.kill()
            _, stderr = process.communicate(timeout=10)
            assert (b"no resume point recorded" in stderr) == (run == 0)
            sent = server.position
            with StreamFilter(path=db) as sf:
                committed = sf.resume_point(server.url)
            assert committed is not None and committed.startswith("last-event-id:" if kind == "sse" else "cursor:")
            # every batch records its point: at most the batch in flight (its verdicts
            # written, its commit not) lies between the verdicts seen and the point
            assert kill_at - BATCH <= committed_records(committed) <= sent
            connections = len(server.connections)
            written = verdicts.read_bytes().count(b"\n")
            process = start(server.url, db, out, verdicts, "--resume")
            wait_for_lines(verdicts, written + 1, process)  # connected, and judging again
            # the restarted run asked for exactly the point the index had committed
            resumed = server.connections[connections]
            if kind == "sse":
                assert resumed.headers.get("last-event-id") == committed.removeprefix("last-event-id:")
            else:
                assert resumed.query.get("cursor") == [committed.removeprefix("cursor:")]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and {post_id(line) for line in out.read_bytes().splitlines()} != every:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
        assert process.returncode == 130, stderr.decode()

    passed = [post_id(line) for line in out.read_bytes().splitlines()]
    assert set(passed) == every  # gapless: every (novel) record passed
    repeats = sum(count - 1 for count in Counter(passed).values())
    assert repeats <= BATCH * len(kills)  # at least once, at most one batch a kill
    assert all(line.endswith(b"}") for line in out.read_bytes().splitlines())  # no torn line


def test_on_redis_a_killed_follower_resumes_at_the_point_redis_holds(tmp_path: Path, redis_server: Any) -> None:
    from streamfilter import RedisStore

    records = sse_posts()
    store = unique_prefix(redis_server.url)
    out, verdicts = tmp_path / "out.jsonl", tmp_path / "verdicts.jsonl"
    with StreamServer("sse", records, interval=0.004) as server:
        first = start(server.url, store, out, verdicts)
        wait_for_lines(verdicts, RECORDS // 2, first)
        first.kill()
        first.communicate(timeout=10)
        with StreamFilter(store=RedisStore(store)) as sf:
            committed = sf.resume_point(server.url)
        assert committed is not None and committed.startswith("last-event-id:")
        second = start(server.url, store, out, verdicts, "--resume")
        wait_for_lines(verdicts, RECORDS, second)
        second.send_signal(signal.SIGINT)
        second.communicate(timeout=30)
        assert server.connections[-1].headers.get("last-event-id") == committed.removeprefix("last-event-id:")
    passed = [post_id(line) for line in out.read_bytes().splitlines()]
    assert set(passed) == {post_id(line) for line in records}
    assert sum(count - 1 for count in Counter(passed).values()) <= BATCH


def test_without_resume_a_restart_starts_fresh(tmp_path: Path) -> None:
    records = sse_posts()
    db, out, verdicts = tmp_path / "db", tmp_path / "out.jsonl", tmp_path / "verdicts.jsonl"
    with StreamServer("sse", records, interval=0.004) as server:
        first = start(server.url, db, out, verdicts)
        wait_for_lines(verdicts, RECORDS // 3, first)
        first.kill()
        first.communicate(timeout=10)
        second = start(server.url, db, tmp_path / "out2.jsonl", tmp_path / "verdicts2.jsonl")
        wait_for_lines(tmp_path / "verdicts2.jsonl", 5, second)
        second.send_signal(signal.SIGINT)
        second.communicate(timeout=30)
        assert server.connections[-1].headers.get("last-event-id") is None


def test_two_urls_keep_their_own_resume_points(tmp_path: Path) -> None:
    db = tmp_path / "db"
    points = {}
    for kind, records in (("sse", sse_posts()[:40]), ("ws", jetstream_posts()[:60])):
        with StreamServer(kind, records) as server:
            verdicts = tmp_path / f"{kind}.jsonl"
            process = start(server.url, db, tmp_path / f"{kind}-out.jsonl", verdicts)
            wait_for_lines(verdicts, len(records), process)
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=30)
            assert process.returncode == 130
            points[server.url] = (kind, records)
    with StreamFilter(path=db) as sf:
        for url, (kind, records) in points.items():
            point = sf.resume_point(url)
            if kind == "sse":
                assert point == f"last-event-id:{len(records)}"
            else:
                assert point == f"cursor:{json.loads(records[-1])['time_us']}"
        assert sf.resume_point("http://127.0.0.1:1/never-followed") is None


def test_resume_needs_an_index(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "streamfilter", "follow", "http://127.0.0.1:1/stream", "--resume"],
        capture_output=True,
        timeout=60,
        env={**os.environ},
    )
    assert done.returncode == 2
    assert b"--resume needs --db or --store" in done.stderr


@pytest.mark.skipif(not os.path.exists("/dev/stdout"), reason="needs /dev/stdout")
def test_resume_writes_to_a_pipe_named_as_a_file(tmp_path: Path) -> None:
    # An appended output is first cut back to its last whole line; a pipe has no end to go back to.
    stream = str(FIXTURES / "campaign.jsonl")
    command = replay_command(stream, "--db", str(tmp_path / "index"), "--resume", "--verdicts", "/dev/stdout", "-q")
    done = subprocess.run([*command, "--out", os.devnull], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.decode().splitlines()
    assert len(lines) == len(Path(stream).read_text().splitlines())
    assert json.loads(lines[0])["verdict"] == "novel"
