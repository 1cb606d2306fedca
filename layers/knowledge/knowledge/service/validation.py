"""What a request may say: its body, its path segments and its query string, checked.

A body is at most ``MAX_BODY_BYTES`` of UTF-8 JSON (an object; no NaN, no lone
surrogate escape); a search body has exactly ``SEARCH_FIELDS`` (docs/architecture.md,
"Search request"). Path segments are taken as sent: a segment whose percent-decoded
form differs from the raw one (``%6Fps-bot``) is a 400, so an IAM policy or an
authorizer written on the literal path sees exactly the agent that is served
(``path_segment``). The one exception is a document path, which is one URL-encoded
segment (``docs%2Fguide.md``) decoded and checked by ``document_path_segment``. The
documents listing and a document's chunk listing take ``limit`` and ``cursor`` from the
query string (``DOCUMENTS_PARAMETERS``, ``CHUNKS_PARAMETERS``). Every refusal is a
``ValidationError`` naming the field.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from knowledge.agent_tools.hits import hit_fields
from knowledge.core.chunk_listing import (
    DEFAULT_CHUNKS_LIMIT,
    MAX_CHUNKS_LIMIT,
    validate_chunks_limit,
)
from knowledge.core.documents import (
    DEFAULT_DOCUMENTS_LIMIT,
    MAX_DOCUMENTS_LIMIT,
    query_parameters,
    validate_document_path,
    validate_documents_limit,
)
from knowledge.core.errors import InvalidScopeError, ValidationError
from knowledge.core.filter_language import parse_filter
from knowledge.core.model import (
    DEFAULT_MAX_CHUNKS_PER_DOCUMENT,
    DEFAULT_MAX_RESULTS,
    SearchMode,
    SearchQuery,
    SearchResult,
    evidence_of,
)
from knowledge.core.result_count import TOP_K, given_result_count, renamed_count_error
from knowledge.core.scope import KnowledgeScope, validate_segment
from knowledge.ranking.origin_weights import BODY_FIELDS, RankWeights, weights_from_body

if TYPE_CHECKING:
    from knowledge.reranking.stage import RerankReport

__all__ = [
    "AGENT_WIDE_CONTEXT",
    "CHUNKS_PARAMETERS",
    "CONTEXT_FIELDS",
    "DOCUMENTS_PARAMETERS",
    "MAX_BODY_BYTES",
    "SEARCH_FIELDS",
    "decode_body",
    "document_path_segment",
    "parse_chunks_query",
    "parse_documents_query",
    "parse_search_request",
    "path_segment",
    "query_from",
    "request_body",
    "search_response_body",
]

MAX_BODY_BYTES = 64 * 1024
"""Largest accepted request body; a query is at most a few KiB, so more is a mistake."""

SEARCH_FIELDS = (
    "query",
    "mode",
    "max_results",
    TOP_K,  # the design's name for max_results (knowledge.core.result_count)
    "min_score",
    "file_patterns",
    "metadata",
    "cross_context",
    "offset",
    "max_chunks_per_document",
    "filter",
    "include_shared",
    "group_by",
    *BODY_FIELDS,  # origin_weights, lesson_weight (knowledge.ranking.origin_weights)
    "explain",  # the trace (knowledge.ranking.explain)
)
"""The fields of a search request body (docs/architecture.md, "Search request"); any
other is a 400."""
CONTEXT_FIELDS = (*SEARCH_FIELDS, "max_tokens")
"""The fields of a prompt-context request body: the search's (its ranking weights and
``explain`` too: the trace then lists the budget's drops) and the token budget."""

AGENT_WIDE_CONTEXT = "_all"
"""Placeholder context of the scope used for an agent-wide search.

``KnowledgeStore.search`` takes a full scope; with ``cross_context`` it filters on
the agent only, so the context value is never used to match anything.
"""

DOCUMENTS_PARAMETERS = ("limit", "cursor")
"""The query parameters of the documents listing; any other is a 400."""
CHUNKS_PARAMETERS = DOCUMENTS_PARAMETERS
"""The query parameters of a document's chunk listing, the same; any other is a 400."""


def _reject_constant(name: str) -> Any:
    # Python's json accepts NaN/Infinity; JSON does not, and they would only reach a
    # numeric check with a confusing message.
    raise ValueError(f"{name} is not valid JSON")


def decode_body(body: bytes | str | Mapping[str, Any] | None) -> Mapping[str, Any]:
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
    it (any bytes may arrive; ``decode_body`` checks they are UTF-8), else as given.

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
    weights: RankWeights | None = None,
) -> SearchQuery:
    """Turn a search request body into a ``SearchQuery``.

    ``body`` is raw JSON (bytes or text, at most ``MAX_BODY_BYTES``) or an already
    decoded object. Fields are exactly ``SEARCH_FIELDS``; a JSON ``null`` means "not
    given". A missing ``mode`` becomes ``default_mode`` (``None``: the store's default).
    Raises ``ValidationError`` naming the field: ``body`` for undecodable input, the
    field's own name for an unknown field or a bad value.
    """
    return query_from(decode_body(body), default_mode, weights)


