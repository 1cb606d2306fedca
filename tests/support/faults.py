"""A fault-injecting HTTP proxy on loopback, in front of the real OpenSearch node.

Production conditions the node never shows on its own, reproduced at the wire (the
code under test is never patched):

- ``delay``: every request waits so long before it is forwarded;
- ``pause()`` / ``resume()``: requests matching ``pause_when`` (default: all) wait at
  the proxy until resumed (a slow or frozen container, a network stall);
- ``hang``: requests are never forwarded and never answered (a hung node); the
  connection is closed when the proxy stops;
- ``drop``: the connection is closed without an answer;
- ``throttle_bulk``: ``_bulk`` items whose action or source matches the predicate are
  not forwarded and are answered ``429 es_rejected_execution_exception``, as a node
  with a full write queue does, every time they are sent.

``requests`` logs ``(method, path)`` of every request seen, ``bulk_bodies`` the body
of every ``_bulk``, ``search_bodies`` the body of every ``_search`` and ``_msearch``.
Use it as a context manager::

    with FaultProxy(opensearch_url) as proxy:
        store = OpenSearchKnowledgeStore(OpenSearchConfig(url=proxy.url, ...))
        proxy.throttle_bulk = lambda meta, source: source.get("record") == "chunk"
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

__all__ = ["FaultProxy"]

BulkPredicate = Callable[[dict[str, Any], dict[str, Any] | None], bool]
RequestPredicate = Callable[[str, str, bytes], bool]


class FaultProxy:
    """An HTTP/1.1 proxy to ``target`` (``http://host:port``) on 127.0.0.1."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.delay = 0.0
        self.hang = False
        self.drop = False
        self.throttle_bulk: BulkPredicate | None = None
        self.pause_when: RequestPredicate | None = None
        self.requests: list[tuple[str, str]] = []
        self.bulk_bodies: list[bytes] = []
        self.search_bodies: list[bytes] = []
        self.throttled_items = 0
        self._open = threading.Event()
        self._open.set()
        self._paused_count = 0
        self._paused_changed = threading.Condition()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                proxy._forward(self, body)

            do_GET = _handle
            do_POST = _handle
            do_PUT = _handle
            do_DELETE = _handle
            do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._open.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- faults ----------------------------------------------------------------------------

    def pause(self, when: RequestPredicate | None = None) -> None:
        """Hold requests (matching ``when``, default all) until ``resume``."""
        self.pause_when = when
        self._open.clear()

    def resume(self) -> None:
        self._open.set()

    def wait_paused(self, count: int = 1, timeout: float = 30.0) -> bool:
        """Wait until ``count`` requests are held at the proxy."""
        with self._paused_changed:
            return self._paused_changed.wait_for(lambda: self._paused_count >= count, timeout)

    # --- the proxy -------------------------------------------------------------------------

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        method, path = handler.command, handler.path
        with self._lock:
            self.requests.append((method, path))
            if path.split("?")[0].endswith("/_bulk"):
                self.bulk_bodies.append(body)
            if path.split("?")[0].endswith(("/_search", "/_msearch")):
                self.search_bodies.append(body)
        if self.hang:
            self._stopping.wait()
            handler.close_connection = True
            return
        if self.drop:
            handler.close_connection = True
            return
        if self.delay:
            self._stopping.wait(self.delay)
        if not self._open.is_set() and (
            self.pause_when is None or self.pause_when(method, path, body)
        ):
            with self._paused_changed:
                self._paused_count += 1
                self._paused_changed.notify_all()
            self._open.wait()
            with self._paused_changed:
                self._paused_count -= 1
        throttled: list[int] = []
        total = 0
        if self.throttle_bulk is not None and path.split("?")[0].endswith("/_bulk"):
            body, throttled, total = self._split_bulk(body, self.throttle_bulk)
        if total and len(throttled) == total:
            status, headers, answer = 200, {"content-type": "application/json"}, b""
            answer = json.dumps({"took": 1, "errors": True, "items": []}).encode()
        else:
            status, headers, answer = self._send(method, path, body, handler.headers)
        if throttled:
            answer = self._merge_throttled(answer, throttled, total)
            with self._lock:
                self.throttled_items += len(throttled)
        handler.send_response(status)
        handler.send_header("Content-Type", headers.get("content-type", "application/json"))
        handler.send_header("Content-Length", str(len(answer)))
        handler.end_headers()
        handler.wfile.write(answer)

    def _send(
        self, method: str, path: str, body: bytes, headers: Any
    ) -> tuple[int, dict[str, str], bytes]:
        connection = http.client.HTTPConnection(*self._target, timeout=120)
        try:
            send_headers = {
                "Content-Type": headers.get("Content-Type", "application/json"),
                "Content-Length": str(len(body)),
            }
            connection.request(method, path, body=body or None, headers=send_headers)
            response = connection.getresponse()
            data = response.read()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, data
        finally:
            connection.close()

    @staticmethod
    def _split_bulk(body: bytes, throttle: BulkPredicate) -> tuple[bytes, list[int], int]:
        """The bulk body without the throttled items, their positions, and the item count."""
        lines = [line for line in body.decode("utf-8").split("\n") if line.strip()]
        kept: list[str] = []
        throttled: list[int] = []
        position = i = 0
        while i < len(lines):
            meta = json.loads(lines[i])
            op = next(iter(meta))
            has_source = op in ("index", "create", "update")
            source = json.loads(lines[i + 1]) if has_source else None
            item_lines = lines[i : i + (2 if has_source else 1)]
            if throttle(meta, source):
                throttled.append(position)
            else:
                kept.extend(item_lines)
            i += len(item_lines)
            position += 1
        return ("\n".join(kept) + "\n").encode("utf-8") if kept else b"", throttled, position

    @staticmethod
    def _merge_throttled(answer: bytes, throttled: list[int], total: int) -> bytes:
        response = json.loads(answer or b"{}")
        forwarded = iter(response.get("items", []))
        items = []
        for position in range(total):
            if position in throttled:
                items.append(
                    {
                        "index": {
                            "status": 429,
                            "error": {
                                "type": "es_rejected_execution_exception",
                                "reason": "rejected execution (queue full) [fault proxy]",
                            },
                        }
                    }
                )
            else:
                items.append(next(forwarded))
        response["items"] = items
        response["errors"] = True
        return json.dumps(response).encode("utf-8")
