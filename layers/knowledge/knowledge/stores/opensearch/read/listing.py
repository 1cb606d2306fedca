"""Request bodies and a response reader for the documents listing: pure functions, no I/O.

The listing reads the per-document records (``record: document``, one per document, id =
the document id; see README "Writes"): a record with a ``generation`` is an indexed
document, one with a ``problem_at`` has a problem, one with both is an indexed document
whose latest attempt failed. A page holding records that replaced a generation asks once
more whether searches still show those generations (``replaced_shown_body``), as one
document's read does in its own request (``parse_document_record``). Pages are ``search_after`` on
``document_path`` (a ``keyword``: UTF-8 byte order, the order of ``knowledge.core.documents``),
so a page costs the same wherever it is in the scope and no scroll context is held
between requests.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from knowledge.core.documents import IndexedDocument
from knowledge.core.scope import KnowledgeScope
from knowledge.stores.opensearch.hits import parse_hits
from knowledge.stores.opensearch.mapping import (
    CHUNK_COUNT,
    CONTENT_HASH,
    DOCUMENT_PATH,
    FORMAT,
    GENERATION,
    INDEXED_AT,
    ORIGIN,
    PROBLEM,
    PROBLEM_AT,
    RECORD,
    RECORD_DOCUMENT,
    REPLACES,
    SIZE,
    VERSION,
)
from knowledge.stores.opensearch.read.answers import replaced_still_shown
from knowledge.stores.opensearch.request_filters import scope_filters

__all__ = [
    "document_record_body",
    "documents_page_body",
    "parse_document_record",
    "parse_documents",
    "replaced_generations",
    "replaced_shown_body",
]

_FIELDS = (
    DOCUMENT_PATH,
    FORMAT,
    ORIGIN,
    SIZE,
    CHUNK_COUNT,
    VERSION,
    CONTENT_HASH,
    INDEXED_AT,
    GENERATION,
    PROBLEM,
)


def _records_query(scope: KnowledgeScope, path: str | None = None) -> dict[str, Any]:
    filters: list[dict[str, Any]] = [*scope_filters(scope), {"term": {RECORD: RECORD_DOCUMENT}}]
    if path is not None:
        filters.append({"term": {DOCUMENT_PATH: path}})
    return {
        "bool": {
            "filter": filters,
            # An indexed version, a problem, or both: a record with neither lists nothing.
            "should": [{"exists": {"field": GENERATION}}, {"exists": {"field": PROBLEM_AT}}],
            "minimum_should_match": 1,
        }
    }


def documents_page_body(scope: KnowledgeScope, size: int, after: str | None) -> dict[str, Any]:
    """Up to ``size`` records of exactly this scope with a path after ``after``, by path."""
    body: dict[str, Any] = {
        "size": size,
        "track_total_hits": False,
        "_source": {"includes": [*_FIELDS, REPLACES]},
        "query": _records_query(scope),
        "sort": [{DOCUMENT_PATH: {"order": "asc"}}],
    }
    if after is not None:
        body["search_after"] = [after]
    return body


def document_record_body(scope: KnowledgeScope, path: str) -> dict[str, Any]:
    """The record of one document of exactly this scope, and the generations searches
    show for it (its record's and its chunks', as of the same refresh): a record that
    replaced a generation whose chunks searches still show reads as not indexed yet
    (``parse_document_record``)."""
    return {
        "size": 1,
        "track_total_hits": False,
        "_source": {"includes": [*_FIELDS, REPLACES]},
        "query": {"bool": {"filter": [*scope_filters(scope), {"term": {DOCUMENT_PATH: path}}]}},
        "post_filter": _records_query(scope, path),
        "aggs": {_SHOWN: {"terms": {"field": GENERATION, "size": _SHOWN_GENERATIONS}}},
    }


def replaced_generations(response: Mapping[str, Any]) -> dict[str, str]:
    """Path -> the generation its record replaced, for the records of a
    ``documents_page_body`` answer that name one (``REPLACES``)."""
    found: dict[str, str] = {}
    for hit in parse_hits(response):
        path, replaced = hit.source.get(DOCUMENT_PATH), hit.source.get(REPLACES)
        if isinstance(path, str) and isinstance(replaced, str):
            found[path] = replaced
    return found


def replaced_shown_body(scope: KnowledgeScope, replaced: Mapping[str, str]) -> dict[str, Any]:
    """Which of the ``replaced`` generations (path -> generation, ``replaced_generations``)
    searches of exactly this scope still show: asked after the page was read, so an
    answer that shows none is at least as new as the page (refreshes only move forward)."""
    generations = sorted(set(replaced.values()))
    return {
        "size": 0,
        "track_total_hits": False,
        "query": {
            "bool": {
                "filter": [
                    *scope_filters(scope),
                    {"terms": {DOCUMENT_PATH: sorted(replaced)}},
                    {"terms": {GENERATION: generations}},
                ]
            }
        },
        "aggs": {_SHOWN: {"terms": {"field": GENERATION, "size": len(generations)}}},
    }


_SHOWN = "shown_generations"
# A document's generations searches show at once: its own, the one it replaced until
# the deletes are searchable, an orphan or two (knowledge.stores.opensearch.write.generations).
_SHOWN_GENERATIONS = 16


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _when(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _document(source: Mapping[str, Any]) -> IndexedDocument | None:
    path = source.get(DOCUMENT_PATH)
    if not isinstance(path, str):
        return None
    indexed = isinstance(source.get(GENERATION), str)
    size, chunks = source.get(SIZE), source.get(CHUNK_COUNT)
    return IndexedDocument(
        path=path,
        format=_text(source.get(FORMAT)) if indexed else None,
        origin=_text(source.get(ORIGIN)) if indexed else None,
        size=size if indexed and isinstance(size, int) else None,
        chunk_count=chunks if indexed and isinstance(chunks, int) else 0,
        version=_text(source.get(VERSION)) if indexed else None,
        content_hash=_text(source.get(CONTENT_HASH)) if indexed else None,
        indexed_at=_when(source.get(INDEXED_AT)) if indexed else None,
        problem=_text(source.get(PROBLEM)),
    )


def _shown(response: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The ``_SHOWN`` buckets of an answer (none without one)."""
    buckets: list[Mapping[str, Any]] = (
        (response or {}).get("aggregations", {}).get(_SHOWN, {}).get("buckets", [])
    )
    return buckets


def _as_searched(
    source: Mapping[str, Any], shown: list[Mapping[str, Any]]
) -> IndexedDocument | None:
    """The document of a record, as searches show it: while the chunks of the generation
    the record replaced are still among the ``shown`` ones (the write's step 3 has not
    reached the searches yet), the new version is not what every search shows, and the
    document reads as not indexed yet, as a first write does before its record."""
    if replaced_still_shown(source, shown):
        source = {**source, GENERATION: None}  # read as a record with no indexed version
    return _document(source)


def parse_document_record(response: Mapping[str, Any]) -> IndexedDocument | None:
    """The document of a ``document_record_body`` answer (``_as_searched``)."""
    hits = parse_hits(response)
    return _as_searched(hits[0].source, _shown(response)) if hits else None


def parse_documents(
    response: Mapping[str, Any], shown: Mapping[str, Any] | None = None
) -> list[IndexedDocument]:
    """The documents of a ``documents_page_body`` answer, in order. ``shown``: the answer
    to its ``replaced_shown_body``, read as in ``parse_document_record``."""
    buckets = _shown(shown)
    documents = (_as_searched(hit.source, buckets) for hit in parse_hits(response))
    return [d for d in documents if d is not None]
