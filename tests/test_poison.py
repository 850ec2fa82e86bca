"""Poison records: each one ended a whole run once. Now each is the ``invalid``
verdict of its own line, with a reason a user can act on, and the stream goes on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streamfilter import MemoryStore, StreamFilter, VerdictKind
from streamfilter._normalize import normalize

from .conftest import replay_command


def good(n: int) -> str:
    words = " ".join(f"w{n}x{i}" for i in range(9))
    return json.dumps({"id": f"g{n}", "text": f"good post {n} {words}", "created_at": "2024-05-01T00:00:00Z"})


def update(payload: str) -> str:
    return json.dumps({"event": "update", "payload": payload})


POISON = [
    # (line, words the reason must hold)
    ('{"id":"p1","text":"four hundred digits","created_at":1' + "0" * 400 + "}", "created_at 1000"),
    (
        '{"did":"did:plc:x","time_us":' + "9" * 4000 + ',"kind":"commit","commit":{"operation":"create",'
        '"collection":"app.bsky.feed.post","rkey":"k","record":{"text":"a post at the end of time"}}}',
        "time_us 9999",
    ),
    (
        '{"id":"p2","text":"a long year","created_at":"Fri May 05 15:24:00 +0000 20166666666666666666666"}',
        "no real date",
    ),
    (update("[" * 100_000 + "]" * 100_000), "streaming update payload: JSON nested deeper than 64"),
    (update('{"id":"m9","n":' + "9" * 5000 + "}"), "streaming update payload: JSON number too long"),
    ('{"id":"p5","text":"february thirty first","created_at":"Fri Feb 31 10:00:00 +0000 2012"}', "Feb 2012"),
    ('{"id":"p6","text":"ninety nine o clock","created_at":"Fri May 09 99:99:99 +0000 2012"}', "time of day"),
    ('{"id":"p7","text":"a date past any calendar","created_at":"2012-02-30T10:00:00Z"}', "created_at"),
]


def test_poison_lines_are_invalid_by_line_and_the_good_posts_around_them_pass(tmp_path: Path) -> None:
    stream = tmp_path / "poison.jsonl"
    stream.write_text("\n".join([good(0), *(line for line, _ in POISON), good(1)]) + "\n")
    verdicts_path = tmp_path / "v.jsonl"
    done = subprocess.run(
        replay_command(str(stream), "--db", str(tmp_path / "index"), "--verdicts", str(verdicts_path)),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    verdicts = [json.loads(line) for line in verdicts_path.read_text().splitlines()]
    assert [v["verdict"] for v in verdicts] == ["novel"] + ["invalid"] * len(POISON) + ["novel"]
    for verdict, (_, expected) in zip(verdicts[1:-1], POISON, strict=True):
        assert expected in verdict["reason"], verdict["reason"]
        assert "set_int_max_str_digits" not in verdict["reason"] and len(verdict["reason"]) < 300
    # and a rerun with --resume over the same file has nothing left to do, instead of failing again
    again = subprocess.run(
        replay_command(str(stream), "--db", str(tmp_path / "index"), "--resume"), capture_output=True, timeout=120
    )
    assert again.returncode == 0, again.stderr.decode()


def test_a_record_that_breaks_an_adapter_unforeseen_is_invalid_not_fatal() -> None:
    """The safety net under every check: an adapter that raises what no check
    expected makes that record invalid, and the next record is judged."""
    from streamfilter.adapters import GenericAdapter, RecordAdapter, TextAdapter  # noqa: PLC0415

    class Broken(GenericAdapter):
        def posts(self, record):  # type: ignore[no-untyped-def]
            if record.get("boom"):
                raise ZeroDivisionError("a bug in an adapter")
            return super().posts(record)

    adapter = RecordAdapter("generic", [], Broken(), TextAdapter())
    with StreamFilter(store=MemoryStore(), adapter=adapter) as sf:
        verdicts = [sf.check({"id": "1", "text": "x y z", "boom": True}), sf.check({"id": "2", "text": "x y z"})]
    assert [v.kind for v in verdicts] == [VerdictKind.INVALID, VerdictKind.NOVEL]
    assert "ZeroDivisionError: a bug in an adapter" in (verdicts[0].reason or "")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # super-linear in the URL pattern once: not a link (no top-level domain), so letters spelled out
        ("see " + "a." * 50_000 + "/ now", "see " + "a" * 50_000 + " now"),
        ("see " + "a." * 50_000 + "com/x now", "see now"),  # the same, a link
        ("a" + "\u0301" * 49_500 + "\u0316" * 49_500, "a"),  # two kinds of marks: a quadratic sort in NFKD
        ("x" + "\u0301\u0316" * 49_000 + " y", "x y"),
    ],
)
def test_hostile_text_normalises_as_a_reader_sees_it(text: str, expected: str) -> None:
    """The work is bounded without changing what a reader sees: a flood of
    marks on one letter reads as the letter. (The time each takes is measured
    by benchmarks/hostile.py, with a budget.)"""
    assert normalize(text) == expected


def test_marks_up_to_the_stream_safe_limit_are_read_as_before() -> None:
    assert normalize("he\u0301llo") == "hello"
    assert normalize("e" + "\u0301" * 29 + " ok") == normalize("e ok")


def test_report_on_a_cluster_whose_text_holds_a_lone_surrogate(tmp_path: Path) -> None:
    stream = tmp_path / "sur.jsonl"
    stream.write_text(
        "".join(
            f'{{"id":"s{i}","text":"buy cheap pills now \\udfff friends","created_at":"2024-05-01T00:00:0{i}Z"}}\n'
            for i in range(3)
        )
    )
    verdicts = tmp_path / "v.jsonl"
    subprocess.run(replay_command(str(stream), "--verdicts", str(verdicts)), check=True, capture_output=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "streamfilter",
            "report",
            str(stream),
            "--verdicts",
            str(verdicts),
            "--json",
            str(tmp_path / "r.json"),
            "--html",
            str(tmp_path / "r.html"),
        ],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    clusters = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["clusters"]
    assert clusters[0]["size"] == 3 and "pills now \ufffd friends" in clusters[0]["text"]
    assert "pills now \ufffd friends" in (tmp_path / "r.html").read_text(encoding="utf-8")


def test_a_truncated_index_is_refused_with_what_to_do_never_a_crash(tmp_path: Path) -> None:
    stream = tmp_path / "many.jsonl"
    stream.write_text(
        "".join(
            json.dumps({"id": str(i), "text": f"post {i} " + " ".join(f"w{(i * 7 + j) % 5000}" for j in range(12))})
            + "\n"
            for i in range(20_000)
        )
    )
    subprocess.run(replay_command(str(stream), "--db", str(tmp_path / "db")), check=True, capture_output=True)
    data = (tmp_path / "db" / "data.mdb").read_bytes()
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "data.mdb").write_bytes(data[: len(data) // 2])
    done = subprocess.run(replay_command(str(stream), "--db", str(tmp_path / "cut")), capture_output=True, timeout=120)
    stderr = done.stderr.decode()
    assert done.returncode in (1, 2), (done.returncode, stderr)  # an error, not SIGBUS (-7)
    assert "is truncated" in stderr and "restore data.mdb from a backup" in stderr.lower()
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "data.mdb").write_bytes(b"no lmdb here" * 1000)
    done = subprocess.run(replay_command(str(stream), "--db", str(tmp_path / "junk")), capture_output=True, timeout=120)
    assert done.returncode in (1, 2) and "is no LMDB index" in done.stderr.decode()
