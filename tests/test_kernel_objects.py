"""The kernel's object loops (``_kernel_objects.c``) against the Python loops they replace:
a worker's batch rebuilt as Entry, Post and Sketch objects, its Verdict objects, and the
``--verdicts`` lines."""

from __future__ import annotations

import dataclasses
import gc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from streamfilter import FilterConfig, Post, Verdict, VerdictKind, _engine, _post, _prepared
from streamfilter._engine import REASON_REPOST_SEEN, Engine, Sketcher
from streamfilter._post import POST_SLOTS, slot_descriptors, verdict_lines
from streamfilter._prepared import Entry, PreparedBatch
from streamfilter._rules import Match
from streamfilter.adapters import record_adapter
from streamfilter.stores import Sketch

from .test_post import verdicts

FIXTURES = sorted(
    path for path in (Path(__file__).parent.parent / "fixtures").glob("*.jsonl") if ".expected" not in path.name
)


def _fixture_batches(path: Path) -> list[list[tuple[int, bytes]]]:
    lines = list(enumerate(path.read_bytes().splitlines(keepends=True), 1))
    lines.append((len(lines) + 1, b"{not json\n"))  # an invalid record: an entry without a post
    return [lines[start : start + 64] for start in range(0, len(lines), 64)]


def _same_sketches(built: list[Sketch], reference: list[Sketch]) -> None:
    assert len(built) == len(reference)
    for one, other in zip(built, reference, strict=True):
        for field in dataclasses.fields(Sketch):
            value, expected = getattr(one, field.name), getattr(other, field.name)
            if isinstance(expected, np.ndarray):
                assert value.dtype == expected.dtype
                assert value.tolist() == expected.tolist()
                assert value.base is not None  # a view of the column, as slicing gives
            else:
                assert type(value) is type(expected)
                assert value == expected


@pytest.mark.parametrize("path", FIXTURES, ids=lambda path: path.stem)
def test_a_batch_rebuilt_by_the_kernel_is_the_python_loops(kernel, monkeypatch, path: Path) -> None:  # type: ignore[no-untyped-def]
    sketcher = Sketcher(FilterConfig(seed=1), record_adapter("auto"))
    for records in _fixture_batches(path):
        wire = sketcher.prepare_wire(records)
        compiled = PreparedBatch.from_wire(wire, records)
        with monkeypatch.context() as patched:
            patched.setattr(_prepared, "_KERNEL", None)
            python = PreparedBatch.from_wire(wire, records)
        assert compiled.entries == python.entries
        _same_sketches(compiled.sketches, python.sketches)
        for built, reference in zip(compiled.entries, python.entries, strict=True):
            # raw is left out of Post's equality: the very record object, in both
            assert built.raw is reference.raw
            assert (built.post is None) == (reference.post is None)
            if built.post is not None:
                assert built.post.raw is reference.post.raw  # type: ignore[union-attr]
                assert gc.is_tracked(built.post)
            assert gc.is_tracked(built)
    assert any(entry.post is None for entry in compiled.entries)


def test_posts_the_kernel_builds_stay_frozen(kernel) -> None:  # type: ignore[no-untyped-def]
    rows = [(7, None, None, 0, False, ("1", "hello", 5.0, None, False, "text", None), None)]
    (entry,) = kernel.entries_from_wire(rows, {7: b"line"}, Post, POST_SLOTS, Entry, slot_descriptors(Entry))
    assert entry.post == Post("1", "hello", 5.0, platform="text", raw=b"line")
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.post.text = "changed"


def test_the_kernel_refuses_slots_that_are_not_the_types_own(kernel) -> None:  # type: ignore[no-untyped-def]
    entry_slots = slot_descriptors(Entry)
    with pytest.raises(TypeError, match="Post"):  # Entry's slots given for Post
        kernel.entries_from_wire([], {}, Post, entry_slots[:8], Entry, entry_slots)
    with pytest.raises(TypeError, match="tuple of 9"):
        kernel.entries_from_wire([], {}, Post, POST_SLOTS, Entry, entry_slots[:8])
    with pytest.raises(TypeError, match="Verdict"):
        kernel.verdict_lines([], Verdict, POST_SLOTS[:7], Post, POST_SLOTS)


