"""A bounded pool of concurrent embedding calls per provider, and the rate gate its
workers share.

Remote embedding APIs answer in tens to hundreds of milliseconds per call, and Bedrock
Titan takes one text per ``InvokeModel``: sent one after another, a 1,000-chunk document
costs 80 s. ``EmbeddingPool.map(function, items)`` runs ``function`` over ``items`` on at
most ``concurrency`` threads (one ``ThreadPoolExecutor`` per provider instance, so every
caller of that provider shares the bound) and returns the results **in input order**.

- **Rate limits back off the whole pool.** A worker that gets a 429 with ``Retry-After``
  (``knowledge.embedding.retry.call_with_retries`` with ``gate=``) calls
  ``RateGate.pause(seconds)``; every worker waits on the same gate before each attempt,
  so no new request of any worker goes out until the server said it would take them
  again. Requests already on the wire finish as they will. A throttle without
  ``Retry-After`` (Bedrock's usual ``ThrottlingException``) cuts the adaptive limit
  (below), and the worker that got it waits its jittered backoff.
- **The caller's deadline is respected.** ``embedding_deadline()`` is the nearer of
  ``knowledge.core.deadline.current_deadline()`` (e.g. the search handler's request budget)
  and the one set by ``embedding_time_budget(seconds)`` (the indexer Lambda sets it per
  record, in ``knowledge.aws.sqs_batch``: the invocation's time left less its reserve; it
  binds the embedding calls only, not the store's own requests). No call, first attempt
  or retry, starts once it has passed, and a gate that would only reopen after it fails
  at once. Such a failure is ``EmbeddingDeadlineError``. ``map`` also stops waiting at
  the deadline: a provider that hangs (calls on the wire, no answer) fails the batch
  with ``EmbeddingDeadlineError`` then, whatever its SDK's read timeout.
- **Errors propagate.** The first failing item (in input order among those that failed)
  raises its error from ``map``; items not started yet are not started, and an item
  under way makes no further attempt (``check_not_cancelled``, asked by
  ``knowledge.embedding.retry`` before every attempt): once ``map`` has raised, a
  worker's only work left for that batch is the one request already on the wire.
- Items run on the pool's threads (``concurrency=1``: one thread, one call after
  another), so the caller can stop waiting at its deadline.

- **How many calls are in flight adapts** (``knowledge.embedding.aimd.AdaptiveLimit``,
  the gate's ``limit``): it starts at ``initial`` and, while it is in use, doubles per
  round trip until the provider first throttles, then grows by about one call per round
  of answers, up to ``concurrency``; a throttled answer cuts it to 0.7x (once per round
  trip). So the pool finds the provider's quota and stays under it.

Settings: the providers take ``concurrency``, the ceiling (``BedrockEmbeddingClient``:
default ``DEFAULT_BEDROCK_CONCURRENCY`` = 64, starting at 16; ``OpenAIEmbeddingClient``:
default ``DEFAULT_OPENAI_CONCURRENCY`` = 16, starting at 4), and the Lambda functions
read ``EMBEDDING_CONCURRENCY`` (``knowledge.aws.settings``) for it. The defaults come
from ``bench/runs/embedding_pool.py`` (``bench/REPORT.md``, "Concurrent embedding").
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from knowledge.core.deadline import Deadline, current_deadline
from knowledge.core.errors import EmbeddingError, ValidationError
from knowledge.embedding.aimd import AdaptiveLimit
from knowledge.embedding.base import EmbeddingDeadlineError

__all__ = [
    "DEFAULT_BEDROCK_CONCURRENCY",
    "DEFAULT_BEDROCK_INITIAL_CONCURRENCY",
    "DEFAULT_OPENAI_CONCURRENCY",
    "DEFAULT_OPENAI_INITIAL_CONCURRENCY",
    "MAX_CONCURRENCY",
    "EmbeddingCancelledError",
    "EmbeddingDeadlineError",
    "EmbeddingPool",
    "RateGate",
    "check_concurrency",
    "check_not_cancelled",
    "embedding_deadline",
    "embedding_time_budget",
]

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_BEDROCK_CONCURRENCY = 64
"""Titan: one text per call; the most calls in flight (the adaptive limit's ceiling). The
limit starts at ``DEFAULT_BEDROCK_INITIAL_CONCURRENCY`` and grows until Bedrock throttles
(``knowledge.embedding.aimd``): the account's quota, not a guess, sets the pace."""

DEFAULT_BEDROCK_INITIAL_CONCURRENCY = 16
"""Where Titan's limit starts: on the man pages at 80 ms a call (bench/REPORT.md section
7) a fixed 16 in flight gave 11.6x the sequential rate; from there the limit grows."""

DEFAULT_OPENAI_CONCURRENCY = 16
"""OpenAI: requests of up to ``batch_size`` texts; the most in flight (the ceiling)."""

DEFAULT_OPENAI_INITIAL_CONCURRENCY = 4
"""Where OpenAI's limit starts: with 16-text requests at 300 ms, 4 in flight gave 1.8x
sequential and 8 no more (1.87x) when the pipeline handed the embedder 64 chunks at a
time, so 4 requests carried a whole batch (bench/REPORT.md section 7)."""

MAX_CONCURRENCY = 64

_EMBEDDING_DEADLINE: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "knowledge_embedding_deadline", default=None
)


