"""Posts placed in event time: the stream's clock as the engine keeps it.

``Timeline.place`` gives each post of a batch the time it is judged and
recorded at (``_clock.EventClock``'s rule), gives undated posts the
stream's time, and warns, with the post's place in its input, where a post
is dated ahead of the clock or arrives more than a TTL off it.

A post dated more than a TTL behind the newest post judged would be
expired on arrival: nothing after it could match it, and a campaign dated
back past the TTL would pass every copy as novel. It is judged and
recorded at the stream's time instead, as a post dated ahead is placed at
it, and counted as dated behind.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt

from ._clock import EventClock
from ._prepared import Entries
from ._stats import duration_text

__all__ = ["Timeline"]

logger = logging.getLogger("streamfilter")

# Fewer posts than this are placed one at a time: arrays cost more than they save.
_FEW = 8


class Timeline:
    """The stream's event time for one engine: its clock, the newest time
    judged (``latest``; of dated posts, ``latest_dated``), and which warnings
    were given once. ``noticed`` counts posts dated ahead (``StatsRecorder.noticed``)."""

    def __init__(self, ttl_seconds: float, latest: float, noticed: Callable[..., None]) -> None:
        self.ttl_seconds = ttl_seconds
        self.latest = latest  # from the index's own clock when the store tells it
        self.latest_dated = -math.inf
        self.clock = EventClock(ttl_seconds, latest)
        self._noticed = noticed
        self._warned_behind = False
        self._warned_ahead = False

    def place(
        self, entries: Entries, judged: list[int], times: npt.NDArray[np.float64], where: Callable[[int], str]
    ) -> None:
        """Place each post (``judged``, the rows of ``entries`` to judge, with
        their sketches' ``times``, which it writes) in event time (``_clock.EventClock``), give
        undated posts the stream's time, and warn where a post is dated
        ahead of the clock, or arrives more than a TTL behind it.

        An undated post takes the newest event time among the dated posts
        judged so far, or, before any, that of the first dated post after
        it in its batch; only in a stream with no dated post yet does it keep
        the wall clock (a plain-text stream expires in wall time), so one
        undated line in a replay of old posts does not move the clock to now.

        A dated post later than the corroborated time plus the slack is
        judged and recorded at that limit, and counted as dated ahead: a few
        posts dated tomorrow cannot expire the index. One more than a TTL
        behind the newest post judged is judged and recorded at the stream's
        time, and counted as dated behind (see the module docstring)."""
        if not judged:
            return
        if len(judged) < _FEW:
            self._place_each(entries, judged, times, where)
            return
        undated = entries.undated
        if any(undated[at] for at in judged) or not np.isfinite(times).all() or self._may_be_behind(times):
            self._place_each(entries, judged, times, where)
            return
        # Every post dated: the clock places them all at once, and the rare
        # posts that need a word (dated ahead, a TTL off) are found in arrays.
        stamps = times.copy()
        placed, streams = self.clock.place_all(stamps)
        ahead = np.flatnonzero(placed < stamps)
        times[ahead] = placed[ahead]
        before = np.empty_like(placed)  # the newest time judged before each post
        before[0] = self.latest
        np.maximum(np.maximum.accumulate(placed[:-1]), self.latest, out=before[1:])
        notes: list[tuple[int, int, str]] = []  # (post, order, warning), made in post order below
        if len(ahead) and not self._warned_ahead:
            self._warned_ahead = True
            first = int(ahead[0])
            stream_time = float(streams[first])
            notes.append(
                (first, 0, _dated_ahead(float(stamps[first]) - stream_time, stream_time, float(placed[first])))
            )
        if self.ttl_seconds > 0:
            known = np.isfinite(before)
            for index in np.flatnonzero(known & (placed - before > self.ttl_seconds)).tolist():
                notes.append((index, 1, _newer_than_all(float(placed[index] - before[index]))))
        for index, order, what in sorted(notes):
            self._warn(entries, judged[index], where, float(stamps[index] if order == 0 else placed[index]), what)
        if len(ahead):
            self._noticed(dated_ahead=len(ahead))
        newest = float(placed.max())
        self.latest, self.latest_dated = max(self.latest, newest), max(self.latest_dated, newest)

    def _may_be_behind(self, times: npt.NDArray[np.float64]) -> bool:
        """Whether a post of a batch dated ``times`` may be more than a TTL
        behind the newest judged before it (the clock only ever places a post
        earlier than its date, so none is where none is dated so far back)."""
        if self.ttl_seconds <= 0:
            return False
        newest_before = np.maximum.accumulate(np.concatenate(([self.latest], times[:-1])))
        return bool((newest_before - times > self.ttl_seconds).any())

    def _place_each(
        self, entries: Entries, judged: list[int], times: npt.NDArray[np.float64], where: Callable[[int], str]
    ) -> None:
        """``place`` one post at a time, for a batch that holds an undated
        post (or a time that is not finite), or only a few posts; the
        reference for the rest."""
        ttl = self.ttl_seconds
        clock = self.clock
        latest, dated = self.latest, self.latest_dated
        waiting: list[int] = []  # undated, before the stream's first dated post
        ahead = behind = 0
        stamps = times.tolist()
        for index, at in enumerate(judged):
            timestamp = stamps[index]
            if entries.undated[at]:
                if math.isfinite(dated):
                    timestamp = dated
                else:
                    waiting.append(index)
                    continue
            else:
                placed = clock.place(timestamp)
                if placed < timestamp:
                    ahead += 1
                    if not self._warned_ahead:
                        self._warned_ahead = True
                        self._warn(
                            entries,
                            at,
                            where,
                            timestamp,
                            _dated_ahead(timestamp - clock.stream_time, clock.stream_time, placed),
                        )
                    timestamp = placed
                for undated in waiting:
                    stamps[undated] = timestamp
                waiting.clear()
                dated = max(dated, timestamp)
            if ttl > 0 and math.isfinite(latest):
                if timestamp - latest > ttl:
                    self._warn(entries, at, where, timestamp, _newer_than_all(timestamp - latest))
                elif latest - timestamp > ttl:  # expired on arrival: judged at the stream's time
                    behind += 1
                    placed = max(timestamp, clock.stream_time)
                    if not self._warned_behind:
                        self._warned_behind = True
                        self._warn(entries, at, where, timestamp, _older_than_newest(latest - timestamp, placed))
                    timestamp = placed
            stamps[index] = timestamp
            latest = max(latest, timestamp)
        for undated in waiting:  # no dated post yet: the wall clock, as the sketcher stamped it
            stamps[undated] = clock.place(stamps[undated])
            latest = max(latest, stamps[undated])
        times[:] = stamps
        if ahead or behind:
            self._noticed(dated_ahead=ahead, dated_behind=behind)
        self.latest, self.latest_dated = latest, dated

    def _warn(self, entries: Entries, at: int, where: Callable[[int], str], timestamp: float, what: str) -> None:
        """Warn of row ``at`` of ``entries``, dated ``timestamp``."""
        when = "undated" if entries.undated[at] else "dated " + _utc(timestamp)
        logger.warning("streamfilter: %s (post %s, %s) %s", where(entries.lines[at]), entries.ids[at], when, what)


def _dated_ahead(lead: float, stream_time: float, placed: float) -> str:
    return (
        f"is dated {_span(lead)} ahead of the stream's time ({_utc(stream_time)}), further than a few posts may "
        f"move the clock: it is judged and recorded at {_utc(placed)} (later such posts are counted in the stats, "
        "not reported)"
    )


def _newer_than_all(gap: float) -> str:
    return (
        f"is {_span(gap)} newer than every post before it, more than the TTL, and the stream's posts since have "
        "reached its time: every earlier post has expired"
    )


def _older_than_newest(gap: float, placed: float) -> str:
    return (
        f"is {_span(gap)} older than the newest post the index has seen, more than the TTL: it is judged and "
        f"recorded at the stream's time ({_utc(placed)}), so that its copies match it (later such posts are "
        "counted in the stats, not reported)"
    )


def _utc(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _span(seconds: float) -> str:
    days = seconds / 86400
    if days < 1:
        return duration_text(seconds)
    return f"{days / 365.25:.1f} years" if days >= 365.25 else f"{days:.1f} days"
