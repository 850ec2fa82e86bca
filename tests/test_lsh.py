from __future__ import annotations

import numpy as np
import pytest

from streamfilter import ConfigError, FilterConfig, candidate_probability, choose_bands
from streamfilter._lsh import band_keys


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.7, 0.9])
@pytest.mark.parametrize("num_perm", [16, 32, 64, 128])
def test_every_permutation_is_used_and_threshold_pairs_are_caught(threshold: float, num_perm: int) -> None:
    plan = choose_bands(threshold, num_perm, max_miss_rate=0.02)
    assert plan.bands * plan.rows == num_perm
    best = max(candidate_probability(threshold, num_perm // r, r) for r in range(1, num_perm + 1) if num_perm % r == 0)
    assert plan.probability(threshold) >= min(0.98, best - 1e-12)


def test_s_curve_matches_simulation() -> None:
    rng = np.random.default_rng(0)
    bands, rows, similarity = 8, 4, 0.6
    trials = rng.random((20000, bands, rows)) < similarity  # each row agrees with probability s
    simulated = np.any(np.all(trials, axis=2), axis=1).mean()
    assert abs(simulated - candidate_probability(similarity, bands, rows)) < 0.01


def test_fewest_bands_that_meet_the_miss_rate() -> None:
    plan = choose_bands(0.5, 32, max_miss_rate=0.02)
    assert (plan.bands, plan.rows) == (16, 2)
    strict = choose_bands(0.5, 32, max_miss_rate=0.005)
    assert strict.bands == 32


def test_band_keys_are_compact_and_band_specific() -> None:
    signatures = np.zeros((1, 8), dtype=np.uint32)  # every band holds the same values
    keys = band_keys(signatures, 4, 2)
    assert keys.dtype == np.uint64 and keys.shape == (1, 4)
    assert len(set(keys[0].tolist())) == 4


def test_config_derives_bands_and_rejects_bad_splits() -> None:
    config = FilterConfig()
    assert config.bands is not None and config.rows is not None
    assert config.bands * config.rows == config.num_perm
    with pytest.raises(ConfigError, match="bands \\* rows must equal num_perm"):
        FilterConfig(num_perm=32, bands=5, rows=5)
    with pytest.raises(ConfigError, match="jaccard_threshold"):
        FilterConfig(jaccard_threshold=1.5)


def test_choose_for_rates_meets_both_targets_at_least_cost() -> None:
    from streamfilter._lsh import choose_for_rates

    plan = choose_for_rates(0.6, 0.01, 0.3, 0.3)
    assert plan is not None
    assert plan.probability(0.6) >= 0.99 and plan.probability(0.3) <= 0.3
    # no cheaper split meets both
    for num_perm in range(1, plan.num_perm):
        for rows in range(1, num_perm + 1):
            bands = num_perm // rows
            ok = candidate_probability(0.6, bands, rows) >= 0.99 and candidate_probability(0.3, bands, rows) <= 0.3
            assert not ok
    assert choose_for_rates(0.5, 0.0001, 0.45, 0.0001) is None
