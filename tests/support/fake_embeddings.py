"""A fake embedding service on 127.0.0.1 for tests and ``bench/runs/embedding_pool.py``.

It speaks both wire protocols the providers use, so the real SDKs talk to it:

- Bedrock ``InvokeModel`` (``POST /model/<model id>/invoke``, one ``inputText``), as
  ``boto3.client("bedrock-runtime", endpoint_url=server.url)`` sends it;
- OpenAI embeddings (``POST .../embeddings``, ``input`` a list), as
  ``openai.OpenAI(base_url=server.url + "/v1")`` sends it.

Each request sleeps ``latency_per_call + latency_per_text * texts`` seconds, and that is
all the wait a client sees: the answer's socket has ``TCP_NODELAY``, as a real endpoint
sends its answer at once (without it the body, written after the headers, waits for the
client's delayed ACK, about 40 ms a call on Linux loopback; ``delayed_body=True`` keeps
that, as the fake answered before). With
``rate_per_second`` set, a token bucket (``burst`` deep) answers requests over the rate
with 429 and ``Retry-After: <retry_after>`` (none if it is empty; Bedrock:
``ThrottlingException``), and so does a request that arrives with ``max_in_flight``
others in flight (a provider's concurrency quota, as Titan's);
``throttle_requests`` answers those request numbers (0-based, in arrival order) with a
429 whatever the rate, and ``reset_requests`` resets their connection (TCP RST, no
answer); texts in ``reject_texts`` get a 400 and texts in ``error_texts`` a
503 (every time). ``vectors(text, dimensions)`` makes a text's vector (default
``vector_for``; a test returns NaN or a wrong size there), and ``openai_data``, if set,
rewrites the OpenAI answer's ``data`` list (drop, duplicate or renumber items). Every
request is recorded (``Call``: arrival and end on ``time.monotonic()``, texts, status),
and the most requests in flight at once is kept, so a test can check what a client did
from the server's side. ``on_arrival(number, texts)``, if set, runs in the request's thread as it
arrives (before any answer): a test holds requests there (a ``threading.Barrier``, an
``Event``) to pin down what is in flight instead of relying on timing. Vectors are
``vector_for(text, dimensions)``: deterministic, the first component tells the text
apart, so order and loss are checkable.
"""

from __future__ import annotations

import hashlib
import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from json_http import JsonHandler, serving

RESET = 0
"""``Call.status`` of a request whose connection the fake reset."""

__all__ = [
    "RESET",
    "Call",
    "FakeEmbeddingServer",
    "Profile",
    "bedrock_runtime",
    "fake_embedding_server",
    "openai_sdk",
    "vector_for",
]


