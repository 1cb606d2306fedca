"""The memory store's TF-IDF scoring: the chunks' raw scores (``chunk_scores``, inside the
query's filters), the sublinear term frequency, a chunk's document and the page rows'
scores (``knowledge.ranking.page_signal``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime

from knowledge.core.filter_language import matches_filter
from knowledge.core.model import DocumentChunk, SearchQuery
from knowledge.core.path_filters import matches_file_patterns, matches_metadata
from knowledge.stores.memory_snapshots import ChunkKey, ChunkRecord, Snapshot

__all__ = ["chunk_scores", "document_of", "page_scores", "sublinear", "wanted"]


def sublinear(count: float) -> float:
    """``1 + ln tf``; below 1 (a term only in the headings, weighed < 1) ``tf`` itself,
    so a term counts more the more it occurs, and never negatively."""
    return 1.0 + math.log(count) if count >= 1.0 else count


def document_of(key: ChunkKey) -> tuple[str, str]:
    """A chunk key's document: (scope key, path)."""
    return key[2], key[0]


def page_scores(
    snapshots: Sequence[Snapshot],
    terms: Mapping[str, float],
    wanted: set[tuple[str, str]],
    pages: dict[tuple[str, str], float],
) -> None:
    """Add the page-row scores of the ``wanted`` documents (scope key, path) of
    ``snapshots``, scored as chunks are (each term at its weight: a term a synonym added
    at ``SYNONYM_WEIGHT``, ``knowledge.ranking.synonym_expansion``), with ``N`` and ``df``
    counted over those snapshots' documents."""
    total = sum(len(s.documents) for s in snapshots)
    frequencies = {t: sum(len(s.page_postings.get(t, ())) for s in snapshots) for t in terms}
    for snapshot in snapshots:
        key = snapshot.scope.key
        for term, weight in terms.items():
            for path, count in snapshot.page_postings.get(term, {}).items():
                if (key, path) in wanted:
                    idf = weight * math.log(1.0 + total / frequencies[term])
                    pages[key, path] = pages.get((key, path), 0.0) + sublinear(count) * idf


def chunk_scores(
    snapshots: Sequence[Snapshot],
    terms: Mapping[str, float],
    query: SearchQuery,
    scores: dict[ChunkKey, float],
    records: dict[ChunkKey, ChunkRecord],
) -> None:
    """Add the raw TF-IDF scores of ``snapshots``' chunks, with ``N`` and ``df`` counted over
    those snapshots only."""
    if not snapshots:
        return
    total_chunks = sum(len(s.chunks) for s in snapshots)
    frequencies = {t: sum(len(s.postings.get(t, ())) for s in snapshots) for t in terms}
    rejected: set[ChunkKey] = set()
    for snapshot in snapshots:
        for term, weight in terms.items():
            posting = snapshot.postings.get(term)
            if not posting:
                continue
            idf = weight * math.log(1.0 + total_chunks / frequencies[term])
            for key, count in posting.items():
                if key in rejected:
                    continue
                if key not in records:
                    record = snapshot.chunks[key]
                    document = snapshot.documents.get(record.chunk.document_path)
                    indexed_at = None if document is None else document.indexed_at
                    if not wanted(record.chunk, query, indexed_at):
                        rejected.add(key)
                        continue
                    records[key] = record
                scores[key] = scores.get(key, 0.0) + sublinear(count) * idf


def wanted(chunk: DocumentChunk, query: SearchQuery, indexed_at: datetime | None) -> bool:
    """Whether ``chunk`` passes the query's file patterns, metadata and filter."""
    return (
        matches_file_patterns(chunk.document_path, query.file_patterns)
        and matches_metadata(chunk.metadata, query.metadata)
        and (
            query.filter is None
            or matches_filter(
                query.filter,
                path=chunk.document_path,
                metadata=chunk.metadata,
                indexed_at=indexed_at,
            )
        )
    )
