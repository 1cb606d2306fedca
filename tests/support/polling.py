"""Waiting for something another thread or process does (a server that polls its bucket,
an indexer behind a queue): ``wait_until`` checks a condition every 50 ms and fails the
test, naming what it waited for, after ``WAIT_SECONDS`` (room for a loaded machine)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

WAIT_SECONDS = 30.0


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    pytest.fail(f"not within {WAIT_SECONDS} s: {what}")
