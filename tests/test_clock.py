"""The event-time clock: what moves it, and how far one post can."""

from __future__ import annotations

import logging
import math
import random
import struct
import time
from pathlib import Path

import lmdb
import pytest

from streamfilter import FilterConfig, StoreError, StreamFilter
from streamfilter._clock import (
    CORROBORATION,
    SLACK_DIVISOR,
    WINDOW,
    EventClock,
    _CEventClock,
    _PyEventClock,
    checked_clock,
)
from streamfilter._compiled import compiled_kernel
from streamfilter._timeline import Timeline

from .conftest import HandClock

DAY = 86400.0
START = 1_700_000_000.0


def test_a_few_posts_dated_ahead_are_placed_a_slack_past_the_stream() -> None:
    clock = EventClock(DAY, wall=HandClock())
    for second in range(100):
        assert clock.place(START + second) == START + second
    for _ in range(CORROBORATION - 1):  # a few in a row, dated a year ahead
        assert clock.place(START + 365 * DAY) == pytest.approx(START + 99 + DAY / SLACK_DIVISOR, abs=CORROBORATION)
    assert clock.place(START + 100) == START + 100  # the stream goes on where it was


def test_one_percent_of_posts_dated_ahead_never_move_the_clock() -> None:
    clock = EventClock(DAY, wall=HandClock())
    placed = []
    for second in range(20 * WINDOW):
        ahead = second % 100 == 50
        placed.append(clock.place(START + second + (365 * DAY if ahead else 0)))
    assert max(placed) < START + 20 * WINDOW + DAY / SLACK_DIVISOR
    assert clock.corroborated < START + 20 * WINDOW


def test_as_many_posts_as_the_clock_needs_move_it() -> None:
    clock = EventClock(DAY, floor=START, wall=HandClock())
    later = START + 30 * DAY
    placed = [clock.place(later + second) for second in range(CORROBORATION)]
    assert placed[:-1] == [START + DAY / SLACK_DIVISOR] * (CORROBORATION - 1)  # held a slack past the old time
    # a new index's first posts have no pace yet: a quarter of the TTL, so a few posts hours apart keep theirs
    new = EventClock(DAY, wall=HandClock())
    assert [new.place(START), new.place(START + 5 * 3600), new.place(START + 365 * DAY)] == [
        START,
        START + 5 * 3600,
        START + DAY / 4,
    ]
    assert placed[-1] == later + CORROBORATION - 1  # the last of them corroborates the new time
    assert clock.place(later + 100) == later + 100


def test_live_event_time_may_run_as_fast_as_the_wall_clock() -> None:
    # a live stream falls quiet for ten minutes: its next post is dated ten
    # minutes on, and the wall clock says ten minutes passed, so it is placed
    # at its own time; a post dated a day on is still held
    wall = HandClock()
    clock = EventClock(300.0, wall=wall)
    assert clock.place(START) == START
    wall.now += 600
    assert clock.place(START + 600) == START + 600
    assert clock.place(START + DAY) == START + 600 + 300 / 4  # a new index's first posts: a quarter of the TTL


def test_without_a_ttl_every_post_keeps_its_time() -> None:
    clock = EventClock(0.0, wall=HandClock())
    assert clock.place(START) == START
    assert clock.place(START + 365 * DAY) == START + 365 * DAY


@pytest.mark.parametrize("stored", [b"1e400", b"inf", b"nan", b"soon", b""])
def test_a_shared_clock_that_is_not_a_finite_number_is_refused_naming_its_key(stored: bytes) -> None:
    with pytest.raises(StoreError, match="the key 'sf:clock'.*not a finite number"):
        checked_clock(stored, "the key 'sf:clock'")


def test_a_shared_clock_later_than_any_post_may_move_it_is_refused() -> None:
    with pytest.raises(StoreError, match="later than any post may move it"):
        checked_clock(repr(time.time() + 30 * DAY).encode(), "the key 'sf:clock'")
    now = time.time()
    assert checked_clock(repr(now).encode(), "the key 'sf:clock'") == now
    assert checked_clock(None, "the key 'sf:clock'") == -math.inf


