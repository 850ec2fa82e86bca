"""The kernel's Sketch builder (``_kernel_prepared.c``) against the Python loop it
replaces: a worker's batch rebuilt from its wire columns, on every fixture."""

from __future__ import annotations

import dataclasses
import gc
from pathlib import Path

import numpy as np
import pytest

from streamfilter import FilterConfig, _prepared
from streamfilter._engine import Sketcher
from streamfilter._post import slot_descriptors
from streamfilter._prepared import PreparedBatch
from streamfilter.adapters import record_adapter
from streamfilter.stores import Sketch

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
def test_a_batch_rebuilt_by_the_kernel_is_the_python_loop(kernel, monkeypatch, path: Path) -> None:  # type: ignore[no-untyped-def]
    sketcher = Sketcher(FilterConfig(seed=1), record_adapter("auto"))
    for records in _fixture_batches(path):
        wire = sketcher.prepare_wire(records)
        compiled = PreparedBatch.from_wire(wire, records)
        with monkeypatch.context() as patched:
            patched.setattr(_prepared, "_KERNEL", None)
            python = PreparedBatch.from_wire(wire, records)
        _same_sketches(compiled.sketches, python.sketches)
        assert all(gc.is_tracked(sketch) for sketch in compiled.sketches)
        assert compiled.entries == python.entries
        # the raw records are the very objects given, row for row
        given = dict(records)
        assert all(given[line] is raw for line, raw in zip(compiled.entries.lines, compiled.entries.raws, strict=True))


def test_the_kernel_refuses_slots_that_are_not_the_sketchs_own(kernel) -> None:  # type: ignore[no-untyped-def]
    no_rows: tuple[object, ...] = ([], [], [], [], _prepared.NO_SHINGLES, _prepared.NO_SHINGLES, _prepared.NO_WORDS)
    with pytest.raises(TypeError, match="Sketch"):
        kernel.sketches_from_columns(*no_rows, Sketch, slot_descriptors(_prepared.Entry)[:8])
    with pytest.raises(TypeError, match="tuple of 8"):
        kernel.sketches_from_columns(*no_rows, Sketch, slot_descriptors(Sketch)[:7])


def test_the_kernel_refuses_rows_of_another_shape(kernel) -> None:  # type: ignore[no-untyped-def]
    keys = np.arange(3, dtype=np.uint64)
    words = np.arange(3, dtype=np.uint32)
    with pytest.raises(ValueError, match="sketch row 0"):
        kernel.sketches_from_columns([("1", 0.0)], [1], [1], [1], keys, keys, words, Sketch, slot_descriptors(Sketch))
    with pytest.raises(ValueError, match="differ in length"):
        kernel.sketches_from_columns([], [1], [], [], keys, keys, words, Sketch, slot_descriptors(Sketch))
