"""The HTTP API's request handling, independent of any HTTP framework.

The local server (``knowledge.local.server``) and the AWS Lambda search function call
the same functions, so both answer the same routes with the same bodies:

=======  ==============================================  =======================
method   path                                            does
=======  ==============================================  =======================
POST     /v1/agents/{agent}/contexts/{context}/search    search one scope
POST     /v1/agents/{agent}/search                       search every context
POST     /v1/agents/{agent}/contexts/{context}/context   a search as a prompt block
POST     /v1/agents/{agent}/context                      the same, every context
GET      /v1/agents/{agent}/contexts/{context}/status    index status
GET      /v1/agents/{agent}/contexts/{context}/documents the scope's documents (paged)
GET      .../contexts/{context}/documents/{path}         one document (path URL-encoded)
POST     /v1/agents/{agent}/contexts/{context}/reindex   re-index from source
PUT      .../contexts/{context}/documents/{path}         write a document (``writes``)
DELETE   .../contexts/{context}/documents/{path}         delete a document
POST     /v1/agents/{agent}/contexts/{context}/uploads   presign a large upload
GET      /v1/health                                      liveness
POST     .../contexts/{context}/repos                    register a Git repository
GET      .../contexts/{context}/repos[/{name}]           repositories and their syncs
DELETE   .../contexts/{context}/repos/{name}             unregister, remove its files
POST     .../contexts/{context}/repos/{name}/sync        sync a repository now
=======  ==============================================  =======================

Every error becomes a response in one place, ``error_response``: bad input is a 400
``{"error", "field"}``; a refused caller a 403; a failing backend or provider a 502/503
and an unexpected exception a 500, each with a plain message and the request id
(``{"error", "field", "request_id"}``): the details (endpoint URL, client library
messages, secret ARNs, tracebacks) go to the log under that id, never to the caller.

Path segments are taken as sent: a segment whose percent-decoded form differs from the
raw one (``%6Fps-bot``) is a 400, so an IAM policy or an authorizer written on the
literal path sees exactly the agent that is served (``path_segment``). The one exception
is a document path, which is one URL-encoded segment (``docs%2Fguide.md``) decoded and
checked by ``document_path_segment``. The documents listing takes ``limit`` and
``cursor`` from the query string (``DOCUMENTS_PARAMETERS``); other routes ignore it.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from knowledge.documents import (
    DEFAULT_DOCUMENTS_LIMIT,
    MAX_DOCUMENTS_LIMIT,
    query_parameters,
    validate_document_path,
    validate_documents_limit,
)
from knowledge.errors import (
    AccessDeniedError,
    ConfigurationError,
    EmbeddingError,
    InvalidScopeError,
    NotFoundError,
    StoreAccessDeniedError,
    StoreError,
    StoreUnavailableError,
    ValidationError,
    public_message,
)
from knowledge.model import (
    DEFAULT_MAX_CHUNKS_PER_DOCUMENT,
    DEFAULT_MAX_RESULTS,
    IndexResult,
    IndexStatus,
    SearchMode,
    SearchQuery,
    SearchResult,
)
from knowledge.scope import KnowledgeScope, validate_segment
from knowledge.search_filter import parse_filter
from knowledge.shared import SharedGrants, SharedLibraryStore
from knowledge.store import KnowledgeStore
from knowledge.writes import (
    MAX_DOCUMENT_BYTES,
    DocumentStorage,
    accepted_body,
    check_writable_scope,
    check_write_path,
    parse_upload_request,
    parse_write,
)

if TYPE_CHECKING:  # the stage is built by whoever configures it; no import at cold start
    from knowledge.repos.service import RepoService
    from knowledge.reranking.stage import RerankingStage, RerankReport

__all__ = [
    "AGENT_WIDE_CONTEXT",
    "CONTEXT_FIELDS",
    "DOCUMENTS_PARAMETERS",
    "MAX_BODY_BYTES",
    "MAX_DOCUMENT_BYTES",
    "SEARCH_FIELDS",
    "WRITE_ROUTES",
    "ApiResponse",
    "KnowledgeApi",
    "ReindexScope",
    "StatusOf",
    "document_path_segment",
    "error_response",
    "parse_documents_query",
    "parse_search_request",
    "path_segment",
    "repo_route",
    "request_body",
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
    "filter",
    "include_shared",
    "group_by",
)
"""The fields of a search request body (DESIGN.md "Search query"); any other is a 400."""
CONTEXT_FIELDS = (*SEARCH_FIELDS, "max_tokens")
"""The fields of a prompt-context request body: the search's and the token budget."""

