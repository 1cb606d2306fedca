"""Request bodies and response readers for one document's chunk listing: pure, no I/O.

The chunks listed are those of the generation the document's record names
(``knowledge.stores.opensearch.write.generations``): the committed version, never a writer's
generation still in flight nor an orphan, though searches may show those for a while.
The record is read first (``listing.document_record_body``, the document route's own
read: a document that reads as not indexed there has no chunks here), then a page of its
chunks: ``search_after`` on ``chunk_index``, so a page costs the same wherever it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from knowledge.core.chunk_listing import IndexedChunk
from knowledge.core.scope import KnowledgeScope
from knowledge.stores.opensearch.hits import parse_hits
from knowledge.stores.opensearch.mapping import (
    CHUNK_INDEX,
    CONTENT,
    DOCUMENT_PATH,
    GENERATION,
    METADATA,
    RECORD,
    RECORD_CHUNK,
)
from knowledge.stores.opensearch.read.listing import parse_document_record
from knowledge.stores.opensearch.request_filters import scope_filters

__all__ = ["chunks_page_body", "indexed_generation", "parse_chunks"]


def indexed_generation(response: Mapping[str, Any]) -> str | None:
    """The generation of the indexed version named by a ``listing.document_record_body``
    answer; ``None`` when the document reads as not indexed (no record, a problem only,
    or a new version searches do not show yet)."""
    document = parse_document_record(response)
    if document is None or not document.indexed:
        return None
    hits = parse_hits(response)
    generation = hits[0].source.get(GENERATION) if hits else None
    return generation if isinstance(generation, str) else None


def chunks_page_body(
    scope: KnowledgeScope, path: str, generation: str, size: int, after: int | None
) -> dict[str, Any]:
    """Up to ``size`` chunks of ``generation`` of ``path`` in exactly this scope with an
    index after ``after``, by index."""
    body: dict[str, Any] = {
        "size": size,
        "track_total_hits": False,
        "_source": {"includes": [CHUNK_INDEX, CONTENT, METADATA]},
        "query": {
            "bool": {
                "filter": [
                    *scope_filters(scope),
                    {"term": {RECORD: RECORD_CHUNK}},
                    {"term": {DOCUMENT_PATH: path}},
                    {"term": {GENERATION: generation}},
                ]
            }
        },
        "sort": [{CHUNK_INDEX: {"order": "asc"}}],
    }
    if after is not None:
        body["search_after"] = [after]
    return body


def parse_chunks(response: Mapping[str, Any]) -> list[IndexedChunk]:
    """The chunks of a ``chunks_page_body`` answer, in order."""
    chunks: list[IndexedChunk] = []
    for hit in parse_hits(response):
        index, content = hit.source.get(CHUNK_INDEX), hit.source.get(CONTENT)
        metadata = hit.source.get(METADATA)
        if isinstance(index, bool) or not isinstance(index, int) or not isinstance(content, str):
            continue  # not a chunk this store wrote
        chunks.append(IndexedChunk(index, content, metadata if isinstance(metadata, dict) else {}))
    return chunks
