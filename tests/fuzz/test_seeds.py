"""The fuzzer's seeds and every finding kept, replayed as tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from .harness import check

SEEDS = sorted((Path(__file__).parent / "seeds").iterdir())


@pytest.mark.parametrize("seed", SEEDS, ids=[seed.name for seed in SEEDS])
def test_seed(seed: Path) -> None:
    check(seed.read_bytes())