AGENT_WIDE_CONTEXT = "_all"
"""Placeholder context of the scope used for an agent-wide search.

``KnowledgeStore.search`` takes a full scope; with ``cross_context`` it filters on
the agent only, so the context value is never used to match anything.
"""

DOCUMENTS_PARAMETERS = ("limit", "cursor")
"""The query parameters of the documents listing; any other is a 400."""

ReindexScope = Callable[[KnowledgeScope], IndexResult]
StatusOf = Callable[[KnowledgeScope, IndexStatus], IndexStatus]
"""What the status route answers for a scope, given the store's status (``kb serve``
adds the progress of its start-up index)."""
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
    for key, value in decoded.items():
        _reject_lone_surrogates(str(key) if _is_text(key) else "body", key)
        _reject_lone_surrogates(str(key) if _is_text(key) else "body", value)
    return decoded


def _is_text(value: object) -> bool:
    return isinstance(value, str) and _encodes(value)


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _reject_lone_surrogates(field_name: str, value: object) -> None:
    """JSON may escape half of a surrogate pair (``"\\ud800"``): valid JSON, but not text.
    It could never be encoded again (the response, the log, the index), so it is a 400."""
    if isinstance(value, str):
        if not _encodes(value):
            raise ValidationError(
                field_name, "contains an unpaired surrogate escape (\\ud800-\\udfff); not text"
            )
    elif isinstance(value, dict):
        for key, item in value.items():
            _reject_lone_surrogates(field_name, key)
            _reject_lone_surrogates(field_name, item)
    elif isinstance(value, list):
        for item in value:
            _reject_lone_surrogates(field_name, item)


def request_body(body: str | None, *, base64_encoded: bool) -> bytes | str | None:
    """The body of an API Gateway event: base64 decoded to bytes when the gateway encoded
    it (any bytes may arrive; ``_decode_body`` checks they are UTF-8), else as given.

    Raises ``ValidationError`` (field ``body``) for base64 that does not decode.
    """
    if body is None or not base64_encoded:
        return body
    try:
        return base64.b64decode(body.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ValidationError("body", "is marked base64-encoded but is not valid base64") from None


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


def _query_from(
    data: Mapping[str, Any],
    default_mode: SearchMode | str | None,
    fields: Sequence[str] = SEARCH_FIELDS,
) -> SearchQuery:
    unknown = sorted(str(k) for k in data if k not in fields)  # include_shared: the API's
    if unknown:
        # The name is echoed back, so a pathological one is cut short.
        name = unknown[0] if len(unknown[0]) <= 64 else unknown[0][:61] + "..."
        raise ValidationError(name, f"is not a known field (allowed: {', '.join(fields)})")
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
    raw_filter = data.get("filter")
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
        filter=None if raw_filter is None else parse_filter(raw_filter),
        group_by=data.get("group_by"),
    )


def search_response_body(
    query: SearchQuery,
    mode: SearchMode,
    results: Sequence[SearchResult],
    took_ms: float,
    rerank: RerankReport | None = None,
) -> dict[str, Any]:
    """The search response: ``{"query", "mode", "results", "took_ms"}``, plus
    ``"rerank"`` (``RerankReport.to_dict``) when a reranking stage is configured."""
    body: dict[str, Any] = {
        "query": query.text,
        "mode": mode.value,
        "results": [r.to_dict() for r in results],
        "took_ms": round(took_ms, 1),
    }
    if rerank is not None:
        body["rerank"] = rerank.to_dict()
    return body


def _error(status: int, message: str, field_name: str | None = None) -> ApiResponse:
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


def new_request_id() -> str:
    """An id for a request that arrived without one (the local server). Not ``uuid``:
    importing it loads ``platform``, which the Lambda cold start would pay for."""
    return os.urandom(16).hex()