def test_the_kernel_refuses_rows_of_another_shape(kernel) -> None:  # type: ignore[no-untyped-def]
    entry_slots = slot_descriptors(Entry)
    with pytest.raises(ValueError, match="entry row 0"):
        kernel.entries_from_wire([(1, None, None)], {1: b"x"}, Post, POST_SLOTS, Entry, entry_slots)
    with pytest.raises(ValueError, match="a post's fields"):
        kernel.entries_from_wire(
            [(1, None, None, 0, False, ("1",), None)], {1: b"x"}, Post, POST_SLOTS, Entry, entry_slots
        )
    with pytest.raises(KeyError):  # a line the batch does not hold
        kernel.entries_from_wire(
            [(2, None, None, 0, False, None, None)], {1: b"x"}, Post, POST_SLOTS, Entry, entry_slots
        )


def _python_lines(batch: list[Verdict]) -> bytes:
    return "".join([verdict.json_line() + "\n" for verdict in batch]).encode("utf-8", "backslashreplace")


@given(st.lists(verdicts, max_size=8))
@example([Verdict(VerdictKind.INVALID, 3, Post("\ud800", "x"), reason="lone \udc00")])
@example([Verdict(VerdictKind.DUPLICATE, 9, Post(None, "x"), duplicate_of='\x00\x1f"\\\u2028', similarity=0.123456)])
@example([Verdict(VerdictKind.DUPLICATE, 1, None, duplicate_of="a", similarity=1.0)])
def test_verdict_lines_are_the_json_lines(kernel, batch: list[Verdict]) -> None:  # type: ignore[no-untyped-def]
    compiled = kernel.verdict_lines(batch, Verdict, slot_descriptors(Verdict), Post, POST_SLOTS)
    try:
        expected = "".join([verdict.json_line() + "\n" for verdict in batch]).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the kernel leaves the batch to the Python loop
        assert compiled is None
    else:
        assert compiled == expected
    assert verdict_lines(batch) == _python_lines(batch)


def test_verdict_lines_without_the_kernel_are_the_same(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    batch = [
        Verdict(VerdictKind.NOVEL, 1, Post("1", "a")),
        Verdict(VerdictKind.DUPLICATE, 2, Post("2", "a"), duplicate_of="1", similarity=2 / 3),
        Verdict(VerdictKind.INVALID, 3, None, reason="not JSON"),
    ]
    compiled = verdict_lines(batch)
    monkeypatch.setattr(_post, "_KERNEL", None)
    assert verdict_lines(batch) == compiled == _python_lines(batch)
    assert compiled.splitlines()[1].endswith(b'"similarity": 0.6667, "reason": null, "line": 2}')


@pytest.mark.parametrize("path", FIXTURES, ids=lambda path: path.stem)
def test_verdicts_the_kernel_builds_are_the_python_loops(kernel, monkeypatch, path: Path) -> None:  # type: ignore[no-untyped-def]
    sketcher = Sketcher(FilterConfig(seed=1), record_adapter("auto"))
    engine = object.__new__(Engine)  # _verdicts needs no store
    for number, records in enumerate(_fixture_batches(path)):
        batch = sketcher.prepare(records)
        # every other sketch a duplicate; every third entry made a repost without text
        matches = [None if at % 2 else Match(f"earlier {at}", at / 7) for at in range(len(batch.sketches))]
        batch.entries = [
            dataclasses.replace(entry, reference=True) if (at + number) % 3 == 0 and entry.kind is None else entry
            for at, entry in enumerate(batch.entries)
        ]
        compiled = engine._built_verdicts(batch, matches)
        with monkeypatch.context() as patched:
            patched.setattr(_engine, "_KERNEL", None)
            python = engine._built_verdicts(batch, matches)
        assert compiled == python
        assert [verdict.raw for verdict in compiled] == [verdict.raw for verdict in python]
        assert all(built.raw is reference.raw for built, reference in zip(compiled, python, strict=True))
        kinds = {verdict.kind for verdict in compiled}
        assert VerdictKind.DUPLICATE in kinds and VerdictKind.NOVEL in kinds
    assert REASON_REPOST_SEEN in {verdict.reason for verdict in compiled}


def test_the_kernel_refuses_a_sketch_index_past_the_matches(kernel) -> None:  # type: ignore[no-untyped-def]
    entry = Entry(1, b"x", Post("1", "x"), sketch_index=1)  # one past the one match
    with pytest.raises(IndexError):
        object.__new__(Engine)._built_verdicts(PreparedBatch([entry], []), [None])
