"""Request bodies and a response reader for the contexts of one agent: pure, no I/O.

One composite aggregation on ``context``, filtered on the agent (a scope's unread-files
and synonyms records alone make no context, as in ``queries.scopes_page_body``), with the
counts ``status`` reads per scope as sub-aggregations: chunks, indexed document records
and their latest ``indexed_at``, records with a problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from knowledge.core.scope_summary import ScopeSummary, summary_state
from knowledge.stores.opensearch.mapping import (
    AGENT,
    CONTEXT,
    GENERATION,
    INDEXED_AT,
    PROBLEM_AT,
    RECORD,
    RECORD_CHUNK,
    RECORD_DOCUMENT,
    RECORD_SYNONYMS,
    RECORD_UNREAD,
)

__all__ = ["agent_scopes_body", "parse_agent_scopes"]


def _records_with(field: str) -> dict[str, Any]:
    return {"bool": {"filter": [{"term": {RECORD: RECORD_DOCUMENT}}, {"exists": {"field": field}}]}}


def agent_scopes_body(
    agent: str, page_size: int, after: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """One page of ``agent``'s contexts with their counts."""
    composite: dict[str, Any] = {
        "size": page_size,
        "sources": [{"context": {"terms": {"field": CONTEXT}}}],
    }
    if after is not None:
        composite["after"] = dict(after)
    return {
        "size": 0,
        "track_total_hits": False,
        "query": {
            "bool": {
                "filter": [{"term": {AGENT: agent}}],
                "must_not": [{"terms": {RECORD: [RECORD_UNREAD, RECORD_SYNONYMS]}}],
            }
        },
        "aggs": {
            "contexts": {
                "composite": composite,
                "aggs": {
                    "chunks": {"filter": {"term": {RECORD: RECORD_CHUNK}}},
                    "indexed": {
                        "filter": _records_with(GENERATION),
                        "aggs": {"last_indexed": {"max": {"field": INDEXED_AT}}},
                    },
                    "problems": {"filter": _records_with(PROBLEM_AT)},
                },
            }
        },
    }


def _when(bucket: Mapping[str, Any]) -> datetime | None:
    """A ``max`` of ``indexed_at``, read as ``answers.parse_scope_stats`` reads it."""
    text, millis = bucket.get("value_as_string"), bucket.get("value")
    if isinstance(text, str):
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    if isinstance(millis, int | float):
        return datetime.fromtimestamp(float(millis) / 1000.0, tz=UTC)
    return None


def parse_agent_scopes(
    response: Mapping[str, Any], writing: frozenset[str]
) -> tuple[list[ScopeSummary], dict[str, Any] | None]:
    """The contexts of one page (``writing``: those this store has a write session open
    on) and the ``after`` key of the next (``None``: done). A context with neither an
    indexed document nor a problem (chunks of a first write not committed yet) is none."""
    agg = response.get("aggregations", {}).get("contexts", {})
    buckets = agg.get("buckets", [])
    found: list[ScopeSummary] = []
    for bucket in buckets:
        context = (bucket.get("key") or {}).get("context")
        indexed = bucket.get("indexed", {})
        documents = int(indexed.get("doc_count", 0))
        problems = int(bucket.get("problems", {}).get("doc_count", 0))
        if not isinstance(context, str) or not (documents or problems):
            continue
        found.append(
            ScopeSummary(
                context=context,
                document_count=documents,
                chunk_count=int(bucket.get("chunks", {}).get("doc_count", 0)),
                problem_count=problems,
                last_indexed_at=_when(indexed.get("last_indexed", {})) if documents else None,
                state=summary_state(documents, writing=context in writing),
            )
        )
    return found, (agg.get("after_key") if buckets else None)
