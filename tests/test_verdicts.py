"""A judged batch's verdicts as columns (``Verdicts``): the ``Verdict`` objects a
caller takes from them, and the ``--verdicts`` lines the kernel writes from
them (``_kernel_verdicts.c``) against the Python loop."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from streamfilter import FilterConfig, Post, StreamFilter, Verdict, VerdictKind, _verdicts
from streamfilter._engine import REASON_REPOST_SEEN, Engine, Sketcher
from streamfilter._prepared import PreparedBatch
from streamfilter._values import Match, Matches
from streamfilter._verdicts import verdict_lines
from streamfilter.adapters import record_adapter

from .test_post import verdicts

FIXTURES = sorted(
    path for path in (Path(__file__).parent.parent / "fixtures").glob("*.jsonl") if ".expected" not in path.name
)


def _columns(batch: list[Verdict]) -> tuple[list[object], ...]:
    return (
        [verdict.post_id for verdict in batch],
        [verdict.kind for verdict in batch],
        [verdict.duplicate_of for verdict in batch],
        [verdict.similarity for verdict in batch],
        [verdict.reason for verdict in batch],
        [verdict.line for verdict in batch],
    )


@given(st.lists(verdicts, max_size=8))
@example([Verdict(VerdictKind.INVALID, 3, Post("\ud800", "x"), reason="lone \udc00")])
@example([Verdict(VerdictKind.DUPLICATE, 9, Post(None, "x"), duplicate_of='\x00\x1f"\\\u2028', similarity=0.123456)])
@example([Verdict(VerdictKind.DUPLICATE, 1, None, duplicate_of="a", similarity=1.0)])
# the line breaks escaped (NEL, U+2029, U+2028), and their neighbours in UTF-8 not (©, ‰, €, U+2027)
@example([Verdict(VerdictKind.INVALID, 4, Post("0\x85", "x"), reason="\u2029\u00a9\u2030\u20ac\u2027\u2028")])
def test_the_kernels_lines_are_the_json_lines(kernel, batch: list[Verdict]) -> None:  # type: ignore[no-untyped-def]
    compiled = kernel.verdict_lines(*_columns(batch))
    python = "".join([verdict.json_line() + "\n" for verdict in batch])
    try:
        expected = python.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the kernel leaves the batch to the Python loop
        assert compiled is None
    else:
        assert compiled == expected
    assert verdict_lines(*_columns(batch)) == python.encode("utf-8", "backslashreplace")  # type: ignore[arg-type]


def test_lines_without_the_kernel_are_the_same() -> None:
    batch = [
        Verdict(VerdictKind.NOVEL, 1, Post("1", "a")),
        Verdict(VerdictKind.DUPLICATE, 2, Post("2", "a"), duplicate_of="1", similarity=2 / 3),
        Verdict(VerdictKind.INVALID, 3, None, reason="not JSON"),
    ]
    compiled = verdict_lines(*_columns(batch))  # type: ignore[arg-type]
    assert _verdicts._py_verdict_lines(*_columns(batch)) == compiled  # type: ignore[arg-type]
    assert [json.loads(line) for line in compiled.splitlines()] == [verdict.to_json() for verdict in batch]
    assert compiled.splitlines()[1].endswith(b'"similarity": 0.6667, "reason": null, "line": 2}')


def test_the_kernel_refuses_columns_of_other_lengths_and_types(kernel) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="differ in length"):
        kernel.verdict_lines(["1"], [], [None], [None], [None], [1])
    with pytest.raises(TypeError, match="line"):
        kernel.verdict_lines(["1"], [VerdictKind.NOVEL], [None], [None], [None], ["1"])
    with pytest.raises(TypeError, match="not a str"):
        kernel.verdict_lines([1], [VerdictKind.NOVEL], [None], [None], [None], [1])


def _fixture_batches(path: Path) -> list[list[tuple[int, bytes]]]:
    lines = list(enumerate(path.read_bytes().splitlines(keepends=True), 1))
    lines.append((len(lines) + 1, b'{"id_str": "d1", "text": "x", "created_at": "Fri Feb 31 00:00:00 +0000 2015"}\n'))
    return [lines[start : start + 64] for start in range(0, len(lines), 64)]


def _expected(batch: PreparedBatch, matches: Sequence[Match | None], engine: Engine) -> list[Verdict]:
    """The verdicts, one row at a time, as the engine gave them as objects before they were columns."""
    entries = batch.entries
    out = []
    for at in range(len(entries)):
        kind, index, post, raw = entries.kinds[at], entries.sketch_index[at], entries.post(at), entries.raws[at]
        if kind is not None:
            record_id = engine.adapter.readable_id(raw) if kind is VerdictKind.INVALID else None
            out.append(Verdict(kind, entries.lines[at], post, reason=entries.reasons[at], raw=raw, record_id=record_id))
            continue
        match = matches[index]
        reference = entries.reference[at]
        if match is None:
            reason = "repost of a post not in the index (never seen, or expired): passed and not indexed"
            out.append(
                Verdict(VerdictKind.NOVEL, entries.lines[at], post, reason=reason if reference else None, raw=raw)
            )
        else:
            out.append(
                Verdict(
                    VerdictKind.DUPLICATE,
                    entries.lines[at],
                    post,
                    duplicate_of=match.duplicate_of,
                    similarity=match.similarity,
                    reason=REASON_REPOST_SEEN if reference else None,
                    raw=raw,
                )
            )
    return out


@pytest.mark.parametrize("path", FIXTURES, ids=lambda path: path.stem)
def test_verdicts_taken_from_the_columns_are_the_rows_verdicts(path: Path) -> None:
    sketcher = Sketcher(FilterConfig(seed=1), record_adapter("auto"))
    engine = object.__new__(Engine)  # _verdicts needs no store
    engine.adapter = sketcher.adapter
    for number, records in enumerate(_fixture_batches(path)):
        # in this process, and as a worker sends it: the same verdicts, the same lines
        for batch in (sketcher.prepare(records), PreparedBatch.from_wire(sketcher.prepare_wire(records), records)):
            # every other sketch a duplicate; every third judged row made a repost without text
            matches = Matches.of(
                None if at % 2 else Match(f"earlier {at}", at / 7) for at in range(len(batch.sketches))
            )
            batch.entries.reference = [
                (at + number) % 3 == 0 and kind is None for at, kind in enumerate(batch.entries.kinds)
            ]
            judged = engine._verdicts(batch, matches)
            expected = _expected(batch, matches, engine)
            assert list(judged) == expected
            assert all(got.raw is want.raw for got, want in zip(judged, expected, strict=True))
            assert judged[1:3] == expected[1:3] and judged[-1] == expected[-1]
            assert judged.json_lines() == "".join(verdict.json_line() + "\n" for verdict in expected).encode()
    assert expected[-1].kind is VerdictKind.INVALID and expected[-1].post_id == "d1"


def test_a_batch_cut_by_a_delete_notice_gives_its_verdicts_in_order(tmp_path: Path) -> None:
    def tweet(post_id: str, second: int) -> dict[str, object]:
        created = f"Mon Jan 01 00:00:0{second} +0000 2024"
        return {"id_str": post_id, "text": "the same words in this post", "created_at": created, "user": {"id": 1}}

    # the delete notice cuts the batch in two parts: the copy after it is novel
    records = [tweet("1", 0), {"delete": {"status": {"id_str": "1"}}}, tweet("2", 1), tweet("3", 2), {"id_str": "4"}]
    with StreamFilter(FilterConfig(seed=1), path=tmp_path / "db") as sf:
        verdicts = sf.check_many(records)
    assert [verdict.kind for verdict in verdicts] == ["novel", "skipped", "novel", "duplicate", "invalid"]
    assert [verdict.line for verdict in verdicts] == [1, 2, 3, 4, 5]
    assert verdicts[3].duplicate_of == "2" and verdicts[2].post is not None and verdicts[2].post.id == "2"


def test_the_verdicts_of_a_batch_cut_in_parts_join_as_the_whole_batchs() -> None:
    # cut after each delete notice (split_after_deletes), judged part by part,
    # then joined: the verdicts, their posts and their lines are the whole batch's
    def tweet(number: int) -> bytes:
        text = f"post number {number} says something of its own {number * 7}"
        return json.dumps({"id_str": str(number), "text": text, "user": {"id": 1}}).encode()

    notice = b'{"delete": {"status": {"id_str": "2"}}}'
    lines = [tweet(1), tweet(2), notice, tweet(3), b"{broken", notice, tweet(4), tweet(5)]
    records = list(enumerate(lines, 1))
    sketcher = Sketcher(FilterConfig(seed=1), record_adapter("auto"))
    engine = object.__new__(Engine)  # _verdicts needs no store
    engine.adapter = sketcher.adapter
    for batch in (sketcher.prepare(records), PreparedBatch.from_wire(sketcher.prepare_wire(records), records)):
        matches = Matches.of(None if at % 2 else Match(f"earlier {at}", 0.75) for at in range(len(batch.sketches)))
        whole = engine._verdicts(batch, matches)
        parts, taken = [], 0
        for part in batch.split_after_deletes():
            parts.append(engine._verdicts(part, Matches.of(matches[taken : taken + len(part.sketches)])))
            taken += len(part.sketches)
        assert len(parts) == 3
        joined = _verdicts.Verdicts.joined(batch.entries, parts)
        assert list(joined) == list(whole) and len(joined) == len(lines)
        assert [verdict.post for verdict in joined] == [verdict.post for verdict in whole]
        assert joined.json_lines() == whole.json_lines()
        assert joined[4].kind is VerdictKind.INVALID and joined[3].duplicate_of == "earlier 2"
        assert [verdict.kind for verdict in joined].count(VerdictKind.SKIPPED) == 2
