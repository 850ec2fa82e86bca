from __future__ import annotations

import gzip
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from streamfilter import StreamFilter
from streamfilter._clock import CORROBORATION
from tests.conftest import FIXTURES

from .conftest import distinct_text, replay_command

FIXTURE_STREAMS = [
    "campaign",
    "twitter_v1_search",
    "twitter_v2_brexit",
    "twitter_v2_stream",
    "mastodon_hashtag",
    "bluesky_jetstream",
    "mixed",
]


def replay(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "streamfilter", "replay", *args],
        input=stdin,
        capture_output=True,
        timeout=120,
    )


@pytest.mark.parametrize("name", FIXTURE_STREAMS)
def test_fixture_verdicts_match_expected(name: str, tmp_path: Path) -> None:
    verdicts_path = tmp_path / "verdicts.jsonl"
    result = replay(
        str(FIXTURES / f"{name}.jsonl"),
        "--verdicts",
        str(verdicts_path),
        "--out",
        str(tmp_path / "out.jsonl"),
    )
    assert result.returncode == 0, result.stderr.decode()
    got = [json.loads(line) for line in verdicts_path.read_text().splitlines()]
    expected = [json.loads(line) for line in (FIXTURES / f"{name}.expected.jsonl").read_text().splitlines()]
    assert [(v["id"], v["verdict"], v["duplicate_of"]) for v in got] == [
        (e["id"], e["verdict"], e["duplicate_of"]) for e in expected
    ]
    for verdict in got:
        assert set(verdict) >= {"id", "verdict", "duplicate_of", "similarity", "reason"}
        assert (verdict["similarity"] is not None) == (verdict["verdict"] == "duplicate")
        if verdict["verdict"] in ("invalid", "skipped"):
            assert verdict["reason"]


def test_out_passes_novel_lines_byte_for_byte(tmp_path: Path) -> None:
    source = FIXTURES / "campaign.jsonl"
    result = replay(str(source), "--verdicts", str(tmp_path / "v.jsonl"))
    assert result.returncode == 0
    lines = source.read_bytes().splitlines()
    verdicts = [json.loads(line) for line in (tmp_path / "v.jsonl").read_text().splitlines()]
    expected = [line for line, verdict in zip(lines, verdicts, strict=True) if verdict["verdict"] == "novel"]
    assert result.stdout.splitlines() == expected


def test_a_plain_text_file_is_judged_line_by_line_quoted_texts_included(tmp_path: Path) -> None:
    # a text in quotes is a whole JSON string: the text it holds, a copy of the line before
    source = tmp_path / "posts.txt"
    source.write_text(
        "ถ้าฉันเป็นแม่คุณแล้วรู้ว่าประหยัดผ้าอนามัยเก้าเดือน คงเลือกจ่ายต่อไป\n"
        '"ถ้าฉันเป็นแม่คุณแล้วรู้ว่าประหยัดผ้าอนามัยเก้าเดือน คงเลือกจ่ายต่อไป"\n'
        "2019\n",
        encoding="utf-8",
    )
    result = replay(str(source), "--verdicts", "-", "--out", os.devnull)
    verdicts = [json.loads(line) for line in result.stdout.splitlines()]
    assert [verdict["verdict"] for verdict in verdicts] == ["novel", "duplicate", "invalid"]
    assert verdicts[1]["duplicate_of"] == "line:1"
    assert "--format text" in verdicts[2]["reason"]
    assert b"posts.txt:3: invalid: JSON value is an int" in result.stderr


def test_lines_across_read_blocks_are_judged_whole_and_in_order(tmp_path: Path) -> None:
    # 3 MB of lines of uneven length: the CLI reads its input in blocks of
    # 1 MB, so lines are cut at block ends and put back together.
    records = [
        {"id": str(number), "text": distinct_text(number, 5 + number % 9), "pad": "x" * (300 + number * 37 % 900)}
        for number in range(1, 4501)
    ]
    stream = tmp_path / "big.jsonl"
    stream.write_text("".join(json.dumps(record) + "\n" for record in records))
    assert stream.stat().st_size > 3 << 20
    result = replay(str(stream), "--verdicts", str(tmp_path / "v.jsonl"), "--out", str(tmp_path / "out.jsonl"))
    assert result.returncode == 0, result.stderr.decode()
    verdicts = [json.loads(line) for line in (tmp_path / "v.jsonl").read_text().splitlines()]
    assert [(v["id"], v["line"]) for v in verdicts] == [(r["id"], number) for number, r in enumerate(records, 1)]
    assert {v["verdict"] for v in verdicts} == {"novel"}
    assert (tmp_path / "out.jsonl").read_bytes() == stream.read_bytes()


