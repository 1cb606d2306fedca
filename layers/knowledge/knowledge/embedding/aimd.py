"""How many embedding calls may be in flight: a limit that grows until the provider
throttles, and backs off when it does (AIMD, as TCP's congestion window).

A provider's quota is rarely known to the client (Bedrock's InvokeModel quota is per
account and model, shared with every other caller), so a fixed concurrency either leaves
most of it unused or trips it all the time. ``AdaptiveLimit`` starts at ``initial`` calls
in flight and:

- **slow start**: until the provider first throttles, every call answered while the
  limit was in use (as many calls in flight as it allows, less one) adds 1: the limit
  doubles per round trip, so a quota well above ``initial`` is reached in a few round
  trips instead of one call per round (TCP's slow start; a short ``kb index`` spends
  most of its time there otherwise);
- **additive increase**: after the first throttle, every such answer adds ``1 / limit``:
  about one more call in flight per round of ``limit`` answers, up to ``ceiling``. A
  limit the caller never fills does not grow (it would say nothing about the provider);
- **multiplicative decrease**: a throttled call (a 429, Bedrock's
  ``ThrottlingException``, or any answer with ``Retry-After``) multiplies the limit by
  ``DECREASE_FACTOR`` (0.7, CUBIC's), down to 1, once per round trip: calls sent before
  the last decrease were sent at the old limit, so their throttles do not cut again.

The waiting before a throttled call is sent again is the ``RateGate``'s
(``knowledge.embedding.pool``: ``Retry-After``, or the jittered backoff), not this.
``acquire(deadline)`` blocks until a call may go out; ``EmbeddingDeadlineError`` when
that would be past ``deadline``. Thread-safe.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from knowledge.core.deadline import Deadline
from knowledge.embedding.base import EmbeddingDeadlineError

__all__ = ["DECREASE_FACTOR", "AdaptiveLimit"]

DECREASE_FACTOR = 0.7


class AdaptiveLimit:
    """Calls in flight allowed now, between 1 and ``ceiling`` (module docstring)."""

    def __init__(
        self, initial: int, ceiling: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ceiling = max(1, ceiling)
        self._limit = float(min(max(1, initial), self._ceiling))
        self._clock = clock
        self._cond = threading.Condition()
        self._in_flight = 0
        self._last_decrease = -math.inf
        self._slow_start = True
        self.max_in_flight = 0
        self.decreases = 0

    @property
    def limit(self) -> int:
        with self._cond:
            return int(self._limit)

    @property
    def ceiling(self) -> int:
        return self._ceiling

    def acquire(self, deadline: Deadline | None = None) -> float:
        """Wait for room for one more call and take it; returns the ticket to ``release``."""
        with self._cond:
            while self._in_flight >= int(self._limit):
                timeout = None if deadline is None else deadline.remaining()
                if timeout is not None and timeout <= 0:
                    raise EmbeddingDeadlineError(
                        "the time budget ran out waiting for the embedding provider's "
                        "calls in flight to answer"
                    )
                self._cond.wait(timeout)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            return self._clock()

    def release(self, ticket: float, *, throttled: bool) -> None:
        """The call taken at ``ticket`` answered (``throttled``: with a rate limit)."""
        with self._cond:
            in_use = self._in_flight >= int(self._limit)
            self._in_flight -= 1
            if throttled:
                self._slow_start = False
                if ticket >= self._last_decrease:
                    self._limit = max(1.0, self._limit * DECREASE_FACTOR)
                    self._last_decrease = self._clock()
                    self.decreases += 1
            elif in_use:
                step = 1.0 if self._slow_start else 1.0 / self._limit
                self._limit = min(float(self._ceiling), self._limit + step)
            self._cond.notify_all()

    def __repr__(self) -> str:
        return f"AdaptiveLimit(limit={self.limit}, ceiling={self._ceiling})"
