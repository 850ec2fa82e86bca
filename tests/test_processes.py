"""Several processes filtering into one LMDB directory at once."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import distinct_text


@pytest.mark.parametrize("workers", [2, 4])
def test_processes_never_both_pass_copies_of_a_text(tmp_path: Path, workers: int) -> None:
    rng = random.Random(5)
    texts = [f"{distinct_text(i)} about {rng.choice(['shoes', 'phones', 'cruises', 'loans'])}" for i in range(300)]
    inputs = []
    for worker in range(workers):
        lines = [
            json.dumps({"id": f"w{worker}-{i}-{copy}", "text": f"@u{copy} {text} http://t.co/{copy}{i}"})
            for i, text in enumerate(texts)
            for copy in range(3)
        ]
        rng.shuffle(lines)
        path = tmp_path / f"in{worker}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        inputs.append(path)
    db = tmp_path / "shared-index"
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamfilter",
                "replay",
                str(path),
                "--db",
                str(db),
                "--batch-size",
                "8",
                "--ttl",
                "0",
                "--out",
                str(tmp_path / f"out{n}.jsonl"),
            ],
            stderr=subprocess.PIPE,
        )
        for n, path in enumerate(inputs)
    ]
    try:
        for process in processes:
            _, stderr = process.communicate(timeout=300)
            assert process.returncode == 0, stderr.decode()
    finally:  # one that failed leaves the others to finish, not to outlive the test
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.communicate()
    passed = []
    for n in range(workers):
        passed += [
            json.loads(line)["text"].split(" ", 1)[1].rsplit(" ", 1)[0]
            for line in (tmp_path / f"out{n}.jsonl").read_text().splitlines()
        ]
    assert sorted(passed) == sorted(texts)  # every text exactly once, across all processes
