"""Retries with exponential backoff and full jitter, shared by the remote embedding providers.

The providers switch off their SDK's own retries and use this instead, so a request is
never retried twice over and the policy is the same (and testable) for every provider.

``call_with_retries(operation, is_retryable=...)`` calls ``operation`` until it returns,
raises an error that ``is_retryable`` rejects, or has failed ``max_retries + 1`` times;
then the last error is re-raised unchanged (the provider wraps it). Between attempts it
sleeps ``backoff_delay(attempt)``: a random duration in ``[0, min(max_delay,
base_delay * 2**attempt)]`` ("full jitter"), or the server's ``Retry-After`` when
``retry_after`` reports one (capped at ``max_delay``).

With ``gate`` (the ``RateGate`` of the provider's ``knowledge.embedding.pool.EmbeddingPool``)
every attempt first waits for the gate to be open, and a server's ``Retry-After`` closes
the gate for that long, so every worker of the pool backs off, not only this one. A
throttle without ``Retry-After`` (``is_throttle``: a 429, Bedrock's
``ThrottlingException``) closes the gate for the attempt's own backoff, unless the gate
has an adaptive ``limit``: then the cut limit is the pool's backoff, and only the worker
that got it waits its backoff (a pool stopped whole at every 429 of a concurrency quota
would idle below it). With
``deadline``, no attempt starts once it has passed, nor a backoff that would end after it:
``EmbeddingDeadlineError`` (caused by the last error, if any) is raised instead. The
gate's ``limit`` (``knowledge.embedding.aimd.AdaptiveLimit``) bounds the attempts in
flight: each waits for room, and its answer (throttled or not) moves the limit. Inside
an ``EmbeddingPool.map`` whose batch has already failed, no attempt starts either
(``pool.check_not_cancelled``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from knowledge.core.deadline import Deadline
from knowledge.core.errors import ValidationError
from knowledge.embedding.pool import EmbeddingDeadlineError, RateGate, check_not_cancelled

__all__ = ["DEFAULT_BASE_DELAY", "DEFAULT_MAX_DELAY", "backoff_delay", "call_with_retries"]

T = TypeVar("T")

DEFAULT_BASE_DELAY = 0.5
DEFAULT_MAX_DELAY = 20.0


def backoff_delay(
    attempt: int,
    *,
    base_delay: float = DEFAULT_BASE_DELAY,
    max_delay: float = DEFAULT_MAX_DELAY,
    rand: Callable[[], float] = random.random,
) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (0-based), with full jitter."""
    ceiling = min(max_delay, base_delay * (2.0 ** min(attempt, 62)))
    return ceiling * min(max(rand(), 0.0), 1.0)


def call_with_retries(
    operation: Callable[[], T],
    *,
    is_retryable: Callable[[BaseException], bool],
    max_retries: int = 5,
    base_delay: float = DEFAULT_BASE_DELAY,
    max_delay: float = DEFAULT_MAX_DELAY,
    retry_after: Callable[[BaseException], float | None] | None = None,
    is_throttle: Callable[[BaseException], bool] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    rand: Callable[[], float] = random.random,
    gate: RateGate | None = None,
    deadline: Deadline | None = None,
) -> T:
    """Return ``operation()``, retrying retryable errors up to ``max_retries`` times.

    Only ``Exception`` subclasses are caught; the last error is re-raised as it was.
    """
    if max_retries < 0:
        raise ValidationError("max_retries", f"must be >= 0, got {max_retries}")
    attempt = 0
    while True:
        if gate is not None:
            gate.wait(sleep, deadline)
        check_not_cancelled()  # the batch failed meanwhile: nobody waits for this answer
        if deadline is not None and deadline.expired():
            raise EmbeddingDeadlineError(
                "the time budget ran out before the embedding call could be sent"
                + (f" again (after {attempt} attempts)" if attempt else "")
            )
        limit = gate.limit if gate is not None else None
        ticket = limit.acquire(deadline) if limit is not None else None
        try:
            result = operation()
        except Exception as exc:
            hinted = retry_after(exc) if retry_after is not None else None
            if limit is not None and ticket is not None:
                throttled = (is_throttle is not None and is_throttle(exc)) or hinted is not None
                limit.release(ticket, throttled=throttled)
            if attempt >= max_retries or not is_retryable(exc):
                raise
            delay = backoff_delay(attempt, base_delay=base_delay, max_delay=max_delay, rand=rand)
            attempt += 1
            if hinted is not None and hinted > 0:
                # The server knows when it will take requests again; trust it, within reason.
                delay = min(max(delay, hinted), max_delay)
                if gate is not None:
                    gate.pause(delay)  # every worker waits; gate.wait above does it here
                    continue
            elif (
                gate is not None and limit is None and is_throttle is not None and is_throttle(exc)
            ):
                # Throttled without a hint (Bedrock's usual 429): the account's rate is
                # shared, so the whole pool backs off too, for this attempt's backoff.
                # With an adaptive limit the cut limit is that backoff (aimd).
                gate.pause(delay)
                continue
            if deadline is not None and delay >= deadline.remaining():
                raise EmbeddingDeadlineError(
                    f"the time budget ends before the next attempt (after {attempt}): {exc}"
                ) from exc
            sleep(delay)
        else:
            if limit is not None and ticket is not None:
                limit.release(ticket, throttled=False)
            return result
