"""Time budgets: a request's deadline, handed down to the calls it makes.

A search behind API Gateway must answer before the gateway gives up (30 s), whatever
OpenSearch or the embedding provider do. The handler opens a budget from the time its
invocation has left (``time_budget(context.get_remaining_time_in_millis() / 1000 - 1)``);
the store and the query embedding read it with ``current_deadline()`` and size their
timeouts and retries from ``Deadline.remaining()``, so the request ends with an error in
time instead of running past the gateway.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from knowledge.core.errors import ValidationError

__all__ = [
    "API_GATEWAY_LIMIT_SECONDS",
    "Deadline",
    "current_deadline",
    "request_budget",
    "time_budget",
]

API_GATEWAY_LIMIT_SECONDS = 29.0
"""API Gateway ends an integration after 29-30 s, whatever the Lambda's own timeout."""

_ANSWER_MARGIN_SECONDS = 1.5
"""Kept back from a budget to shape and send the answer (an error included)."""


def request_budget(remaining_ms: int | float) -> float:
    """Seconds a request may spend on its work: what the invocation has left
    (``context.get_remaining_time_in_millis()``), capped at the gateway's limit, less
    the time needed to answer."""
    remaining = min(float(remaining_ms) / 1000.0, API_GATEWAY_LIMIT_SECONDS)
    return max(0.0, remaining - _ANSWER_MARGIN_SECONDS)


@dataclass(frozen=True, slots=True)
class Deadline:
    """A point in ``clock()`` time (``time.monotonic()``; tests move a clock of their
    own) by which a piece of work must be done."""

    at: float
    clock: Callable[[], float] = field(default=time.monotonic, compare=False, repr=False)

    @classmethod
    def after(cls, seconds: float, *, clock: Callable[[], float] = time.monotonic) -> Deadline:
        """The deadline ``seconds`` from now (on ``clock``)."""
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise ValidationError("seconds", f"must be a number, got {seconds!r}")
        return cls(clock() + max(0.0, float(seconds)), clock)

    def remaining(self) -> float:
        """Seconds left (0 once passed)."""
        return max(0.0, self.at - self.clock())

    def expired(self) -> bool:
        return self.remaining() <= 0.0

    def timeout(self, at_most: float) -> float:
        """A timeout for one call: ``at_most``, or less if the deadline is nearer."""
        return min(at_most, self.remaining())

    def earliest(self, other: Deadline | None) -> Deadline:
        """The nearer of the two deadlines."""
        return self if other is None or self.at <= other.at else other


_CURRENT: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "knowledge_deadline", default=None
)


def current_deadline() -> Deadline | None:
    """The deadline of the work running in this context (``None``: no budget set)."""
    return _CURRENT.get()


@contextlib.contextmanager
def time_budget(
    seconds: float, *, clock: Callable[[], float] = time.monotonic
) -> Iterator[Deadline]:
    """Run the block with a deadline ``seconds`` from now (an enclosing, nearer deadline
    stays in force). ``clock`` is injectable for tests."""
    deadline = Deadline.after(seconds, clock=clock).earliest(_CURRENT.get())
    token = _CURRENT.set(deadline)
    try:
        yield deadline
    finally:
        _CURRENT.reset(token)
