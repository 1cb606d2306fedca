"""One API Gateway HTTP API request (payload format 2.0) through an ASGI application.

The remote MCP endpoint (``knowledge.aws.mcp_endpoint``) serves the MCP SDK's streamable
HTTP transport, an ASGI application, from a Lambda function. This module is the whole
adapter: ``asgi_scope`` turns the event into the ASGI HTTP scope, ``call_asgi`` feeds the
body to the application once and gathers what it sends into the proxy response API
Gateway expects (``statusCode``, ``headers``, ``body``, ``isBase64Encoded``).

A small adapter of our own rather than Mangum: Mangum is well kept, but what it adds
(many event sources, lifespan cycles, binary media types, compression) is not needed
here, and every MCP request needs a server of its own (the scope comes from the URL, the
tools from the caller's grant), so there is no long-lived application whose lifespan an
adapter could manage. This is one function the endpoint awaits inside its own event loop,
with the transport's session manager started and stopped around it.

Guarantees:

- the scope is what an ASGI server would give for the request: method, ``rawPath`` as
  ``path`` and ``raw_path`` (not decoded: the route checks the literal segments),
  ``rawQueryString``, lower-cased headers (API Gateway joins repeated ones with commas;
  its ``cookies`` list becomes one ``cookie`` header), ``https`` on the API's domain;
- the body is sent once, base64-decoded when the event says so; after it, ``receive``
  waits until the response is complete and then reports the disconnect, as a server does
  when the client goes away after its answer;
- the response body is text when it is UTF-8 (JSON-RPC always is), otherwise base64;
  repeated response headers are joined with commas, ``set-cookie`` goes to ``cookies``.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import anyio

__all__ = ["AsgiApp", "AsgiResponse", "asgi_scope", "call_asgi", "event_body"]

Message = MutableMapping[str, Any]
AsgiApp = Callable[
    [
        MutableMapping[str, Any],
        Callable[[], Awaitable[Message]],
        Callable[[Message], Awaitable[None]],
    ],
    Awaitable[None],
]


def event_body(event: Mapping[str, Any]) -> bytes:
    """The request body as bytes (``ValueError`` for base64 that does not decode)."""
    body = event.get("body")
    if not body:
        return b""
    if event.get("isBase64Encoded"):
        return base64.b64decode(str(body).encode("ascii"), validate=True)
    return str(body).encode("utf-8")


def asgi_scope(event: Mapping[str, Any]) -> dict[str, Any]:
    """The ASGI HTTP scope of an HTTP API (2.0) event (module docstring)."""
    context = event.get("requestContext") or {}
    http = context.get("http") or {}
    path = str(event.get("rawPath") or http.get("path") or "/")
    headers = [
        (str(name).lower().encode("latin-1"), str(value).encode("latin-1"))
        for name, value in (event.get("headers") or {}).items()
        if value is not None
    ]
    cookies = event.get("cookies")
    if cookies:
        headers.append((b"cookie", "; ".join(cookies).encode("latin-1")))
    domain = str(context.get("domainName") or "localhost")
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": str(http.get("method") or "GET").upper(),
        "scheme": "https",
        "path": path,
        "raw_path": path.encode("latin-1", errors="replace"),
        "query_string": str(event.get("rawQueryString") or "").encode("latin-1"),
        "root_path": "",
        "headers": headers,
        "server": (domain, 443),
        "client": (str(http.get("sourceIp") or "0.0.0.0"), 0),  # noqa: S104 - a peer, not a bind
    }


@dataclass
class AsgiResponse:
    """What the application sent: status, headers (in order, repeats kept) and body."""

    status: int = 500
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    complete: bool = False

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        return next((value for key, value in self.headers if key == wanted), None)

    def to_proxy(self) -> dict[str, Any]:
        """The API Gateway (2.0) proxy response."""
        headers: dict[str, str] = {}
        cookies: list[str] = []
        for name, value in self.headers:
            if name == "set-cookie":
                cookies.append(value)
            elif name in headers:
                headers[name] = f"{headers[name]}, {value}"
            else:
                headers[name] = value
        try:
            body, encoded = self.body.decode("utf-8"), False
        except UnicodeDecodeError:
            body, encoded = base64.b64encode(self.body).decode("ascii"), True
        proxy: dict[str, Any] = {
            "statusCode": self.status,
            "headers": headers,
            "body": body,
            "isBase64Encoded": encoded,
        }
        if cookies:
            proxy["cookies"] = cookies
        return proxy


async def call_asgi(app: AsgiApp, scope: MutableMapping[str, Any], body: bytes) -> AsgiResponse:
    """Run ``app`` for one request whose body is ``body``; what it answered."""
    response = AsgiResponse()
    answered = anyio.Event()
    sent_body = False

    async def receive() -> Message:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            response.status = int(message["status"])
            response.headers = [
                (bytes(name).decode("latin-1").lower(), bytes(value).decode("latin-1"))
                for name, value in message.get("headers") or ()
            ]
        elif message["type"] == "http.response.body":
            response.body += bytes(message.get("body") or b"")
            if not message.get("more_body", False):
                response.complete = True
                answered.set()

    try:
        await app(scope, receive, send)
    finally:
        answered.set()
    return response
