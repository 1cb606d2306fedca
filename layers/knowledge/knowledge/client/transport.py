"""How ``KnowledgeClient`` talks HTTP: one request, retried, its answer checked.

``Transport.call`` sends a request (``urllib``, no pooled connection), retries HTTP 429
and 5xx and connection errors with exponential backoff (``Retry-After`` honoured,
capped), except a 5xx whose body says ``"retryable": false``; ``checked`` turns a final
status into the error the module ``knowledge.client`` documents.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from knowledge.client.auth import Auth
from knowledge.client.errors import AccessDeniedError, ApiError, ServiceUnavailableError
from knowledge.core.errors import (
    NotFoundError,
    TooLargeError,
    ValidationError,
)
from knowledge.core.retry_after import retry_after_seconds

__all__ = ["RETRY_STATUSES", "USER_AGENT", "Reply", "Transport", "checked"]

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
USER_AGENT = "knowledge-search-client/1"


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer: its status, its JSON body and the request id the server sent."""

    status: int
    body: dict[str, Any]
    request_id: str | None


class Transport:
    """Requests to one base URL with ``auth``, ``timeout``, ``retries`` and backoff."""

    def __init__(
        self,
        base: str,
        auth: Auth | None,
        *,
        timeout: float,
        retries: int,
        backoff: float,
        max_backoff: float,
    ) -> None:
        self._base = base
        self._auth = auth
        self._timeout = timeout
        self._retries = retries
        self._backoff = backoff
        self._max_backoff = max_backoff

    def call(
        self,
        method: str,
        path: str,
        payload: Mapping[str, Any] | None = None,
        *,
        data: bytes | None = None,
        content_type: str = "application/json",
    ) -> Reply:
        url = self._base + path
        body = (
            data if data is not None else b"" if payload is None else json.dumps(payload).encode()
        )
        attempt = 0
        while True:
            try:
                reply = self._send(method, url, body, content_type)
            except _TransientError as exc:
                if attempt >= self._retries:
                    raise ServiceUnavailableError(
                        f"{method} {path}: the API did not answer after {attempt + 1} "
                        f"attempt(s): {exc.reason}",
                        exc.status,
                    ) from None
                time.sleep(self._delay(attempt, exc.retry_after))
                attempt += 1
                continue
            return checked(method, path, reply)

    def _send(
        self, method: str, url: str, body: bytes, content_type: str = "application/json"
    ) -> Reply:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if body:
            headers["Content-Type"] = content_type
        if self._auth is not None:
            self._auth.apply(method, url, headers, body)
        request = urllib.request.Request(  # noqa: S310 - the scheme is checked in __init__
            url, data=body if body else None, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:  # noqa: S310
                return Reply(response.status, _json(response.read()), _request_id(response))
        except urllib.error.HTTPError as error:
            with error:
                raw = error.read()
                request_id = _request_id(error)
            if error.code in RETRY_STATUSES and _json(raw).get("retryable") is not False:
                raise _TransientError(
                    f"HTTP {error.code}{_detail(_json(raw), request_id)}",
                    error.code,
                    retry_after_seconds(error.headers.get("Retry-After")),
                ) from None
            return Reply(error.code, _json(raw), request_id)
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            reason = getattr(exc, "reason", exc)
            raise _TransientError(str(reason) or type(exc).__name__, None, None) from None

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        delay: float = self._backoff * (2**attempt)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, self._max_backoff)


class _TransientError(Exception):
    def __init__(self, reason: str, status: int | None, retry_after: float | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.retry_after = retry_after


def _json(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw.decode("utf-8")) if raw else {}
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {"error": "the server answered with a body that is not JSON"}
    return data if isinstance(data, dict) else {"value": data}


def _request_id(response: Any) -> str | None:
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name in ("x-amzn-requestid", "apigw-requestid", "x-request-id"):
        value = headers.get(name)
        if value:
            return str(value)
    return None


def _detail(body: Mapping[str, Any], request_id: str | None) -> str:
    message = body.get("error") or body.get("message")
    text = f": {message}" if message else ""
    if request_id is None and isinstance(body.get("request_id"), str):
        request_id = body["request_id"]
    return text + (f" (request id {request_id})" if request_id else "")


def checked(method: str, path: str, reply: Reply) -> Reply:
    if 200 <= reply.status < 300:
        return reply
    body = reply.body
    message = str(body.get("error") or body.get("message") or f"HTTP {reply.status}")
    detail = _detail(body, reply.request_id)
    if reply.status in (400, 413):
        field_name = body.get("field")
        error = TooLargeError if reply.status == 413 else ValidationError
        raise error(field_name if isinstance(field_name, str) else "request", message)
    if reply.status in (401, 403):
        raise AccessDeniedError(reply.status, f"{method} {path}: access denied{detail}")
    if reply.status == 404:
        raise NotFoundError(f"{method} {path}: not found{detail}")
    if reply.status in RETRY_STATUSES:  # a 5xx the server says retrying cannot cure
        raise ServiceUnavailableError(f"{method} {path}: HTTP {reply.status}{detail}", reply.status)
    raise ApiError(reply.status, f"{method} {path}: HTTP {reply.status}{detail}")
