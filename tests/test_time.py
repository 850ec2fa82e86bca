"""Twitter's times read by the kernel exactly as the whole reading reads them."""

from __future__ import annotations

from datetime import UTC, date, datetime

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamfilter import InvalidRecordError, _time
from streamfilter._time import parse_timestamp


def _by_strptime(text: str) -> float:
    return datetime.strptime(text, "%a %b %d %H:%M:%S %z %Y").timestamp()


@pytest.mark.parametrize("offset", ["+0000", "+0530", "-0800"])
def test_every_time_of_a_day_reads_as_strptime_reads_it(offset: str) -> None:
    for clock in ["00:00:00", "00:00:59", "09:59:01", "23:59:59", "13:07:42"]:
        for day in ["Mon Feb 16", "Tue Feb 17", "Sat Feb 29"]:
            year = "2020" if day.endswith("29") else "2015"
            text = f"{day} {clock} {offset} {year}"
            assert parse_timestamp(text, "created_at") == _by_strptime(text)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Wed Mar 04 24:00:00 +0000 2015", "time of day"),
        ("Wed Mar 04 12:60:00 +0000 2015", "time of day"),
        ("Wed Mar 04 12:00:61 +0000 2015", "time of day"),
        ("Wed Mar 04 12:00:00 +2400 2015", "time of day"),
        ("Sun Feb 29 12:00:00 +0000 2015", "does not have"),
        ("Sun Apr 31 12:00:00 +0000 2015", "does not have"),
        ("Sun Apr 00 12:00:00 +0000 2015", "does not have"),
    ],
)
def test_a_time_that_does_not_exist_is_refused(text: str, reason: str) -> None:
    with pytest.raises(InvalidRecordError, match=reason):
        parse_timestamp(text, "created_at")


_DIGIT = st.sampled_from("0123456789")
_FIELD = st.one_of(st.text(_DIGIT, min_size=2, max_size=2), st.sampled_from(["٣0", " 1", "+1", "1_"]))


@settings(max_examples=3000, deadline=None)
@example(day="29", month="Feb", year="2000", hour="12", offset="+0000", weekday="Tue")  # a leap century
@example(day="29", month="Feb", year="2100", hour="12", offset="+0000", weekday="Mon")  # not one
@example(day="31", month="Dec", year="1899", hour="23", offset="-2359", weekday="Sun")  # before the kernel's years
@given(
    day=_FIELD,
    month=st.sampled_from(["Jan", "Feb", "Apr", "Jun", "Sep", "Dec", "Foo", "feb", "FEB"]),
    year=st.one_of(st.text(_DIGIT, min_size=4, max_size=4), st.sampled_from(["1900", "2000", "2024", "2100"])),
    hour=_FIELD,
    offset=st.builds(
        lambda sign, digits: sign + digits, st.sampled_from("+-*"), st.text(_DIGIT, min_size=4, max_size=4)
    ),
    weekday=st.sampled_from(["Mon", "Sun", "xyz", "M n", "Mo\u00e9"]),
)
def test_the_kernel_reads_a_twitter_time_as_the_regex_reading_does(  # type: ignore[no-untyped-def]
    kernel, day: str, month: str, year: str, hour: str, offset: str, weekday: str
) -> None:
    text = f"{weekday} {month} {day} {hour}:07:42 {offset} {year}"
    try:
        expected: float | None = _time._py_from_twitter(text, "created_at")
    except (InvalidRecordError, ValueError):
        expected = None  # refused: the kernel leaves it to the whole reading, which refuses it
    found = kernel.twitter_time(text)
    if found is None:  # it leaves only what is not its usual shape: refused, before 1900, or not ASCII
        assert expected is None or int(year) < 1900 or not text.isascii()
    else:
        assert found == expected


def test_numpy_numbers_and_dates_read_as_python_s_do() -> None:
    # a data frame's rows hold numpy's integers; a date column, dates
    assert parse_timestamp(np.int64(1714564800)) == parse_timestamp(1714564800) == 1714564800.0
    assert parse_timestamp(np.int32(1714564800)) == 1714564800.0
    assert parse_timestamp(np.int64(1714564800123)) == 1714564800.123  # milliseconds, as an int's are read
    assert (
        parse_timestamp(date(2024, 5, 1))
        == parse_timestamp("2024-05-01")
        == datetime(2024, 5, 1, tzinfo=UTC).timestamp()
    )
    with pytest.raises(InvalidRecordError, match="created_at is a boolean"):
        parse_timestamp(np.bool_(True), "created_at")
    with pytest.raises(InvalidRecordError, match="far future"):
        parse_timestamp(np.uint64(2**63), "created_at")


@pytest.mark.parametrize(
    "text",
    [
        "Tue, 14 Nov 2023 22:13:20 +0000",  # an RSS item's pubDate, an email's Date
        "14 Nov 2023 22:13:20 GMT",
        "Tue, 14 Nov 2023 23:13:20 +0100",
        "Tue, 14 Nov 2023 22:13:20 -0000",  # no zone of its own: UTC
    ],
)
def test_an_rfc_2822_date_reads_as_its_moment(text: str) -> None:
    assert parse_timestamp(text, "pubDate") == 1_700_000_000.0


def test_an_rfc_2822_date_that_no_calendar_has_is_refused() -> None:
    with pytest.raises(InvalidRecordError, match="cannot read pubDate"):
        parse_timestamp("Tue, 31 Feb 2023 22:13:20 +0000", "pubDate")