@pytest.mark.parametrize("stored", [struct.pack("<d", math.inf), b"1e400x"])
def test_a_damaged_clock_in_an_lmdb_index_is_refused_naming_the_index(tmp_path: Path, stored: bytes) -> None:
    records = [{"id": str(n), "text": f"post {n} of the stream", "created_at": START + n} for n in range(3)]
    with StreamFilter(path=tmp_path / "index") as sf:
        sf.check_many(records)
    env = lmdb.open(str(tmp_path / "index"), max_dbs=4)
    with env.begin(write=True) as txn:
        txn.put(b"clock", stored, db=env.open_db(b"meta", txn=txn))
    env.close()
    with pytest.raises(StoreError, match=f"clock in the LMDB index at {tmp_path / 'index'} holds .* not a finite"):
        with StreamFilter(path=tmp_path / "index") as sf:
            sf.check_many(records)


def _adversarial_times(seed: int, count: int) -> list[float]:
    """A stream's dates with what a campaign adds: bursts a year ahead, posts
    a week behind, ties, and the odd time that is not finite."""
    rng = random.Random(seed)
    times, now = [], START
    for _ in range(count):
        now += rng.choice([0.0, 0.5, 1.0, 30.0])
        roll = rng.random()
        if roll < 0.02:
            times.append(now + 365 * DAY)
        elif roll < 0.03:
            times.append(now - 7 * DAY)
        elif roll < 0.032:
            times.append(rng.choice([math.inf, -math.inf, math.nan]))
        else:
            times.append(now)
    return times


@pytest.mark.skipif(compiled_kernel() is None, reason="the compiled kernel is not built")
@pytest.mark.parametrize("seed", range(4))
def test_the_kernel_places_every_post_where_the_rule_does(seed: int) -> None:
    times = _adversarial_times(seed, 3 * WINDOW + 17)  # the window fills, then wraps
    compiled, reference = _CEventClock(DAY, wall=(tick := HandClock())), _PyEventClock(DAY, wall=HandClock())
    expected = []
    for timestamp in times:  # the rule, one post at a time; the wall clock moves a little each post
        reference._wall.now += 0.25  # type: ignore[attr-defined]
        expected.append(reference._place(timestamp))
    got: list[tuple[float, float]] = []
    for start in range(0, len(times), 500):  # the kernel, a batch at a time
        batch = times[start : start + 500]
        placed, streams = [], []
        for timestamp in batch:  # the same wall readings, one a post
            tick.now += 0.25
            at, stream = compiled.place_all([timestamp])
            placed.append(float(at[0]))
            streams.append(float(stream[0]))
        got += zip(placed, streams, strict=True)
    assert [repr(pair) for pair in got] == [repr(pair) for pair in expected]  # repr: nan equals nan
    assert (compiled.corroborated, compiled.stream_time) == (reference.corroborated, reference.stream_time)
    # a whole batch at once places as one post at a time does, the wall clock standing still
    whole, single = _CEventClock(DAY, wall=HandClock()), _CEventClock(DAY, wall=HandClock())
    assert repr(whole.place_all(times)[0].tolist()) == repr([single.place(timestamp) for timestamp in times])


def test_a_batch_placed_at_once_warns_and_counts_as_one_post_at_a_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    times = [t if math.isfinite(t) else START for t in _adversarial_times(7, 3000)]
    times[1500] = times[1499] + 2 * DAY  # a post newer than all before it by more than the TTL
    records = [{"id": str(n), "text": f"post {n} of the stream", "created_at": t} for n, t in enumerate(times)]

    def judged(path: Path) -> tuple[list[tuple[str, str | None]], list[str], dict[str, int]]:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="streamfilter"):
            with StreamFilter(FilterConfig(ttl_seconds=DAY, seed=1), path=path) as sf:
                verdicts = [(v.kind.value, v.duplicate_of) for v in sf.check_many(records)]
                signals = dict(sf.stats().signals)
        return verdicts, [r.getMessage() for r in caplog.records], signals

    at_once = judged(tmp_path / "at-once")
    monkeypatch.setattr(Timeline, "place", Timeline._place_each)
    one_by_one = judged(tmp_path / "one-by-one")
    assert at_once == one_by_one
    verdicts, warnings, signals = at_once
    assert signals["dated_ahead"] > 0
    assert any("ahead of the stream's time" in w for w in warnings)
    assert any("newer than every post before it" in w for w in warnings)
    assert any("older than the newest post" in w for w in warnings)
