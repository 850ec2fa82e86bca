"""The one backoff of every retry loop: its waits, its budget, its reset."""

from __future__ import annotations

from streamfilter._backoff import Backoff

from .conftest import HandClock


def test_waits_double_up_to_the_largest_within_their_jitter() -> None:
    clock = HandClock()
    half = Backoff(0.05, 0.4, clock=clock)
    full = Backoff(0.05, 0.4, full=True, clock=clock)
    for step in (0.05, 0.1, 0.2, 0.4, 0.4, 0.4):
        wait = half.wait()
        assert wait is not None and step / 2 <= wait <= step
        wait = full.wait()
        assert wait is not None and 0 <= wait <= step
    assert half.failures == 6


def test_a_wait_that_would_pass_the_budget_is_not_taken() -> None:
    clock = HandClock()
    backoff = Backoff(1.0, 60.0, budget=10.0, clock=clock)
    assert backoff.wait() is not None  # step 1: 0 + 1 <= 10
    clock.now += 7.0  # the attempts themselves took time
    assert backoff.wait() is not None  # step 2: 7 + 2 <= 10
    clock.now += 1.0
    assert backoff.wait() is None  # step 4: 8 + 4 > 10
    assert backoff.waited == 8.0


def test_a_success_starts_the_next_run_from_the_first_step() -> None:
    clock = HandClock()
    backoff = Backoff(0.5, 60.0, full=True, budget=5.0, clock=clock)
    for _ in range(3):
        backoff.wait()
    clock.now += 4.9
    backoff.reset()
    assert backoff.failures == 0 and backoff.waited == 0.0
    assert backoff.step() == 0.5 and backoff.step(2.0) == 2.0  # a server's own first wait (SSE retry)
    wait = backoff.wait()
    assert wait is not None and wait <= 0.5
