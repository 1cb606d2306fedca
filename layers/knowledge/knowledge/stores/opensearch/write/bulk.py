"""Bulk sending: serialized actions out as ``_bulk`` requests, answers back per action.

- ``serialize`` turns an ``opensearchpy.helpers``-style action into its bulk lines
  (with ``if_seq_no``/``if_primary_term``/``retry_on_conflict`` kept in the meta line);
- ``send_bulk`` sends them in one request to ``/<index>/_bulk`` (retried as a whole by
  the connection on connection errors, 429 and 5xx) and sends the items the node
  throttled (429) again, with backoff, up to ``max_retries`` times; it returns one
  answer per action, in order. The index is in the path, never in the action lines;
- ``BulkSender`` runs requests in order on one background thread, so the caller
  chunks and embeds the next documents while a request is on the wire. The thread runs
  in a copy of the caller's context, so the caller's deadline (``knowledge.core.deadline``)
  bounds its requests too; throttled items are not sent again past that deadline.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from knowledge.core.deadline import current_deadline
from knowledge.core.errors import StoreError
from knowledge.stores.opensearch.client import RetryPolicy
from knowledge.stores.opensearch.connection import Connection

__all__ = ["BulkSender", "byte_length", "item_ok", "send_bulk", "serialize"]

R = TypeVar("R")

_META_KEYS = ("_id", "if_seq_no", "if_primary_term", "retry_on_conflict")
_MIN_RETRY_SECONDS = 1.0
"""Least time a resend of throttled items should have before the caller's deadline."""


def serialize(action: Mapping[str, Any], serializer: Any) -> str:
    """An action's bulk lines, newline-terminated (meta line, then the source or the
    partial update). The meta line names no index: the request's path does."""
    dumps = serializer.dumps
    meta = {key: action[key] for key in _META_KEYS if key in action}
    lines: str = dumps({action["_op_type"]: meta}) + "\n"
    if "_source" in action:
        lines += dumps(action["_source"]) + "\n"
    elif "doc" in action:
        update = {key: action[key] for key in ("doc", "upsert") if key in action}
        lines += dumps(update) + "\n"
    return lines


def byte_length(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def item_ok(info: Mapping[str, Any]) -> bool:
    status = info.get("status")
    return isinstance(status, int) and 200 <= status < 300


def send_bulk(
    connection: Connection,
    index: str,
    actions: Sequence[str],
    action: str,
    *,
    retry: RetryPolicy,
    refresh: str | None = None,
) -> list[dict[str, Any]]:
    """Send serialized actions as one request to ``/<index>/_bulk``; the items answered
    429 are sent again (backoff, up to ``retry.max_retries`` times) and then answer 429.
    Returns one answer per action, in order: the item's answer plus ``op`` (its
    operation)."""
    results: list[dict[str, Any]] = [{} for _ in actions]
    pending = list(range(len(actions)))
    attempt = 0
    deadline = current_deadline()
    while pending:
        body = "".join(actions[i] for i in pending)
        response = connection.bulk(index, body, action, refresh=refresh)
        items = response.get("items") or []
        if len(items) != len(pending):
            raise StoreError(
                f"OpenSearch at {connection.config.url} failed to {action}: _bulk answered "
                f"{len(items)} items for {len(pending)} actions"
            )
        throttled: list[int] = []
        pause = retry.delay(attempt + 1)
        # No resend that the caller's deadline would cut short (the pause and a try).
        may_retry = attempt < retry.max_retries and (
            deadline is None or deadline.remaining() > pause + _MIN_RETRY_SECONDS
        )
        for position, item in zip(pending, items, strict=True):
            op, info = next(iter(item.items()))
            if info.get("status") == 429 and may_retry:
                throttled.append(position)
            else:
                results[position] = {"op": op, **info}
        if throttled:
            attempt += 1
            retry.sleep(pause)
        pending = throttled
    return results


class BulkSender(Generic[R]):
    """Runs ``send`` on each submitted request, in order, in one background thread
    (started by the first request); ``submit`` blocks while ``depth`` requests wait. The
    first exception stops the sending: later requests are dropped and ``check``/``wait``
    raise it in the caller's thread. ``depth=0`` sends in the caller's thread instead."""

    def __init__(self, send: Callable[[R], None], depth: int) -> None:
        self._send = send
        self._depth = depth
        self._queue: queue.Queue[tuple[R] | None] = queue.Queue(maxsize=max(1, depth))
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._cancelled = False

    def submit(self, request: R) -> None:
        self.check()
        if self._depth == 0:
            self._run_one(request)
            self.check()
            return
        if self._thread is None:
            context = contextvars.copy_context()  # the caller's deadline holds there too
            self._thread = threading.Thread(
                target=context.run, args=(self._run,), name="opensearch-bulk", daemon=True
            )
            self._thread.start()
        self._queue.put((request,))

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                self._run_one(item[0])
            finally:
                self._queue.task_done()

    def _run_one(self, request: R) -> None:
        if self._error is not None or self._cancelled:
            return
        try:
            self._send(request)
        except BaseException as exc:  # handed over to the caller's thread
            self._error = exc

    def check(self) -> None:
        """Raise the sender's error, if it met one."""
        if self._error is not None:
            raise self._error

    def wait(self) -> None:
        """Return when every submitted request is done; raise the sender's error."""
        if self._thread is not None:
            self._queue.join()
        self.check()

    def cancel(self) -> None:
        """Drop the requests not sent yet."""
        self._cancelled = True

    def close(self) -> None:
        """Stop the thread after the submitted requests. Idempotent."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()
