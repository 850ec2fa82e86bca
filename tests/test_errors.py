"""Library misuse raises the library's own errors, saying what to change."""

from __future__ import annotations

from typing import Any

import pytest

from streamfilter import ConfigError, FilterConfig, MemoryStore, StreamFilter, StreamFilterError
from streamfilter._config import parse_duration


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"jaccard_threshold": 0}, "jaccard_threshold must be in (0, 1]"),
        ({"shingle_size": "2"}, "shingle_size must be an integer"),
        ({"shingle_size": 99}, "shingle_size must be an integer from 1 to"),
        ({"num_perm": 0}, "num_perm must be an integer from 1 to 1024"),
        ({"ttl_seconds": -5}, "ttl_seconds must be from 0 (never expire) to"),
        ({"ttl_seconds": float("inf")}, "ttl_seconds must be from 0 (never expire) to"),
        # past what Redis takes as an expiry ("--ttl 99999999999999999999d" failed there, at the first batch)
        ({"ttl_seconds": 8.64e24}, "to 3,155,760,000 (100 years), got 8.64e+24"),
        ({"retweet_policy": "ignore"}, "retweet_policy must be one of content, drop, keep"),
        ({"bands": 3}, "Give both, or neither"),
        ({"batch_size": 0}, "batch_size must be from 1"),
    ],
)
def test_bad_config(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        FilterConfig(**settings)
    assert message in str(caught.value)
    assert isinstance(caught.value, StreamFilterError)


def test_bad_filter_arguments(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="either path"):
        StreamFilter(path=tmp_path, store=MemoryStore())
    with pytest.raises(ConfigError, match="config must be a FilterConfig"):
        StreamFilter({"jaccard_threshold": 0.5})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="store must be a BandStore"):
        StreamFilter(store={})  # type: ignore[arg-type]


def test_durations() -> None:
    assert parse_duration("90s") == 90
    assert parse_duration("24h") == 86400
    assert parse_duration("7d") == 7 * 86400
    assert parse_duration("0") == 0
    with pytest.raises(ConfigError, match="such as 90s, 24h, 7d"):
        parse_duration("a week")
    with pytest.raises(ConfigError, match="'7' has no unit: write 7s, 7m, 7h, 7d or 7w"):
        parse_duration("7")  # seconds, or days?