def test_out_cuts_a_page_to_its_novel_posts(tmp_path: Path) -> None:
    first = {"data": {"id": "1", "text": "the gate agent rebooked everyone on the evening flight to Denver"}}
    page: dict[str, Any] = {
        "data": [
            {"id": "2", "text": "The gate agent rebooked everyone on the evening flight to Denver!"},
            {"id": "3", "text": "lost luggage again and nobody at the counter knows where it went"},
        ],
        "meta": {"result_count": 2},
    }
    stream = tmp_path / "pages.jsonl"
    stream.write_text(json.dumps(first) + "\n" + json.dumps(page) + "\n")
    result = replay(str(stream), "--verdicts", str(tmp_path / "v.jsonl"))
    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout.splitlines()
    assert out[0] == json.dumps(first).encode()
    assert json.loads(out[1]) == {"data": [page["data"][1]], "meta": {"result_count": 2}}


def test_a_page_on_a_first_line_with_a_byte_order_mark_is_cut_too(tmp_path: Path) -> None:
    text = "the gate agent rebooked everyone on the evening flight"
    page = {"data": [{"id": "1", "text": text}, {"id": "2", "text": text}]}
    stream = tmp_path / "bom.jsonl"
    stream.write_bytes(b"\xef\xbb\xbf" + json.dumps(page).encode() + b"\n")
    result = replay(str(stream), "--verdicts", str(tmp_path / "v.jsonl"))
    assert result.returncode == 0, result.stderr.decode()
    assert [json.loads(line)["verdict"] for line in (tmp_path / "v.jsonl").read_text().splitlines()] == [
        "novel",
        "duplicate",
    ]
    assert json.loads(result.stdout) == {"data": [page["data"][0]]}


def test_invalid_lines_are_reported_rejected_and_the_stream_goes_on(tmp_path: Path) -> None:
    source = FIXTURES / "mixed.jsonl"
    result = replay(str(source), "--rejects", str(tmp_path / "rejects"), "--out", str(tmp_path / "out"))
    assert result.returncode == 0
    stderr = result.stderr.decode()
    for line_number in (3, 4, 5, 6, 9):
        assert f"mixed.jsonl:{line_number}: invalid:" in stderr
    lines = source.read_bytes().splitlines()
    assert (tmp_path / "rejects").read_bytes().splitlines() == [lines[i - 1] for i in (3, 4, 5, 6, 9)]
    assert "10 posts, 3 novel, 2 duplicates, 0 retweets, 5 invalid" in stderr
    assert len((tmp_path / "out").read_bytes().splitlines()) == 3


def test_an_invalid_verdict_names_the_records_id_where_it_can_be_read(tmp_path: Path) -> None:
    stream = tmp_path / "invalid.jsonl"
    stream.write_text(
        '{"id_str": "d1", "created_at": "Fri Feb 31 14:00:00 +0000 2012", "text": "a post of an impossible day"}\n'
        '{"data": {"id": "v2", "text": "a page whose post has no time we read", "created_at": "soon"}}\n'
        '{"id": true, "text": "a post whose id is a boolean"}\n'
        '{"id": "", "text": "a post whose id is empty"}\n'
        "{not json at all\n"
    )
    with stream.open("ab") as raw:  # refused for its bytes: its id is read all the same
        raw.write(b'{"id_str": "u8", "text": "not UTF-8: \xff\xfe"}\n{"id": "n0", "text": "a null: \x00"}\n')
    verdicts = tmp_path / "v.jsonl"
    assert replay(str(stream), "--verdicts", str(verdicts), "--out", os.devnull).returncode == 0
    lines = [json.loads(line) for line in verdicts.read_text().splitlines()]
    assert [(line["id"], line["verdict"]) for line in lines] == [
        ("d1", "invalid"), ("v2", "invalid"), ("line:3", "invalid"), ("line:4", "invalid"), ("line:5", "invalid"),
        ("u8", "invalid"), ("n0", "invalid"),
    ]  # fmt: skip
    assert [line["reason"] for line in lines[5:]] == ["invalid UTF-8 at byte 37", "line contains a null byte"]
    with StreamFilter() as sf:  # the library's verdict says the same
        verdict = sf.check({"id": "g9", "text": None})
        assert (verdict.kind.value, verdict.post_id, verdict.record_id) == ("invalid", "g9", "g9")


# Runs the command and writes its peak RSS (VmHWM, KiB) to argv[1] at exit; wait4's
# ru_maxrss would count the pages of the forking test process as well.
_PEAK_RSS = """
import atexit, runpy, sys
out = sys.argv.pop(1)
def peak():
    with open("/proc/self/status") as status, open(out, "w") as handle:
        handle.write(status.read().split("VmHWM:")[1].split()[0])
atexit.register(peak)
runpy.run_module("streamfilter", run_name="__main__", alter_sys=True)
"""


