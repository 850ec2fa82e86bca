"""Event times from the many ways platforms write them."""

from __future__ import annotations

import calendar
import functools
import math
import re
import time
from datetime import UTC, date, datetime

import numpy as np

from ._compiled import chosen, kernel
from ._exceptions import InvalidRecordError
from ._wording import a_type, shown

__all__ = ["parse_timestamp"]

_EARLIEST = datetime(1990, 1, 1, tzinfo=UTC).timestamp()
FUTURE_SLACK = 86400.0  # how far ahead of this machine's clock a post may be dated
_HUGE = 10**20  # past this, an epoch number in any unit is centuries off


def parse_timestamp(value: object, field: str = "timestamp") -> float:
    """Seconds since the epoch from epoch numbers (s, ms, µs or ns), ISO 8601,
    Twitter's ``Wed Feb 24 11:35:00 +0000 2015``, RFC 2822's ``Tue, 14 Nov
    2023 22:13:20 +0000`` (emails, HTTP, RSS), a ``datetime`` (a pandas
    ``Timestamp`` too; a naive one is read as UTC), a ``date`` (its midnight,
    UTC, as a date-only ISO string) or a numpy ``datetime64``; numpy's
    integers and floats count as numbers.

    Times before 1990 or more than a day ahead of this machine's clock are
    rejected: they are broken clocks or hostile input, and a far-future time
    would otherwise move the event clock ahead and expire the whole index.
    So is a date that no calendar has (``Feb 31``, ``99:99:99``). Every
    rejection is an InvalidRecordError that names ``field`` and the value
    (cut short when long: a number may have thousands of digits).
    """
    if type(value) is str:
        accepted = _ACCEPTED.get(value)
        if accepted is not None:
            return accepted
    if isinstance(value, bool | np.bool_):
        raise InvalidRecordError(f"{field} is a boolean: {value!r}")
    if isinstance(value, np.integer):  # a data frame's row holds numpy's integers
        value = int(value)
    if isinstance(value, int):
        if not -_HUGE < value < _HUGE:  # float() of one past 1e308 overflows; past 1e20 is far off in any unit
            raise InvalidRecordError(f"{field} {shown(value)} is in the far {'future' if value > 0 else 'past'}")
        seconds = _from_number(float(value))
    elif isinstance(value, float):
        seconds = _from_number(value)
    elif isinstance(value, str):
        seconds = _from_string(value.strip(), field)
    elif isinstance(value, datetime | np.datetime64):
        seconds = _from_datetime(value, field)
    elif isinstance(value, date):  # a day, as a date-only ISO string is: its midnight, UTC
        seconds = datetime(value.year, value.month, value.day, tzinfo=UTC).timestamp()
    else:
        raise InvalidRecordError(f"{field} is {a_type(value)}, not a string, number or datetime")
    if not math.isfinite(seconds):
        raise InvalidRecordError(f"{field} {shown(value)} is not a finite number")
    if seconds < _EARLIEST:
        raise InvalidRecordError(f"{field} {shown(value)} is in the far past (before 1990)")
    if seconds > time.time() + FUTURE_SLACK:
        raise InvalidRecordError(f"{field} {shown(value)} is in the far future")
    if type(value) is str:
        if len(_ACCEPTED) >= _ACCEPTED_SIZE:
            _ACCEPTED.clear()
        _ACCEPTED[value] = seconds
    return seconds


# Strings accepted before, and what they read as: a busy stream repeats each
# second's stamp, and the checks above are worth skipping. Only accepted ones
# are kept, for the clock only moves on: a time far in the future now may
# not be later, while one accepted stays acceptable.
_ACCEPTED: dict[str, float] = {}
_ACCEPTED_SIZE = 4096


def _from_datetime(value: datetime | np.datetime64, field: str) -> float:
    """Seconds of a ``datetime`` (a pandas ``Timestamp`` is one; naive ones
    are read as UTC) or a numpy ``datetime64``; NaT is no time."""
    try:
        if isinstance(value, np.datetime64):
            if np.isnat(value):
                raise ValueError("NaT")
            return float(value.astype("datetime64[us]").astype(np.int64)) / 1e6
        if value.tzinfo is None or value.utcoffset() is None:
            value = value.replace(tzinfo=UTC)
        return value.timestamp()
    except (ValueError, OverflowError, OSError):
        raise InvalidRecordError(f"{field} {shown(value)} is no point in time") from None


