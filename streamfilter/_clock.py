"""The stream's event-time clock, which no small set of posts can move.

A post's TTL runs in event time: the index's clock is the newest event time
it has judged, and a post older than the clock minus the TTL has expired.
Event times come from the posts, so whoever writes a post sets one: two posts
dated "now" in a replay of last year's campaign, or dated tomorrow in a live
stream, would move a naive clock so far that every post before them expired
at once, and the filter would pass every copy as novel.

The rule (docs/design/rules.md, "The clock"):

1. **The corroborated time** is the ``CORROBORATION``-th newest event time
   among the last ``WINDOW`` dated posts (before that many, in a new index,
   the oldest of them), and never moves back. Fewer posts than that, in a
   row or spread out (up to 3% of the window), cannot move it at all.
2. **The stream's time** is the corroborated time, or, when it is later,
   the time it was when the filter last looked plus the wall-clock time
   since: event time may run as fast as the wall clock without posts to
   corroborate it, so a live stream that falls quiet for an hour takes the
   hour up again with its next post, while a replay, which runs through a
   day in seconds, needs its posts to move it.
3. **A post is placed** at its own time, or at the stream's time plus the
   allowance when it is later than that: ``ttl / SLACK_DIVISOR``, or, in a
   stream too sparse for that to cover the time its last
   ``CORROBORATION`` posts span, the time ``CORROBORATION + LEAD`` of its
   posts take (its pace: the span of the window's posts just below its
   ``CORROBORATION`` newest, divided by their number, which fewer posts
   dated ahead than that do not change). So one post moves the index's
   clock at most ``max(ttl / 32, the time LEAD posts take)`` past the
   stream's own. A post placed
   earlier than its date is *dated ahead*: it is judged and recorded at the
   time it is placed at, counted (``stats().signals["dated_ahead"]``), and
   reported once.

So a stream that moves on (a replay of a second recording months after the
first) moves the clock once ``CORROBORATION`` posts have reached the new
time; before that, they are placed the allowance past the old one. Until
more than ``CORROBORATION`` posts are in, the stream has no pace: a new
index's first post sets its clock, and the allowance is ``ttl / 4``, so a
handful of posts hours apart keep their times while a post dated a year
ahead is still held; after a restart, until that many more came, it is the
slack alone, for the index holds posts a larger step would expire. A
small file of posts further apart than that is judged closer in time than
it is dated, never further apart.
"""

from __future__ import annotations

import bisect
import math
import time
from collections import deque
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from ._compiled import chosen, kernel
from ._exceptions import StoreError
from ._time import FUTURE_SLACK

__all__ = ["CORROBORATION", "LEAD", "SLACK_DIVISOR", "WINDOW", "EventClock", "checked_clock"]

WINDOW = 1024
CORROBORATION = 32
SLACK_DIVISOR = 32
LEAD = 4


