"""``kb serve``: the HTTP API on localhost over a folder laid out like the bucket.

On start the server binds its port (failing fast if it is taken) and serves at once;
the start-up index runs on a background thread: every valid scope under
``ROOT/<agent>/<context>/`` and every scope the store already holds (a scope whose
folder vanished while the server was down is emptied). Meanwhile the status route says
``INDEXING`` with ``progress`` (documents done / total) for each scope not yet done, and
searches see what is committed. Then a ``BucketWatcher`` applies later changes like S3
events would. A start-up index that fails on the configuration (the store refuses every
write: an index built with vectors opened without an embedder, say) starts no watcher
that would fail every file every poll: ``startup_error`` holds the reason, every status
says ``ERROR`` with it, and ``kb serve`` exits with it. Every request goes through
``KnowledgeApi.handle``: the same code the Lambda search function runs. Stdlib only
(``http.server.ThreadingHTTPServer``).

The HTTP layer answers *every* request in the API's JSON error shape, also those the
standard library would answer in HTML or not at all: an unknown method (405 with
``Allow`` on a known path), a malformed request line, oversized headers, a body framed
twice (``Content-Length`` values that differ: 400; any ``Transfer-Encoding``: 411), a body
shorter than its ``Content-Length`` (408 after ``body_timeout`` seconds), a body whose text
cannot be encoded back (a lone surrogate escape). A request path sent as raw UTF-8
(not percent-encoded) is read as UTF-8, not as the standard library's Latin-1.
Accepted sockets get ``TCP_NODELAY`` (a keep-alive response is not held back by
Nagle's algorithm) and the listen backlog is large enough for a burst of clients.

**Other sites' pages.** A server bound to a loopback address answers only requests
addressed to a loopback name (``Host``: ``127.0.0.1``, ``localhost``, ``[::1]``, any
port; no ``Host`` at all is accepted) and none that a page of another site sent
(an ``Origin`` header that is not a loopback ``http(s)`` origin): else any web page the
user opens could read every scope by DNS rebinding (a name of the attacker's that
resolves to 127.0.0.1; the browser then sends that name as ``Host``) or start
reindexes. The first is a 421, the second a 403, both before any route runs (the
playground page's own requests carry its loopback origin). A server bound to another
address (``--host 0.0.0.0``) was opened to the network on purpose and checks neither.

The server never closes the store: whoever opened it does (the CLI, a test).
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any, TextIO
from urllib.parse import urlsplit

from knowledge.core.errors import (
    ConfigurationError,
    InvalidScopeError,
    NotFoundError,
    ValidationError,
)
from knowledge.core.loopback import is_loopback_host
from knowledge.core.model import (
    IndexOptions,
    IndexResult,
    IndexState,
    IndexStatus,
    SearchMode,
)
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.pipeline import index_source, reindex_source
from knowledge.ingest.sources.local import SYMLINK_OUTSIDE_SCOPE, BucketFolderSource
from knowledge.local.playground import Asset, playground_asset
from knowledge.local.progress import IndexingProgress, ProgressBar
from knowledge.local.watcher import BucketWatcher, IndexingStopped, check_poll_interval
from knowledge.reranking import RerankingStage
from knowledge.search.shared import SharedGrants
from knowledge.service.api import (
    MAX_BODY_BYTES,
    MAX_DOCUMENT_BYTES,
    ApiResponse,
    KnowledgeApi,
    error_response,
)
from knowledge.stores.protocol import KnowledgeStore, ScopeSources

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "LISTEN_BACKLOG",
    "LocalServer",
    "serve_until_stopped",
]

logger = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
LISTEN_BACKLOG = 512
"""Connections the kernel queues before the server accepts them (the stdlib default is 5:
a burst of 64 clients saw resets)."""
DEFAULT_BODY_TIMEOUT = 5.0
"""Seconds a request body may take to arrive once its headers are in."""
_JSON = "application/json; charset=utf-8"


class _ApiHttpServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self,
        address: tuple[str, int],
        api: KnowledgeApi,
        body_timeout: float = 5.0,
        scopes: Callable[[], Iterable[KnowledgeScope]] = tuple,
    ) -> None:
        self.api = api
        self.body_timeout = body_timeout
        self.scopes = scopes
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _ApiRequestHandler)
        self.loopback = is_loopback_host(str(self.server_address[0]))


def _host_name(header: str) -> str | None:
    """The name of a ``Host`` header value (``name``, ``name:port``, ``[v6]:port``)."""
    try:
        return urlsplit(f"//{header.strip()}").hostname
    except ValueError:  # a bad port or bracket
        return None


def _foreign_request(headers: Any) -> ApiResponse | None:
    """The refusal of a request a loopback server must not answer (module docstring),
    else ``None``."""
    host = headers.get("Host")
    if host is not None:
        name = _host_name(host)
        if name is None or not is_loopback_host(name):
            return _error_body(
                HTTPStatus.MISDIRECTED_REQUEST,
                "this server answers only requests addressed to 127.0.0.1, localhost or "
                "[::1] (a page of another site cannot read the local index)",
                "Host",
            )
    origin = headers.get("Origin")
    if origin is not None:
        try:
            parts = urlsplit(origin.strip())
            allowed = parts.scheme in ("http", "https") and is_loopback_host(parts.hostname or "")
        except ValueError:
            allowed = False
        if not allowed:
            return _error_body(
                HTTPStatus.FORBIDDEN,
                "requests from pages of other sites are refused (the Origin is not a "
                "loopback address)",
                "Origin",
            )
    return None


def _error_body(status: int, message: str, field: str | None = None) -> ApiResponse:
    return ApiResponse(status, {"error": message, "field": field})


class _ApiRequestHandler(BaseHTTPRequestHandler):
    server: _ApiHttpServer
    protocol_version = "HTTP/1.1"
    server_version = "kb-local"
    timeout = 30  # an idle keep-alive connection does not hold a thread forever
    disable_nagle_algorithm = True  # TCP_NODELAY: no ~40 ms stall per keep-alive response

    def parse_request(self) -> bool:
        """The standard library's parsing, then the refusal of a request addressed to
        another name or sent by another site's page (a loopback server only)."""
        if not super().parse_request():
            return False
        refusal = _foreign_request(self.headers) if self.server.loopback else None
        if refusal is None:
            return True
        self.close_connection = True
        with contextlib.suppress(OSError):  # the client went away
            self._send(refusal)
        logger.info("%s %d", _printable(self.requestline), refusal.status)
        return False

    def do_GET(self) -> None:
        asset = playground_asset(
            self.path, self.server.scopes, writes=self.server.api.writes_enabled
        )
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

    def do_HEAD(self) -> None:
        self._handle()

    def do_OPTIONS(self) -> None:
        self._handle()

    def do_TRACE(self) -> None:
        self._handle()

    def do_CONNECT(self) -> None:
        self._handle()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Every error the standard library raises itself, in the API's JSON shape."""
        if self.request_version == "HTTP/0.9":
            self.request_version = "HTTP/1.1"  # 0.9 has no status line; answer as 1.1
        if code == HTTPStatus.NOT_IMPLEMENTED and getattr(self, "command", None):
            # A method with no do_ handler: the API says 405 (with Allow) or 404.
            self._handle()
            return
        self.close_connection = True
        reason = message or HTTPStatus(code).phrase
        text = {
            HTTPStatus.BAD_REQUEST: f"malformed request: {reason}",
            HTTPStatus.REQUEST_URI_TOO_LONG: "the request line is too long",
            HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE: f"request headers too large: {reason}",
        }.get(HTTPStatus(code), reason)
        field = "headers" if code == HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE else None
        response = _error_body(code, text, field)
        with contextlib.suppress(OSError):  # the client went away
            self._send(response)
        logger.info("%s %d", _printable(getattr(self, "requestline", "")), code)

    def _handle(self) -> None:
        started = time.perf_counter()
        try:
            response = self._respond()
        except Exception as exc:  # never let a trace reach the client
            response = error_response(exc)
        try:
            self._send(response)
        except OSError:  # BrokenPipe, ConnectionReset, a timeout: the client went away
            self.close_connection = True
        logger.info(
            "%s %s %d %.1fms",
            _printable(self.command),
            _printable(self.path),
            response.status,
            (time.perf_counter() - started) * 1000.0,
        )

    def _respond(self) -> ApiResponse:
        encodings = self.headers.get_all("Transfer-Encoding") or []
        if encodings:
            # Any of them (chunked, gzip...): its framing would override Content-Length.
            self.close_connection = True
            shown = ", ".join(encodings)[:80]
            return ApiResponse(
                HTTPStatus.LENGTH_REQUIRED,
                {
                    "error": f"Transfer-Encoding '{shown}' is not supported; send Content-Length",
                    "field": "body",
                },
            )
        lengths = {value.strip() for value in self.headers.get_all("Content-Length") or []}
        if len(lengths) > 1:
            # Two framings: a proxy in front may read the other one (request smuggling).
            self.close_connection = True
            return error_response(
                ValidationError("body", "more than one Content-Length, with different values")
            )
        raw_length = self.headers.get("Content-Length", "0").strip() or "0"
        if not (raw_length.isascii() and raw_length.isdigit()):
            self.close_connection = True
            return error_response(ValidationError("body", f"bad Content-Length '{raw_length}'"))
        length = int(raw_length)
        # A document write (--allow-writes) takes a file; every other body is a small JSON.
        limit = (
            MAX_DOCUMENT_BYTES
            if self.command == "PUT" and self.server.api.writes_enabled
            else MAX_BODY_BYTES
        )
        if length > limit:
            # Not read: closing the connection discards it.
            self.close_connection = True
            return error_response(
                ValidationError("body", f"must be at most {limit} bytes, got {length}")
            )
        body = self._read_body(length) if length else b""
        if isinstance(body, ApiResponse):
            return body
        return self.server.api.handle(
            self.command,
            self._target(),
            body or None,
            content_type=self.headers.get("Content-Type"),
        )

    def _target(self) -> str:
        """The request path as the client meant it. The standard library decodes the
        request line as Latin-1; a client that sends raw UTF-8 (``/documents/배포.md``,
        not percent-encoded) means UTF-8, and other non-ASCII bytes are a 400."""
        raw = self.path.encode("latin-1")
        if raw.isascii():
            return self.path
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ValidationError(
                "path", "the request path is not UTF-8 (percent-encode it as UTF-8)"
            ) from None

    def _read_body(self, length: int) -> bytes | ApiResponse:
        """``length`` bytes, or a 408/400 when they do not all arrive in time: within
        ``body_timeout`` seconds in all (a socket timeout alone bounds only the wait for
        the next bytes, so a body trickled in a byte at a time never timed out)."""
        deadline = time.monotonic() + self.server.body_timeout
        parts: list[bytes] = []
        received = 0
        try:
            while received < length:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self.connection.settimeout(left)
                part = self.rfile.read1(length - received)
                if not part:  # the client closed its side
                    break
                parts.append(part)
                received += len(part)
            body = b"".join(parts)
        except TimeoutError:
            self.close_connection = True
            return _error_body(
                HTTPStatus.REQUEST_TIMEOUT,
                f"the body did not arrive within {self.server.body_timeout:g} s "
                f"(Content-Length says {length} bytes)",
                "body",
            )
        finally:
            self.connection.settimeout(self.timeout)
        if len(body) < length:
            self.close_connection = True
            return _error_body(
                HTTPStatus.BAD_REQUEST,
                f"the body ended after {len(body)} of the {length} bytes Content-Length says",
                "body",
            )
        return body

    def _send(self, response: ApiResponse) -> None:
        try:
            payload = response.to_json()
        except UnicodeEncodeError:
            # Text that is no Unicode (a lone surrogate escape such as \ud800 in the query)
            # decodes as JSON but cannot be written back as UTF-8.
            response = _error_body(
                HTTPStatus.BAD_REQUEST,
                "the body holds text that is not valid Unicode (a lone surrogate escape?)",
                "body",
            )
            payload = response.to_json()
        self.send_response(response.status)
        self.send_header("Content-Type", _JSON)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in response.headers.items():
            self.send_header(name, value)
        if getattr(self, "command", None) == "HEAD":
            self.close_connection = True  # no body follows: do not reuse the connection
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if getattr(self, "command", None) != "HEAD":
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


