"""``kb serve``: the HTTP API on localhost over a folder laid out like the bucket.

On start the server binds its port (failing fast if it is taken), indexes every valid
scope under ``ROOT/<agent>/<context>/`` (invalid folder names are logged with the
reason), then starts a ``BucketWatcher`` that applies later changes like S3 events
would, and serves every request through ``KnowledgeApi.handle``: the same code the
Lambda search function runs. Stdlib only (``http.server.ThreadingHTTPServer``).

The server never closes the store: whoever opened it does (the CLI, a test).
"""

from __future__ import annotations

import logging
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from knowledge.api import MAX_BODY_BYTES, ApiResponse, KnowledgeApi, error_response
from knowledge.errors import ConfigurationError, NotFoundError, ValidationError
from knowledge.local.playground import Asset, playground_asset
from knowledge.local.watcher import BucketWatcher, take_snapshot
from knowledge.model import IndexOptions, IndexResult, SearchMode
from knowledge.scope import KnowledgeScope
from knowledge.sources.local import BucketFolderSource
from knowledge.store import KnowledgeStore

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "LocalServer", "serve_until_stopped"]

logger = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
_JSON = "application/json; charset=utf-8"


class _ApiHttpServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        api: KnowledgeApi,
        scopes: Callable[[], Iterable[KnowledgeScope]] = tuple,
    ) -> None:
        self.api = api
        self.scopes = scopes
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _ApiRequestHandler)


class _ApiRequestHandler(BaseHTTPRequestHandler):
    server: _ApiHttpServer
    protocol_version = "HTTP/1.1"
    server_version = "kb-local"
    timeout = 30  # an idle keep-alive connection does not hold a thread forever

    def do_GET(self) -> None:
        asset = playground_asset(self.path, self.server.scopes)
        if asset is not None:
            self._send_asset(asset)
            return
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def _handle(self) -> None:
        started = time.perf_counter()
        try:
            response = self._respond()
        except Exception as exc:  # never let a trace reach the client
            response = error_response(exc)
        try:
            self._send(response)
        except (BrokenPipeError, ConnectionResetError):
            # The client went away; socketserver would print a traceback for this.
            self.close_connection = True
        logger.info(
            "%s %s %d %.1fms",
            self.command,
            self.path,
            response.status,
            (time.perf_counter() - started) * 1000.0,
        )

    def _respond(self) -> ApiResponse:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            return ApiResponse(
                HTTPStatus.LENGTH_REQUIRED,
                {"error": "chunked bodies are not supported; send Content-Length", "field": "body"},
            )
        raw_length = self.headers.get("Content-Length", "0").strip() or "0"
        if not (raw_length.isascii() and raw_length.isdigit()):
            self.close_connection = True
            return error_response(ValidationError("body", f"bad Content-Length '{raw_length}'"))
        length = int(raw_length)
        if length > MAX_BODY_BYTES:
            # Not read: closing the connection discards it.
            self.close_connection = True
            return error_response(
                ValidationError("body", f"must be at most {MAX_BODY_BYTES} bytes, got {length}")
            )
        body = self.rfile.read(length) if length else b""
        return self.server.api.handle(self.command, self.path, body or None)

    def _send(self, response: ApiResponse) -> None:
        payload = response.to_json()
        self.send_response(response.status)
        self.send_header("Content-Type", _JSON)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in response.headers.items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)

    def _send_asset(self, asset: Asset) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", asset.content_type)
        self.send_header("Content-Length", str(len(asset.body)))
        self.send_header("Cache-Control", "no-store")
        # The page runs only its own script and talks only to this server.
        self.send_header(
            "Content-Security-Policy",
            "default-src 'self'; script-src 'self'; style-src 'self'; frame-ancestors 'none'",
        )
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(asset.body)

    def log_message(self, format: str, *args: Any) -> None:
        # One line per request is logged by _handle; this only carries protocol errors.
        logger.debug("%s - %s", self.address_string(), format % args)