def error_response(exc: BaseException, request_id: str | None = None) -> ApiResponse:
    """Map any exception to a response; the only place errors become HTTP shapes.

    ``ValidationError`` (and ``InvalidScopeError``) -> 400 with the field;
    ``AccessDeniedError`` -> 403 with the field; ``NotFoundError`` -> 404;
    ``ConfigurationError`` (``EmbeddingMismatchError``), ``StoreUnavailableError`` and
    ``StoreAccessDeniedError`` (the backend refused our own role; its body says what to
    check) -> 503, ``EmbeddingError`` -> 502, ``StoreError`` and anything else -> 500. A 5xx body
    is a fixed message plus ``request_id`` (``request_id``, or a new one): the exception
    (URLs, library messages, ARNs, the traceback of an unexpected error) is logged with
    that id and never returned.
    """
    if isinstance(exc, ValidationError):
        return _error(400, exc.message, exc.field)
    if isinstance(exc, AccessDeniedError):
        return _error(403, exc.message, exc.field)
    if isinstance(exc, NotFoundError):
        return _error(404, str(exc))
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


@dataclass(frozen=True, slots=True)
class _Route:
    pattern: tuple[str, ...]  # "{agent}" / "{context}" are captured segments
    method: str
    name: str


_ROUTES = (
    _Route(("v1", "health"), "GET", "health"),
    _Route(("v1", "agents", "{agent}", "search"), "POST", "agent_search"),
    _Route(("v1", "agents", "{agent}", "contexts", "{context}", "search"), "POST", "search"),
    # Prompt context (knowledge.prompt_context): a search, answered as a prompt block.
    _Route(("v1", "agents", "{agent}", "context"), "POST", "agent_context"),
    _Route(("v1", "agents", "{agent}", "contexts", "{context}", "context"), "POST", "context"),
    _Route(("v1", "agents", "{agent}", "contexts", "{context}", "status"), "GET", "status"),
    _Route(("v1", "agents", "{agent}", "contexts", "{context}", "reindex"), "POST", "reindex"),
    _Route(("v1", "agents", "{agent}", "contexts", "{context}", "documents"), "GET", "documents"),
    _Route(
        ("v1", "agents", "{agent}", "contexts", "{context}", "documents", "{path}"),
        "GET",
        "document",
    ),
    # Writes (knowledge.writes): authorized apart from reads on every front end.
    _Route(
        ("v1", "agents", "{agent}", "contexts", "{context}", "documents", "{path}"),
        "PUT",
        "put_document",
    ),
    _Route(
        ("v1", "agents", "{agent}", "contexts", "{context}", "documents", "{path}"),
        "DELETE",
        "delete_document",
    ),
    _Route(("v1", "agents", "{agent}", "contexts", "{context}", "uploads"), "POST", "upload"),
    # Git repository sources (issue 24; knowledge.repos.service).
    _Route(("v1", "agents", "{agent}", "contexts", "{context}", "repos"), "POST", "repo_add"),
    _Route(("v1", "agents", "{agent}", "contexts", "{context}", "repos"), "GET", "repo_list"),
    _Route(
        ("v1", "agents", "{agent}", "contexts", "{context}", "repos", "{name}"), "GET", "repo_get"
    ),
    _Route(
        ("v1", "agents", "{agent}", "contexts", "{context}", "repos", "{name}"),
        "DELETE",
        "repo_remove",
    ),
    _Route(
        ("v1", "agents", "{agent}", "contexts", "{context}", "repos", "{name}", "sync"),
        "POST",
        "repo_sync",
    ),
)
WRITE_ROUTES = frozenset({"put_document", "delete_document", "upload"})


def document_path_segment(raw: str) -> str:
    """The document path of a ``.../documents/{path}`` request: one URL-encoded segment
    (``docs%2Fguide.md``), decoded (UTF-8) and checked like any document path.
    Raises ``ValidationError`` (field ``path``)."""
    try:
        decoded = unquote(raw, errors="strict")
    except UnicodeDecodeError:
        raise ValidationError("path", "is not URL-encoded UTF-8") from None
    return validate_document_path(decoded, "path")