def _peak_rss_of_replay(peak: Path, *args: str) -> tuple[int, subprocess.CompletedProcess[bytes]]:
    """(peak RSS in KiB, result) of one replay process."""
    result = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, str(peak), "replay", "--sketch-processes", "0", *args],
        capture_output=True,
        timeout=120,
    )
    return int(peak.read_text()), result


def test_a_line_over_the_limit_is_rejected_without_being_held_whole(tmp_path: Path) -> None:
    # 48 MB with no line end in sight (a binary file, a stuck producer): it is
    # rejected by its line number, --rejects gets its first 4 MB, the stream goes
    # on, and the replay does not hold the whole line in memory
    def post(post_id: str, text: str) -> bytes:
        return json.dumps({"id_str": post_id, "text": text, "created_at": "Mon Feb 16 00:00:00 +0000 2015"}).encode()

    peaks = {}
    for name, middle in (
        ("short", post("2", "a short line")),
        ("long", b'{"id_str": "2", "text": "' + b"a" * (48 << 20)),
    ):
        stream = tmp_path / f"{name}.jsonl"
        stream.write_bytes(
            b"\n".join([post("1", "a post before the long line"), middle, post("3", "and one after it")]) + b"\n"
        )
        verdicts, rejects = tmp_path / f"{name}.verdicts", tmp_path / f"{name}.rejects"
        peaks[name], result = _peak_rss_of_replay(
            tmp_path / f"{name}.peak",
            str(stream),
            "--verdicts",
            str(verdicts),
            "--rejects",
            str(rejects),
            "--out",
            os.devnull,
        )
        assert result.returncode == 0, result.stderr.decode()[-2000:]
    judged = [json.loads(line) for line in verdicts.read_text().splitlines()]
    assert [(v["line"], v["verdict"]) for v in judged] == [(1, "novel"), (2, "invalid"), (3, "novel")]
    assert judged[1]["reason"] == "line is at least 4194305 bytes, over the 4194304 byte limit"
    assert f"long.jsonl:2: invalid: {judged[1]['reason']}" in result.stderr.decode()
    assert rejects.read_bytes() == (b'{"id_str": "2", "text": "' + b"a" * (48 << 20))[:4194305] + b"\n"
    assert peaks["long"] < peaks["short"] + 24 * 1024, peaks  # KiB: the head, not the 48 MB line


def test_stdin_dash_and_gzip_inputs(tmp_path: Path) -> None:
    data = (FIXTURES / "campaign.jsonl").read_bytes()
    from_stdin = replay(stdin=data)
    from_dash = replay("-", stdin=data)
    packed = tmp_path / "campaign.jsonl.gz"
    packed.write_bytes(gzip.compress(data))
    from_gzip = replay(str(packed))
    assert from_stdin.returncode == from_dash.returncode == from_gzip.returncode == 0
    assert from_stdin.stdout == from_dash.stdout == from_gzip.stdout
    assert len(from_stdin.stdout.splitlines()) == 12


def test_a_byte_order_mark_does_not_hide_the_first_line(tmp_path: Path) -> None:
    lines = (FIXTURES / "campaign.jsonl").read_bytes().splitlines()
    plain = replay(str(FIXTURES / "campaign.jsonl"), "--verdicts", str(tmp_path / "plain"))
    windows = tmp_path / "windows.jsonl"
    windows.write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(lines) + b"\r\n")
    marked = replay(str(windows), "--verdicts", str(tmp_path / "marked"))
    assert plain.returncode == marked.returncode == 0, marked.stderr.decode()

    def judged(name: str) -> list[tuple[str, str, str | None]]:
        verdicts = [json.loads(line) for line in (tmp_path / name).read_text().splitlines()]
        return [(v["id"], v["verdict"], v["duplicate_of"]) for v in verdicts]

    assert judged("marked") == judged("plain")
    assert judged("marked")[0][0] == json.loads(lines[0])["id_str"]