class _PyEventClock:
    """Places each dated post in time by the rule above; ``floor`` is the
    index's own clock when the filter opened (-inf for a new index), and
    ``wall`` the monotonic clock that paces it (seconds)."""

    def __init__(
        self, ttl_seconds: float, floor: float = -math.inf, wall: Callable[[], float] = time.monotonic
    ) -> None:
        self.slack = ttl_seconds / SLACK_DIVISOR if ttl_seconds > 0 else math.inf
        self.corroborated = floor
        self._new = floor == -math.inf
        self.stream_time = floor  # rule 2, as of ``_looked``
        self._wall = wall
        self._looked = wall()
        # the window: its times in arrival order, and sorted
        self._arrived: deque[float] = deque()
        self._sorted: list[float] = []

    def place(self, timestamp: float) -> float:
        """The time a post dated ``timestamp`` is judged and recorded at."""
        return self._place(timestamp)[0]

    def place_all(
        self, stamps: Sequence[float] | npt.NDArray[np.float64]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """``place`` for each of ``stamps`` in turn: the times they are
        placed at, and the stream's time after each."""
        pairs = [self._place(timestamp) for timestamp in stamps]
        return np.array([at for at, _ in pairs], dtype=np.float64), np.array(
            [stream for _, stream in pairs], dtype=np.float64
        )

    def _place(self, timestamp: float) -> tuple[float, float]:
        """The rule: where a post dated ``timestamp`` is placed, and the stream's time then."""
        arrived, ordered = self._arrived, self._sorted
        if len(arrived) == WINDOW:
            del ordered[bisect.bisect_left(ordered, arrived.popleft())]
        arrived.append(timestamp)
        bisect.insort(ordered, timestamp)
        if len(ordered) >= CORROBORATION:
            reached = ordered[-CORROBORATION]
        else:  # a new index's first posts: the oldest of them (after a restart, the index's own clock)
            reached = ordered[0] if self._new else self.corroborated
        if reached > self.corroborated:
            self.corroborated = reached
        now = self._wall()
        self.stream_time = max(self.corroborated, self.stream_time + (now - self._looked))
        self._looked = now
        if len(ordered) <= CORROBORATION:
            allowance = self.slack * (SLACK_DIVISOR / 4 if self._new else 1)
        else:
            allowance = max(self.slack, (CORROBORATION + LEAD) * self._pace())
        return min(timestamp, self.stream_time + allowance), self.stream_time

    def _pace(self) -> float:
        """Seconds between the stream's posts: the span of the window's
        times just below its ``CORROBORATION`` newest, over their number
        (fewer than ``CORROBORATION`` posts dated ahead sit among those
        newest, and change nothing); 0 while the window holds no more."""
        ordered = self._sorted
        below = len(ordered) - CORROBORATION
        if below <= 0:
            return 0.0
        counted = min(below, CORROBORATION)
        return (ordered[below] - ordered[below - counted]) / counted


class _CEventClock(_PyEventClock):
    """The rule in C (``_kernel_clock.c``), its window a ring in arrival
    order and a sorted copy; ``_place`` stays the rule it is held to."""

    def __init__(
        self, ttl_seconds: float, floor: float = -math.inf, wall: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(ttl_seconds, floor, wall)
        self._ring = np.zeros(WINDOW, dtype=np.float64)
        self._ordered = np.zeros(WINDOW, dtype=np.float64)
        self._size = self._head = 0
        # place's time, where it is placed, and the stream's time then
        self._one = tuple(np.zeros(1, dtype=np.float64) for _ in range(3))

    def place(self, timestamp: float) -> float:
        stamp, placed, stream = self._one
        stamp[0] = timestamp
        self._place_times(stamp, placed, stream)
        return float(placed[0])

    def place_all(
        self, stamps: Sequence[float] | npt.NDArray[np.float64]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        times = np.asarray(stamps, dtype=np.float64)
        placed, streams = np.empty_like(times), np.empty_like(times)
        self._place_times(times, placed, streams)
        return placed, streams

    def _place_times(
        self, times: npt.NDArray[np.float64], placed: npt.NDArray[np.float64], streams: npt.NDArray[np.float64]
    ) -> None:
        self._size, self._head, self.corroborated, self.stream_time, self._looked = kernel.place_times(
            self._ring, self._ordered, self._size, self._head, self.corroborated, self._new, self.slack,
            self.stream_time, self._looked, WINDOW, CORROBORATION, LEAD, float(SLACK_DIVISOR), self._wall,
            times, placed, streams,
        )  # fmt: skip


EventClock = chosen(_CEventClock, _PyEventClock)


# How far the clocks of workers sharing an index may disagree with this one's.
_CLOCK_SKEW = 3600.0


def checked_clock(stored: bytes | str | float | None, where: str) -> float:
    """The index's clock as read from ``where`` (a key, a record), or -inf
    when it holds none; a StoreError naming ``where`` when it is not a
    finite number, or is later than any post may move it (a post is placed
    no later than its date, which is at most a day past this machine's
    time): written by hand, or by something that is not streamfilter."""
    if stored is None:
        return -math.inf
    try:
        clock = float(stored)
    except (TypeError, ValueError):
        clock = math.nan
    if clock == -math.inf:  # what an index that has judged no dated post yet keeps
        return clock
    if math.isfinite(clock) and clock <= time.time() + FUTURE_SLACK + _CLOCK_SKEW:
        return clock
    shown = stored.decode(errors="replace") if isinstance(stored, bytes) else str(stored)
    problem = "is not a finite number" if not math.isfinite(clock) else "is later than any post may move it"
    raise StoreError(
        f"the index's clock in {where} holds {shown[:40]!r}, which {problem} (the newest event time the index "
        "has judged, in Unix seconds): it was edited by hand or written by something else; set it to the newest "
        "event time the index holds, or delete it (the next batch sets it again), or start a new index"
    )
