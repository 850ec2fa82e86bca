"""Twitter's times read fast on a day read before, and exactly as the whole reading reads them."""

from __future__ import annotations

from datetime import datetime

import pytest

from streamfilter import InvalidRecordError
from streamfilter._time import parse_timestamp


def _by_strptime(text: str) -> float:
    return datetime.strptime(text, "%a %b %d %H:%M:%S %z %Y").timestamp()


@pytest.mark.parametrize("offset", ["+0000", "+0530", "-0800"])
def test_every_time_of_a_day_read_before_reads_as_strptime_reads_it(offset: str) -> None:
    first = f"Mon Feb 16 12:00:00 {offset} 2015"
    assert parse_timestamp(first, "created_at") == _by_strptime(first)
    for clock in ["00:00:00", "00:00:59", "09:59:01", "23:59:59", "13:07:42"]:
        text = f"Mon Feb 16 {clock} {offset} 2015"
        assert parse_timestamp(text, "created_at") == _by_strptime(text)
    other_day = f"Tue Feb 17 13:07:42 {offset} 2015"  # same shape, not the same day
    assert parse_timestamp(other_day, "created_at") == _by_strptime(other_day)


@pytest.mark.parametrize(
    ("clock", "reason"),
    [("24:00:00", "time of day"), ("12:60:00", "time of day"), ("12:00:61", "time of day")],
)
def test_a_day_read_before_still_refuses_a_time_of_day_that_does_not_exist(clock: str, reason: str) -> None:
    parse_timestamp("Wed Mar 04 08:00:00 +0000 2015", "created_at")
    with pytest.raises(InvalidRecordError, match=reason):
        parse_timestamp(f"Wed Mar 04 {clock} +0000 2015", "created_at")