def _from_number(number: float) -> float:
    magnitude = abs(number)
    if magnitude >= 1e17:
        return number / 1e9  # nanoseconds
    if magnitude >= 1e14:
        return number / 1e6  # microseconds (Bluesky time_us)
    if magnitude >= 1e11:
        return number / 1e3  # milliseconds
    return number


_MONTHS = {
    name: number
    for number, name in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}


# Twitter v1.1's shape: weekday, month, day, hh:mm:ss, UTC offset, year (ASCII digits only)
_TWITTER = re.compile(r"[^ ]* ([A-Z][a-z]{2}) ([0-9]+) ([0-9]{2}):([0-9]{2}):([0-9]{2}) ([+-][0-9]{4}) ([0-9]+)")


def _c_from_twitter(text: str, field: str) -> float | None:
    """The usual shape, when it names a real time, read in C without the
    regex; anything else as ``_py_from_twitter`` reads it."""
    known: float | None = kernel.twitter_time(text)
    return known if known is not None else _py_from_twitter(text, field)


def _py_from_twitter(text: str, field: str) -> float | None:
    """Twitter v1.1's ``Wed Feb 24 11:35:00 +0000 2015``, without strptime's
    cost; None when ``text`` is not of that shape, InvalidRecordError when it
    is but names no real time (``Feb 31``, ``99:99:99``, a year of 20 digits)."""
    found = _TWITTER.fullmatch(text)
    if found is None or found[1] not in _MONTHS:
        return None
    month, day, hour, minute, second, offset, year = found.groups()
    if len(year) != 4 or len(day) > 2:
        raise InvalidRecordError(f"{field} {shown(text)} has no real date (a year of 4 digits, a day of 1 or 2)")
    midnight = _twitter_day(year, month, day, offset)
    if midnight is None:
        raise InvalidRecordError(f"{field} {shown(text)} names a day that {month} {year} does not have")
    if int(hour) > 23 or int(minute) > 59 or int(second) > 59 or int(offset[1:3]) > 23 or int(offset[3:5]) > 59:
        raise InvalidRecordError(f"{field} {shown(text)} names a time of day that does not exist")
    return float(midnight + int(hour) * 3600 + int(minute) * 60 + int(second))


_from_twitter = chosen(_c_from_twitter, _py_from_twitter)


@functools.lru_cache(maxsize=1024)
def _twitter_day(year: str, month: str, day: str, offset: str) -> int | None:
    """Epoch seconds of a day's midnight at a UTC offset (``+0100``), or None
    for a day the month does not have; a stream has few distinct days."""
    if not 1 <= int(day) <= calendar.monthrange(int(year), _MONTHS[month])[1]:
        return None
    shift = int(offset[1:3]) * 3600 + int(offset[3:5]) * 60
    midnight = calendar.timegm((int(year), _MONTHS[month], int(day), 0, 0, 0, 0, 0, 0))
    return midnight - shift if offset[0] == "+" else midnight + shift


def _from_string(text: str, field: str) -> float:
    if not text:
        raise InvalidRecordError(f"{field} is an empty string")
    twitter = _from_twitter(text, field)
    if twitter is not None:
        return twitter
    if len(text) > 64:  # no way of writing a time is this long; float() of 4,000 digits is
        raise InvalidRecordError(f"{field} {shown(text)} is no timestamp (over 64 characters)")
    try:
        return _from_number(float(text))
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        try:
            parsed = datetime.strptime(text, "%a %b %d %H:%M:%S %z %Y")
        except ValueError:
            parsed = _from_rfc_2822(text, field)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def _from_rfc_2822(text: str, field: str) -> datetime:
    """An email's, an HTTP header's or an RSS feed's date (RFC 2822:
    ``Tue, 14 Nov 2023 22:13:20 +0000``; a zone of ``-0000`` or none is UTC)."""
    from email.utils import parsedate_to_datetime  # here: rare, and its import is a start-up cost

    try:
        return parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        raise InvalidRecordError(f"cannot read {field} {shown(text)} as a date and time") from None
