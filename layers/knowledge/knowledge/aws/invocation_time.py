"""How much of a Lambda invocation is left, and whether one more unit of work fits in it.

The indexer takes SQS records (and pages of a scope reindex) one at a time. Before each
it asks ``TimeBudget.can_start()``: at least ``reserve_ms`` must be left *after* the
longest unit seen so far in this invocation. What does not fit is handed back (a batch
item failure, a continuation message) instead of being cut off by the timeout, which
would make SQS replay the whole batch after the visibility timeout.

The only clock is the invocation's own: ``remaining_ms`` is
``context.get_remaining_time_in_millis``, and a unit's duration is the difference of two
readings, so a unit that waits on the network counts as it should.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from knowledge.core.errors import ValidationError

__all__ = ["DEFAULT_RESERVE_MS", "TimeBudget"]

DEFAULT_RESERVE_MS = 30_000
"""Time kept free at the end of an invocation (reporting, flushing metrics, a slow call)."""


class TimeBudget:
    """The time left in one invocation (module docstring). Not thread-safe: one per
    invocation, used by the thread that processes the batch."""

    def __init__(self, remaining_ms: Callable[[], int], reserve_ms: int = DEFAULT_RESERVE_MS):
        if reserve_ms < 0:
            raise ValidationError("reserve_ms", f"must be >= 0, got {reserve_ms}")
        self._remaining_ms = remaining_ms
        self._reserve_ms = reserve_ms
        self._longest_ms = 0

    @classmethod
    def unlimited(cls) -> TimeBudget:
        """A budget that never runs out (no Lambda context: tests, local tools)."""
        return cls(lambda: 2**62, 0)

    @property
    def reserve_ms(self) -> int:
        return self._reserve_ms

    @property
    def longest_ms(self) -> int:
        """The longest unit measured so far."""
        return self._longest_ms

    def remaining_ms(self) -> int:
        return int(self._remaining_ms())

    def seconds_left(self) -> float:
        """Seconds until only the reserve is left (0 once it is reached): the deadline of
        the embedding calls a unit makes (``knowledge.embedding.pool.embedding_time_budget``)."""
        return max(0.0, (self.remaining_ms() - self._reserve_ms) / 1000.0)

    def can_start(self) -> bool:
        """True if one more unit as long as the longest so far still leaves the reserve."""
        return self.remaining_ms() - self._longest_ms >= self._reserve_ms

    @contextmanager
    def unit(self) -> Iterator[None]:
        """Measure one unit of work (its duration raises the bar for the next ones)."""
        before = self.remaining_ms()
        try:
            yield
        finally:
            self._longest_ms = max(self._longest_ms, before - self.remaining_ms())
