"""Worker processes sharing one index on a real Redis and a real Redis Cluster."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import distinct_text, replay_command, unique_prefix

WORKERS = 4


def campaign(tmp_path: Path, texts: int = 250) -> tuple[list[str], dict[str, str]]:
    """One campaign stream: every text three times with other mentions and links,
    and one in five also with a word changed (a near-duplicate). Returns the
    lines and, per post id, the text it carries (before decoration)."""
    rng = random.Random(11)
    lines: list[str] = []
    base_of: dict[str, str] = {}
    for i in range(texts):
        text = f"{distinct_text(i)} about {rng.choice(['shoes', 'phones', 'cruises', 'loans'])} now"
        variants = [text] * 3 + ([text.replace("now", "today")] if i % 5 == 0 else [])
        for copy, variant in enumerate(variants):
            post_id = f"{i}-{copy}"
            base_of[post_id] = variant
            lines.append(
                json.dumps(
                    {"id": post_id, "text": f"@u{rng.randrange(999)} {variant} https://t.co/{rng.randrange(10**6)}"}
                )
            )
    rng.shuffle(lines)
    return lines, base_of


def partitions(lines: list[str], tmp_path: Path) -> list[Path]:
    """Split like a Kafka topic keyed by post id."""
    paths = [tmp_path / f"part{n}.jsonl" for n in range(WORKERS)]
    parts: list[list[str]] = [[] for _ in range(WORKERS)]
    for line in lines:
        parts[hash(json.loads(line)["id"]) % WORKERS].append(line)
    for path, part in zip(paths, parts, strict=True):
        path.write_text("\n".join(part) + "\n")
    return paths


def passed_ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(params=["redis", "redis-cluster"])
def url(request: pytest.FixtureRequest) -> str:
    server = request.getfixturevalue("redis_server" if request.param == "redis" else "redis_cluster")
    return unique_prefix(server.url)


def test_four_workers_pass_each_text_once(tmp_path: Path, url: str) -> None:
    lines, base_of = campaign(tmp_path)
    whole = tmp_path / "whole.jsonl"
    whole.write_text("\n".join(lines) + "\n")
    single = subprocess.run(
        replay_command(
            str(whole), "--db", str(tmp_path / "lmdb"), "--ttl", "0", "--out", str(tmp_path / "single.jsonl")
        ),
        capture_output=True,
        timeout=300,
        check=True,
    )
    assert single.returncode == 0
    workers = [
        subprocess.Popen(
            replay_command(
                *(str(part), "--store", url, "--ttl", "0", "--batch-size", "8"),
                *("--out", str(tmp_path / f"out{n}.jsonl"), "--verdicts", str(tmp_path / f"verdicts{n}.jsonl")),
            ),
            stderr=subprocess.PIPE,
        )
        for n, part in enumerate(partitions(lines, tmp_path))
    ]
    for worker in workers:
        _, stderr = worker.communicate(timeout=300)
        assert worker.returncode == 0, stderr.decode()
    shared = [post_id for n in range(WORKERS) for post_id in passed_ids(tmp_path / f"out{n}.jsonl")]
    # exact copies (the same text behind other mentions and links) pass exactly once overall
    texts = [base_of[post_id] for post_id in shared]
    assert len(texts) == len(set(texts))
    clusters = [post_id.split("-")[0] for post_id in shared]
    assert set(clusters) == {str(i) for i in range(250)}  # and every campaign message got through
    # One LMDB worker reading the whole stream passes one post per message. Shared,
    # a near-duplicate (one word changed) can race its original on another worker
    # within one batch round-trip, and both pass; count how often.
    alone = passed_ids(tmp_path / "single.jsonl")
    assert sorted(post_id.split("-")[0] for post_id in alone) == sorted(str(i) for i in range(250))
    races = len(clusters) - len(set(clusters))
    # and every duplicate names a post that did pass: a worker never drops its post once
    # another worker's verdict points at it
    verdicts = [
        json.loads(line) for n in range(WORKERS) for line in (tmp_path / f"verdicts{n}.jsonl").read_text().splitlines()
    ]
    assert {v["duplicate_of"] for v in verdicts if v["verdict"] == "duplicate"} <= set(shared)
    print(
        f"\n{url}: {len(shared)} passed by {WORKERS} workers, {len(alone)} by one LMDB worker: "
        f"{races} of 50 near-duplicate pairs raced and both passed"
    )
    assert races <= 50


def test_killed_worker_resumes_without_loss(tmp_path: Path, url: str) -> None:
    lines, base_of = campaign(tmp_path, texts=1500)
    stream = tmp_path / "stream.jsonl"
    stream.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    command = replay_command(str(stream), "--store", url, "--ttl", "0", "--batch-size", "16", "--out", str(out))
    worker = subprocess.Popen(command, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while (not out.exists() or out.stat().st_size < 20_000) and worker.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    assert worker.returncode == -signal.SIGKILL, "the worker finished before it could be killed"
    killed_at = len(passed_ids(out))
    resumed = subprocess.run([*command, "--resume"], capture_output=True, timeout=300, check=False)
    assert resumed.returncode == 0, resumed.stderr.decode()
    passed = passed_ids(out)
    assert {post_id.split("-")[0] for post_id in passed} == {str(i) for i in range(1500)}  # nothing lost
    repeats = len(passed) - len(set(passed))
    print(f"\n{url}: killed after {killed_at} novel posts; {repeats} repeated after --resume")
    assert repeats <= 16  # at most the batch in flight


def test_replay_on_redis_gives_the_fixture_verdicts(tmp_path: Path, url: str) -> None:
    verdicts = tmp_path / "verdicts.jsonl"
    done = subprocess.run(
        replay_command("fixtures/campaign.jsonl", "--store", url, "--verdicts", str(verdicts), "--out", os.devnull),
        capture_output=True,
        timeout=120,
        check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 0, done.stderr.decode()
    expected = Path(__file__).resolve().parent.parent / "fixtures" / "campaign.expected.jsonl"
    got = [(v["id"], v["verdict"], v["duplicate_of"]) for v in map(json.loads, verdicts.read_text().splitlines())]
    want = [(v["id"], v["verdict"], v["duplicate_of"]) for v in map(json.loads, expected.read_text().splitlines())]
    assert got == want


def test_replay_with_redis_down_fails_clearly(tmp_path: Path) -> None:
    from .redis_servers import free_port

    port = free_port()
    done = subprocess.run(
        replay_command("fixtures/campaign.jsonl", "--store", f"redis://127.0.0.1:{port}/0?retry_for=0.5"),
        capture_output=True,
        timeout=120,
        check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 1
    assert (
        done.stderr.decode()
        .strip()
        .splitlines()[-1]
        .startswith(f"streamfilter: error: Redis at redis://127.0.0.1:{port}/0 (prefix sf) is unreachable: ")
    )


def test_store_takes_only_redis_urls(tmp_path: Path) -> None:
    done = subprocess.run(
        replay_command("fixtures/campaign.jsonl", "--store", "http://localhost:6379"),
        capture_output=True,
        timeout=120,
        check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 2
    assert "--store takes a redis://, rediss:// or unix:// URL" in done.stderr.decode()