def test_a_truncated_gzip_input_keeps_its_whole_lines_and_the_next_input(tmp_path: Path) -> None:
    source = FIXTURES / "campaign.jsonl"
    lines = source.read_bytes().splitlines()
    packed = gzip.compress(source.read_bytes())
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(packed[: len(packed) - 20])  # the end-of-stream trailer and a little data
    other = tmp_path / "other.jsonl"
    other.write_bytes(b'{"id_str": "after", "text": "a different post that only the second input holds"}\n')
    db = str(tmp_path / "index")
    result = replay(str(cut), str(other), "--db", db, "--verdicts", str(tmp_path / "v"))
    stderr = result.stderr.decode()
    assert result.returncode == 1, stderr
    verdicts = [json.loads(line) for line in (tmp_path / "v").read_text().splitlines()]
    judged = len(verdicts) - 1
    assert 0 < judged < len(lines)
    assert f"cut.jsonl.gz: input broke off after line {judged}" in stderr
    assert f"line {judged + 1} is incomplete and was not judged" in stderr
    assert [v["id"] for v in verdicts[:judged]] == [json.loads(line)["id_str"] for line in lines[:judged]]
    assert verdicts[-1]["id"] == "after" and verdicts[-1]["verdict"] == "novel"
    # once the input is whole again, a resume judges exactly the lines it could not
    cut.write_bytes(packed)
    resumed = replay(str(cut), str(other), "--db", db, "--resume", "--verdicts", str(tmp_path / "v2"))
    assert resumed.returncode == 0, resumed.stderr.decode()
    rest = [json.loads(line)["id"] for line in (tmp_path / "v2").read_text().splitlines()]
    assert rest == [json.loads(line)["id_str"] for line in lines[judged:]]


def _warnings(result: subprocess.CompletedProcess[bytes], phrase: str) -> list[str]:
    """The lines of a successful replay's stderr that hold ``phrase``."""
    stderr = result.stderr.decode()
    assert result.returncode == 0, stderr
    return [line for line in stderr.splitlines() if phrase in line]


def test_one_post_dated_past_the_ttl_does_not_expire_the_index(tmp_path: Path) -> None:
    # One mis-dated line would move the index's clock years ahead: every
    # earlier post would expire at once, and the copies after it pass as
    # novel. It is placed a slack past the stream's time instead, stderr
    # names it once, and the stats line counts it. An undated line takes the
    # stream's time, and moves nothing.
    lines = (FIXTURES / "campaign.jsonl").read_bytes().splitlines()
    expected = [json.loads(line) for line in (FIXTURES / "campaign.expected.jsonl").read_text().splitlines()]
    clean = replay(str(FIXTURES / "campaign.jsonl"))
    assert clean.returncode == 0 and b"ahead of the stream's time" not in clean.stderr
    misdated = json.loads(lines[0])
    misdated.update(id_str="misdated", created_at="Wed Oct 10 20:19:24 +0000 2018", text="an unrelated post")
    undated = {"id_str": "undated", "text": "another unrelated post, with no time at all"}
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(
        b"\n".join([*lines[:4], json.dumps(misdated).encode(), *lines[4:7], json.dumps(undated).encode(), *lines[7:]])
        + b"\n"
    )
    result = replay(str(mixed), "--verdicts", str(tmp_path / "v"))
    warnings = _warnings(result, "ahead of the stream's time")
    assert len(warnings) == 1, result.stderr.decode()
    assert warnings[0].startswith(
        f"streamfilter: {mixed}:5 (post misdated, dated 2018-10-10 20:19:24Z) is dated 6.4 years ahead"
    )
    assert "it is judged and recorded at 2012-05-06 08:07:00Z" in warnings[0]  # a quarter TTL on, still 2012
    assert not _warnings(result, "newer than every post before it")
    judged = {v["id"]: v["verdict"] for v in map(json.loads, (tmp_path / "v").read_text().splitlines())}
    assert judged.pop("misdated") == judged.pop("undated") == "novel"
    assert judged == {post["id"]: post["verdict"] for post in expected}  # the copies after it are still found


def test_a_few_posts_dated_ahead_anywhere_leave_every_verdict_as_it_was(tmp_path: Path) -> None:
    # Fifteen posts dated years ahead, in a row or spread out, are fewer than
    # the clock needs to move: the campaign's verdicts are those of the clean replay
    lines = (FIXTURES / "campaign.jsonl").read_bytes().splitlines()
    expected_lines = (FIXTURES / "campaign.expected.jsonl").read_text().splitlines()
    expected = {post["id"]: post["verdict"] for post in map(json.loads, expected_lines)}
    ahead = []
    for index in range(CORROBORATION - 1):
        post = json.loads(lines[0])
        post.update(id_str=f"ahead{index}", created_at="Wed Oct 10 20:19:24 +0000 2018", text=distinct_text(index))
        ahead.append(json.dumps(post).encode())
    in_a_row = [*lines[:1], *ahead, *lines[1:]]
    spread = [line for pair in itertools.zip_longest(lines, ahead) for line in pair if line is not None]
    for name, stream in (("in_a_row", in_a_row), ("spread", spread)):
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(b"\n".join(stream) + b"\n")
        result = replay(str(path), "--verdicts", str(tmp_path / f"{name}.v"))
        assert result.returncode == 0, result.stderr.decode()
        judged = {v["id"]: v["verdict"] for v in map(json.loads, (tmp_path / f"{name}.v").read_text().splitlines())}
        assert {post_id: judged[post_id] for post_id in expected} == expected, name


