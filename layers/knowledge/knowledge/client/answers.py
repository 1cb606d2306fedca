"""What ``KnowledgeClient`` sends and reads back: paths, search bodies, results, statuses.

Pure functions between the package's value objects and the API's JSON
(docs/openapi.yaml): ``scope_path``, ``search_body``, ``result_of``, ``status_of``.
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from knowledge.core.filter_language import filter_to_json
from knowledge.core.model import (
    DEFAULT_MAX_CHUNKS_PER_DOCUMENT,
    FileProblem,
    IndexState,
    IndexStatus,
    SearchQuery,
    SearchResult,
)
from knowledge.core.scope import KnowledgeScope
from knowledge.ranking.origin_weights import weights_body

__all__ = ["ranking_fields", "result_of", "scope_path", "search_body", "segment", "status_of"]


def scope_path(scope: KnowledgeScope) -> str:
    return f"/v1/agents/{segment(scope.agent)}/contexts/{segment(scope.context)}"


def segment(value: str) -> str:
    # Scope segments are [A-Za-z0-9._-] (validated by KnowledgeScope): nothing to escape.
    return urllib.parse.quote(value, safe="")


def search_body(query: SearchQuery) -> dict[str, Any]:
    body: dict[str, Any] = {"query": query.text, "max_results": query.max_results}
    if query.mode is not None:
        body["mode"] = query.mode.value
    if query.min_score is not None:  # else the server's default floor
        body["min_score"] = query.min_score
    if query.file_patterns:
        body["file_patterns"] = list(query.file_patterns)
    if query.metadata:
        body["metadata"] = dict(query.metadata)
    if query.filter is not None:
        body["filter"] = filter_to_json(query.filter)
    if query.offset:
        body["offset"] = query.offset
    if query.max_chunks_per_document != DEFAULT_MAX_CHUNKS_PER_DOCUMENT:
        body["max_chunks_per_document"] = query.max_chunks_per_document
    if query.group_by is not None:
        body["group_by"] = query.group_by
    body.update(weights_body(query.weights))  # knowledge.ranking.origin_weights
    return body


def result_of(item: Mapping[str, Any]) -> SearchResult:
    def optional(name: str) -> float | None:
        value = item.get(name)
        return None if value is None else float(value)

    metadata = item.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise TypeError("metadata is not an object")
    matching = item.get("matching_chunks")  # a grouped search's (knowledge.ranking.grouping)
    return SearchResult(
        document_path=str(item["document_path"]),
        chunk_index=int(item["chunk_index"]),
        content=str(item["content"]),
        score=float(item["score"]),
        keyword_score=optional("keyword_score"),
        vector_score=optional("vector_score"),
        rank_score=optional("rank_score"),
        metadata=metadata,
        rerank_score=optional("rerank_score"),
        search_score=optional("search_score"),
        matching_chunks=None if matching is None else int(matching),
        extra=item.get("extra") is True,
    )


def ranking_fields(
    explain: bool, origin_weights: Mapping[str, float] | None, lesson_weight: float | None
) -> dict[str, Any]:
    """The body fields of ``search_response``'s ranking arguments (only those given)."""
    fields: dict[str, Any] = {}
    if explain:
        fields["explain"] = True
    if origin_weights is not None:
        fields["origin_weights"] = dict(origin_weights)
    if lesson_weight is not None:
        fields["lesson_weight"] = lesson_weight
    return fields


def status_of(data: Mapping[str, Any]) -> IndexStatus:
    last = data.get("last_indexed_at")
    problems: Sequence[Mapping[str, Any]] = data.get("problems") or ()
    return IndexStatus(
        document_count=int(data["document_count"]),
        chunk_count=int(data["chunk_count"]),
        last_indexed_at=None if last is None else datetime.fromisoformat(str(last)),
        state=IndexState(str(data["state"])),
        message=data.get("message"),
        problems=tuple(FileProblem(str(p["document_path"]), str(p["reason"])) for p in problems),
        # Absent from an API older than these counts.
        embedded_chunks=int(data.get("embedded_chunks") or 0),
        reused_chunks=int(data.get("reused_chunks") or 0),
        unread_files=_unread_files(data.get("unread_files")),
    )


def _unread_files(value: object) -> dict[str, int]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): int(v) for k, v in value.items() if isinstance(v, int)}
