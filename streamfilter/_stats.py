"""What a running filter has done: verdict counts, latency, the index, the source.

``StreamFilter.stats()`` returns a ``FilterStats``; the Prometheus endpoint
(``streamfilter.metrics``) and the CLI's periodic stats line read the same
object, so the three never disagree.
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ._post import VerdictKind

__all__ = ["ATTACK_SIGNALS", "BATCH_SECONDS_BUCKETS", "FilterStats", "LatencyHistogram", "SourceState", "StatsRecorder"]

# What an adversary's work looks like from inside the filter, each a counter
# (docs/guides/production.md has an alert for each):
ATTACK_SIGNALS = {
    "dated_ahead": "posts dated ahead of the stream's clock, judged at the clock's time",
    "dated_behind": "posts dated more than a TTL behind the stream's clock, judged at the clock's time",
    "full_buckets": "band keys found holding as many live posts as a look-up offers",
    "verification_capped": "posts with more candidates than the verification bound",
    "cross_platform_deletes": "delete notices ignored, naming only another platform's post",
}

# Upper bounds, in seconds, of the arrival-to-verdict histogram: a post
# judged alone takes well under a millisecond, a loaded replay's batch tens.
BATCH_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@runtime_checkable
class SourceState(Protocol):
    """A source that says how its connection is doing (``follow``'s LiveStream, consume's reader)."""

    reconnects: int
    connected: bool


@dataclass(frozen=True)
class LatencyHistogram:
    """Batches by arrival-to-verdict time: ``counts[i]`` took at most
    ``buckets[i]`` seconds and more than the bucket before (the last count is
    over every bucket); ``total_seconds`` is their sum."""

    buckets: tuple[float, ...]
    counts: tuple[int, ...]
    total_seconds: float

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, batches at or under it), ending with +inf: Prometheus's form."""
        running, pairs = 0, []
        for bound, count in zip((*self.buckets, float("inf")), self.counts, strict=True):
            running += count
            pairs.append((bound, running))
        return pairs


@dataclass(frozen=True)
class FilterStats:
    """A snapshot of a filter since it opened. Times are Unix seconds."""

    posts: Mapping[str, int]  # by verdict: novel, duplicate, retweet, invalid, skipped
    batches: int
    batch_seconds: LatencyHistogram  # from a batch's first record arriving to its verdicts
    index_posts: int | None  # live posts in the index (None: not counted yet)
    purged: int | None  # posts purged by this filter's batches (None: the store expires them itself)
    reconnects: int  # of the sources being filtered
    source_connected: bool | None  # None when no source says
    newest_event_time: float | None  # the newest post time the index has seen
    last_commit_time: float | None
    started: float
    taken_at: float  # when this snapshot was taken
    # ATTACK_SIGNALS' counters since the filter opened, each by its name
    signals: Mapping[str, int] = dataclasses.field(default_factory=lambda: dict.fromkeys(ATTACK_SIGNALS, 0))

    @property
    def posts_total(self) -> int:
        return sum(self.posts.values())

    @property
    def source_lag_seconds(self) -> float | None:
        """Wall clock minus the newest event time: how far behind the source the filter is."""
        return None if self.newest_event_time is None else self.taken_at - self.newest_event_time

    def line(self, since: FilterStats | None = None) -> str:
        """One line for a log: the counts, and the rate since ``since`` (or since the start)."""
        before, began = (0, self.started) if since is None else (since.posts_total, since.taken_at)
        elapsed = max(self.taken_at - began, 1e-9)
        parts = [
            f"{self.posts_total:,} posts",
            ", ".join(f"{self.posts.get(kind.value, 0):,} {kind.value}" for kind in VerdictKind),
            f"{(self.posts_total - before) / elapsed:,.0f} posts/s",
        ]
        if self.index_posts is not None:
            parts.append(f"index {self.index_posts:,} posts")
        lag = self.source_lag_seconds
        if lag is not None:
            parts.append(f"lag {duration_text(lag)}")
        if self.source_connected is not None:
            parts.append(("connected" if self.source_connected else "disconnected") + f", {self.reconnects} reconnects")
        seen = [f"{count:,} {name.replace('_', ' ')}" for name, count in self.signals.items() if count]
        if seen:
            parts.append("attack signals: " + ", ".join(seen))
        return "; ".join(parts)


class StatsRecorder:
    """Counts kept by the engine as batches commit; safe to read from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started = time.time()
        self._posts = dict.fromkeys((kind.value for kind in VerdictKind), 0)
        self._buckets = [0] * (len(BATCH_SECONDS_BUCKETS) + 1)
        self._seconds = 0.0
        self._batches = 0
        self._last_commit: float | None = None
        self._signals = dict.fromkeys(ATTACK_SIGNALS, 0)
        self._sources: list[SourceState] = []  # being filtered now
        self._ended_reconnects = 0  # of the sources no longer filtered

    def committed(self, kinds: Mapping[str, int], seconds: float) -> None:
        """A batch committed in ``seconds``, with ``kinds`` verdicts of each kind (``Verdicts.counts``)."""
        with self._lock:
            for kind, count in kinds.items():
                self._posts[kind] += count
            self._buckets[bisect.bisect_left(BATCH_SECONDS_BUCKETS, seconds)] += 1
            self._seconds += seconds
            self._batches += 1
            self._last_commit = time.time()

    def noticed(self, **counts: int) -> None:
        """Add to the ATTACK_SIGNALS counters named."""
        with self._lock:
            for name, count in counts.items():
                self._signals[name] += count

    def watch(self, source: object) -> None:
        """Report ``source``'s connection state too, when it keeps one (SourceState)."""
        if isinstance(source, SourceState):
            with self._lock:
                self._sources.append(source)

    def unwatch(self, source: object) -> None:
        """``source`` is no longer filtered: keep its reconnects, forget the rest."""
        if isinstance(source, SourceState):
            with self._lock:
                self._sources.remove(source)
                self._ended_reconnects += source.reconnects

    def snapshot(self, index_posts: int | None, purged: int | None, newest_event_time: float | None) -> FilterStats:
        with self._lock:
            sources: Iterable[SourceState] = list(self._sources)
            reconnects = self._ended_reconnects + sum(source.reconnects for source in sources)
            return FilterStats(
                posts=dict(self._posts),
                batches=self._batches,
                batch_seconds=LatencyHistogram(BATCH_SECONDS_BUCKETS, tuple(self._buckets), self._seconds),
                index_posts=index_posts,
                purged=purged,
                reconnects=reconnects,
                source_connected=any(source.connected for source in sources) if self._sources else None,
                newest_event_time=newest_event_time,
                last_commit_time=self._last_commit,
                started=self.started,
                taken_at=time.time(),
                signals=dict(self._signals),
            )


def duration_text(seconds: float) -> str:
    """``0.4 s``, ``12 min``, ``3.2 h``, ``925 days``: a span as a person reads it."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:,.0f} days"