def test_a_stream_that_moves_on_moves_the_clock(tmp_path: Path) -> None:
    # The stream moved on (a second recording, years later): once as many
    # posts as the clock needs are dated there, it moves, and every earlier
    # post expires: the copies after it match none of them. stderr names the
    # post that moved it.
    lines = (FIXTURES / "campaign.jsonl").read_bytes().splitlines()
    later = []
    for index in range(CORROBORATION):
        post = json.loads(lines[0])
        post.update(id_str=f"later{index}", created_at="Wed Oct 10 20:19:24 +0000 2018", text=distinct_text(index))
        later.append(json.dumps(post).encode())
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(b"\n".join([*lines[:4], *later, *lines[4:]]) + b"\n")
    result = replay(str(mixed), "--verdicts", str(tmp_path / "v"))
    warnings = _warnings(result, "newer than every post before it")
    assert [warning.split(" (post ")[0] for warning in warnings] == [f"streamfilter: {mixed}:{4 + CORROBORATION}"], (
        result.stderr.decode()
    )
    assert "every earlier post has expired" in warnings[0]
    judged = [json.loads(line) for line in (tmp_path / "v").read_text().splitlines()]
    before_the_move = {verdict["id"] for verdict in judged[:4]}
    assert not any(verdict["duplicate_of"] in before_the_move for verdict in judged[4 + CORROBORATION :])
    assert judged[4 + CORROBORATION]["verdict"] == "novel"  # the originals expired with the move


def test_a_quiet_spell_longer_than_a_short_ttl_expires_what_came_before(tmp_path: Path) -> None:
    # Under --ttl 5m, a stream that falls quiet for ten minutes is not
    # mis-dated: once the posts after the gap have moved the clock, the post
    # before the gap has expired for them (live, the wall clock's ten minutes
    # move it at the first: tests/test_clock.py)
    def post(post_id: str, when: str, text: str) -> bytes:
        return json.dumps({"id_str": post_id, "text": text, "created_at": f"Mon Feb 16 {when} +0000 2015"}).encode()

    announcement = "the same announcement posted twice, ten minutes apart"
    after = [post(f"after{i}", f"10:10:{i:02d}", distinct_text(i)) for i in range(CORROBORATION)]
    stream = tmp_path / "quiet.jsonl"
    stream.write_bytes(
        b"\n".join([post("before", "10:00:00", announcement), *after, post("copy", "10:10:30", announcement)]) + b"\n"
    )
    result = replay(str(stream), "--ttl", "5m", "--verdicts", str(tmp_path / "v"))
    warnings = _warnings(result, "newer than every post before it")
    assert len(warnings) == 1 and warnings[0].endswith("every earlier post has expired")
    verdicts = {v["id"]: v["verdict"] for v in map(json.loads, (tmp_path / "v").read_text().splitlines())}
    assert verdicts["before"] == verdicts["copy"] == "novel"


def test_a_time_warning_names_the_input_and_its_line(tmp_path: Path) -> None:
    # With several inputs, the warning names the file and the line within it,
    # as the report of an invalid line does (not the record's number in the run).
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    lines = (FIXTURES / "campaign.jsonl").read_bytes().splitlines()
    first.write_bytes(b"\n".join(lines[:6]) + b"\n")
    misdated = json.loads(lines[6])
    misdated.update(id_str="misdated", created_at="Wed Oct 10 20:19:24 +0000 2018")
    second.write_bytes(b"\n".join([lines[7], json.dumps(misdated).encode(), b"{broken", *lines[8:10]]) + b"\n")
    result = replay(str(first), str(second), "--verdicts", str(tmp_path / "v"))
    warnings = _warnings(result, "ahead of the stream's time")
    assert len(warnings) == 1 and warnings[0].startswith(f"streamfilter: {second}:2 (post misdated,"), result.stderr
    assert f"streamfilter: {second}:3: invalid".encode() in result.stderr


