"""Errors and answers as HTTP shapes: ``ApiResponse`` and the one ``error_response``.

Every error becomes a response here: bad input is a 400 ``{"error", "field"}`` (a
document body over its size limit a 413); a refused caller a 403; a caller over one of
its write limits a 429 with ``Retry-After`` (``rate_limited``); a failing backend or
provider a 502/503 and an unexpected exception a 500, each with a plain message and the
request id (``{"error", "field", "request_id"}``): the details (endpoint URL, client
library messages, secret ARNs, tracebacks) go to the log under that id, never to the
caller.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from knowledge.core.errors import (
    AccessDeniedError,
    ConfigurationError,
    EmbeddingError,
    NotFoundError,
    RateLimitedError,
    StoreAccessDeniedError,
    StoreError,
    StoreUnavailableError,
    TooLargeError,
    ValidationError,
    public_message,
)

__all__ = ["ApiResponse", "error_body", "error_response", "new_request_id", "rate_limited"]

logger = logging.getLogger("knowledge.service.api")  # the name operators filter on


@dataclass(frozen=True, slots=True)
class ApiResponse:
    """A status code and a JSON object body (plus extra headers, e.g. ``Allow`` on a 405)."""

    status: int
    body: dict[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """The body as UTF-8 JSON; non-ASCII text (Korean) is kept as is, not escaped."""
        return json.dumps(self.body, ensure_ascii=False).encode("utf-8")


def error_body(status: int, message: str, field_name: str | None = None) -> ApiResponse:
    return ApiResponse(status, {"error": message, "field": field_name})


def _server_error(
    status: int, message: str, request_id: str, *, retryable: bool = True
) -> ApiResponse:
    body: dict[str, Any] = {
        "error": f"{message} (request id {request_id})",
        "field": None,
        "request_id": request_id,
    }
    if not retryable:
        # A misconfiguration (the backend refuses our role): asking again cannot cure it,
        # so clients that retry 5xx (KnowledgeClient) stop at once and show the advice.
        body["retryable"] = False
    return ApiResponse(status, body)


def rate_limited(exc: RateLimitedError) -> ApiResponse:
    """A 429: the usual ``{"error", "field"}`` with the limit's name (``limit``), its
    setting (``limit_value``) and ``retry_after`` (whole seconds), the same seconds in the
    ``Retry-After`` header that clients honour, and ``retryable: false`` when waiting
    alone cannot help (``RateLimitedError``)."""
    body: dict[str, Any] = {
        "error": exc.message,
        "field": None,
        "limit": exc.limit,
        "limit_value": exc.value,
        "retry_after": exc.retry_after,
    }
    if not exc.retryable:
        body["retryable"] = False
    return ApiResponse(429, body, {"Retry-After": str(exc.retry_after)})


def new_request_id() -> str:
    """An id for a request that arrived without one (the local server). Not ``uuid``:
    importing it loads ``platform``, which the Lambda cold start would pay for."""
    return os.urandom(16).hex()


def error_response(exc: BaseException, request_id: str | None = None) -> ApiResponse:
    """Map any exception to a response; the only place errors become HTTP shapes.

    ``ValidationError`` (and ``InvalidScopeError``) -> 400 with the field, but
    ``TooLargeError`` -> 413;
    ``AccessDeniedError`` -> 403 with the field; ``NotFoundError`` -> 404;
    ``RateLimitedError`` -> 429 with ``Retry-After`` (``rate_limited``);
    ``ConfigurationError`` (``EmbeddingMismatchError``), ``StoreUnavailableError`` and
    ``StoreAccessDeniedError`` (the backend refused our own role; its body says what to
    check) -> 503, ``EmbeddingError`` -> 502, ``StoreError`` and anything else -> 500. A 5xx body
    is a fixed message plus ``request_id`` (``request_id``, or a new one): the exception
    (URLs, library messages, ARNs, the traceback of an unexpected error) is logged with
    that id and never returned.
    """
    if isinstance(exc, TooLargeError):
        return error_body(413, exc.message, exc.field)
    if isinstance(exc, ValidationError):
        return error_body(400, exc.message, exc.field)
    if isinstance(exc, AccessDeniedError):
        return error_body(403, exc.message, exc.field)
    if isinstance(exc, NotFoundError):
        return error_body(404, str(exc))
    if isinstance(exc, RateLimitedError):
        return rate_limited(exc)
    rid = request_id or new_request_id()
    extra = {"request_id": rid, "error_type": type(exc).__name__}
    public = public_message(exc)
    if isinstance(exc, ConfigurationError):
        logger.error("configuration error: %s", exc, extra=extra)
        return _server_error(503, public, rid)
    if isinstance(exc, StoreUnavailableError):
        logger.error("index backend unavailable: %s", exc, extra=extra)
        return _server_error(503, public, rid)
    if isinstance(exc, StoreAccessDeniedError):
        logger.error("index backend refused the function's role: %s", exc, extra=extra)
        return _server_error(503, public, rid, retryable=False)
    if isinstance(exc, EmbeddingError):
        logger.error("embedding provider failed: %s", exc, extra=extra)
        return _server_error(502, public, rid)
    if isinstance(exc, StoreError):
        logger.error("index backend failed: %s", exc, exc_info=exc, extra=extra)
        return _server_error(500, public, rid)
    logger.error("internal error: %s", type(exc).__name__, exc_info=exc, extra=extra)
    return _server_error(500, public, rid)
