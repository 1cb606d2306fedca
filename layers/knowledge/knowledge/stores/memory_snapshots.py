"""The memory store's values: per-scope snapshots, and how a session's changes make one.

A scope's index is an immutable ``Snapshot`` (documents, chunks, postings, problems,
unread counts); ``apply_changes`` builds the next one from a base and a session's
changes without touching the base, which searches may still be reading
(``knowledge.stores.memory``). ``listed_document`` and ``latest_problems`` read one back.
Pure values and functions, no locks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from knowledge.core.documents import (
    IndexedDocument,
)
from knowledge.core.model import (
    MAX_STATUS_PROBLEMS,
    DocumentChunk,
    FileProblem,
)
from knowledge.core.scope import KnowledgeScope
from knowledge.stores.protocol import StoredDocument

__all__ = [
    "ChunkKey",
    "ChunkRecord",
    "DocumentRecord",
    "Snapshot",
    "apply_changes",
    "empty_snapshot",
    "latest_problems",
    "listed_document",
]


# (document path, chunk index, scope key): unique across the snapshots of one agent, and
# ordered so that equal scores rank by path, then position (fusion breaks ties by key).
ChunkKey = tuple[str, int, str]


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    key: ChunkKey
    chunk: DocumentChunk
    term_counts: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class DocumentRecord:
    stored: StoredDocument
    chunks: tuple[ChunkRecord, ...]
    indexed_at: datetime | None = None
    format: str | None = None
    size: int | None = None
    origin: str | None = None
    # The page row (knowledge.ranking.page_signal): the document's text terms, counted.
    page_terms: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One scope's index. Its dicts are never mutated once the snapshot is published."""

    scope: KnowledgeScope
    documents: Mapping[str, DocumentRecord]
    chunks: Mapping[ChunkKey, ChunkRecord]
    postings: Mapping[str, Mapping[ChunkKey, float]]  # term -> chunk -> term frequency
    last_indexed_at: datetime | None
    # path -> (when recorded: a store-wide sequence number, reason); most recent = highest
    problems: Mapping[str, tuple[int, str]]
    unread: Mapping[str, int] = field(default_factory=dict)  # IndexStatus.unread_files
    # term -> document path -> its count in the page row (knowledge.ranking.page_signal)
    page_postings: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    synonyms: str | None = None  # the scope's synonyms text (ranking.synonym_expansion), config


def empty_snapshot(scope: KnowledgeScope) -> Snapshot:
    return Snapshot(scope, {}, {}, {}, None, {})


def apply_changes(
    base: Snapshot,
    changes: Mapping[str, DocumentRecord | None],
    at: datetime,
    problems: Mapping[str, tuple[int, str] | None],
    unread: Mapping[str, int] | None = None,
    *,
    synonyms: tuple[str | None] | None = None,
) -> Snapshot:
    """A new snapshot: ``base`` with each changed path replaced (``None``: removed) and
    each changed problem set (``None``: cleared); ``synonyms`` (a 1-tuple) replaces the
    scope's synonyms text, ``None`` keeps it.

    Copies the outer dicts and only the posting lists of the terms that change.
    """
    documents = dict(base.documents)
    chunks = dict(base.chunks)
    owned: dict[str, dict[ChunkKey, float]] = {}
    owned_pages: dict[str, dict[str, int]] = {}

    def own(term: str) -> dict[ChunkKey, float]:
        if term not in owned:
            owned[term] = dict(base.postings.get(term, {}))
        return owned[term]

    def own_page(term: str) -> dict[str, int]:
        if term not in owned_pages:
            owned_pages[term] = dict(base.page_postings.get(term, {}))
        return owned_pages[term]

    for path, new in changes.items():
        old = documents.pop(path, None)
        if old is not None:
            for record in old.chunks:
                del chunks[record.key]
                for term in record.term_counts:
                    del own(term)[record.key]
            for term in old.page_terms:
                del own_page(term)[path]
        if new is not None:
            documents[path] = new
            for record in new.chunks:
                chunks[record.key] = record
                for term, count in record.term_counts.items():
                    own(term)[record.key] = count
            for term, page_count in new.page_terms.items():
                own_page(term)[path] = page_count
    postings = dict(base.postings)
    for term, posting in owned.items():
        if posting:
            postings[term] = posting
        else:
            postings.pop(term, None)
    page_postings = dict(base.page_postings)
    for term, pages in owned_pages.items():
        if pages:
            page_postings[term] = pages
        else:
            page_postings.pop(term, None)
    recorded = dict(base.problems)
    for path, problem in problems.items():
        if problem is None:
            recorded.pop(path, None)
        else:
            recorded[path] = problem
    counts = base.unread if unread is None else MappingProxyType(dict(unread))
    text = base.synonyms if synonyms is None else synonyms[0]
    return Snapshot(
        base.scope, documents, chunks, postings, at, recorded, counts, page_postings, text
    )


def latest_problems(problems: Mapping[str, tuple[int, str]]) -> tuple[FileProblem, ...]:
    latest = sorted(problems.items(), key=lambda item: item[1][0], reverse=True)
    return tuple(FileProblem(path, reason) for path, (_, reason) in latest[:MAX_STATUS_PROBLEMS])


def listed_document(snapshot: Snapshot, path: str) -> IndexedDocument:
    record = snapshot.documents.get(path)
    problem = snapshot.problems.get(path)
    reason = None if problem is None else problem[1]
    if record is None:
        return IndexedDocument(path, None, None, 0, None, None, None, reason)
    return IndexedDocument(
        path=path,
        format=record.format,
        size=record.size,
        chunk_count=record.stored.chunk_count,
        version=record.stored.version,
        content_hash=record.stored.content_hash,
        indexed_at=record.indexed_at,
        problem=reason,
        origin=record.origin,
    )
