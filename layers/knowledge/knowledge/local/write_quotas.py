"""``kb serve``'s write counts: one process, so an in-process counter is the shared one.

The server answers each request on its own thread, so a window's count is read, decided
and added under one lock (``knowledge.service.write_quotas.WindowCounter``): two writes of
one agent arriving together can never both take the window's last place. Only the
current window of each agent is kept; an agent's older window is dropped when it writes
again, and all of them once more than ``PRUNE_AT`` agents are held.
"""

from __future__ import annotations

import threading

from knowledge.service.write_quotas import (
    DEFAULT_WRITE_LIMITS,
    Clock,
    WindowUsage,
    WriteLimits,
    WriteQuota,
    refused_by,
)

__all__ = ["PRUNE_AT", "InProcessCounter", "local_write_quota"]

PRUNE_AT = 4096
"""Agents held before the windows that have ended are dropped."""


class InProcessCounter:
    """A ``WindowCounter`` in this process's memory, safe across threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._windows: dict[str, tuple[int, WindowUsage]] = {}

    def add(self, agent: str, window: int, size: int, limits: WriteLimits) -> WindowUsage | None:
        with self._lock:
            held = self._windows.get(agent)
            usage = held[1] if held is not None and held[0] == window else WindowUsage()
            if refused_by(usage, size, limits) is not None:
                return usage
            if held is None and len(self._windows) >= PRUNE_AT:
                self._windows = {a: h for a, h in self._windows.items() if h[0] >= window}
            self._windows[agent] = (window, WindowUsage(usage.requests + 1, usage.bytes + size))
            return None


def local_write_quota(
    limits: WriteLimits = DEFAULT_WRITE_LIMITS, *, clock: Clock | None = None
) -> WriteQuota:
    """The quota of a ``kb serve``: ``limits`` counted in this process."""
    return WriteQuota(limits, InProcessCounter(), clock=clock)
