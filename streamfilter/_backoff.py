"""The waits between attempts of every retry loop: exponential backoff with jitter.

Each failure doubles the step, from ``first`` up to ``largest``; the wait is
drawn at random below it, so that many workers that lost the same server do
not come back to it at the same moment. ``full`` jitter draws from the whole
step (a live source's reconnects), else from its upper half (a store's
retries, which a batch waits on). ``budget`` bounds the time spent trying,
counted from the first attempt (``Backoff`` made, or ``reset``): the wait
that would pass it is not taken.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

__all__ = ["Backoff"]


class Backoff:
    """Waits for one run of failures (``reset`` starts a new one)."""

    def __init__(
        self,
        first: float,
        largest: float,
        *,
        full: bool = False,
        budget: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.first = first
        self.largest = largest
        self.full = full
        self.budget = budget
        self._clock = clock
        self.failures = 0
        self._started = clock()

    def reset(self) -> None:
        """An attempt succeeded: the next failure starts from ``first`` again."""
        self.failures = 0
        self._started = self._clock()

    @property
    def waited(self) -> float:
        """Seconds since the first attempt of this run."""
        return self._clock() - self._started

    def step(self, first: float | None = None) -> float:
        """The largest wait after the failures so far, from ``first`` (the
        default, or a server's own, such as an SSE ``retry``)."""
        base = self.first if first is None else first
        return float(min(self.largest, base * 2 ** max(self.failures - 1, 0)))

    def wait(self, first: float | None = None) -> float | None:
        """Count a failure; the wait before the next attempt, or None where
        waiting it would pass the budget."""
        self.failures += 1
        step = self.step(first)
        if self.budget is not None and self.waited + step > self.budget:
            return None
        return random.uniform(0.0 if self.full else step / 2, step)
