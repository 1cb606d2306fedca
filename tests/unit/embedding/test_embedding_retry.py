from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from knowledge.core.errors import ValidationError
from knowledge.core.retry_after import retry_after_seconds
from knowledge.embedding.pool import RateGate
from knowledge.embedding.retry import backoff_delay, call_with_retries


class Transient(Exception):
    pass


class Permanent(Exception):
    pass


def _flaky(failures: list[Exception], value: str = "ok") -> tuple[Callable[[], str], list[int]]:
    calls: list[int] = []

    def operation() -> str:
        calls.append(len(calls))
        if failures:
            raise failures.pop(0)
        return value

    return operation, calls


def _is_transient(exc: BaseException) -> bool:
    return isinstance(exc, Transient)


def test_retries_retryable_errors_with_exponential_backoff() -> None:
    operation, calls = _flaky([Transient(), Transient(), Transient()])
    sleeps: list[float] = []
    result = call_with_retries(
        operation, is_retryable=_is_transient, sleep=sleeps.append, rand=lambda: 1.0
    )
    assert result == "ok"
    assert len(calls) == 4
    assert sleeps == [0.5, 1.0, 2.0]


def test_non_retryable_error_is_raised_at_once() -> None:
    operation, calls = _flaky([Permanent("bad request")])
    sleeps: list[float] = []
    with pytest.raises(Permanent, match="bad request"):
        call_with_retries(operation, is_retryable=_is_transient, sleep=sleeps.append)
    assert len(calls) == 1
    assert sleeps == []


def test_gives_up_after_max_retries_and_reraises_the_last_error() -> None:
    errors: list[Exception] = [Transient(str(i)) for i in range(10)]
    operation, calls = _flaky(errors)
    sleeps: list[float] = []
    with pytest.raises(Transient, match="3"):
        call_with_retries(operation, is_retryable=_is_transient, max_retries=3, sleep=sleeps.append)
    assert len(calls) == 4
    assert len(sleeps) == 3


def test_zero_retries_means_one_attempt() -> None:
    operation, calls = _flaky([Transient()])
    with pytest.raises(Transient):
        call_with_retries(
            operation, is_retryable=_is_transient, max_retries=0, sleep=lambda _: None
        )
    assert len(calls) == 1


def test_retry_after_hint_is_honoured_and_capped() -> None:
    operation, _ = _flaky([Transient(), Transient()])
    sleeps: list[float] = []
    hints = iter([3.0, 500.0])
    call_with_retries(
        operation,
        is_retryable=_is_transient,
        retry_after=lambda _exc: next(hints),
        sleep=sleeps.append,
        rand=lambda: 0.0,
        max_delay=20.0,
    )
    assert sleeps == [3.0, 20.0]


def test_negative_max_retries_is_rejected() -> None:
    with pytest.raises(ValidationError) as info:
        call_with_retries(lambda: 1, is_retryable=_is_transient, max_retries=-1)
    assert info.value.field == "max_retries"


@pytest.mark.parametrize(
    ("attempt", "rand", "expected"),
    [
        (0, 1.0, 0.5),
        (1, 1.0, 1.0),
        (3, 1.0, 4.0),
        (10, 1.0, 20.0),
        (500, 1.0, 20.0),
        (2, 0.0, 0.0),
        (2, 0.5, 1.0),
    ],
)
def test_backoff_delay_is_full_jitter_under_a_cap(
    attempt: int, rand: float, expected: float
) -> None:
    assert backoff_delay(attempt, rand=lambda: rand) == pytest.approx(expected)


def test_backoff_delay_default_jitter_stays_in_range() -> None:
    for attempt in range(8):
        ceiling = min(20.0, 0.5 * 2**attempt)
        for _ in range(50):
            assert 0.0 <= backoff_delay(attempt) <= ceiling


_NOW = datetime(2026, 11, 30, 22, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("20", 20.0),
        (" 0.25 ", 0.25),
        ("Mon, 30 Nov 2026 22:00:30 GMT", 30.0),  # HTTP-date, 30 s ahead
        ("Monday, 30-Nov-26 22:01:00 GMT", 60.0),  # the obsolete RFC 850 form
        ("Mon, 30 Nov 2026 21:59:00 GMT", 0.0),  # already past: no wait
        ("1e400", math.inf),  # huge: the caller caps it
        ("-3", None),
        ("nan", None),
        ("soon", None),
        ("", None),
        (None, None),
        ("Mon, 99 Nov 2026 25:00:00 GMT", None),
    ],
)
def test_retry_after_seconds(value: str | None, expected: float | None) -> None:
    assert retry_after_seconds(value, now=lambda: _NOW) == expected


class _Throttled(Exception):
    pass


@pytest.mark.parametrize("throttle", [True, False], ids=["throttle", "server-error"])
def test_a_throttle_without_retry_after_holds_back_the_whole_pool(throttle: bool) -> None:
    # Bedrock throttles without Retry-After: the worker that got it backs off (0.25 s
    # here), and so must every other worker of the pool (the gate), before its next
    # request. A 5xx is this request's problem only: the gate stays open.
    gate = RateGate(clock=lambda: 100.0)  # the clock stands still: the pause stays
    sleeps: list[float] = []
    failures = [_Throttled() if throttle else RuntimeError("503")]

    def operation() -> str:
        if failures:
            raise failures.pop()
        return "ok"

    result = call_with_retries(
        operation,
        is_retryable=lambda exc: True,
        is_throttle=lambda exc: isinstance(exc, _Throttled),
        sleep=sleeps.append,
        rand=lambda: 0.5,
        gate=gate,
    )
    assert result == "ok"
    assert sleeps == [0.25]
    assert gate.closed_for() == (0.25 if throttle else 0.0)
    other_worker: list[float] = []
    call_with_retries(
        lambda: 1, is_retryable=lambda exc: True, sleep=other_worker.append, gate=gate
    )
    assert other_worker == ([0.25] if throttle else [])
