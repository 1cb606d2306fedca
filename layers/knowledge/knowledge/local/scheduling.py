"""Indexing work of many scopes on a few threads, fairly: one tenant's big job never
holds another's small edit back.

``FairScheduler`` keeps a queue of jobs per scope and runs them on ``workers`` threads:
one job of a scope at a time, in the order they came (a scope's writes stay ordered), and
across scopes the next job is taken from the agent with the fewest jobs running, then the
agent served longest ago, then the job waiting longest. With more than one worker, no
agent runs more than ``workers - 1`` jobs at once: one worker is always left for the other
agents, so a scope's new file waits for nothing but its own scope's work. The embedded
store writes a large document in short transactions (``stores.embedded.write_session``),
so the two jobs share the file's write lock too. Threads rather than processes: jobs are
I/O and C calls (SQLite, embedding providers) as much as Python, and they share one open
store; fairness is the aim, not throughput.

``ScopeLocks`` serialises the writes of one scope (the watcher's jobs, the reindex route,
a repository sync) and leaves different scopes free to write side by side.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from knowledge.core.scope import KnowledgeScope

__all__ = ["DEFAULT_INDEX_WORKERS", "FairScheduler", "ScopeLocks"]

logger = logging.getLogger(__name__)

DEFAULT_INDEX_WORKERS = 2
"""Two threads: a scope's big job on one, every other agent's work on the other."""


class ScopeLocks:
    """One lock per scope, made on first use: writes of a scope run one at a time,
    writes of different scopes side by side."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[KnowledgeScope, threading.Lock] = {}

    def of(self, scope: KnowledgeScope) -> threading.Lock:
        with self._guard:
            lock = self._locks.get(scope)
            if lock is None:
                lock = self._locks[scope] = threading.Lock()
            return lock


@dataclass(slots=True)
class _Job:
    number: int
    run: Callable[[], Any]
    future: Future[Any] = field(default_factory=Future)


class FairScheduler:
    """Runs jobs per scope on ``workers`` daemon threads (module docstring).

    ``submit`` queues a job and returns its ``Future``; ``queued`` and ``running`` say
    what a scope has waiting and under way (the status route shows both); ``idle_for``
    how long no job has run or waited (idle maintenance waits for it). ``stop``
    cancels what has not started and waits for the running jobs; a job asked to stop
    is the job's business (``should_stop`` callbacks). Threads start with the first job.
    """

    def __init__(self, workers: int = DEFAULT_INDEX_WORKERS, *, name: str = "kb-index") -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
        self._workers = workers
        self._name = name
        self._agent_cap = max(1, workers - 1)
        self._changed = threading.Condition()
        self._queues: dict[KnowledgeScope, deque[_Job]] = {}
        self._running: set[KnowledgeScope] = set()
        self._agent_running: defaultdict[str, int] = defaultdict(int)
        self._agent_served: defaultdict[str, int] = defaultdict(int)
        self._numbers = itertools.count()
        self._picks = itertools.count(1)
        self._threads: list[threading.Thread] = []
        self._stopped = False
        self._last_end = time.monotonic()

    @property
    def workers(self) -> int:
        return self._workers

    def submit(self, scope: KnowledgeScope, run: Callable[[], Any]) -> Future[Any]:
        """Queue ``run`` behind the scope's earlier jobs; its ``Future`` holds what it
        returns or raises. Refused (``RuntimeError``) once stopped."""
        job = _Job(next(self._numbers), run)
        with self._changed:
            if self._stopped:
                raise RuntimeError("the scheduler is stopped")
            self._queues.setdefault(scope, deque()).append(job)
            self._start_threads()
            self._changed.notify()
        return job.future

    def queued(self, scope: KnowledgeScope) -> int:
        """Jobs of ``scope`` waiting to start."""
        with self._changed:
            return len(self._queues.get(scope, ()))

    def running(self, scope: KnowledgeScope) -> bool:
        """Whether a job of ``scope`` is under way."""
        with self._changed:
            return scope in self._running

    def idle_for(self) -> float:
        """Seconds since the last job ended (or since the scheduler was made), ``0.0``
        while a job runs or waits."""
        with self._changed:
            if self._running or any(self._queues.values()):
                return 0.0
            return time.monotonic() - self._last_end

    def stop(self, timeout: float | None = 10.0) -> None:
        """Cancel the jobs not started, wait for the running ones; idempotent."""
        with self._changed:
            self._stopped = True
            for queue in self._queues.values():
                for job in queue:
                    job.future.cancel()
            self._queues.clear()
            self._changed.notify_all()
            threads, self._threads = self._threads, []
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(timeout)

    # --- the workers ---------------------------------------------------------------------

    def _start_threads(self) -> None:
        while len(self._threads) < self._workers:
            thread = threading.Thread(
                target=self._work, name=f"{self._name}-{len(self._threads) + 1}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _work(self) -> None:
        while True:
            with self._changed:
                picked = self._pick()
                while picked is None:
                    if self._stopped:
                        return
                    self._changed.wait()
                    picked = self._pick()
                scope, job = picked
            if job.future.set_running_or_notify_cancel():
                try:
                    job.future.set_result(job.run())
                except BaseException as exc:  # handed to whoever waits on the future
                    job.future.set_exception(exc)
            with self._changed:
                self._running.discard(scope)
                self._agent_running[scope.agent] -= 1
                self._last_end = time.monotonic()
                self._changed.notify_all()

    def _pick(self) -> tuple[KnowledgeScope, _Job] | None:
        """The next job (module docstring), marked running; ``None`` if none may start.
        Called with the condition held."""
        if self._stopped:
            return None
        ready = [
            scope
            for scope, queue in self._queues.items()
            if queue
            and scope not in self._running
            and self._agent_running[scope.agent] < self._agent_cap
        ]
        if not ready:
            return None
        scope = min(
            ready,
            key=lambda s: (
                self._agent_running[s.agent],
                self._agent_served[s.agent],
                self._queues[s][0].number,
            ),
        )
        queue = self._queues[scope]
        job = queue.popleft()
        if not queue:
            del self._queues[scope]
        self._running.add(scope)
        self._agent_running[scope.agent] += 1
        self._agent_served[scope.agent] = next(self._picks)
        return scope, job
