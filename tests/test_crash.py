"""Killed replays resume without losing a novel post (tests that really kill)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import replay_command as replay

KILLS = int(os.environ.get("STREAMFILTER_KILLS", "5"))
BATCH = 64


def make_stream(path: Path, distinct: int = 2000, copies: int = 3, seed: int = 1) -> None:
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(5000)]
    texts = [" ".join(rng.choices(vocabulary, k=12)) for _ in range(distinct)]
    lines = [
        json.dumps({"id": f"{i}-{c}", "text": f"@u{c} {texts[i]} http://t.co/{c}", "created_at": 1_600_000_000 + i})
        for i in range(distinct)
        for c in range(copies)
    ]
    rng.shuffle(lines)
    path.write_text("\n".join(lines) + "\n")


def verdict_kinds(stream: Path, db: Path, verdicts: Path) -> list[str]:
    result = subprocess.run(
        replay(str(stream), "--db", str(db), "--verdicts", str(verdicts), "--out", os.devnull, "--ttl", "0"),
        capture_output=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr.decode()
    return [json.loads(line)["verdict"] for line in verdicts.read_text().splitlines()]


def test_sigkill_at_random_points_then_resume_loses_nothing(tmp_path: Path) -> None:
    stream = tmp_path / "stream.jsonl"
    make_stream(stream, distinct=1500 * KILLS)
    clean_out = tmp_path / "clean.jsonl"
    clean_db = tmp_path / "clean-db"
    subprocess.run(
        replay(
            str(stream),
            "--db",
            str(clean_db),
            "--out",
            str(clean_out),
            "--ttl",
            "0",
            "--batch-size",
            str(BATCH),
        ),
        check=True,
        capture_output=True,
        timeout=300,
    )
    clean = clean_out.read_text().splitlines()

    db = tmp_path / "db"
    out = tmp_path / "out.jsonl"
    rng = random.Random(int(os.environ.get("STREAMFILTER_KILL_SEED", "7")))
    # Each kill lands once the output has passed a random point of the stream
    # (and a random moment after it), so it is mid-stream however fast the
    # replay runs; a point already passed kills the next run as it starts.
    kill_points = sorted(rng.uniform(0.05, 0.9) * clean_out.stat().st_size for _ in range(KILLS))
    kills = 0
    while True:
        process = subprocess.Popen(
            replay(
                str(stream),
                "--db",
                str(db),
                "--out",
                str(out),
                "--ttl",
                "0",
                "--batch-size",
                str(BATCH),
                "--resume",
            ),
            stderr=subprocess.DEVNULL,
        )
        if kills < KILLS:
            while process.poll() is None and (out.stat().st_size if out.exists() else 0) < kill_points[kills]:
                time.sleep(0.005)
            time.sleep(rng.uniform(0, 0.05))
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                kills += 1
        if process.wait(timeout=300) == 0:
            break
    delivered = out.read_text().splitlines()
    # every post a clean run lets through was delivered, and nothing else
    assert set(delivered) == set(clean)
    # a kill can repeat at most the one batch that was written but not committed
    assert len(delivered) - len(clean) <= kills * BATCH
    # the index opens and judges like the clean one
    assert verdict_kinds(stream, db, tmp_path / "v1") == verdict_kinds(stream, clean_db, tmp_path / "v2")
    assert kills == KILLS
    print(
        f"{kills} kills: {len(delivered)} delivered, {len(clean)} novel in a clean run, {len(delivered) - len(clean)} repeats"
    )


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_sigint_and_sigterm_finish_the_batch_and_resume(tmp_path: Path, signum: int, code: int) -> None:
    stream = tmp_path / "stream.jsonl"
    make_stream(stream, distinct=50000, copies=1)
    db = tmp_path / "db"
    out = tmp_path / "out.jsonl"
    process = subprocess.Popen(
        replay(str(stream), "--db", str(db), "--out", str(out), "--batch-size", "256"), stderr=subprocess.PIPE
    )
    while process.poll() is None and not (out.exists() and out.stat().st_size):
        time.sleep(0.01)  # the first batch is out: the replay is mid-stream
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == code, stderr.decode()
    message = stderr.decode()
    assert "finishing the current batch" in message and " posts, " in message
    first = out.read_text().splitlines()
    assert 0 < len(first) < 50000
    resumed = subprocess.run(
        replay(str(stream), "--db", str(db), "--out", str(out), "--resume"), capture_output=True, timeout=300
    )
    assert resumed.returncode == 0
    everything = out.read_text().splitlines()
    assert sorted(everything) == sorted(stream.read_text().splitlines())  # all novel, each exactly once


def test_resume_cuts_the_half_line_a_killed_run_left(tmp_path: Path) -> None:
    # A run killed in the middle of writing a batch leaves half a line in its
    # outputs; the batch was not committed, so the resumed run writes it again
    # and must not glue it to the torn line.
    stream = tmp_path / "stream.jsonl"
    make_stream(stream, distinct=300)
    lines = stream.read_text().splitlines(keepends=True)
    clean_out, clean_verdicts = tmp_path / "clean.jsonl", tmp_path / "clean-verdicts.jsonl"
    common = ["--ttl", "0", "--batch-size", str(BATCH)]
    run = subprocess.run(
        replay(str(stream), "--db", str(tmp_path / "clean-db"), "--out", str(clean_out), "--verdicts",
               str(clean_verdicts), *common),
        capture_output=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0
    # the first run saw only the first 400 lines, as if the rest had not arrived
    growing = tmp_path / "growing.jsonl"
    growing.write_text("".join(lines[:400]))
    out, verdicts = tmp_path / "out.jsonl", tmp_path / "verdicts.jsonl"
    args = [str(growing), "--db", str(tmp_path / "db"), "--out", str(out), "--verdicts", str(verdicts), *common]
    assert subprocess.run(replay(*args), capture_output=True, timeout=300).returncode == 0
    # then it was killed halfway through writing the next line of each output
    with out.open("ab") as handle:
        handle.write(clean_out.read_bytes().splitlines(keepends=True)[len(out.read_bytes().splitlines())][:25])
    with verdicts.open("ab") as handle:
        handle.write(b'{"id": "12-1", "verd')
    growing.write_text("".join(lines))
    resumed = subprocess.run(replay(*args, "--resume"), capture_output=True, timeout=300)
    assert resumed.returncode == 0
    assert b"partial line" in resumed.stderr
    assert out.read_text() == clean_out.read_text()
    assert [json.loads(line) for line in verdicts.read_text().splitlines()] == [
        json.loads(line) for line in clean_verdicts.read_text().splitlines()
    ]
