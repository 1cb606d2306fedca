"""The primary's side of ``kb serve --workers N``: starting, watching and stopping workers.

``WorkerPool`` starts ``count`` worker processes (``knowledge.local.worker``) that accept
on the primary's listening socket (its descriptor is inherited) and forward what they do
not answer to the primary's ``ForwardServer``. Each gets its ``WorkerSetup`` on stdin,
which stays open: a worker whose stdin ends stops, so none outlives the primary, even
one killed outright. Their logs go where the primary's go (the same stderr).

A worker that exits while the pool runs is started again, and the log says so; one
that keeps exiting right after its start (its store cannot be opened, say) is given up
after ``MAX_QUICK_RESTARTS`` tries, with an error in the log: the primary goes on
serving every request itself. ``stop`` sends SIGTERM and waits, then kills what is left.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Final

import knowledge
from knowledge.local.worker import WorkerSetup

__all__ = ["MAX_QUICK_RESTARTS", "WorkerPool", "default_workers"]

logger = logging.getLogger("knowledge.local.server")

MAX_QUICK_RESTARTS: Final = 3
"""Restarts in a row of a worker that lived less than ``_QUICK_EXIT_S`` before it is given up."""
_QUICK_EXIT_S: Final = 10.0
_STOP_WAIT_S: Final = 10.0
_WATCH_EVERY_S: Final = 0.5


def default_workers() -> int:
    """The processes ``kb serve`` runs by default: one per core it may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


class _Worker:
    """One worker process, and whether it said it serves."""

    def __init__(self, setup: WorkerSetup) -> None:
        self.setup = setup
        self.started = time.monotonic()
        self.ready = threading.Event()
        package_parent = str(Path(knowledge.__file__).resolve().parent.parent)
        path = os.environ.get("PYTHONPATH")
        env = {
            **os.environ,
            "PYTHONPATH": package_parent if not path else f"{package_parent}{os.pathsep}{path}",
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "knowledge.local.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            pass_fds=(setup.listening_fd,),
            env=env,
            text=True,
        )
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        with contextlib.suppress(BrokenPipeError):  # it died at once: the pool sees it exit
            self.process.stdin.write(setup.to_json() + "\n")
            self.process.stdin.flush()  # the pipe stays open: its end tells the worker to stop
        self._reader = threading.Thread(
            target=self._read_ready, name=f"kb-worker-{setup.number}", daemon=True
        )
        self._reader.start()

    def _read_ready(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        for line in stdout:
            if line.strip() == "ready":
                self.ready.set()

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def terminate(self) -> None:
        if self.alive():
            self.process.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> None:
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(1.0)  # its stdout ends with it
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


class WorkerPool:
    """``count`` workers made from ``setup`` (``number`` 1 to ``count``), watched and
    restarted until ``stop`` (module docstring)."""

    def __init__(self, setup: WorkerSetup, count: int) -> None:
        self._setup = setup
        self._count = count
        self._workers: dict[int, _Worker] = {}
        self._quick_exits: dict[int, int] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None

    def start(self) -> None:
        with self._lock:
            for number in range(1, self._count + 1):
                self._workers[number] = _Worker(replace(self._setup, number=number))
        self._watcher = threading.Thread(target=self._watch, name="kb-workers", daemon=True)
        self._watcher.start()

    def pids(self) -> list[int]:
        """The running workers' process ids."""
        with self._lock:
            return [w.pid for w in self._workers.values() if w.alive()]

    def wait_ready(self, timeout: float) -> bool:
        """Wait until every worker serves (one started again included); ``False`` if
        ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                waiting = [w for w in self._workers.values() if not w.ready.is_set()]
            if not waiting:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            waiting[0].ready.wait(min(left, _WATCH_EVERY_S))

    def _watch(self) -> None:
        while not self._stopping.wait(_WATCH_EVERY_S):
            with self._lock:
                if self._stopping.is_set():
                    return
                for number, worker in list(self._workers.items()):
                    if worker.alive():
                        continue
                    try:
                        self._restart(number, worker)
                    except OSError as exc:  # no process could be started: try next time
                        logger.error("cannot start worker %d again: %s", number, exc)

    def _restart(self, number: int, worker: _Worker) -> None:
        code = worker.process.returncode
        worker.wait(0)
        lived = time.monotonic() - worker.started
        quick = self._quick_exits.get(number, 0) + 1 if lived < _QUICK_EXIT_S else 0
        self._quick_exits[number] = quick
        if quick > MAX_QUICK_RESTARTS:
            del self._workers[number]
            logger.error(
                "worker %d exited (code %s) %d times right after starting; not starting it "
                "again: the server goes on with %d worker(s) beside the primary process",
                number,
                code,
                quick,
                len(self._workers),
            )
            return
        logger.warning(
            "worker %d (pid %d) exited (code %s); starting it again", number, worker.pid, code
        )
        self._workers[number] = _Worker(replace(self._setup, number=number))

    def stop(self) -> None:
        """Stop every worker (SIGTERM, then a kill after ``_STOP_WAIT_S``); idempotent."""
        self._stopping.set()
        with self._lock:
            workers, self._workers = list(self._workers.values()), {}
        if self._watcher is not None:
            self._watcher.join(_STOP_WAIT_S)
        for worker in workers:
            worker.terminate()
        deadline = time.monotonic() + _STOP_WAIT_S
        for worker in workers:
            worker.wait(max(0.0, deadline - time.monotonic()))
