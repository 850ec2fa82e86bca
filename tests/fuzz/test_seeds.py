"""The fuzzer's seeds and every finding kept, replayed as tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .harness import check

SEEDS = sorted((Path(__file__).parent / "seeds").iterdir())


@pytest.mark.parametrize("seed", SEEDS, ids=[seed.name for seed in SEEDS])
def test_seed(seed: Path) -> None:
    check(seed.read_bytes())


# Text with lone surrogates among any other characters: st.text() leaves them out,
# so pieces of surrogates alone (categories=["Cs"]) are mixed in.
_SURROGATES = st.text(st.characters(categories=["Cs"]), min_size=1, max_size=2)
_ANY_TEXT = st.lists(st.one_of(st.text(max_size=40), _SURROGATES), max_size=8).map("".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_ANY_TEXT)
def test_any_text_in_every_shape(text: str) -> None:
    check(text.encode("utf-8", "surrogatepass"))  # as a raw line: invalid UTF-8 where a surrogate is


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | _ANY_TEXT,
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_ANY_TEXT, inner, max_size=4),
                    max_leaves=20))  # fmt: skip
def test_any_json_value_in_every_shape(value: object) -> None:
    check(json.dumps(value).encode())