def _folder_storage(root: Path) -> Any:
    from knowledge.local.writes import FolderStorage

    return FolderStorage(root)


def _printable(text: str) -> str:
    return json.dumps(text, ensure_ascii=True)[1:-1] if not text.isprintable() else text


class LocalServer:
    """The local stack: the HTTP API, a start-up index in the background, a folder watcher.

    Requests are served from the moment the port is bound (``port=0`` picks a free
    port; ``url`` says which); the start-up index and then the watcher run on a
    background thread. ``start`` waits for that index unless ``wait=False``
    (``wait_until_ready`` waits later; ``progress`` counts it). ``reranking`` reranks
    every search's top candidates (``knowledge.reranking``). ``stop`` is idempotent,
    abandons an unfinished start-up index (the scope being written keeps what it had)
    and leaves the store open.
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
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
        reranking: RerankingStage | None = None,
        allow_writes: bool = False,
        shared_grants: SharedGrants | None = None,
        repo_sync_interval: float | None = None,
    ) -> None:
        self._root = Path(root)
        self._source_name = f"kb serve {self._root.resolve()}"
        if not self._root.is_dir():
            raise ConfigurationError(f"the folder to serve does not exist: {self._root}")
        check_poll_interval(poll_interval)
        if body_timeout <= 0:
            raise ValueError(f"body_timeout must be positive, got {body_timeout}")
        self._store = store
        self._host = host
        self._port = port
        self._poll_interval = poll_interval
        self._options = options or IndexOptions()
        self._body_timeout = body_timeout
        self._source = BucketFolderSource(self._root)
        self._write_lock = threading.Lock()
        self.progress = IndexingProgress()
        # Git repository sources (knowledge.ingest.repos.local): synced into the folder, indexed.
        from knowledge.ingest.repos.local import LocalRepos, RepoScheduler

        self.repos = LocalRepos(self._root, self._index_synced_scope)
        self._repo_scheduler = (
            None if repo_sync_interval is None else RepoScheduler(self.repos, repo_sync_interval)
        )
        self.api = KnowledgeApi(
            store,
            reindex=self._reindex_scope,
            default_mode=default_mode,
            status=self._status,  # INDEXING while the start-up index runs
            reranking=reranking,
            writes=_folder_storage(self._root) if allow_writes else None,
            shared=shared_grants,
            repos=self.repos.service,
        )
        self._http: _ApiHttpServer | None = None
        self._http_thread: threading.Thread | None = None
        self._startup_thread: threading.Thread | None = None
        self._watcher: BucketWatcher | None = None
        self._lifecycle = threading.Lock()
        self._stopping = threading.Event()
        self._ready = threading.Event()
        self._startup_error: ConfigurationError | None = None

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

    @property
    def ready(self) -> bool:
        """True once the start-up index is done and the watcher runs."""
        return self._ready.is_set()

    @property
    def startup_error(self) -> ConfigurationError | None:
        """Why the start-up index could never write (the store refuses every write, e.g.
        an index built with vectors opened without an embedder), else ``None``. Then
        nothing is indexed or watched, and every status says ``ERROR`` with the reason."""
        return self._startup_error

    def wait_until_ready(self, timeout: float | None = None) -> bool:
        """Wait for the start-up index; ``False`` if ``timeout`` passed first, the server
        was stopped before it finished, or it failed (``startup_error``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._ready.wait(0.1):
            if self._stopping.is_set() or self._startup_error is not None:
                return False
            if deadline is not None and time.monotonic() >= deadline:
                return False
        return True

    def scopes(self) -> list[KnowledgeScope]:
        """The valid scopes under the root (what the playground page offers)."""
        return list(self._source.iter_scopes())

    def scopes_to_sync(self) -> list[KnowledgeScope]:
        """The folder's scopes, the store's scopes (an orphan is emptied), and scope
        folders that are links (indexed empty, so their status says why), sorted."""
        listing = self._source.iter_scopes()
        scopes = set(listing)
        for problem in [*listing.skipped, *listing.errors]:
            logger.warning("ignored %s: %s", problem.path, problem.reason)
            if problem.reason == SYMLINK_OUTSIDE_SCOPE and problem.path.count("/") == 1:
                agent, context = problem.path.split("/")
                with contextlib.suppress(InvalidScopeError):
                    scopes.add(KnowledgeScope(agent, context))
        try:
            indexed = self._store.list_scopes()
        except Exception as exc:  # the backend is down: index what the folder has
            logger.warning("cannot list the indexed scopes: %s", exc)
            indexed = []
        for scope in indexed:
            if scope in scopes:
                continue
            elsewhere = self._indexed_elsewhere(scope)
            if elsewhere is None:
                scopes.add(scope)  # its folder is gone: emptied by the start-up index
            else:
                logger.info("left %s as it is: indexed by %s, not from here", scope, elsewhere)
        return sorted(scopes, key=lambda scope: (scope.agent, scope.context))

    @property
    def source_name(self) -> str:
        """What this server records as the source of the scopes it indexes
        (``knowledge.stores.protocol.ScopeSources``): its root, resolved once when it was made."""
        return self._source_name

    def _indexed_elsewhere(self, scope: KnowledgeScope) -> str | None:
        """The recorded source of ``scope`` when it is not this server (``kb index`` into
        the same file, say), else ``None``."""
        if not isinstance(self._store, ScopeSources):
            return None
        try:
            source = self._store.scope_source(scope)
        except Exception as exc:
            logger.warning("cannot read where %s was indexed from: %s", scope, exc)
            return None
        return None if source is None or source == self.source_name else source

    def _claim(self, scopes: list[KnowledgeScope]) -> None:
        """Record this server as the source of the scopes it is about to index."""
        if not isinstance(self._store, ScopeSources):
            return
        for scope in scopes:
            try:
                self._store.set_scope_source(scope, self.source_name)
            except Exception as exc:
                logger.warning("cannot record where %s is indexed from: %s", scope, exc)

    def start(self, *, wait: bool = True) -> None:
        """Bind and serve in the background; the start-up index runs on its own thread.

        Requests are answered from the moment the port is bound. ``wait`` (the default,
        for code that searches right after starting) returns once the start-up index is
        done; ``kb serve`` passes ``wait=False`` and shows the progress instead.
        """
        self._start()
        if wait:
            self.wait_until_ready()

    def _start(self) -> None:
        with self._lifecycle:
            if self._http is not None:
                raise RuntimeError("the server is already started")
            try:
                self._http = _ApiHttpServer(
                    (self._host, self._port), self.api, self._body_timeout, self.scopes
                )
            except (OSError, OverflowError) as exc:  # OverflowError: a port over 65535
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise ConfigurationError(
                    f"cannot listen on {self._host}:{self._port}: {reason}"
                ) from exc
            self._stopping.clear()
            self._http_thread = threading.Thread(
                target=self._http.serve_forever,
                kwargs={"poll_interval": 0.2},
                name="kb-http",
                daemon=True,
            )
            self._http_thread.start()
            self.progress.prepare()  # a status asked from now on says the index is under way
            self._startup_thread = threading.Thread(
                target=self._start_up, name="kb-startup", daemon=True
            )
            self._startup_thread.start()

    def _start_up(self) -> None:
        watcher = BucketWatcher(
            self._root,
            self._store,
            self._source,
            options=self._options,
            poll_interval=self._poll_interval,
            baseline={},  # until synchronize succeeds, the first poll looks at everything
            write_lock=self._write_lock,
        )
        started = time.monotonic()
        try:
            scopes = self.scopes_to_sync()
            self._claim(scopes)
            results = watcher.synchronize(
                scopes, progress=self.progress, should_stop=self._stopping.is_set
            )
            documents = sum(r.indexed_documents + r.skipped_documents for r in results.values())
            logger.info(
                "start-up index done: %d scopes, %d documents in %.1f s",
                len(results),
                documents,
                time.monotonic() - started,
            )
        except IndexingStopped:
            return
        except ConfigurationError as exc:  # no retry can succeed: say so, watch nothing
            logger.error("the start-up index failed: %s", exc)
            self._startup_error = exc
            return
        except Exception as exc:
            logger.exception(
                "the start-up index failed (%s); the watcher retries every scope",
                str(exc) or type(exc).__name__,
            )
        finally:
            self.progress.end()  # idempotent; also when the run failed before listing
        with self._lifecycle:
            if self._stopping.is_set():
                return
            self._watcher = watcher
            watcher.start()
            if self._repo_scheduler is not None:
                self._repo_scheduler.start()
        self._ready.set()

    def stop(self) -> None:
        """Stop serving, indexing and watching; idempotent. The store stays open."""
        self._stopping.set()
        with self._lifecycle:
            watcher, self._watcher = self._watcher, None
            startup, self._startup_thread = self._startup_thread, None
            http, self._http = self._http, None
            http_thread, self._http_thread = self._http_thread, None
        if watcher is not None:
            watcher.stop()
        if self._repo_scheduler is not None:
            self._repo_scheduler.stop()
        if startup is not None:
            startup.join(30.0)
        if http is not None:
            if http_thread is not None:
                http.shutdown()
                http_thread.join(10.0)
            http.server_close()

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _status(self, scope: KnowledgeScope, status: IndexStatus) -> IndexStatus:
        if self._startup_error is not None:
            return replace(
                status,
                state=IndexState.ERROR,
                message=f"the start-up index failed: {self._startup_error}",
                progress=None,
            )
        return self.progress.status(scope, status)

    def _index_synced_scope(self, scope: KnowledgeScope) -> IndexResult:
        """Index a scope a repository sync just wrote (the watcher would, a poll later)."""
        with self._write_lock:
            return index_source(self._store, scope, self._source, self._options)

    def _reindex_scope(self, scope: KnowledgeScope) -> IndexResult:
        """Reindex from the folder; a scope whose folder vanished is emptied. A scope with
        neither a folder nor indexed documents is a 404 (no server path in the message)."""
        folder = self._source.scope_folder(scope)
        if not folder.is_dir() and scope not in self._store.list_scopes():
            raise NotFoundError(f"no folder and no index for scope {scope}")
        with self._write_lock:
            return reindex_source(self._store, scope, self._source, self._options)


class _TerminalProgress:
    """The start-up index on the terminal: a ``\r`` bar on a TTY, else a line a second."""

    def __init__(self, progress: IndexingProgress, stream: TextIO) -> None:
        self._progress = progress
        self._stream = stream
        self._tty = stream.isatty()
        self._bar: ProgressBar | None = None
        self._last_line = 0.0
        self._last_done = -1
        self._finished = False

    def update(self) -> None:
        if self._finished:
            return
        counts = self._progress.overall()
        if self._progress.ended:
            if self._bar is not None:
                self._bar.finish()
            print(
                f"indexed {counts.documents_done}/{counts.documents_total} documents",
                file=self._stream,
                flush=True,
            )
            self._finished = True
            return
        if not self._progress.running:
            return
        if self._tty:
            if self._bar is None:
                self._bar = ProgressBar(counts.documents_total, self._stream, enabled=True)
            self._bar.update(counts.documents_done)
            return
        now = time.monotonic()
        if counts.documents_done != self._last_done and now - self._last_line >= 1.0:
            print(
                f"indexing {counts.documents_done}/{counts.documents_total} documents",
                file=self._stream,
                flush=True,
            )
            self._last_line, self._last_done = now, counts.documents_done


def serve_until_stopped(
    server: LocalServer, *, out: TextIO | None = None, progress_out: TextIO | None = None
) -> int:
    """Start ``server``, print its URL, show the start-up index's progress, block until
    Ctrl-C or SIGTERM, then stop it. Returns the process exit code (0 on a requested stop).

    The signal handlers only record the signal (no lock, no I/O: a second signal that
    lands while the first is handled can never deadlock); the main loop polls the record.
    """
    stream = out or sys.stdout
    requested: list[int] = []

    def request_stop(signum: int, frame: FrameType | None) -> None:
        requested.append(signum)  # one C-level append: safe at any point of the main thread

    previous: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, request_stop)
    terminal = _TerminalProgress(server.progress, progress_out or sys.stderr)
    try:
        server.start(wait=False)
        print(f"Serving {server.root} on {server.url} (Ctrl-C to stop)", file=stream, flush=True)
        while not requested:
            terminal.update()
            if server.startup_error is not None:
                raise server.startup_error  # kb: error: <the reason>, exit code 2
            time.sleep(0.1)  # a signal cuts the sleep short (PEP 475 then resumes it)
        print("Stopping...", file=stream, flush=True)
        return 0
    finally:
        server.stop()
        terminal.update()  # the start-up index has ended by now: its last line, once
        for signum, handler in previous.items():
            signal.signal(signum, handler)
