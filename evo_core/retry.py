"""One retry loop for every network call: jittered exponential backoff, an optional
deadline, and a predicate that says which failures are worth another attempt.

The HTTP rollout engine and the remote sandbox client both use :func:`retry_call`; each
decides what is retryable (a refused connection, a 5xx) and what it reports when the
attempts run out, so the loop itself lives here once and is tested once.
"""

from __future__ import annotations

import random
import time
from typing import Callable, Optional, TypeVar

import attrs

T = TypeVar("T")


class Retryable(Exception):
    """Raised by an attempt to say "this failed, another attempt may succeed"; ``str()`` is
    the reason that ends up in the final error."""


class RetriesExhausted(Exception):
    """Every attempt failed with a retryable error (or the deadline left no time for another)."""

    def __init__(self, attempts: int, last: BaseException) -> None:
        super().__init__(f"failed after {attempts} attempt{'s' * (attempts != 1)}: {last}")
        self.attempts = attempts
        self.last = last


@attrs.frozen(kw_only=True)
class Backoff:
    """``retries`` further attempts after the first; before retry ``k`` (0-based) the caller
    waits ``min(max_s, initial_s * multiplier**k)`` scaled by a factor drawn uniformly from
    ``[1 - jitter, 1)``, so that clients that failed together do not return together.
    ``deadline_s`` (measured from the first attempt) stops retrying early when the next wait
    would end past it."""

    retries: int = attrs.field(default=3, validator=attrs.validators.ge(0))
    initial_s: float = attrs.field(default=0.5, validator=attrs.validators.ge(0))
    max_s: float = attrs.field(default=16.0, validator=attrs.validators.ge(0))
    multiplier: float = attrs.field(default=2.0, validator=attrs.validators.ge(1))
    jitter: float = attrs.field(default=0.5, validator=[attrs.validators.ge(0), attrs.validators.le(1)])
    deadline_s: Optional[float] = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.gt(0)))

    def delays(self, rng: Optional[random.Random] = None) -> list[float]:
        """The wait before each of the ``retries`` retries."""
        rng = rng or random.Random()
        return [min(self.max_s, self.initial_s * self.multiplier ** k) * ((1.0 - self.jitter) + self.jitter * rng.random())
                for k in range(self.retries)]


def retry_call(
    attempt: Callable[[], T],
    backoff: Backoff,
    *,
    retryable: Callable[[BaseException], bool] = lambda exc: isinstance(exc, Retryable),
    on_retry: Optional[Callable[[int, BaseException, float], None]] = None,
    rng: Optional[random.Random] = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``attempt()`` until it returns, at most ``backoff.retries + 1`` times.

    An exception for which ``retryable(exc)`` is false propagates at once (the caller's
    request is wrong: repeating it cannot help). A retryable one is followed by a wait and
    another attempt; ``on_retry(number, exc, wait_s)`` hears of each (``number`` counts from
    1). When no attempt is left, or the deadline would pass during the wait,
    :class:`RetriesExhausted` is raised from the last error."""
    delays = backoff.delays(rng)
    start = clock()
    for k in range(backoff.retries + 1):
        try:
            return attempt()
        except Exception as exc:
            if not retryable(exc):
                raise
            last = exc
        if k == backoff.retries:
            break
        wait = delays[k]
        if backoff.deadline_s is not None and clock() - start + wait > backoff.deadline_s:
            break
        if on_retry is not None:
            on_retry(k + 1, last, wait)
        sleep(wait)
    raise RetriesExhausted(k + 1, last) from last
