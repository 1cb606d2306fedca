"""What the tests' loopback fakes share: a request handler with JSON answers and no
request log, and ``serving``, which runs a server on a thread for a ``with`` block."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any


@contextmanager
def serving(server: HTTPServer) -> Iterator[str]:
    """Serve ``server`` on a thread for the block; yields ``http://127.0.0.1:<port>``.
    It polls for the stop every 10 ms, so the block's end returns promptly."""
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class JsonHandler(BaseHTTPRequestHandler):
    """A handler whose ``send_json`` writes one JSON answer with its length (a ``HEAD``
    answer: the headers only); quiet."""

    def send_json(
        self, status: int, payload: Any, headers: Mapping[str, str] | None = None
    ) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:
        pass
