"""knowledge.aws.asgi: one API Gateway HTTP API event through an ASGI application."""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio
import pytest
from lambda_support import api_event

from knowledge.aws.asgi import asgi_scope, call_asgi, event_body

Message = MutableMapping[str, Any]


def test_the_scope_is_the_request_as_sent() -> None:
    event = api_event("POST", "/mcp/agents/%6Fps-bot/contexts/runbooks", {"a": 1}, query="x=1")
    event["cookies"] = ["a=1", "b=2"]
    scope = asgi_scope(event)
    assert scope["method"] == "POST"
    assert scope["path"] == "/mcp/agents/%6Fps-bot/contexts/runbooks"  # never decoded
    assert scope["raw_path"] == b"/mcp/agents/%6Fps-bot/contexts/runbooks"
    assert scope["query_string"] == b"x=1"
    assert scope["scheme"] == "https"
    assert scope["server"] == ("a1b2c3d4e5.execute-api.us-east-1.amazonaws.com", 443)
    headers = dict(scope["headers"])
    assert headers[b"content-type"] == b"application/json"
    assert headers[b"cookie"] == b"a=1; b=2"
    assert all(name == name.lower() for name, _ in scope["headers"])


def test_the_body_is_decoded_when_the_gateway_encoded_it() -> None:
    event = api_event("PUT", "/x", "배포".encode())
    assert event["isBase64Encoded"] is True
    assert event_body(event) == "배포".encode()
    event["body"] = "not base64!"
    with pytest.raises(ValueError):  # noqa: PT011 - binascii.Error
        event_body(event)
    assert event_body({"body": None}) == b""


def test_the_answer_becomes_the_proxy_response() -> None:
    received: list[Message] = []

    async def app(
        scope: Any, receive: Callable[[], Awaitable[Message]], send: Callable[[Message], Any]
    ) -> None:
        received.append(await receive())
        await send(
            {
                "type": "http.response.start",
                "status": 201,
                "headers": [
                    (b"Content-Type", b"application/json"),
                    (b"vary", b"a"),
                    (b"vary", b"b"),
                    (b"set-cookie", b"s=1"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b'{"ok":', "more_body": True})
        await send({"type": "http.response.body", "body": b"true}"})
        received.append(await receive())  # after the answer: the client went away

    answer = anyio.run(call_asgi, app, {"type": "http"}, b"payload")
    assert received == [
        {"type": "http.request", "body": b"payload", "more_body": False},
        {"type": "http.disconnect"},
    ]
    assert answer.complete
    assert answer.header("content-type") == "application/json"
    assert answer.to_proxy() == {
        "statusCode": 201,
        "headers": {"content-type": "application/json", "vary": "a, b"},
        "body": '{"ok":true}',
        "isBase64Encoded": False,
        "cookies": ["s=1"],
    }


def test_a_body_that_is_not_utf8_is_sent_base64() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"\xff\x00"})

    proxy = anyio.run(call_asgi, app, {"type": "http"}, b"").to_proxy()
    assert proxy["isBase64Encoded"] is True
    assert base64.b64decode(proxy["body"]) == b"\xff\x00"
