"""``kb serve`` finishes the store's maintenance once it has nothing else to do.

A write session's end gives back what the write freed (the embedded store's
``maintenance``: keyword merges, free pages cut off the file, the WAL cut to nothing), but
it cannot always finish: another write session was open, or a search held the WAL's frames
and the checkpoint gave up (within a second, rather than hold the writer). Until the next
large write the file then keeps its free pages, or a WAL as long as the last transaction
(hundreds of MB after a large document). ``IdleMaintenance`` runs the store's ``maintain``
when the server is idle:

* no request in flight in this process and none for ``REQUEST_QUIET_S`` (a search never
  waits for it, and a burst of requests postpones it);
* no indexing job running or queued, and none ended for ``idle_seconds`` (a watcher's
  next job is likely to follow a change at once; maintenance would only take turns with it);
* the start-up index is done, and the store says work is due (``maintenance_due``: a few
  pragmas and a ``stat``, so asking every ``check_seconds`` costs nothing).

A run takes turns as the store's own maintenance does: short transactions, stopping for a
write session that opens meanwhile, never refusing a reader. A run that could not finish is
tried again after another ``idle_seconds``. Searches answered by worker processes
(``kb serve --workers``) are not seen here; they are never held up by a run either (SQLite
readers are not blocked by a checkpoint), and one that holds the WAL makes the run retry.
A store without ``maintain`` (in memory, OpenSearch) gets no thread at all.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final, Protocol, runtime_checkable

from knowledge.local.http_handler import HttpApi
from knowledge.service.api import ApiResponse

__all__ = [
    "DEFAULT_IDLE_SECONDS",
    "REQUEST_QUIET_S",
    "IdleMaintenance",
    "MaintainedStore",
    "ObservedApi",
]

logger = logging.getLogger(__name__)

DEFAULT_IDLE_SECONDS: Final = 30.0
"""Seconds without indexing before a run (and between two runs)."""

REQUEST_QUIET_S: Final = 1.0
"""Seconds without a request before a run: long enough to fall between a client's bursts."""


@runtime_checkable
class MaintainedStore(Protocol):
    """A store that can give back what its writes left (the embedded store)."""

    def maintenance_due(self) -> bool: ...

    def maintain(self) -> object: ...


class IdleMaintenance:
    """Runs ``store.maintain()`` on its own daemon thread when the server is idle (module
    docstring). ``writes_idle_for`` says how long no indexing job has run or waited
    (``FairScheduler.idle_for``); ``ready`` whether the start-up index is done.
    ``observe`` wraps the API the HTTP server calls, so requests are counted."""

    def __init__(
        self,
        store: MaintainedStore,
        *,
        writes_idle_for: Callable[[], float],
        ready: Callable[[], bool],
        idle_seconds: float = DEFAULT_IDLE_SECONDS,
        check_seconds: float = 1.0,
    ) -> None:
        if idle_seconds <= 0 or check_seconds <= 0:
            raise ValueError("idle_seconds and check_seconds must be positive")
        self._store = store
        self._writes_idle_for = writes_idle_for
        self._ready = ready
        self._idle_seconds = idle_seconds
        self._check_seconds = check_seconds
        self._guard = threading.Lock()
        self._in_flight = 0
        self._last_request = time.monotonic()
        self._last_run = float("-inf")
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.runs = 0
        """Runs so far (what a test or the log can count)."""

    def observe(self, api: HttpApi) -> ObservedApi:
        """``api`` with every request counted as activity."""
        return ObservedApi(api, self)

    @contextmanager
    def request(self) -> Iterator[None]:
        """One request under way: no run starts until it is over and quiet."""
        with self._guard:
            self._in_flight += 1
        try:
            yield
        finally:
            with self._guard:
                self._in_flight -= 1
                self._last_request = time.monotonic()

    def idle(self) -> bool:
        """Whether a run may start now (module docstring), the store's part aside."""
        now = time.monotonic()
        with self._guard:
            if self._in_flight or now - self._last_request < REQUEST_QUIET_S:
                return False
            if now - self._last_run < self._idle_seconds:
                return False
        return self._ready() and self._writes_idle_for() >= self._idle_seconds

    def run_if_idle(self) -> bool:
        """Maintain the store when idle and work is due; whether it ran. Never raises:
        a failure is logged and tried again after another idle period."""
        if not self.idle():
            return False
        try:
            if not self._store.maintenance_due():
                return False
            with self._guard:
                self._last_run = time.monotonic()
            started = time.monotonic()
            report = self._store.maintain()
            self.runs += 1
            logger.info("idle maintenance in %.2f s: %s", time.monotonic() - started, report)
            return True
        except Exception as exc:
            with self._guard:
                self._last_run = time.monotonic()
            logger.warning("idle maintenance failed (tried again later): %s", exc)
            return False

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopping.clear()
        self._thread = threading.Thread(target=self._loop, name="kb-maintain", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop checking and wait (``timeout`` at most) for a run under way. Idempotent."""
        self._stopping.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _loop(self) -> None:
        while not self._stopping.wait(self._check_seconds):
            self.run_if_idle()


class ObservedApi:
    """The HTTP layer's API (``knowledge.local.http_handler.HttpApi``) with every request
    counted by an ``IdleMaintenance``."""

    def __init__(self, api: HttpApi, maintenance: IdleMaintenance) -> None:
        self._api = api
        self._maintenance = maintenance

    @property
    def writes_enabled(self) -> bool:
        return self._api.writes_enabled

    @property
    def max_put_bytes(self) -> int | None:
        return self._api.max_put_bytes

    def handle(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        content_type: str | None = None,
    ) -> ApiResponse:
        with self._maintenance.request():
            return self._api.handle(method, path, body, content_type=content_type)
