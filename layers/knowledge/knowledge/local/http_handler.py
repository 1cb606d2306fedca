"""The HTTP layer of ``kb serve``: stdlib ``http.server`` in front of ``KnowledgeApi.handle``.

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
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import time
from collections.abc import Callable, Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import urlsplit

from knowledge.core.errors import TooLargeError, ValidationError
from knowledge.core.loopback import is_loopback_host
from knowledge.core.scope import KnowledgeScope
from knowledge.local.playground import Asset, playground_asset
from knowledge.service.api import (
    MAX_BODY_BYTES,
    ApiResponse,
    error_response,
)

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "LISTEN_BACKLOG",
    "ApiHttpServer",
    "HttpApi",
    "encoded",
    "printable",
]

logger = logging.getLogger("knowledge.local.server")  # the name operators filter on

LISTEN_BACKLOG = 512
"""Connections the kernel queues before the server accepts them (the stdlib default is 5:
a burst of 64 clients saw resets)."""
DEFAULT_BODY_TIMEOUT = 5.0
"""Seconds a request body may take to arrive once its headers are in."""
_JSON = "application/json; charset=utf-8"


class HttpApi(Protocol):
    """What the HTTP layer calls: ``KnowledgeApi``, or a worker process's router
    (``knowledge.local.worker``) that answers the read-only routes itself and forwards
    the others to the primary process."""

    @property
    def writes_enabled(self) -> bool: ...

    @property
    def max_put_bytes(self) -> int | None: ...

    def handle(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        content_type: str | None = None,
    ) -> ApiResponse: ...


class ApiHttpServer(ThreadingHTTPServer):
    """The HTTP server of ``kb serve``: binds ``address``, or serves on ``listening``, a
    socket another process bound and listens on (a worker process's, inherited from the
    primary: every process accepts on the same port)."""

    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self,
        address: tuple[str, int],
        api: HttpApi,
        body_timeout: float = 5.0,
        scopes: Callable[[], Iterable[KnowledgeScope]] = tuple,
        *,
        listening: socket.socket | None = None,
    ) -> None:
        self.api = api
        self.body_timeout = body_timeout
        self.scopes = scopes
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _ApiRequestHandler, bind_and_activate=listening is None)
        if listening is not None:
            self.socket.close()  # the one TCPServer made, never bound
            self.socket = listening
            self.server_address = listening.getsockname()
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
    server: ApiHttpServer
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
        logger.info("%s %d", printable(self.requestline), refusal.status)
        return False

    def do_GET(self) -> None:
        try:
            asset = playground_asset(
                self.path, self.server.scopes, writes=self.server.api.writes_enabled
            )
        except Exception as exc:  # the scope list reads the folder: answer, never hang up
            with contextlib.suppress(OSError):  # the client went away
                self._send(error_response(exc))
            return
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
        logger.info("%s %d", printable(getattr(self, "requestline", "")), code)

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
            printable(self.command),
            printable(self.path),
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
        # A document write (--allow-writes) takes a file, up to what the indexer indexes
        # (KnowledgeApi.max_put_bytes); every other body is a small JSON.
        document_limit = self.server.api.max_put_bytes if self.command == "PUT" else None
        limit = MAX_BODY_BYTES if document_limit is None else document_limit
        if length > limit:
            # Not read: closing the connection discards it.
            self.close_connection = True
            too_large = TooLargeError if document_limit is not None else ValidationError
            return error_response(too_large("body", f"must be at most {limit} bytes, got {length}"))
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
        response, payload = encoded(response)
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


def encoded(response: ApiResponse) -> tuple[ApiResponse, bytes]:
    """``response`` and its JSON body; a 400 instead when its text is no Unicode (a lone
    surrogate escape such as \\ud800 in the query decodes as JSON but cannot be written
    back as UTF-8)."""
    try:
        return response, response.to_json()
    except UnicodeEncodeError:
        refusal = _error_body(
            HTTPStatus.BAD_REQUEST,
            "the body holds text that is not valid Unicode (a lone surrogate escape?)",
            "body",
        )
        return refusal, refusal.to_json()


def printable(text: str) -> str:
    return json.dumps(text, ensure_ascii=True)[1:-1] if not text.isprintable() else text
