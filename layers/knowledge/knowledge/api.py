"""The HTTP API's request handling, independent of any HTTP framework.

The local server (``knowledge.local.server``) and the AWS Lambda search function call
the same functions, so both answer the same routes with the same bodies:

=======  ==============================================  =======================
method   path                                            does
=======  ==============================================  =======================
POST     /v1/agents/{agent}/contexts/{context}/search    search one scope
POST     /v1/agents/{agent}/search                       search every context
GET      /v1/agents/{agent}/contexts/{context}/status    index status
POST     /v1/agents/{agent}/contexts/{context}/reindex   re-index from source
GET      /v1/health                                      liveness
=======  ==============================================  =======================

Every error becomes a response in one place, ``error_response``: bad input is a 400
``{"error", "field"}``; an unexpected exception is a 500 ``"internal error"`` that is
logged with its traceback and never shown to the caller.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import unquote

from knowledge.errors import (
    ConfigurationError,
    EmbeddingError,
    NotFoundError,
    StoreError,
    StoreUnavailableError,
    ValidationError,
)
from knowledge.model import (
    DEFAULT_MAX_CHUNKS_PER_DOCUMENT,
    DEFAULT_MAX_RESULTS,
    IndexResult,
    SearchMode,
    SearchQuery,
    SearchResult,
)
from knowledge.scope import KnowledgeScope, validate_segment
from knowledge.store import KnowledgeStore

__all__ = [
    "AGENT_WIDE_CONTEXT",
    "MAX_BODY_BYTES",
    "SEARCH_FIELDS",
    "ApiResponse",
    "KnowledgeApi",
    "ReindexScope",
    "error_response",
    "parse_search_request",
    "search_response_body",
]

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
"""Largest accepted request body; a query is at most a few KiB, so more is a mistake."""

SEARCH_FIELDS = (
    "query",
    "mode",
    "max_results",
    "min_score",
    "file_patterns",
    "metadata",
    "cross_context",
    "offset",
    "max_chunks_per_document",
)
"""The fields of a search request body (DESIGN.md "Search query"); any other is a 400."""

AGENT_WIDE_CONTEXT = "_all"
"""Placeholder context of the scope used for an agent-wide search.

