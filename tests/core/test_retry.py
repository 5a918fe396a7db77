"""The shared retry loop (evo_core.retry), on a fake clock: no test sleeps."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from evo_core.retry import Backoff, RetriesExhausted, Retryable, retry_call


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s

    def clock(self) -> float:
        return self.now


def flaky(failures: int, exc: BaseException = Retryable("busy"), value: str = "ok"):
    calls = {"n": 0}

    def attempt() -> str:
        calls["n"] += 1
        if calls["n"] <= failures:
            raise exc
        return value

    return attempt, calls


def test_retries_until_success_and_reports_each_retry():
    t, seen = FakeTime(), []
    attempt, calls = flaky(2)
    out = retry_call(attempt, Backoff(retries=4, initial_s=1.0, max_s=10.0, jitter=0.0),
                     on_retry=lambda n, e, w: seen.append((n, str(e), w)), sleep=t.sleep, clock=t.clock)
    assert out == "ok" and calls["n"] == 3
    assert seen == [(1, "busy", 1.0), (2, "busy", 2.0)] and t.slept == [1.0, 2.0]


def test_exhausted_names_the_attempts_and_the_last_error():
    t = FakeTime()
    attempt, calls = flaky(100)
    with pytest.raises(RetriesExhausted, match="failed after 3 attempts: busy") as info:
        retry_call(attempt, Backoff(retries=2, initial_s=0.1), sleep=t.sleep, clock=t.clock)
    assert calls["n"] == 3 and info.value.attempts == 3 and str(info.value.last) == "busy"
    assert len(t.slept) == 2  # no wait after the last attempt


def test_zero_retries_is_one_attempt():
    t = FakeTime()
    attempt, calls = flaky(1)
    with pytest.raises(RetriesExhausted, match="after 1 attempt: busy"):
        retry_call(attempt, Backoff(retries=0), sleep=t.sleep, clock=t.clock)
    assert calls["n"] == 1 and t.slept == []


def test_a_non_retryable_error_propagates_at_once():
    t = FakeTime()
    attempt, calls = flaky(5, exc=ValueError("bad request"))
    with pytest.raises(ValueError, match="bad request"):
        retry_call(attempt, Backoff(retries=5), sleep=t.sleep, clock=t.clock)
    assert calls["n"] == 1 and t.slept == []


def test_the_predicate_decides_what_is_retryable():
    t = FakeTime()
    attempt, calls = flaky(2, exc=ConnectionError("refused"))
    out = retry_call(attempt, Backoff(retries=3, initial_s=0.01), retryable=lambda e: isinstance(e, ConnectionError),
                     sleep=t.sleep, clock=t.clock)
    assert out == "ok" and calls["n"] == 3


def test_the_deadline_stops_before_a_wait_that_would_end_past_it():
    t = FakeTime()
    attempt, calls = flaky(100)
    # waits 1, 2, 4, 8 ...: after 1 + 2 = 3 s, the next wait (4 s) would end at 7 s > 5 s
    with pytest.raises(RetriesExhausted, match="after 3 attempts"):
        retry_call(attempt, Backoff(retries=10, initial_s=1.0, max_s=100.0, jitter=0.0, deadline_s=5.0),
                   sleep=t.sleep, clock=t.clock)
    assert calls["n"] == 3 and t.slept == [1.0, 2.0]


def test_bad_schedules_are_refused():
    for kw in ({"retries": -1}, {"jitter": 1.5}, {"multiplier": 0.5}, {"deadline_s": 0.0}, {"initial_s": -1.0}):
        with pytest.raises(ValueError):
            Backoff(**kw)


@settings(max_examples=60, deadline=None)
@given(initial=st.floats(0.0, 5), cap=st.floats(0.0, 30), mult=st.floats(1.0, 4.0), jitter=st.floats(0.0, 1.0),
       retries=st.integers(0, 12), seed=st.integers(0, 10**6))
def test_delays_grow_are_capped_and_jittered_within_bounds(initial, cap, mult, jitter, retries, seed):
    b = Backoff(retries=retries, initial_s=initial, max_s=cap, multiplier=mult, jitter=jitter)
    d = b.delays(random.Random(seed))
    assert len(d) == retries
    for k, x in enumerate(d):
        ceiling = min(cap, initial * mult ** k)
        assert (1.0 - jitter) * ceiling - 1e-12 <= x <= ceiling + 1e-12
    assert d == b.delays(random.Random(seed))  # the schedule is a function of the rng alone
