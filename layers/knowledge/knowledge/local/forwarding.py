"""The private channel from ``kb serve``'s worker processes to its primary process.

A worker answers the read-only routes itself; every other request (writes, status with
the start-up index's progress, reindex, repositories) needs the primary's state, so the
worker, once its HTTP layer has checked and read the request (the same checks as the
primary's: ``knowledge.local.http_handler``), sends it here unchanged: the method, the
raw path, the ``Content-Type`` and the body. The primary answers it with
``KnowledgeApi.handle``, as if it had come in on the port, and sends back the status,
the extra headers and the JSON body, which the worker writes out as its own answer.

The primary listens on a Unix socket in a folder only its user can enter (``mkdtemp``),
never on the network. Messages are ``multiprocessing.connection`` frames (a length,
then the bytes): no pickling, only JSON and the body's bytes. A worker keeps its
connections open for the next forwarded request; a primary that is gone (stopping) is a
503 the worker answers itself, naming no socket.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socketserver
import tempfile
import threading
from dataclasses import dataclass
from multiprocessing.connection import Client, Connection
from pathlib import Path
from typing import Any

from knowledge.local.http_handler import HttpApi, encoded
from knowledge.service.responses import ApiResponse, error_body

__all__ = ["ForwardServer", "Forwarder", "remove_abandoned"]

logger = logging.getLogger("knowledge.local.server")

_UNAVAILABLE = "the server's primary process is not answering (is the server stopping?); try again"


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    path: str
    content_type: str | None
    body: bytes | None


def _send_request(conn: Connection, request: _Request) -> None:
    head = {
        "method": request.method,
        "path": request.path,
        "content_type": request.content_type,
        "has_body": request.body is not None,
    }
    conn.send_bytes(json.dumps(head).encode("utf-8"))
    conn.send_bytes(request.body or b"")


def _receive_request(conn: Connection) -> _Request:
    head: dict[str, Any] = json.loads(conn.recv_bytes())
    body = conn.recv_bytes()
    return _Request(
        str(head["method"]),
        str(head["path"]),
        head.get("content_type"),
        body if head.get("has_body") else None,
    )


class _Connection(socketserver.BaseRequestHandler):
    """One worker's connection: its forwarded requests, one after the other."""

    server: _UnixServer

    def handle(self) -> None:
        conn = Connection(os.dup(self.request.fileno()))
        try:
            while True:
                try:
                    request = _receive_request(conn)
                except (EOFError, OSError):
                    return  # the worker closed it (or stopped)
                response = self.server.api.handle(
                    request.method, request.path, request.body, content_type=request.content_type
                )
                response, payload = encoded(response)
                head = {"status": response.status, "headers": dict(response.headers)}
                try:
                    conn.send_bytes(json.dumps(head).encode("utf-8"))
                    conn.send_bytes(payload)
                except OSError:
                    return
        finally:
            conn.close()


class _UnixServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, path: str, api: HttpApi) -> None:
        self.api = api
        super().__init__(path, _Connection)


_FOLDER_PREFIX = "kb-serve-"


def remove_abandoned(address: str) -> None:
    """Remove the folder of the forwarding socket at ``address`` (a ``ForwardServer``'s),
    left behind by a primary that was killed before it could; nothing else is removed."""
    folder = Path(address).parent
    if folder.name.startswith(_FOLDER_PREFIX):
        shutil.rmtree(folder, ignore_errors=True)


class ForwardServer:
    """The primary's end: answers forwarded requests with ``api.handle`` on a Unix socket
    of its own (``address``) until ``close``."""

    def __init__(self, api: HttpApi) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix=_FOLDER_PREFIX))  # mode 0700
        self.address = str(self._folder / "primary.sock")
        self._server = _UnixServer(self.address, api)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="kb-forward",
            daemon=True,
        )
        self._thread.start()

    def close(self) -> None:
        """Stop answering and remove the socket; idempotent."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(10.0)
        self._server.server_close()
        shutil.rmtree(self._folder, ignore_errors=True)


class Forwarder:
    """A worker's end: sends a request to the primary and returns its answer, over a pool
    of kept connections (one per concurrent forward)."""

    def __init__(self, address: str) -> None:
        self._address = address
        self._idle: list[Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def forward(
        self, method: str, path: str, body: bytes | None, content_type: str | None
    ) -> ApiResponse:
        """The primary's answer to the request; a 503 when it cannot be reached."""
        try:
            conn = self._borrow()
        except OSError as exc:
            logger.warning("cannot reach the primary process: %s", exc)
            return error_body(503, _UNAVAILABLE)
        try:
            _send_request(conn, _Request(method, path, content_type, body))
            head: dict[str, Any] = json.loads(conn.recv_bytes())
            payload = conn.recv_bytes()
        except (EOFError, OSError) as exc:
            # Not sent again: the primary may have acted on it (a write) before it went away.
            conn.close()
            logger.warning("the primary process did not answer %s %s: %s", method, path, exc)
            return error_body(503, _UNAVAILABLE)
        self._give_back(conn)
        return ApiResponse(int(head["status"]), json.loads(payload), dict(head["headers"]))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _borrow(self) -> Connection:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return Client(self._address, family="AF_UNIX")

    def _give_back(self, conn: Connection) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(conn)
                return
        conn.close()
