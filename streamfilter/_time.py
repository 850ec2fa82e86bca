"""Event times from the many ways platforms write them."""

from __future__ import annotations

import calendar
import functools
import math
import time
from datetime import UTC, datetime

from ._exceptions import InvalidRecordError

__all__ = ["parse_timestamp"]

_EARLIEST = datetime(1990, 1, 1, tzinfo=UTC).timestamp()
_FUTURE_SLACK = 86400.0


def parse_timestamp(value: object) -> float:
    """Seconds since the epoch from epoch numbers (s, ms or µs), ISO 8601, or
    Twitter's ``Wed Feb 24 11:35:00 +0000 2015``.

    Times before 1990 or more than a day ahead of this machine's clock are
    rejected: they are broken clocks or hostile input, and a far-future time
    would otherwise move the event clock ahead and expire the whole index.
    """
    if type(value) is str:
        accepted = _ACCEPTED.get(value)
        if accepted is not None:
            return accepted
    if isinstance(value, bool):
        raise InvalidRecordError(f"timestamp is a boolean: {value!r}")
    if isinstance(value, int | float):
        seconds = _from_number(float(value))
    elif isinstance(value, str):
        seconds = _from_string(value.strip())
    else:
        raise InvalidRecordError(f"timestamp is a {type(value).__name__}, not a string or number")
    if not math.isfinite(seconds):
        raise InvalidRecordError(f"timestamp {value!r} is not a finite number")
    if seconds < _EARLIEST:
        raise InvalidRecordError(f"timestamp {value!r} is in the far past (before 1990)")
    if seconds > time.time() + _FUTURE_SLACK:
        raise InvalidRecordError(f"timestamp {value!r} is in the far future")
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


def _from_twitter(text: str) -> float | None:
    """Twitter v1.1's ``Wed Feb 24 11:35:00 +0000 2015``, without strptime's cost."""
    parts = text.split(" ")
    if len(parts) != 6 or len(parts[3]) != 8 or len(parts[4]) != 5:
        return None
    clock = parts[3]
    try:
        day = _twitter_day(parts[5], parts[1], parts[2], parts[4])
        seconds = int(clock[0:2]) * 3600 + int(clock[3:5]) * 60 + int(clock[6:8])
    except ValueError:
        return None
    if day is None or clock[2] != ":" or clock[5] != ":":
        return None
    return float(day + seconds)


@functools.lru_cache(maxsize=1024)
def _twitter_day(year: str, month: str, day: str, offset: str) -> int | None:
    """Epoch seconds of a day's midnight at a UTC offset (``+0100``); a stream has few distinct days."""
    if month not in _MONTHS or offset[0] not in "+-":
        return None
    shift = int(offset[1:3]) * 3600 + int(offset[3:5]) * 60
    midnight = calendar.timegm((int(year), _MONTHS[month], int(day), 0, 0, 0, 0, 0, 0))
    return midnight - shift if offset[0] == "+" else midnight + shift


def _from_string(text: str) -> float:
    if not text:
        raise InvalidRecordError("timestamp is an empty string")
    twitter = _from_twitter(text)
    if twitter is not None:
        return twitter
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
            raise InvalidRecordError(f"cannot read timestamp {text[:64]!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