def query_from(
    data: Mapping[str, Any],
    default_mode: SearchMode | str | None,
    weights: RankWeights | None = None,
    fields: Sequence[str] = SEARCH_FIELDS,
) -> SearchQuery:
    """``parse_search_request`` of a decoded body; ``weights``: the deployment's origin and
    lesson weights, which the body's ``origin_weights`` / ``lesson_weight`` override;
    ``fields``: the body's allowed fields (``CONTEXT_FIELDS`` for the prompt context).
    ``top_k`` is ``max_results`` by the design's name: either, or both with one value
    (``knowledge.core.result_count``); a bad ``top_k`` is refused under that name."""
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
    count_name, max_results = given_result_count(data)
    min_score = data.get("min_score")
    patterns = data.get("file_patterns")
    metadata = data.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ValidationError("metadata", "must be an object of string values")
    cross_context = data.get("cross_context")
    offset = data.get("offset")
    per_document = data.get("max_chunks_per_document")
    raw_filter = data.get("filter")
    try:
        return SearchQuery(
            text=data["query"],
            mode=mode,
            max_results=DEFAULT_MAX_RESULTS if max_results is None else max_results,
            min_score=min_score,
            file_patterns=() if patterns is None else _file_patterns(patterns),
            metadata={} if metadata is None else metadata,
            cross_context=False if cross_context is None else cross_context,
            offset=0 if offset is None else offset,
            max_chunks_per_document=(
                DEFAULT_MAX_CHUNKS_PER_DOCUMENT if per_document is None else per_document
            ),
            filter=None if raw_filter is None else parse_filter(raw_filter),
            group_by=data.get("group_by"),
            weights=weights_from_body(data, weights),
        )
    except ValidationError as exc:  # a bad top_k is named as it was sent
        raise renamed_count_error(exc, count_name) from None


def search_response_body(
    query: SearchQuery,
    mode: SearchMode,
    results: Sequence[SearchResult],
    took_ms: float,
    rerank: RerankReport | None = None,
    *,
    scope: KnowledgeScope | None = None,
    vector_side: str | None = None,
) -> dict[str, Any]:
    """The search response: ``{"query", "mode", "min_score", "evidence", "results",
    "took_ms"}`` (``min_score``: the request's, else the default floor the best result had
    to reach, ``SearchQuery.evidence_floor``; ``evidence``: how strong the best result is,
    ``core.model.evidence_of``, ``none`` for no results), plus ``"rerank"``
    (``RerankReport.to_dict``) when a reranking stage is configured and ``"vector_side"``
    when a vector or hybrid search ran on the keyword side alone
    (``ranking.vector_side.vector_side_note``: the embedder cannot read the query). Each result is
    ``SearchResult.to_dict`` with, for a search of ``scope`` (its context unused when
    ``query.cross_context``), the design's names and where the hit came from:
    ``source_type``, ``title``, ``agent``, ``context``
    (``knowledge.agent_tools.hits.hit_fields``)."""
    shown = [r.to_dict() for r in results]
    if scope is not None:
        for item, result in zip(shown, results, strict=True):
            item.update(hit_fields(result, scope, query.cross_context))
    body: dict[str, Any] = {
        "query": query.text,
        "mode": mode.value,
        "min_score": query.evidence_floor,
        "evidence": evidence_of(results),
        "results": shown,
        "took_ms": round(took_ms, 1),
    }
    if vector_side is not None:
        body["vector_side"] = vector_side
    if rerank is not None:
        body["rerank"] = rerank.to_dict()
    return body


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
    the store's check (``knowledge.core.documents.decode_cursor``)."""
    limit, cursor = _paging(query_string, DOCUMENTS_PARAMETERS, MAX_DOCUMENTS_LIMIT)
    return (DEFAULT_DOCUMENTS_LIMIT if limit is None else validate_documents_limit(limit)), cursor


def parse_chunks_query(query_string: str | None) -> tuple[int, str | None]:
    """``(limit, cursor)`` of a document's chunk listing, checked as the documents
    listing's are; ``limit`` defaults to ``DEFAULT_CHUNKS_LIMIT``, at most
    ``MAX_CHUNKS_LIMIT`` (``knowledge.core.chunk_listing``)."""
    limit, cursor = _paging(query_string, CHUNKS_PARAMETERS, MAX_CHUNKS_LIMIT)
    return (DEFAULT_CHUNKS_LIMIT if limit is None else validate_chunks_limit(limit)), cursor


def _paging(
    query_string: str | None, allowed: Sequence[str], maximum: int
) -> tuple[int | None, str | None]:
    """The ``limit`` (``None``: not given; a number, not yet checked against its range)
    and ``cursor`` of a listing's query string."""
    values = query_parameters(query_string, allowed)
    limit = None
    if "limit" in values:
        text = values["limit"].strip()
        # Many digits are out of range anyway; int() of thousands of them would be refused.
        if not text.isascii() or not text.isdigit() or len(text) > 9:
            shown = text if len(text) <= 32 else text[:29] + "..."
            raise ValidationError("limit", f"must be an integer from 1 to {maximum}, got '{shown}'")
        limit = int(text)
    cursor = values.get("cursor")
    if cursor is not None and not cursor:
        raise ValidationError("cursor", "must not be empty (leave it out for the first page)")
    return limit, cursor


def path_segment(field_name: str, raw: str) -> str:
    """An ``agent``/``context`` path segment exactly as sent, checked.

    The allowed alphabet (``knowledge.core.scope``) never needs escaping, so a segment whose
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
