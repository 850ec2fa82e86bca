"""What a running filter shows: StreamFilter.stats(), the Prometheus endpoint,
/healthz, the periodic stats line, and tokens kept off the command line."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from contextlib import aclosing
from pathlib import Path

import anyio
import pytest

from streamfilter import FilterConfig, StreamFilter
from streamfilter.metrics import serve_metrics
from streamfilter.sources import follow

from .conftest import FIXTURES, distinct_text
from .live_servers import StreamServer
from .redis_servers import free_port


def scrape(url: str) -> dict[str, float]:
    """The samples of a Prometheus text page, by series and labels."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def health(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_stats_count_what_the_verdicts_say(tmp_path: Path) -> None:
    lines = (FIXTURES / "campaign.jsonl").read_bytes().splitlines()
    with StreamFilter(path=tmp_path / "db") as sf:
        verdicts = sf.check_many(lines[:10]) + sf.check_many(lines[10:])
        stats = sf.stats()
    kinds = Counter(verdict.kind.value for verdict in verdicts)
    assert {kind: n for kind, n in stats.posts.items() if n} == dict(kinds)
    assert stats.index_posts == kinds["novel"]
    assert stats.batches == 2 and stats.batch_seconds.count == 2
    assert stats.purged == 0
    assert stats.source_connected is None  # no live source


def test_purged_and_index_posts_follow_the_ttl(tmp_path: Path) -> None:
    posts = [
        {"id": str(n), "text": distinct_text(n), "created_at": 1_700_000_000 + 60 * n} for n in range(50)
    ]  # one a minute; a 10-minute TTL keeps about ten
    with StreamFilter(FilterConfig(ttl_seconds=600), path=tmp_path / "db") as sf:
        for post in posts:
            sf.check(post)
        stats = sf.stats()
    assert stats.purged is not None and stats.purged >= 35
    assert stats.index_posts == 50 - stats.purged
    assert stats.newest_event_time == 1_700_000_000 + 60 * 49


@pytest.mark.anyio
async def test_healthz_follows_the_source_and_the_commits() -> None:
    records = [json.dumps({"id": str(n), "text": distinct_text(n)}).encode() for n in range(20)]
    async with StreamFilter() as sf:
        server = StreamServer("jsonl", records).__enter__()
        metrics = serve_metrics(sf, "127.0.0.1", 0, healthy_within=0.5)
        try:
            passed = []
            async with aclosing(sf.filter(follow(server.url, backoff=(0.05, 0.1)))) as posts:
                async for post in posts:
                    passed.append(post.id)
                    if len(passed) == len(records):
                        break
                assert await anyio.to_thread.run_sync(health, f"{metrics.url}/healthz") == 200
                samples = await anyio.to_thread.run_sync(scrape, f"{metrics.url}/metrics")
                assert samples['streamfilter_posts_total{verdict="novel"}'] == 20
                assert samples["streamfilter_source_connected"] == 1
                server.__exit__(None, None, None)  # the source goes away and stays away
                # unhealthy once the source is down and no batch was committed for healthy_within (0.5 s)
                with anyio.fail_after(30):
                    while await anyio.to_thread.run_sync(health, f"{metrics.url}/healthz") != 503:  # noqa: ASYNC110 - polls an endpoint
                        await anyio.sleep(0.05)
                assert sf.stats().source_connected is False
                assert sf.stats().reconnects >= 1
        finally:
            metrics.close()


