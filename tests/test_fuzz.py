"""Broken input through the real CLI: no crash, one verdict per line, the stream goes on."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import FIXTURES

FUZZ_LINES = int(os.environ.get("STREAMFILTER_FUZZ_LINES", "100000"))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
records = st.dictionaries(
    st.sampled_from(
        [
            "id",
            "id_str",
            "text",
            "full_text",
            "created_at",
            "retweeted_status",
            "data",
            "includes",
            "user",
            "statuses",
            "referenced_tweets",
        ]
    ),
    json_values,
    max_size=6,
)


def mutate(line: bytes, rng: random.Random) -> bytes:
    """One of the ways real lines break: cut, flipped bytes, bad UTF-8, NULs, deep nesting, huge."""
    choice = rng.randrange(9)
    if choice == 0 and line:
        return line[: rng.randrange(len(line))]
    if choice == 1 and line:
        data = bytearray(line)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data).replace(b"\n", b" ")
    if choice == 2:
        return line.replace(b'"text"', b'"text":null,"x"', 1)
    if choice == 3:
        return line[: len(line) // 2] + b"\x00" + line[len(line) // 2 :]
    if choice == 4:
        return b"\xff\xfe" + line
    if choice == 5:
        return b'{"text":' * rng.randint(50, 3000) + b'"x"' + b"}" * rng.randint(0, 50)
    if choice == 6:
        return line.replace(b"2016", str(rng.choice([1066, 2999, 99999])).encode(), 1).replace(b"2021", b"2999", 1)
    if choice == 7:
        return json.dumps(rng.choice([[1, 2], "s", 3, None, True])).encode()
    return line


def run_cli(lines: list[bytes], tmp_path: Path) -> tuple[subprocess.CompletedProcess[bytes], list[dict[str, Any]]]:
    stream = tmp_path / "fuzz.jsonl"
    stream.write_bytes(b"\n".join(lines) + b"\n")
    verdicts = tmp_path / "verdicts.jsonl"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "streamfilter",
            "replay",
            str(stream),
            "--verdicts",
            str(verdicts),
            "--rejects",
            str(tmp_path / "rejects"),
            "--out",
            os.devnull,
        ],
        capture_output=True,
        timeout=600,
    )
    return result, [json.loads(line) for line in verdicts.read_text().splitlines()]


def test_mutation_fuzzer_over_real_payloads(tmp_path: Path) -> None:
    seeds = [
        line
        for name in ("twitter_v1_search", "twitter_v2_stream", "campaign", "mixed")
        for line in (FIXTURES / f"{name}.jsonl").read_bytes().splitlines()
    ]
    rng = random.Random(11)
    lines = [mutate(rng.choice(seeds), rng) for _ in range(FUZZ_LINES)]
    lines = [line.replace(b"\n", b" ").replace(b"\r", b" ") for line in lines]
    big = b'{"id": "huge", "text": "' + b"a" * (10 << 20) + b'"}'
    lines.insert(len(lines) // 2, big)
    result, verdicts = run_cli(lines, tmp_path)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert b"Traceback" not in result.stderr
    by_line: dict[int, int] = {}
    for verdict in verdicts:
        by_line[verdict["line"]] = by_line.get(verdict["line"], 0) + 1
    assert set(by_line) == set(range(1, len(lines) + 1))  # every line judged, the stream went on
    for number, count in by_line.items():
        if count > 1:  # only response pages carry several posts
            record = json.loads(lines[number - 1])
            assert isinstance(record.get("data"), list) or isinstance(record.get("statuses"), list)
    huge = next(v for v in verdicts if v["line"] == len(lines) // 2 + 1)
    assert huge["verdict"] == "invalid" and "byte limit" in huge["reason"]
    invalid = sum(v["verdict"] == "invalid" for v in verdicts)
    assert invalid == len((tmp_path / "rejects").read_bytes().splitlines())
    assert result.stderr.count(b": invalid: ") == invalid


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(
        records.map(lambda r: json.dumps(r).encode()) | st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"")),
        min_size=1,
        max_size=40,
    )
)
def test_hypothesis_lines(tmp_path_factory, lines: list[bytes]) -> None:  # type: ignore[no-untyped-def]
    lines = [line.replace(b"\r", b"") for line in lines]
    result, verdicts = run_cli(lines, tmp_path_factory.mktemp("h"))
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert {v["line"] for v in verdicts} == set(range(1, len(lines) + 1))