def parse_documents_query(query_string: str | None) -> tuple[int, str | None]:
    """``(limit, cursor)`` from the listing's query string (``limit=50&cursor=...``).

    ``limit`` defaults to ``DEFAULT_DOCUMENTS_LIMIT``; an unknown or repeated parameter,
    a ``limit`` that is no integer in range, or an empty ``cursor`` is a
    ``ValidationError`` naming the parameter. Whether the cursor belongs to the scope is
    the store's check (``knowledge.documents.decode_cursor``)."""
    values = query_parameters(query_string, DOCUMENTS_PARAMETERS)
    limit = DEFAULT_DOCUMENTS_LIMIT
    if "limit" in values:
        text = values["limit"].strip()
        # Many digits are out of range anyway; int() of thousands of them would be refused.
        if not text.isascii() or not text.isdigit() or len(text) > 9:
            shown = text if len(text) <= 32 else text[:29] + "..."
            raise ValidationError(
                "limit", f"must be an integer from 1 to {MAX_DOCUMENTS_LIMIT}, got '{shown}'"
            )
        limit = validate_documents_limit(int(text))
    cursor = values.get("cursor")
    if cursor is not None and not cursor:
        raise ValidationError("cursor", "must not be empty (leave it out for the first page)")
    return limit, cursor


def path_segment(field_name: str, raw: str) -> str:
    """An ``agent``/``context`` path segment exactly as sent, checked.

    The allowed alphabet (``knowledge.scope``) never needs escaping, so a segment whose
    percent-decoded form differs from the raw one (``%6Fps-bot`` for ``ops-bot``) is a
    400: served as the decoded name it would sidestep a policy on the literal path.
    Raises ``ValidationError``/``InvalidScopeError`` naming ``field_name``.
    """
    if unquote(raw) != raw:
        shown = raw if len(raw) <= 80 else raw[:77] + "..."
        raise InvalidScopeError(
            field_name,
            f"'{shown}' is percent-encoded; send the name itself "
            "(letters, digits, '.', '_' or '-' never need escaping)",
        )
    return validate_segment(field_name, raw)


def repo_route(
    service: RepoService | None,
    route: str,
    captured: Mapping[str, str],
    body: bytes | str | Mapping[str, Any] | None = None,
    *,
    request_id: str | None = None,
) -> ApiResponse:
    """One repository route (``repo_add``, ``repo_list``, ``repo_get``, ``repo_remove``,
    ``repo_sync``) over ``service`` (``knowledge.repos.service``); the local server and
    the AWS repos function share it. Never raises."""
    try:
        scope = KnowledgeScope(
            path_segment("agent", captured["agent"]), path_segment("context", captured["context"])
        )
        if service is None:
            raise ConfigurationError("repository sources are not configured on this server")
        name = captured.get("name", "")
        if route == "repo_add":
            status, answer = service.add(scope, _decode_body(body))
        elif route == "repo_list":
            status, answer = service.list(scope)
        elif route == "repo_get":
            status, answer = service.get(scope, name)
        elif route == "repo_remove":
            status, answer = service.remove(scope, name)
        else:
            data = _decode_body(body) if body not in (None, b"", "") else {}
            status, answer = service.sync(scope, name, data)
        return ApiResponse(status, {"agent": scope.agent, "context": scope.context, **answer})
    except Exception as exc:
        return error_response(exc, request_id)


def _match(pattern: Sequence[str], segments: Sequence[str]) -> dict[str, str] | None:
    if len(pattern) != len(segments):
        return None
    pairs = list(zip(pattern, segments, strict=True))
    if any(not expected.startswith("{") and expected != actual for expected, actual in pairs):
        return None
    return {
        # A document path is decoded and checked by the route itself (``document``).
        expected.strip("{}"): (
            actual if expected == "{path}" else path_segment(expected.strip("{}"), actual)
        )
        for expected, actual in pairs
        if expected.startswith("{")
    }