def test_follow_serves_metrics_and_prints_stats_lines(tmp_path: Path) -> None:
    records = [
        json.dumps({"id": f"{n}-{c}", "text": f"@u{c} {distinct_text(n)}", "created_at": 1_700_000_000 + n}).encode()
        for n in range(40)
        for c in range(2)
    ]
    port = free_port()
    verdicts = tmp_path / "verdicts.jsonl"
    with StreamServer("jsonl", records, drops=[30], interval=0.002) as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "streamfilter", "follow", server.url, "--verdicts", str(verdicts)]
            + ["--metrics", f"127.0.0.1:{port}", "--stats-interval", "0.3s", "--out", os.devnull],
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not verdicts.exists() or verdicts.read_text().count("\n") < 80):
            time.sleep(0.05)
        samples = scrape(f"http://127.0.0.1:{port}/metrics")
        while time.monotonic() < deadline and samples["streamfilter_index_posts"] != 40:
            time.sleep(0.2)  # the index is counted at most once a second
            samples = scrape(f"http://127.0.0.1:{port}/metrics")
        status = health(f"http://127.0.0.1:{port}/healthz")
        assert process.stderr is not None
        said = []
        while time.monotonic() < deadline:  # a stats line taken after every post was judged
            said.append(process.stderr.readline())
            if not said[-1] or b"stats: 80 posts; 40 novel, 40 duplicate" in said[-1]:
                break
        process.send_signal(signal.SIGTERM)
        _, rest = process.communicate(timeout=30)
        stderr = b"".join(said) + rest
    assert process.returncode == 143
    assert status == 200
    kinds = Counter(json.loads(line)["verdict"] for line in verdicts.read_text().splitlines())
    for kind in ("novel", "duplicate", "retweet", "invalid", "skipped"):
        assert samples[f'streamfilter_posts_total{{verdict="{kind}"}}'] == kinds[kind]
    assert kinds["novel"] == 40 and kinds["duplicate"] == 40
    assert samples["streamfilter_index_posts"] == 40
    assert samples["streamfilter_reconnects_total"] == 1  # the one drop
    assert samples["streamfilter_batch_seconds_count"] >= 1
    assert samples['streamfilter_batch_seconds_bucket{le="+Inf"}'] == samples["streamfilter_batch_seconds_count"]
    assert samples["streamfilter_source_lag_seconds"] > 0  # posts from 2023
    assert "streamfilter_purged_total" in samples and "process_resident_memory_bytes" in samples
    log = stderr.decode()
    assert "stats: 80 posts; 40 novel, 40 duplicate" in log
    assert f"metrics on http://127.0.0.1:{port}/metrics" in log


def test_a_token_from_a_header_file_or_the_environment_reaches_only_the_server(tmp_path: Path) -> None:
    records = [json.dumps({"id": str(n), "text": distinct_text(n)}).encode() for n in range(5)]
    header_file = tmp_path / "headers"
    header_file.write_text("# the token\nAuthorization: Bearer s3cret-token\n")
    for run, (extra, env) in enumerate(
        [
            (["--header-file", str(header_file)], {}),
            ([], {"STREAMFILTER_HEADERS": "Authorization: Bearer s3cret-token"}),
        ]
    ):
        verdicts = tmp_path / f"verdicts{run}.jsonl"
        with StreamServer("jsonl", records) as server:
            process = subprocess.Popen(
                [sys.executable, "-m", "streamfilter", "follow", server.url, "--verdicts", str(verdicts), *extra],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env={**os.environ, **env},
            )
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and (not verdicts.exists() or verdicts.read_text().count("\n") < 5):
                time.sleep(0.05)
            argv = Path(f"/proc/{process.pid}/cmdline").read_bytes()
            process.send_signal(signal.SIGINT)
            _, stderr = process.communicate(timeout=30)
            assert server.connections[0].headers["authorization"] == "Bearer s3cret-token"
        assert b"s3cret" not in argv and b"s3cret" not in stderr


@pytest.mark.parametrize("bad", ["9108", "localhost:", "host:99999"])
def test_a_bad_metrics_address_is_a_usage_error(bad: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "streamfilter", "replay", str(FIXTURES / "mixed.jsonl"), "--metrics", bad],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert b"--metrics takes HOST:PORT" in done.stderr


