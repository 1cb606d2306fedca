"""Indexing problems kept in the index itself: one problem record per document.

``WriteSession.record_problem`` writes a record ``{"record": "problem", agent, context,
document_path, document_name, metadata: {reason, recorded_at}}``; no ``document_id``,
content or vector, so no search, document count or stored-document listing sees it. With
client ids its id is ``<document id>:problem`` (never a chunk id, those end in a number),
so writing it again replaces it; a document's ``put_document`` deletes that id, and a
delete of the document (``document_filters``) takes it along. Bodies are pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from knowledge.model import FileProblem
from knowledge.scope import KnowledgeScope
from knowledge.stores.opensearch.mapping import (
    AGENT,
    CONTEXT,
    DOCUMENT_NAME,
    DOCUMENT_PATH,
    METADATA,
    RECORD,
)
from knowledge.stores.opensearch.queries import document_filters, scope_filters

__all__ = [
    "RECORD_PROBLEM",
    "parse_problems",
    "problem_id",
    "problem_query",
    "problem_record",
    "problems_body",
]

RECORD_PROBLEM = "problem"
_REASON = "reason"
_RECORDED_AT = "recorded_at"


def problem_id(document_id: str) -> str:
    return f"{document_id}:{RECORD_PROBLEM}"


def problem_record(
    scope: KnowledgeScope, path: str, reason: str, recorded_at: datetime
) -> dict[str, Any]:
    """The ``_source`` of a problem record (its time as a sortable UTC ISO string)."""
    at = recorded_at if recorded_at.tzinfo is not None else recorded_at.replace(tzinfo=UTC)
    return {
        RECORD: RECORD_PROBLEM,
        AGENT: scope.agent,
        CONTEXT: scope.context,
        DOCUMENT_PATH: path,
        DOCUMENT_NAME: path.rsplit("/", 1)[-1],
        METADATA: {
            _REASON: reason,
            _RECORDED_AT: at.astimezone(UTC).isoformat(timespec="microseconds"),
        },
    }


def problem_query(scope: KnowledgeScope, path: str) -> dict[str, Any]:
    """The problem record(s) of one document (several only where ids are the server's)."""
    return {
        "bool": {"filter": [*document_filters(scope, path), {"term": {RECORD: RECORD_PROBLEM}}]}
    }


def problems_body(scope: KnowledgeScope, size: int) -> dict[str, Any]:
    """The scope's most recent problem records first, at most ``size``."""
    return {
        "size": size,
        "track_total_hits": False,
        "_source": [DOCUMENT_PATH, f"{METADATA}.{_REASON}"],
        "query": {"bool": {"filter": [*scope_filters(scope), {"term": {RECORD: RECORD_PROBLEM}}]}},
        "sort": [
            {f"{METADATA}.{_RECORDED_AT}": {"order": "desc", "unmapped_type": "keyword"}},
            {DOCUMENT_PATH: "asc"},
        ],
    }


def parse_problems(response: Mapping[str, Any]) -> tuple[FileProblem, ...]:
    problems: list[FileProblem] = []
    for hit in response.get("hits", {}).get("hits", []):
        source = hit.get("_source") or {}
        path = source.get(DOCUMENT_PATH)
        reason = (source.get(METADATA) or {}).get(_REASON)
        if isinstance(path, str) and isinstance(reason, str):
            problems.append(FileProblem(path, reason))
    return tuple(problems)
