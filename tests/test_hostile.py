"""Input written to break the filter: each is reported or judged, and the stream goes on."""

from __future__ import annotations

import json
import subprocess
from contextlib import aclosing
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from streamfilter import MemoryStore, StreamFilter, StreamFilterError, VerdictKind

from .conftest import replay_command

HUGE_NUMBER = "9" * 5000  # past Python's 4,300-digit limit for int()

HOSTILE_LINES = [
    ('{"id": "\\udc00", "text": "a post whose id is a lone surrogate"}', "invalid", "lone surrogate (U+DC00)"),
    ('{"id_str": "\\ud800x", "text": "another such id"}', "invalid", "lone surrogate (U+D800)"),
    ('{"id_str": "7", "text": "\\udfff"}', "novel", None),  # text alone: judged on what is left
    ('{"id_str": "8", "text": "words then \\udfff a lone half"}', "novel", None),
    ('{"id_str": "9", "text": "a number too long", "n": ' + HUGE_NUMBER + "}", "invalid", "JSON number too long"),
    ("[" + HUGE_NUMBER + "]", "invalid", "JSON number too long"),
    ('{"id_str": "10", "text": "the stream goes on after all of them"}', "novel", None),
]


def test_hostile_lines_are_reported_by_line_and_the_replay_goes_on(tmp_path: Path) -> None:
    stream = tmp_path / "hostile.jsonl"
    stream.write_text("\n".join(line for line, _, _ in HOSTILE_LINES) + "\n")
    done = subprocess.run(
        replay_command(str(stream), "--db", str(tmp_path / "index"), "--verdicts", str(tmp_path / "v.jsonl")),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    verdicts = [json.loads(line) for line in (tmp_path / "v.jsonl").read_text().splitlines()]
    assert [v["verdict"] for v in verdicts] == [kind for _, kind, _ in HOSTILE_LINES]
    for verdict, (_, _, reason) in zip(verdicts, HOSTILE_LINES, strict=True):
        if reason is not None:
            assert reason in verdict["reason"]
    assert [v["line"] for v in verdicts] == list(range(1, len(HOSTILE_LINES) + 1))
    stderr = done.stderr.decode()
    assert f"{stream}:1: invalid:" in stderr and f"{stream}:5: invalid:" in stderr


def test_check_reports_hostile_records_as_invalid_verdicts() -> None:
    with StreamFilter(store=MemoryStore()) as sf:
        assert sf.check({"id": "\udc00", "text": "hi there"}).kind is VerdictKind.INVALID
        assert sf.check('{"id": 1, "text": "x", "n": ' + HUGE_NUMBER + "}").kind is VerdictKind.INVALID
        assert sf.check({"id": "2", "text": "\udfff\udfff"}).kind is VerdictKind.NOVEL
        assert sf.check({"id": "3", "text": "\udfff\udfff"}).kind is VerdictKind.DUPLICATE


def test_check_of_a_page_indexes_nothing_and_check_many_then_passes_its_posts() -> None:
    page = {"data": [{"id": "1", "text": "the first post on this page"}, {"id": "2", "text": "a second one"}]}
    with StreamFilter(store=MemoryStore()) as sf:
        with pytest.raises(StreamFilterError, match="carries 2 posts.*nothing was indexed"):
            sf.check(page)
        assert [v.kind for v in sf.check_many([page])] == [VerdictKind.NOVEL, VerdictKind.NOVEL]


@pytest.mark.anyio
async def test_the_callers_own_error_leaves_the_block_unwrapped() -> None:
    with pytest.raises(ValueError, match="the caller's own") as caught:
        async with StreamFilter(store=MemoryStore()) as sf:
            async with aclosing(sf.filter([{"id": "1", "text": "one post"}])) as posts:
                async for _ in posts:
                    raise ValueError("the caller's own")
    assert type(caught.value) is ValueError


@pytest.mark.anyio
async def test_a_block_that_raises_outside_any_loop_leaves_unwrapped() -> None:
    with pytest.raises(KeyError):
        async with StreamFilter(store=MemoryStore()):
            await anyio.lowlevel.checkpoint()
            raise KeyError("missing")