class KnowledgeApi:
    """The routes over one store; the repository routes go to ``repos``
    (``knowledge.repos.service``; without it they answer 503, not configured), the write
    routes to ``writes`` (a ``knowledge.writes.DocumentStorage``; without it, 403).

    ``reindex`` re-indexes a scope from wherever its documents live; without it the
    reindex route answers 503 (not configured). ``default_mode`` is the mode used when
    a request names none (``None``: the store's default). ``status``, if given, turns the
    store's status of a scope into what the status route answers. ``reranking`` reranks
    every search's top candidates (``knowledge.reranking``; off when ``None``). Every
    method returns an ``ApiResponse`` and never raises.
    """

    def __init__(
        self,
        store: KnowledgeStore,
        *,
        reindex: ReindexScope | None = None,
        default_mode: SearchMode | None = None,
        status: StatusOf | None = None,
        reranking: RerankingStage | None = None,
        writes: DocumentStorage | None = None,
        shared: SharedGrants | None = None,
        repos: RepoService | None = None,
    ) -> None:
        self._repos = repos
        self._store = store
        self._writes = writes
        self._shared = shared or SharedGrants({})
        self._reindex = reindex
        self._default_mode = default_mode
        self._status_of = status
        self._reranking = reranking

    @property
    def store(self) -> KnowledgeStore:
        return self._store

    def search(
        self,
        agent: str,
        context: str | None,
        body: bytes | str | Mapping[str, Any] | None,
        *,
        request_id: str | None = None,
    ) -> ApiResponse:
        """Search one scope, or every context of ``agent`` when ``context`` is ``None``.

        ``agent``/``context`` are path segments as sent (``path_segment``)."""
        try:
            data = _decode_body(body)
            query, mode, results, took_ms, report = self._search(agent, context, data)
            return ApiResponse(200, search_response_body(query, mode, results, took_ms, report))
        except Exception as exc:
            return error_response(exc, request_id)

    def prompt_context(
        self,
        agent: str,
        context: str | None,
        body: bytes | str | Mapping[str, Any] | None,
        *,
        request_id: str | None = None,
    ) -> ApiResponse:
        """The search's results as a block for a prompt, within the body's ``max_tokens``
        (``knowledge.prompt_context``): ``{"query", "mode", "context", "passages",
        "dropped", "tokens", "took_ms"}``. Same scope rules and body as ``search``."""
        try:
            from knowledge.prompt_context import build_prompt_context, parse_max_tokens

            data = _decode_body(body)
            max_tokens = parse_max_tokens(data.get("max_tokens"))
            query, mode, results, took_ms, _ = self._search(agent, context, data, CONTEXT_FIELDS)
            block = build_prompt_context(results, max_tokens)
            answer = {"query": query.text, "mode": mode.value, **block.to_dict()}
            return ApiResponse(200, {**answer, "took_ms": round(took_ms, 1)})
        except Exception as exc:
            return error_response(exc, request_id)

    def _search(
        self,
        agent: str,
        context: str | None,
        data: Mapping[str, Any],
        fields: Sequence[str] = SEARCH_FIELDS,
    ) -> tuple[SearchQuery, SearchMode, list[SearchResult], float, RerankReport | None]:
        path_segment("agent", agent)
        if context is not None:
            path_segment("context", context)
        query = _query_from(data, self._default_mode, fields)
        if context is None:
            if data.get("cross_context") is False:
                raise ValidationError(
                    "cross_context",
                    "the agent-wide route always searches every context; "
                    "use /v1/agents/{agent}/contexts/{context}/search for one context",
                )
            query = replace(query, cross_context=True)
        scope = KnowledgeScope(agent, AGENT_WIDE_CONTEXT if context is None else context)
        store = self._searched_store(agent, data.get("include_shared"))
        started = time.perf_counter()
        report: RerankReport | None = None
        if self._reranking is None:
            results = store.search(scope, query)
        else:
            results, report = self._reranking.search(store, scope, query)  # type: ignore[arg-type]
        took_ms = (time.perf_counter() - started) * 1000.0
        mode = query.mode or self._store.default_mode
        return query, mode, results, took_ms, report

    def _searched_store(self, agent: str, include: object) -> KnowledgeStore | SharedLibraryStore:
        """The store, widened to the agent's granted shared libraries (``knowledge.shared``)
        unless ``include_shared`` is false; the grant is configuration, never the request."""
        if include is not None and not isinstance(include, bool):
            raise ValidationError("include_shared", "must be true or false")
        libraries = self._shared.scopes_of(agent)
        if include is True and not libraries:
            raise ValidationError("include_shared", f"agent '{agent}' has no shared library")
        if include is False or not libraries:
            return self._store
        return SharedLibraryStore(self._store, libraries)

    def status(self, agent: str, context: str, *, request_id: str | None = None) -> ApiResponse:
        """Index status of one scope: ``{"agent", "context", **IndexStatus.to_dict()}``."""
        try:
            scope = KnowledgeScope(path_segment("agent", agent), path_segment("context", context))
            status = self._store.status(scope)
            if self._status_of is not None:
                status = self._status_of(scope, status)
            body = {"agent": agent, "context": context, **status.to_dict()}
            if self._repos is not None:  # each repository's last sync (knowledge.repos)
                body["repos"] = self._repos.statuses(scope)
            return ApiResponse(200, body)
        except Exception as exc:
            return error_response(exc, request_id)

    def reindex(self, agent: str, context: str, *, request_id: str | None = None) -> ApiResponse:
        """Re-index one scope from its source: ``{"agent", "context", **IndexResult.to_dict()}``."""
        try:
            scope = KnowledgeScope(path_segment("agent", agent), path_segment("context", context))
            if self._reindex is None:
                raise ConfigurationError("re-indexing is not configured on this server")
            result = self._reindex(scope)
            return ApiResponse(200, {"agent": agent, "context": context, **result.to_dict()})
        except Exception as exc:
            return error_response(exc, request_id)

    def documents(
        self,
        agent: str,
        context: str,
        query_string: str | None = None,
        *,
        request_id: str | None = None,
    ) -> ApiResponse:
        """One page of the scope's documents: ``{"agent", "context", "documents",
        "next_cursor"}`` (``knowledge.documents``); ``query_string`` as sent."""
        try:
            scope = KnowledgeScope(path_segment("agent", agent), path_segment("context", context))
            limit, cursor = parse_documents_query(query_string)
            page = self._store.list_documents(scope, limit=limit, cursor=cursor)
            return ApiResponse(200, {"agent": agent, "context": context, **page.to_dict()})
        except Exception as exc:
            return error_response(exc, request_id)

    def document(
        self, agent: str, context: str, path: str, *, request_id: str | None = None
    ) -> ApiResponse:
        """One document of the scope: ``{"agent", "context", **IndexedDocument.to_dict()}``,
        404 when the scope has no record of it. ``path`` is the URL-encoded segment."""
        try:
            scope = KnowledgeScope(path_segment("agent", agent), path_segment("context", context))
            document_path = document_path_segment(path)
            found = self._store.get_document(scope, document_path)
            if found is None:
                shown = document_path if len(document_path) <= 200 else document_path[:197] + "..."
                raise NotFoundError(f"no document '{shown}' in {scope}")
            return ApiResponse(200, {"agent": agent, "context": context, **found.to_dict()})
        except Exception as exc:
            return error_response(exc, request_id)

    # -- writes (knowledge.writes); off (403) unless a storage is given ---------------

    @property
    def writes_enabled(self) -> bool:
        return self._writes is not None

    def _write_scope(self, agent: str, context: str) -> tuple[KnowledgeScope, DocumentStorage]:
        scope = KnowledgeScope(path_segment("agent", agent), path_segment("context", context))
        check_writable_scope(scope)
        if self._writes is None:
            raise AccessDeniedError("operation", "writes are off on this server")
        return scope, self._writes

    def put_document(
        self,
        agent: str,
        context: str,
        path: str,
        body: bytes | str | None,
        *,
        content_type: str | None = None,
        query_string: str | None = None,
        request_id: str | None = None,
    ) -> ApiResponse:
        """Store a document (202 ``knowledge.writes.accepted_body``); the source's
        indexing makes it searchable. ``path`` is the URL-encoded segment."""
        try:
            scope, storage = self._write_scope(agent, context)
            data = body.encode("utf-8") if isinstance(body, str) else (body or b"")
            write = parse_write(
                scope,
                document_path_segment(path),
                data,
                content_type=content_type,
                query_string=query_string,
            )
            storage.put(scope, write.path, write.data, write.sidecar)
            return ApiResponse(202, accepted_body(write))
        except Exception as exc:
            return error_response(exc, request_id)

    def delete_document(
        self, agent: str, context: str, path: str, *, request_id: str | None = None
    ) -> ApiResponse:
        """Remove a document and its sidecar: 202, or 404 when the storage knows there
        was none (the folder; S3 deletes are idempotent and always 202)."""
        try:
            scope, storage = self._write_scope(agent, context)
            document_path = document_path_segment(path)
            check_write_path(document_path)
            if storage.delete(scope, document_path) is False:
                raise NotFoundError(f"no document '{document_path[:200]}' in {scope}")
            return ApiResponse(
                202, {"agent": agent, "context": context, "path": document_path, "deleted": True}
            )
        except Exception as exc:
            return error_response(exc, request_id)

    def upload(
        self,
        agent: str,
        context: str,
        body: bytes | str | Mapping[str, Any] | None,
        *,
        request_id: str | None = None,
    ) -> ApiResponse:
        """A presigned upload of one document (``{"path", "size"?, "expires_in"?}``)."""
        try:
            scope, storage = self._write_scope(agent, context)
            if body is None or (isinstance(body, bytes | str) and not body.strip()):
                raise ValidationError("body", "a JSON object with a 'path' field is required")
            path, size, expires = parse_upload_request(_decode_body(body))
            grant = storage.presign_upload(scope, path, size, expires)
            return ApiResponse(
                200,
                {
                    "agent": agent,
                    "context": context,
                    "path": path,
                    "max_bytes": size,
                    "expires_in": expires,
                    "method": "POST",
                    **grant,
                },
            )
        except Exception as exc:
            return error_response(exc, request_id)

    def health(self) -> ApiResponse:
        return ApiResponse(200, {"status": "ok", "store": self._store.name})

    def repos(
        self,
        route: str,
        captured: Mapping[str, str],
        body: bytes | str | Mapping[str, Any] | None = None,
        *,
        request_id: str | None = None,
    ) -> ApiResponse:
        """The repository routes (``repo_route``); 503 when not configured."""
        return repo_route(self._repos, route, captured, body, request_id=request_id)

    def handle(
        self,
        method: str,
        path: str,
        body: bytes | str | Mapping[str, Any] | None = None,
        *,
        request_id: str | None = None,
        content_type: str | None = None,
    ) -> ApiResponse:
        """Route one request. Unknown path -> 404; known path, wrong method -> 405.

        ``path`` is the raw request path and may carry a query string (ignored); a
        percent-encoded agent or context segment is a 400 (``path_segment``).
        ``request_id`` goes into 5xx bodies (a new one when not given).
        """
        try:
            route_path, _, query_string = path.partition("?")
            if len(route_path) > 1:
                route_path = route_path.rstrip("/")
            segments = route_path.lstrip("/").split("/")
            method = method.upper()
            matched = [(r, c) for r in _ROUTES if (c := _match(r.pattern, segments)) is not None]
            if not matched:
                return _error(404, f"no route for {route_path}")
            for route, captured in matched:
                if route.method == method and route.name == "put_document":
                    return self.put_document(
                        captured["agent"],
                        captured["context"],
                        captured["path"],
                        body if not isinstance(body, Mapping) else None,
                        content_type=content_type,
                        query_string=query_string,
                        request_id=request_id,
                    )
                if route.method == method:
                    return self._dispatch(route.name, captured, body, query_string, request_id)
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
            return error_response(exc, request_id)

    def _dispatch(
        self,
        name: str,
        captured: Mapping[str, str],
        body: bytes | str | Mapping[str, Any] | None,
        query_string: str,
        request_id: str | None,
    ) -> ApiResponse:
        if name == "health":
            return self.health()
        if name.startswith("repo_"):
            return self.repos(name, captured, body, request_id=request_id)
        if name == "agent_search":
            return self.search(captured["agent"], None, body, request_id=request_id)
        if name == "search":
            return self.search(captured["agent"], captured["context"], body, request_id=request_id)
        if name == "agent_context":
            return self.prompt_context(captured["agent"], None, body, request_id=request_id)
        if name == "context":
            return self.prompt_context(
                captured["agent"], captured["context"], body, request_id=request_id
            )
        if name == "status":
            return self.status(captured["agent"], captured["context"], request_id=request_id)
        if name == "documents":
            return self.documents(
                captured["agent"], captured["context"], query_string, request_id=request_id
            )
        if name == "document":
            return self.document(
                captured["agent"], captured["context"], captured["path"], request_id=request_id
            )
        if name == "delete_document":
            return self.delete_document(
                captured["agent"], captured["context"], captured["path"], request_id=request_id
            )
        if name == "upload":
            return self.upload(captured["agent"], captured["context"], body, request_id=request_id)
        return self.reindex(captured["agent"], captured["context"], request_id=request_id)
