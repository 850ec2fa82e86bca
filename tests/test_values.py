"""A batch's sketches and matches as columns (``_values.Sketches``, ``Matches``)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamfilter._values import Match, Matches, Sketch, Sketches

_SKETCH = st.builds(
    lambda number, time, keys, shingles, words, made_up, refers, cut: Sketch(
        f"p{number}",
        time,
        np.array(keys, dtype=np.uint64),
        np.array(shingles, dtype=np.uint64),
        np.array(words, dtype=np.uint32),
        made_up,
        refers,
        cut,
    ),
    st.integers(0, 99),
    st.floats(-1e10, 1e10),
    st.lists(st.integers(0, 2**64 - 1), max_size=6),
    st.lists(st.integers(0, 2**64 - 1), max_size=6),
    st.lists(st.integers(0, 2**32 - 1), max_size=6),
    st.booleans(),
    st.none() | st.just("origin"),
    st.booleans(),
)


def _fields(sketch: Sketch) -> tuple[object, ...]:
    return (
        sketch.post_id,
        sketch.timestamp,
        sketch.band_keys.tolist(),
        sketch.shingles.tolist(),
        sketch.words.tolist(),
        sketch.made_up_id,
        sketch.refers_to,
        sketch.cut_off,
    )


@settings(max_examples=200, deadline=None)
@given(sketches=st.lists(_SKETCH, max_size=8), data=st.data())
def test_sketches_hold_each_sketch_and_cut_any_rows(sketches: list[Sketch], data: st.DataObject) -> None:
    batch = Sketches.of(sketches)
    assert len(batch) == len(sketches)
    assert [_fields(sketch) for sketch in batch] == [_fields(sketch) for sketch in sketches]
    rows = data.draw(st.lists(st.integers(0, len(sketches) - 1), max_size=8) if sketches else st.just([]))
    taken = batch.take(rows)
    assert [_fields(sketch) for sketch in taken] == [_fields(sketches[row]) for row in rows]
    keys, counts = batch.keys_of(rows)
    assert keys.tolist() == [key for row in rows for key in sketches[row].band_keys.tolist()]
    assert counts.tolist() == [len(sketches[row].band_keys) for row in rows]
    assert batch.owners().tolist() == [at for at, sketch in enumerate(sketches) for _ in sketch.band_keys]


def test_matches_are_columns_that_read_as_match_or_none() -> None:
    matches = Matches.of([None, Match("a", 0.5)])
    matches.append(Match("b", 1.0))
    matches[0] = Match("c", 0.75)
    assert (matches.duplicate_of, matches.similarity) == (["c", "a", "b"], [0.75, 0.5, 1.0])
    matches[1] = None
    assert matches == [Match("c", 0.75), None, Match("b", 1.0)] and matches[-1] == Match("b", 1.0)
    assert matches != [Match("c", 0.75), None] and matches[1:] == [None, Match("b", 1.0)]