class LocalServer:
    """The local stack: initial indexing, a folder watcher and the HTTP API.

    ``start`` returns once the port is bound, every scope is indexed and requests
    are served on a background thread; ``url`` then says where (``port=0`` picks a
    free port). ``stop`` is idempotent and leaves the store open.
    """

    def __init__(
        self,
        root: str | Path,
        store: KnowledgeStore,
        *,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        poll_interval: float = 1.0,
        options: IndexOptions | None = None,
        default_mode: SearchMode | None = None,
    ) -> None:
        self._root = Path(root)
        if not self._root.is_dir():
            raise ConfigurationError(f"the folder to serve does not exist: {self._root}")
        self._store = store
        self._host = host
        self._port = port
        self._poll_interval = poll_interval
        self._options = options or IndexOptions()
        self._source = BucketFolderSource(self._root)
        self._write_lock = threading.Lock()
        self.api = KnowledgeApi(store, reindex=self._reindex_scope, default_mode=default_mode)
        self._http: _ApiHttpServer | None = None
        self._http_thread: threading.Thread | None = None
        self._watcher: BucketWatcher | None = None

    @property
    def root(self) -> Path:
        return self._root

    @property
    def watcher(self) -> BucketWatcher | None:
        return self._watcher

    @property
    def url(self) -> str:
        """``http://host:port`` of the bound socket; only valid after ``start``."""
        if self._http is None:
            raise RuntimeError("the server is not started")
        host, port = self._http.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}"

    def scopes(self) -> list[KnowledgeScope]:
        """The valid scopes under the root (what the playground page offers)."""
        return list(self._source.iter_scopes())

    def index_all(self) -> dict[KnowledgeScope, IndexResult]:
        """Bring every valid scope under the root in line with its folder."""
        results: dict[KnowledgeScope, IndexResult] = {}
        scopes = self._source.iter_scopes()
        for scope in scopes:
            with self._write_lock:
                result = self._store.index(scope, self._source, self._options)
            results[scope] = result
            logger.info(
                "indexed %s: %d documents (%d chunks), %d unchanged or skipped, "
                "%d deleted, %d errors",
                scope,
                result.indexed_documents,
                result.indexed_chunks,
                result.skipped_documents,
                result.deleted_documents,
                len(result.errors),
            )
            for problem in result.errors:
                logger.warning("not indexed %s/%s: %s", scope, problem.path, problem.reason)
        for problem in [*scopes.skipped, *scopes.errors]:
            logger.warning("ignored %s: %s", problem.path, problem.reason)
        return results

    def start(self) -> None:
        """Bind, index every scope, start the watcher and serve in the background."""
        if self._http is not None:
            raise RuntimeError("the server is already started")
        try:
            self._http = _ApiHttpServer((self._host, self._port), self.api, self.scopes)
        except OSError as exc:
            raise ConfigurationError(
                f"cannot listen on {self._host}:{self._port}: {exc.strerror or str(exc)}"
            ) from exc
        try:
            # Taken before indexing: whatever changes meanwhile shows up in the first poll.
            baseline = take_snapshot(self._root)
            self.index_all()
            self._watcher = BucketWatcher(
                self._root,
                self._store,
                self._source,
                options=self._options,
                poll_interval=self._poll_interval,
                baseline=baseline,
                write_lock=self._write_lock,
            )
            self._watcher.start()
            self._http_thread = threading.Thread(
                target=self._http.serve_forever,
                kwargs={"poll_interval": 0.2},
                name="kb-http",
                daemon=True,
            )
            self._http_thread.start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop serving and watching; idempotent. The store stays open."""
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        http, self._http = self._http, None
        if http is not None:
            if self._http_thread is not None:
                http.shutdown()
                self._http_thread.join(10.0)
                self._http_thread = None
            http.server_close()

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _reindex_scope(self, scope: KnowledgeScope) -> IndexResult:
        folder = self._root / scope.agent / scope.context
        if not folder.is_dir():
            raise NotFoundError(f"no folder for scope {scope} under {self._root}")
        with self._write_lock:
            return self._store.reindex(scope, self._source, self._options)


def serve_until_stopped(server: LocalServer, *, out: TextIO | None = None) -> int:
    """Start ``server``, print its URL, block until Ctrl-C or SIGTERM, then stop it.

    Returns the process exit code (0 on a requested stop).
    """
    stream = out or sys.stdout
    stop_requested = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop_requested.set()

    # Ctrl-C during the initial indexing is a plain KeyboardInterrupt; the handlers
    # that turn signals into a graceful stop are installed once serving has begun.
    previous: dict[signal.Signals, Any] = {}
    try:
        server.start()
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                previous[signum] = signal.signal(signum, request_stop)
        print(f"Serving {server.root} on {server.url} (Ctrl-C to stop)", file=stream, flush=True)
        # A timeout on wait() lets the main thread run signal handlers promptly.
        while not stop_requested.wait(0.5):
            pass
        print("Stopping...", file=stream, flush=True)
        return 0
    finally:
        server.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