``KnowledgeStore.search`` takes a full scope; with ``cross_context`` it filters on
the agent only, so the context value is never used to match anything.
"""

ReindexScope = Callable[[KnowledgeScope], IndexResult]
"""Re-indexes one scope from its source (the local folder, the S3 prefix)."""


@dataclass(frozen=True, slots=True)
class ApiResponse:
    """A status code and a JSON object body (plus extra headers, e.g. ``Allow`` on a 405)."""

    status: int
    body: dict[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """The body as UTF-8 JSON; non-ASCII text (Korean) is kept as is, not escaped."""
        return json.dumps(self.body, ensure_ascii=False).encode("utf-8")


def _reject_constant(name: str) -> Any:
    # Python's json accepts NaN/Infinity; JSON does not, and they would only reach a
    # numeric check with a confusing message.
    raise ValueError(f"{name} is not valid JSON")


def _decode_body(body: bytes | str | Mapping[str, Any] | None) -> Mapping[str, Any]:
    if body is None or (isinstance(body, bytes | str) and not body.strip()):
        raise ValidationError("body", "a JSON object with at least a 'query' field is required")
    if isinstance(body, Mapping):
        return body
    raw = body.encode("utf-8") if isinstance(body, str) else body
    if len(raw) > MAX_BODY_BYTES:
        raise ValidationError("body", f"must be at most {MAX_BODY_BYTES} bytes, got {len(raw)}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError("body", f"must be UTF-8 encoded JSON: {exc.reason}") from None
    try:
        decoded = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ValidationError(
            "body", f"malformed JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except ValueError as exc:
        raise ValidationError("body", f"malformed JSON: {exc}") from None
    except RecursionError:
        raise ValidationError("body", "malformed JSON: nested too deeply") from None
    if not isinstance(decoded, dict):
        raise ValidationError("body", f"must be a JSON object, got {_json_type(decoded)}")
    return decoded


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def _file_patterns(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple) and all(isinstance(p, str) for p in value):
        return tuple(value)
    raise ValidationError("file_patterns", "must be a glob string or a list of glob strings")


def parse_search_request(
    body: bytes | str | Mapping[str, Any] | None,
    *,
    default_mode: SearchMode | str | None = None,
) -> SearchQuery:
    """Turn a search request body into a ``SearchQuery``.

    ``body`` is raw JSON (bytes or text, at most ``MAX_BODY_BYTES``) or an already
    decoded object. Fields are exactly ``SEARCH_FIELDS``; a JSON ``null`` means "not
    given". A missing ``mode`` becomes ``default_mode`` (``None``: the store's default).
    Raises ``ValidationError`` naming the field: ``body`` for undecodable input, the
    field's own name for an unknown field or a bad value.
    """
    return _query_from(_decode_body(body), default_mode)


def _query_from(data: Mapping[str, Any], default_mode: SearchMode | str | None) -> SearchQuery:
    unknown = sorted(str(k) for k in data if k not in SEARCH_FIELDS)
    if unknown:
        # The name is echoed back, so a pathological one is cut short.
        name = unknown[0] if len(unknown[0]) <= 64 else unknown[0][:61] + "..."
        raise ValidationError(name, f"is not a known field (allowed: {', '.join(SEARCH_FIELDS)})")
    if data.get("query") is None:
        raise ValidationError("query", "is required")

    mode_value = data.get("mode")
    mode = (
        SearchMode.parse(mode_value)
        if mode_value is not None
        else (None if default_mode is None else SearchMode.parse(default_mode))
    )
    max_results = data.get("max_results")
    min_score = data.get("min_score")
    patterns = data.get("file_patterns")
    metadata = data.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ValidationError("metadata", "must be an object of string values")
    cross_context = data.get("cross_context")
    offset = data.get("offset")
    per_document = data.get("max_chunks_per_document")
    return SearchQuery(
        text=data["query"],
        mode=mode,
        max_results=DEFAULT_MAX_RESULTS if max_results is None else max_results,
        min_score=0.0 if min_score is None else min_score,
        file_patterns=() if patterns is None else _file_patterns(patterns),
        metadata={} if metadata is None else metadata,
        cross_context=False if cross_context is None else cross_context,
        offset=0 if offset is None else offset,
        max_chunks_per_document=(
            DEFAULT_MAX_CHUNKS_PER_DOCUMENT if per_document is None else per_document
        ),
    )


def search_response_body(
    query: SearchQuery, mode: SearchMode, results: Sequence[SearchResult], took_ms: float
) -> dict[str, Any]:
    """The search response: ``{"query", "mode", "results", "took_ms"}``."""
    return {
        "query": query.text,
        "mode": mode.value,
        "results": [r.to_dict() for r in results],
        "took_ms": round(took_ms, 1),
    }


def _error(status: int, message: str, field_name: str | None = None) -> ApiResponse:
    return ApiResponse(status, {"error": message, "field": field_name})


def error_response(exc: BaseException) -> ApiResponse:
    """Map any exception to a response; the only place errors become HTTP shapes.

    ``ValidationError`` (and ``InvalidScopeError``) -> 400 with the field;
    ``NotFoundError`` -> 404; ``ConfigurationError`` (``EmbeddingMismatchError``) and
    ``StoreUnavailableError`` -> 503 with the message, because the operator must act;
    ``EmbeddingError`` -> 502; anything else -> 500 ``"internal error"``, logged with
    its traceback and never returned.
    """
    if isinstance(exc, ValidationError):
        return _error(400, exc.message, exc.field)
    if isinstance(exc, NotFoundError):
        return _error(404, str(exc))
    if isinstance(exc, ConfigurationError):
        logger.error("configuration error: %s", exc)
        return _error(503, f"the service is misconfigured: {exc}")
    if isinstance(exc, StoreUnavailableError):
        logger.error("index backend unavailable: %s", exc)
        return _error(503, f"the index backend is unavailable: {exc}")
    if isinstance(exc, EmbeddingError):
        logger.error("embedding provider failed: %s", exc)
        return _error(502, "the embedding provider failed; try again later")
    if isinstance(exc, StoreError):
        logger.error("index backend failed: %s", exc, exc_info=exc)
        return _error(500, "the index backend failed")
    logger.error("internal error: %s", type(exc).__name__, exc_info=exc)
    return _error(500, "internal error")


@dataclass(frozen=True, slots=True)
class _Route:
    pattern: tuple[str, ...]  # "{agent}" / "{context}" are captured segments
    method: str
    name: str


_ROUTES = (
    _Route(("v1", "health"), "GET", "health"),
    _Route(("v1", "agents", "{agent}", "search"), "POST", "agent_search"),
    _Route(("v1", "agents", "{agent}", "contexts", "{context}", "search"), "POST", "search"),
    _Route(("v1", "agents", "{agent}", "contexts", "{context}", "status"), "GET", "status"),
    _Route(("v1", "agents", "{agent}", "contexts", "{context}", "reindex"), "POST", "reindex"),
)


def _match(pattern: Sequence[str], segments: Sequence[str]) -> dict[str, str] | None:
    if len(pattern) != len(segments):
        return None
    captured: dict[str, str] = {}
    for expected, actual in zip(pattern, segments, strict=True):
        if expected.startswith("{"):
            captured[expected.strip("{}")] = unquote(actual)
        elif expected != actual:
            return None
    return captured


class KnowledgeApi:
    """The five routes over one store.

    ``reindex`` re-indexes a scope from wherever its documents live; without it the
    reindex route answers 503 (not configured). ``default_mode`` is the mode used when
    a request names none (``None``: the store's default). Every method returns an
    ``ApiResponse`` and never raises.
    """

    def __init__(
        self,
        store: KnowledgeStore,
        *,
        reindex: ReindexScope | None = None,
        default_mode: SearchMode | None = None,
    ) -> None:
        self._store = store
        self._reindex = reindex
        self._default_mode = default_mode

    @property
    def store(self) -> KnowledgeStore:
        return self._store

    def search(
        self, agent: str, context: str | None, body: bytes | str | Mapping[str, Any] | None
    ) -> ApiResponse:
        """Search one scope, or every context of ``agent`` when ``context`` is ``None``."""
        try:
            validate_segment("agent", agent)
            if context is not None:
                validate_segment("context", context)
            data = _decode_body(body)
            query = _query_from(data, self._default_mode)
            if context is None:
                if data.get("cross_context") is False:
                    raise ValidationError(
                        "cross_context",
                        "the agent-wide route always searches every context; "
                        "use /v1/agents/{agent}/contexts/{context}/search for one context",
                    )
                query = replace(query, cross_context=True)
            scope = KnowledgeScope(agent, AGENT_WIDE_CONTEXT if context is None else context)
            started = time.perf_counter()
            results = self._store.search(scope, query)
            took_ms = (time.perf_counter() - started) * 1000.0
            mode = query.mode or self._store.default_mode
            return ApiResponse(200, search_response_body(query, mode, results, took_ms))
        except Exception as exc:
            return error_response(exc)

    def status(self, agent: str, context: str) -> ApiResponse:
        """Index status of one scope: ``{"agent", "context", **IndexStatus.to_dict()}``."""
        try:
            scope = KnowledgeScope(agent, context)  # validates both segments
            status = self._store.status(scope)
            return ApiResponse(200, {"agent": agent, "context": context, **status.to_dict()})
        except Exception as exc:
            return error_response(exc)

    def reindex(self, agent: str, context: str) -> ApiResponse:
        """Re-index one scope from its source: ``{"agent", "context", **IndexResult.to_dict()}``."""
        try:
            scope = KnowledgeScope(agent, context)  # validates both segments
            if self._reindex is None:
                raise ConfigurationError("re-indexing is not configured on this server")
            result = self._reindex(scope)
            return ApiResponse(200, {"agent": agent, "context": context, **result.to_dict()})
        except Exception as exc:
            return error_response(exc)

    def health(self) -> ApiResponse:
        return ApiResponse(200, {"status": "ok", "store": self._store.name})

    def handle(
        self, method: str, path: str, body: bytes | str | Mapping[str, Any] | None = None
    ) -> ApiResponse:
        """Route one request. Unknown path -> 404; known path, wrong method -> 405.

        ``path`` may carry a query string (ignored) and percent-escapes (decoded per
        segment, so an escaped ``/`` inside an agent name is rejected, not re-split).
        """
        try:
            route_path = path.split("?", 1)[0]
            if len(route_path) > 1:
                route_path = route_path.rstrip("/")
            segments = route_path.lstrip("/").split("/")
            method = method.upper()
            matched = [(r, c) for r in _ROUTES if (c := _match(r.pattern, segments)) is not None]
            if not matched:
                return _error(404, f"no route for {route_path}")
            for route, captured in matched:
                if route.method == method:
                    return self._dispatch(route.name, captured, body)
            allowed = ", ".join(sorted({r.method for r, _ in matched}))
            return ApiResponse(
                405,
                {
                    "error": f"method {method} is not allowed on {route_path} (allowed: {allowed})",
                    "field": None,
                },
                {"Allow": allowed},
            )
        except Exception as exc:
            return error_response(exc)

    def _dispatch(
        self, name: str, captured: Mapping[str, str], body: bytes | str | Mapping[str, Any] | None
    ) -> ApiResponse:
        if name == "health":
            return self.health()
        if name == "agent_search":
            return self.search(captured["agent"], None, body)
        if name == "search":
            return self.search(captured["agent"], captured["context"], body)
        if name == "status":
            return self.status(captured["agent"], captured["context"])
        return self.reindex(captured["agent"], captured["context"])