def test_the_redis_password_comes_from_the_environment(tmp_path: Path) -> None:
    from .redis_servers import redis_available

    if not redis_available():
        pytest.skip("redis-server is not installed (.ci/run installs it: apt-get install redis-server)")
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--requirepass", "s3cret"]
        + ["--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )
    try:
        command = [sys.executable, "-m", "streamfilter", "replay", str(FIXTURES / "campaign.jsonl")]
        command += ["--store", f"redis://127.0.0.1:{port}/0", "--out", os.devnull]
        deadline = time.monotonic() + 30
        while True:
            refused = subprocess.run(command, capture_output=True, timeout=60)
            if b"authentication" in refused.stderr.lower() or time.monotonic() > deadline:
                break
            time.sleep(0.1)  # the server is still starting
        assert refused.returncode == 1 and b"authentication" in refused.stderr.lower()
        env = {**os.environ, "STREAMFILTER_REDIS_PASSWORD": "s3cret"}
        done = subprocess.run(command, capture_output=True, timeout=60, env=env)
        assert done.returncode == 0, done.stderr.decode()
        assert b"24 posts" in done.stderr and b"s3cret" not in done.stderr
    finally:
        server.terminate()
        server.wait(10)


@pytest.mark.anyio
async def test_a_source_that_ended_keeps_its_reconnects_and_no_longer_reports(tmp_path: Path) -> None:
    records = [json.dumps({"id": str(n), "text": distinct_text(n)}).encode() for n in range(10)]
    async with StreamFilter() as sf:
        for run in range(2):  # a service that makes its source again, as after an error
            with StreamServer("jsonl", records, drops=[4]) as server:
                judged = 0
                async with aclosing(sf.judge(follow(server.url, backoff=(0.01, 0.02)))) as verdicts:
                    async for _ in verdicts:
                        judged += 1
                        if judged == len(records):
                            break
            stats = sf.stats()
            assert stats.reconnects == run + 1  # each run's one drop, the ended runs' too
            assert stats.source_connected is None  # no source is being filtered now


def _closed_by_peer(connection: socket.socket) -> bool:
    """Whether the other end has closed ``connection``, which is readable."""
    try:
        return connection.recv(1, socket.MSG_PEEK) == b""
    except ConnectionError:
        return True


def test_silent_connections_neither_block_scrapes_nor_pile_up_threads() -> None:
    with StreamFilter() as sf:
        server = serve_metrics(sf, "127.0.0.1", 0)
        silent = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(5)]
        try:
            assert "streamfilter_index_posts" in str(scrape(f"{server.url}/metrics"))  # served beside them
            more = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(30)]
            try:
                # Before any request: the server closes the connections past its
                # 16 at once. Wait until it has (a request served first would free
                # its slot for one still waiting to be accepted).
                waiting, deadline = list(more), time.monotonic() + 30
                while len(waiting) > 11 and time.monotonic() < deadline:
                    readable, _, _ = select.select(waiting, [], [], 0.5)
                    waiting = [c for c in waiting if c not in readable or not _closed_by_peer(c)]
                answers = []
                for connection in more:
                    connection.settimeout(30)
                    try:
                        connection.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
                        answers.append(connection.recv(12))
                    except ConnectionError:
                        answers.append(b"")
                served = sum(answer.startswith(b"HTTP/1.0") for answer in answers)
                # 16 connections at most: the 5 silent ones hold 5, so at most 11 of these are served,
                # and the rest are closed at once instead of each waiting in a thread of its own
                assert 1 <= served <= 11 and answers.count(b"") == 30 - served
            finally:
                for connection in more:
                    connection.close()
        finally:
            for connection in silent:
                connection.close()
            server.close()


@pytest.mark.parametrize(
    ("seconds", "shown"), [(0.84, "0.8 s"), (754.0, "13 min"), (9000.0, "2.5 h"), (79_960_503.8, "925 days")]
)
def test_a_lag_reads_in_the_unit_a_person_would_use(seconds: float, shown: str) -> None:
    from streamfilter._stats import duration_text

    assert duration_text(seconds) == shown