def test_an_undated_line_takes_the_time_of_the_stream_around_it(tmp_path: Path) -> None:
    # An undated first line used to take the wall clock: the clock jumped to
    # now, every dated post after it arrived expired, and the whole replay
    # came out novel (25 of 25), with no warning. It takes the time of the
    # first dated post after it now, and a later undated line that of the
    # newest dated post before it.
    lines = (FIXTURES / "campaign.jsonl").read_bytes().splitlines()
    undated = [json.dumps({"id_str": f"undated{i}", "text": distinct_text(i)}).encode() for i in range(2)]
    archive = tmp_path / "archive.jsonl"
    archive.write_bytes(b"\n".join([undated[0], *lines[:12], undated[1], *lines[12:]]) + b"\n")
    result = replay(str(archive), "--verdicts", str(tmp_path / "v"))
    assert result.returncode == 0, result.stderr.decode()
    verdicts = [json.loads(line) for line in (tmp_path / "v").read_text().splitlines()]
    expected = [json.loads(line) for line in (FIXTURES / "campaign.expected.jsonl").read_text().splitlines()]
    judged = {v["id"]: v["verdict"] for v in verdicts}
    assert {post["id"]: post["verdict"] for post in expected} == {
        k: v for k, v in judged.items() if not k.startswith("undated")
    }
    assert judged["undated0"] == judged["undated1"] == "novel"
    assert b"than every post before it" not in result.stderr and b"older than the newest post" not in result.stderr


def test_old_posts_replayed_into_an_index_that_saw_newer_ones_are_named(tmp_path: Path) -> None:
    # The index's clock comes from its last run: 2012 posts replayed after
    # newer ones would arrive expired. They are judged at the stream's time
    # instead, so they match each other as in an index of their own; stderr
    # names the first such line, once.
    db = str(tmp_path / "index")
    newer = replay(str(FIXTURES / "twitter_v1_search.jsonl"), "--db", db)
    assert newer.returncode == 0, newer.stderr.decode()
    older = replay(str(FIXTURES / "campaign.jsonl"), "--db", db)
    warnings = _warnings(older, "older than the newest post the index has seen")
    assert len(warnings) == 1, older.stderr.decode()
    campaign = FIXTURES / "campaign.jsonl"
    assert warnings[0].startswith(
        f"streamfilter: {campaign}:1 (post 200000000000000001, dated 2012-05-04 14:07:00Z) is "
    )
    assert "it is judged and recorded at the stream's time (" in warnings[0]
    fresh = replay(str(FIXTURES / "campaign.jsonl"), "--db", str(tmp_path / "fresh"))
    assert b"older than the newest post" not in fresh.stderr
    # the same novel posts come out as from an index of their own, and the campaign's copies not
    assert older.stdout == fresh.stdout
    assert len(fresh.stdout.splitlines()) < len(campaign.read_bytes().splitlines())


def test_db_persists_between_runs_and_pins_its_settings(tmp_path: Path) -> None:
    db = str(tmp_path / "index")
    source = str(FIXTURES / "campaign.jsonl")
    first = replay(source, "--db", db, "--ttl", "0")
    second = replay(source, "--db", db, "--ttl", "0", "--verdicts", str(tmp_path / "v"))
    assert first.returncode == second.returncode == 0
    assert second.stdout == b""  # everything was seen in the first run
    assert {json.loads(line)["verdict"] for line in (tmp_path / "v").read_text().splitlines()} == {"duplicate"}
    mismatch = replay(source, "--db", db, "--shingle-size", "3")
    assert mismatch.returncode == 1
    message = mismatch.stderr.decode().strip()
    assert len(message.splitlines()) == 1
    assert "shingle_size: index has 2, requested 3" in message


def test_retweet_policy_on_the_command_line(tmp_path: Path) -> None:
    source = str(FIXTURES / "twitter_v1_search.jsonl")
    result = replay(source, "--retweets", "drop", "--verdicts", str(tmp_path / "v"))
    verdicts = [json.loads(line) for line in (tmp_path / "v").read_text().splitlines()]
    statuses = [json.loads(line) for line in Path(source).read_text().splitlines()]
    assert result.returncode == 0
    assert [v["verdict"] == "retweet" for v in verdicts] == ["retweeted_status" in s for s in statuses]


def test_generic_fields(tmp_path: Path) -> None:
    lines = b'{"m": {"k": "a"}, "body": {"t": "Generic body text about ferries"}}\n{"m": {"k": "b"}, "body": {"t": "generic BODY text about ferries!"}}\n'
    result = replay(
        "--format",
        "generic",
        "--id-field",
        "m.k",
        "--text-field",
        "body.t",
        "--verdicts",
        "-",
        "--out",
        str(tmp_path / "o"),
        stdin=lines,
    )
    verdicts = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(v["id"], v["verdict"], v["duplicate_of"]) for v in verdicts] == [
        ("a", "novel", None),
        ("b", "duplicate", "a"),
    ]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--ttl", "soon"], 2, "cannot read duration"),
        (["--threshold", "2"], 2, "must be in (0, 1]"),
        (["--format", "xml"], 2, "invalid choice"),
        (["/no/such/file.jsonl"], 2, "cannot open input"),
    ],
)
def test_usage_errors_exit_2(args: list[str], code: int, message: str) -> None:
    result = replay(*args, stdin=b"")
    assert result.returncode == code
    assert message in result.stderr.decode()