def bedrock_runtime(server: FakeEmbeddingServer, *, timeout: float, connections: int = 32) -> Any:
    """A real ``boto3`` ``bedrock-runtime`` client on ``server``, bounded like the product's
    own clients: one attempt (the product retries), ``connections`` pooled, and ``timeout``
    seconds to connect and read, so a call left in flight when a test ends (a batch that
    failed early) ends by itself instead of holding the process's exit."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=server.url,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(
            retries={"total_max_attempts": 1},
            max_pool_connections=connections,
            connect_timeout=timeout,
            read_timeout=timeout,
        ),
    )


def openai_sdk(server: FakeEmbeddingServer, *, timeout: float) -> Any:
    """A real ``openai.OpenAI`` client on ``server``: no retries of its own, ``timeout``
    seconds a call (bounded as ``bedrock_runtime``)."""
    import openai

    return openai.OpenAI(
        base_url=server.url + "/v1", api_key="test", max_retries=0, timeout=timeout
    )


def vector_for(text: str, dimensions: int) -> list[float]:
    """The fake's vector of ``text``: first component from a hash of the text, then a
    constant tail (cheap to make and to compare)."""
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    marker = int.from_bytes(digest, "big") / 2.0**64
    return [marker] + [0.5] * (dimensions - 1)


@dataclass
class Profile:
    """How the fake behaves (module docstring)."""

    latency_per_call: float = 0.0
    latency_per_text: float = 0.0
    dimensions: int = 256
    rate_per_second: float | None = None
    burst: int = 1
    retry_after: str = "1"
    throttle_requests: frozenset[int] = frozenset()
    max_in_flight: int | None = None
    reset_requests: frozenset[int] = frozenset()
    reject_texts: frozenset[str] = frozenset()
    error_texts: frozenset[str] = frozenset()
    vectors: Callable[[str, int], list[float]] = vector_for
    openai_data: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None
    on_arrival: Callable[[int, list[str]], None] | None = None
    delayed_body: bool = False


@dataclass(frozen=True)
class Call:
    started: float
    ended: float
    texts: int
    status: int


@dataclass
class FakeEmbeddingServer:
    profile: Profile
    url: str = ""
    calls: list[Call] = field(default_factory=list)
    max_in_flight: int = 0
    _in_flight: int = 0
    _arrivals: int = 0
    _tokens: float = 0.0
    _refilled: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        with self._lock:
            self.calls = []
            self.max_in_flight = self._in_flight = self._arrivals = 0
            self._tokens, self._refilled = float(self.profile.burst), time.monotonic()

    @property
    def texts_embedded(self) -> int:
        with self._lock:
            return sum(call.texts for call in self.calls if call.status == 200)

    @property
    def arrivals(self) -> int:
        """Requests that reached the server so far (answered or not)."""
        with self._lock:
            return self._arrivals

    @property
    def in_flight(self) -> int:
        """Requests arrived and not answered yet."""
        with self._lock:
            return self._in_flight

    @property
    def throttled(self) -> int:
        with self._lock:
            return sum(1 for call in self.calls if call.status == 429)

    def _admit(self) -> tuple[int, bool]:
        """This request's number, and whether it may go through (rate, script)."""
        with self._lock:
            number = self._arrivals
            self._arrivals += 1
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            if number in self.profile.throttle_requests:
                return number, False
            cap = self.profile.max_in_flight
            if cap is not None and self._in_flight > cap:
                return number, False
            rate = self.profile.rate_per_second
            if rate is None:
                return number, True
            now = time.monotonic()
            self._tokens = min(
                float(self.profile.burst), self._tokens + (now - self._refilled) * rate
            )
            self._refilled = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return number, True
            return number, False

    def _done(self, started: float, texts: int, status: int) -> None:
        with self._lock:
            self._in_flight -= 1
            self.calls.append(Call(started, time.monotonic(), texts, status))

    def handle(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
        started = time.monotonic()
        bedrock = path.startswith("/model/")
        texts = [body.get("inputText", "")] if bedrock else list(body.get("input", []))
        number, allowed = self._admit()
        status, headers, payload = 200, {}, None
        try:
            if self.profile.on_arrival is not None:
                self.profile.on_arrival(number, texts)
            if number in self.profile.reset_requests:
                status = RESET
                return status, headers, payload
            if not allowed:
                status = 429
                if self.profile.retry_after:
                    headers = {"Retry-After": self.profile.retry_after}
                if bedrock:
                    headers["x-amzn-ErrorType"] = "ThrottlingException"
                    payload = {"message": "Too many requests, please wait before trying again."}
                else:
                    payload = {"error": {"message": "Rate limit reached", "type": "requests"}}
                return status, headers, payload
            time.sleep(self.profile.latency_per_call + self.profile.latency_per_text * len(texts))
            if any(text in self.profile.reject_texts for text in texts):
                status = 400
                if bedrock:
                    headers = {"x-amzn-ErrorType": "ValidationException"}
                    payload = {"message": "Malformed input request"}
                else:
                    payload = {"error": {"message": "bad input", "type": "invalid_request"}}
                return status, headers, payload
            if any(text in self.profile.error_texts for text in texts):
                status = 503
                if bedrock:
                    headers = {"x-amzn-ErrorType": "ServiceUnavailableException"}
                    payload = {"message": "Service unavailable"}
                else:
                    payload = {"error": {"message": "overloaded", "type": "server_error"}}
                return status, headers, payload
            size = int(body.get("dimensions") or self.profile.dimensions)
            if bedrock:
                payload = {
                    "embedding": self.profile.vectors(texts[0], size),
                    "inputTextTokenCount": len(texts[0].split()),
                }
            else:
                data = [
                    {
                        "object": "embedding",
                        "index": i,
                        "embedding": self.profile.vectors(text, size),
                    }
                    for i, text in enumerate(texts)
                ]
                if self.profile.openai_data is not None:
                    data = self.profile.openai_data(data)
                tokens = sum(len(text.split()) for text in texts)
                payload = {
                    "object": "list",
                    "data": data,
                    "model": body.get("model", "fake"),
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                }
            return status, headers, payload
        finally:
            self._done(started, len(texts), status)


def _handler(fake: FakeEmbeddingServer) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the SDKs reuse their connections

        def setup(self) -> None:
            super().setup()
            if not fake.profile.delayed_body:  # the body goes out with the headers
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            status, headers, payload = fake.handle(self.path, body)
            if status == RESET:  # drop the connection mid-request: linger 0 sends a RST
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.close_connection = True
                return
            self.send_json(status, payload, headers)

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # many clients connect at once


@contextmanager
def fake_embedding_server(profile: Profile) -> Iterator[FakeEmbeddingServer]:
    """Serve ``profile`` on 127.0.0.1 (an ephemeral port) for the ``with`` block."""
    fake = FakeEmbeddingServer(profile)
    fake.reset()
    with serving(_Server(("127.0.0.1", 0), _handler(fake))) as fake.url:
        yield fake