def embedding_deadline() -> Deadline | None:
    """The deadline embedding calls in this context must start by (module docstring)."""
    own = _EMBEDDING_DEADLINE.get()
    general = current_deadline()
    return general if own is None else own.earliest(general)


@contextlib.contextmanager
def embedding_time_budget(seconds: float) -> Iterator[Deadline]:
    """Run the block with embedding calls bound to start within ``seconds`` from now (a
    nearer deadline already set stays in force). Unlike ``knowledge.core.deadline.time_budget``
    it does not bind the store's requests."""
    deadline = Deadline.after(seconds).earliest(_EMBEDDING_DEADLINE.get())
    token = _EMBEDDING_DEADLINE.set(deadline)
    try:
        yield deadline
    finally:
        _EMBEDDING_DEADLINE.reset(token)


class EmbeddingCancelledError(EmbeddingError):
    """A retry not made because its batch had already failed (``check_not_cancelled``);
    ``EmbeddingPool.map`` raises the batch's own failure, never this."""


_CANCELLED: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "knowledge_embedding_cancelled", default=None
)


def check_concurrency(concurrency: object) -> int:
    """``concurrency`` as a validated int (``ValidationError`` naming the field)."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int):
        raise ValidationError("concurrency", f"must be an integer, got {concurrency!r}")
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise ValidationError(
            "concurrency", f"must be in [1, {MAX_CONCURRENCY}], got {concurrency}"
        )
    return concurrency


class RateGate:
    """When the pool's workers may send their next request (module docstring).

    ``pause(seconds)`` closes the gate until ``seconds`` from now (a later reopening wins
    over an earlier one); ``wait(sleep, deadline)`` returns once it is open.
    """

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, *, limit: AdaptiveLimit | None = None
    ) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._open_at = 0.0
        self.limit = limit
        """How many calls may be in flight (``knowledge.embedding.aimd``); ``None``: any."""

    def pause(self, seconds: float) -> None:
        """Hold every worker back for ``seconds`` from now."""
        with self._lock:
            self._open_at = max(self._open_at, self._clock() + max(0.0, seconds))

    def closed_for(self) -> float:
        """Seconds until the gate reopens (0 when open)."""
        with self._lock:
            return max(0.0, self._open_at - self._clock())

    def wait(self, sleep: Callable[[float], None], deadline: Deadline | None = None) -> None:
        """Return once the gate is open; ``EmbeddingDeadlineError`` at once if it reopens
        only at or after ``deadline``. ``sleep`` does the waiting (injectable in tests);
        if another worker extends the pause meanwhile, this waits again."""
        waited_until: float | None = None
        while True:
            with self._lock:
                open_at = self._open_at
            if waited_until is not None and open_at <= waited_until:
                return
            delay = open_at - self._clock()
            if delay <= 0:
                return
            if deadline is not None and delay >= deadline.remaining():
                raise EmbeddingDeadlineError(
                    f"the embedding provider asked to wait {delay:.1f} s, past the time "
                    "budget of the request"
                )
            sleep(delay)
            waited_until = open_at


class EmbeddingPool:
    """Up to ``concurrency`` embedding calls at once, results in input order (module
    docstring). ``name`` names the worker threads. Thread-safe; the threads are created
    on first concurrent use and live as long as the pool (daemon-like executor threads,
    ended by ``close()``)."""

    def __init__(
        self, concurrency: int, *, initial: int | None = None, name: str = "embedding"
    ) -> None:
        self._concurrency = check_concurrency(concurrency)
        self._name = name
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        start = self._concurrency if initial is None else check_concurrency(initial)
        self.limit = AdaptiveLimit(start, self._concurrency)
        self.gate = RateGate(limit=self.limit)

    @property
    def concurrency(self) -> int:
        """The most calls ever in flight (the adaptive limit's ceiling)."""
        return self._concurrency

    def map(self, function: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``[function(item) for item in items]``, up to ``concurrency`` at a time."""
        if not items:
            return []
        deadline = embedding_deadline()
        executor = self._get_executor()
        stop = threading.Event()

        def run(item: T) -> R:
            if stop.is_set():
                raise _NotStartedError
            _CANCELLED.set(stop)  # in this task's own context: its retries see the stop
            _check_deadline(deadline, 1, len(items))
            try:
                return function(item)
            except BaseException:
                stop.set()  # items not started yet are not started
                raise

        # One context copy per task: a context cannot be entered by two threads at once.
        futures = [executor.submit(contextvars.copy_context().run, run, item) for item in items]
        timeout = None if deadline is None else max(0.0, deadline.remaining())
        done, pending = concurrent.futures.wait(
            futures, timeout=timeout, return_when=concurrent.futures.FIRST_EXCEPTION
        )
        failed = any(not f.cancelled() and f.exception() is not None for f in done)
        if not failed and not pending:
            return [future.result() for future in futures]
        stop.set()  # no further item starts, and no retry of one under way
        for future in futures:
            future.cancel()
        errors = [
            error
            for future in futures
            if future in done and not future.cancelled()
            for error in (future.exception(),)
            if error is not None and not isinstance(error, _NOT_REAL_FAILURES)
        ]
        if errors:
            raise errors[0]
        raise EmbeddingDeadlineError(
            f"the time budget ran out with {len(pending)} of {len(items)} embedding calls "
            "unanswered (the provider did not answer in time)"
        )

    def _get_executor(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=self._concurrency, thread_name_prefix=self._name
                )
            return self._executor

    def close(self) -> None:
        """End the worker threads (a later ``map`` starts new ones); idempotent."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    def __repr__(self) -> str:
        return f"EmbeddingPool(concurrency={self._concurrency}, limit={self.limit.limit})"


class _NotStartedError(Exception):
    """An item skipped because another one failed (never seen by callers: ``map``
    raises the failure, the first in input order among those that failed)."""


_NOT_REAL_FAILURES = (_NotStartedError, EmbeddingCancelledError)


def check_not_cancelled() -> None:
    """``EmbeddingCancelledError`` if the ``map`` this call runs in has already failed
    (another item's error, or its deadline): ``knowledge.embedding.retry`` asks before
    every attempt, so a worker stops retrying an item nobody waits for any more."""
    stop = _CANCELLED.get()
    if stop is not None and stop.is_set():
        raise EmbeddingCancelledError(
            "not sent again: the batch this text belongs to has already failed"
        )


def _check_deadline(deadline: Deadline | None, left: int, total: int) -> None:
    if deadline is not None and deadline.expired():
        raise EmbeddingDeadlineError(
            f"the time budget ran out with {left} of {total} embedding calls not started"
        )