def test_unusable_db_is_a_one_line_failure(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = replay("--db", str(blocker), stdin=b"hello\n")
    assert result.returncode == 1
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith("is a file, not an index directory: choose a directory for --db")


def test_console_script_and_params() -> None:
    result = subprocess.run(["streamfilter", "params", "--threshold", "0.6"], capture_output=True, timeout=60)
    assert result.returncode == 0
    output = result.stdout.decode()
    assert "bands 16  rows 2" in output
    row = next(line for line in output.splitlines() if line.strip().startswith("0.60"))
    assert abs(float(row.split()[1]) - (1 - (1 - 0.6**2) ** 16)) < 1e-6


def test_templated_posts_stay_distinct(tmp_path: Path) -> None:
    # 30,000 posts that differ in one number: every band key they share is hot.
    # "post number 5" and "post number 7" share 3 of 7 words and pairs, under
    # the threshold; only numbers whose 32-bit word hashes collide would match
    # (about 0.1 such pairs expected among 30,000 under a seed drawn at random;
    # none under seed 1, which the test fixes so that it never depends on the draw)
    lines = "".join(f"post number {i}\n" for i in range(30000)).encode()
    result = replay("--verdicts", str(tmp_path / "v"), "--out", os.devnull, "--seed", "1", stdin=lines)
    assert result.returncode == 0
    kinds = [json.loads(line)["verdict"] for line in (tmp_path / "v").read_text().splitlines()]
    assert kinds == ["novel"] * 30000


def test_resume_across_several_inputs(tmp_path: Path) -> None:
    # two files, both replayed; a resume must skip both entirely, including the
    # first file's tail that shared a batch with the second file's head
    first = tmp_path / "a.jsonl"
    second = tmp_path / "b.jsonl"
    first.write_text("".join(json.dumps({"id": f"a{i}", "text": distinct_text(i)}) + "\n" for i in range(50)))
    second.write_text("".join(json.dumps({"id": f"b{i}", "text": distinct_text(1000 + i)}) + "\n" for i in range(50)))
    db = str(tmp_path / "db")
    out = tmp_path / "out"
    done = replay(str(first), str(second), "--db", db, "--out", str(out), "--ttl", "0", "--batch-size", "30")
    assert done.returncode == 0
    again = replay(
        str(first),
        str(second),
        "--db",
        db,
        "--out",
        str(out),
        "--ttl",
        "0",
        "--resume",
        "--verdicts",
        str(tmp_path / "v"),
    )
    assert again.returncode == 0
    assert (tmp_path / "v").read_text() == ""  # nothing left to judge
    assert len(out.read_text().splitlines()) == 100


def test_a_reader_that_stops_early_ends_the_replay_quietly(tmp_path: Path) -> None:
    # `streamfilter replay big.jsonl | head`: the closed pipe stops the replay
    # with the exit of a command SIGPIPE ended (141), neither blamed on the
    # index nor a worker's traceback
    from tests.test_crash import make_stream

    stream = tmp_path / "stream.jsonl"
    make_stream(stream, distinct=20000, copies=1)
    replay = subprocess.Popen(
        [sys.executable, "-m", "streamfilter", "replay", str(stream), "--db", str(tmp_path / "db")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert replay.stdout is not None
    replay.stdout.readline()
    replay.stdout.close()
    _, stderr = replay.communicate(timeout=120)
    assert replay.returncode == 141
    assert stderr.decode() == ""


def test_a_cut_off_copy_and_a_two_word_edit_are_duplicates_through_the_command(tmp_path: Path) -> None:
    # Both copies share under half of their words and word pairs with their
    # original; the start rule and the word-edit rule catch them (README, "The rules, stated").
    texts = [
        "@united We waited four hours at the gate in Denver and nobody from the crew told us why "
        "the flight was late https://t.co/abc",
        "my bag never made it to denver, again",
        "@AmericanAir We waited four hours at the gate in Denver and nob…",
        "my suitcase never made it to dallas, again",
        "the crew on the morning flight to boston were wonderful today",
    ]
    stream = tmp_path / "rules.jsonl"
    stream.write_text(
        "".join(
            json.dumps({"id_str": str(n), "text": text, "created_at": f"Mon Feb 16 10:00:0{n} +0000 2015"}) + "\n"
            for n, text in enumerate(texts, 1)
        )
    )
    # the word-edit pair shares under half its word pairs: LSH proposes it
    # under about half the seeds, so the run is made reproducible with one that does
    result = replay(str(stream), "--db", str(tmp_path / "db"), "--verdicts", str(tmp_path / "v"), "--seed", "2")
    assert result.returncode == 0, result.stderr
    verdicts = [json.loads(line) for line in (tmp_path / "v").read_text().splitlines()]
    assert [(v["verdict"], v["duplicate_of"]) for v in verdicts] == [
        ("novel", None),
        ("novel", None),
        ("duplicate", "1"),
        ("duplicate", "2"),
        ("novel", None),
    ]
    assert verdicts[2]["similarity"] == 1.0  # the cut copy is the start of its original, word for word
    assert verdicts[3]["similarity"] == 0.75  # two word edits in eight words


def test_sigterm_ends_a_replay_of_an_idle_stdin_at_once(tmp_path: Path) -> None:
    # `replay -` judges a line, then its writer goes quiet without closing the
    # pipe: SIGTERM ends it at once, with the summary, not when stdin ends
    out = tmp_path / "out.jsonl"
    replay = subprocess.Popen(
        [sys.executable, "-m", "streamfilter", "replay", "-", "--out", str(out)],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert replay.stdin is not None
    replay.stdin.write(json.dumps({"id": "1", "text": "the one line before the quiet"}).encode() + b"\n")
    replay.stdin.flush()
    while not (out.exists() and out.read_text().endswith("\n")):  # judged, written: the replay waits on stdin
        assert replay.poll() is None
        time.sleep(0.01)
    replay.send_signal(signal.SIGTERM)
    assert replay.wait(timeout=20) == 128 + signal.SIGTERM  # stdin is still open
    assert replay.stderr is not None
    with replay.stdin, replay.stderr:
        assert b"1 post, 1 novel" in replay.stderr.read()


def test_a_command_s_error_shows_that_command_s_usage(tmp_path: Path) -> None:
    done = subprocess.run(replay_command(str(tmp_path / "nosuchfile.jsonl")), capture_output=True, timeout=60)
    stderr = done.stderr.decode()
    assert done.returncode == 2 and stderr.startswith("usage: streamfilter replay [-h]")
    assert "cannot open input" in stderr and "{replay,follow,consume,report,params}" not in stderr


def test_a_table_is_refused_as_json_lines_and_read_as_text_when_asked(tmp_path: Path) -> None:
    table = tmp_path / "posts.csv"
    table.write_text('tweet_id,text\n1,Win a free cruise today\n2,"win a FREE cruise, click"\n', encoding="utf-8")
    refused = subprocess.run(replay_command(str(table)), capture_output=True, timeout=60)
    assert refused.returncode == 2 and refused.stdout == b""
    assert "posts.csv is a table" in refused.stderr.decode() and "--text-field" in refused.stderr.decode()
    verdicts = tmp_path / "verdicts.jsonl"
    command = replay_command(str(table), "--format", "text", "--verdicts", str(verdicts), "-q")
    assert subprocess.run(command, capture_output=True, timeout=60).returncode == 0
    assert len(verdicts.read_text().splitlines()) == 3  # the header is a post too


def test_the_progress_line_counts_the_bytes_of_lines_done_not_read_ahead(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # reading runs batches ahead of judging: the share and the time left
    # follow the lines done, so 100% is shown only once every line is done
    import anyio

    from streamfilter.cli._inputs import Inputs, Progress

    stream = tmp_path / "s.jsonl"
    stream.write_bytes(b"".join(b'{"id": "%d", "text": "%s"}\n' % (n, b"w" * 9000) for n in range(400)))
    inputs = Inputs([str(stream)])
    handles = inputs.open_all()

    async def read_all() -> list[int]:
        return [len(chunk) for chunk in [c async for c in inputs.chunks(handles)] if isinstance(chunk, list)]

    sizes = anyio.run(read_all)
    handles[0].close()
    assert len(sizes) > 2 and sum(sizes) == 400  # read whole, in several chunks
    assert inputs.bytes_done() == 0  # nothing done yet
    inputs.done(sizes[0])
    first = inputs.bytes_done()
    assert 0 < first < stream.stat().st_size
    progress = Progress(True, inputs)
    progress.show({"posts": sizes[0], "novel": sizes[0], "duplicate": 0}, final=False)
    shown = capsys.readouterr().err
    assert f"{sizes[0]:,} posts" in shown and "100%" not in shown and " left" in shown
    inputs.progress(400)  # a commit's progress: every line done
    assert inputs.bytes_done() == stream.stat().st_size
    progress.show({"posts": 400, "novel": 400, "duplicate": 0}, final=True)
    assert "100%" in capsys.readouterr().err
