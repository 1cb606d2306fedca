"""The documents the OpenSearch writer sends: chunk sources and the per-document records.

``chunk_document`` is one chunk's ``_source`` (scope, document facts, generation,
content, keyword terms, metadata and its key/value terms, vector and ``embedding_key``);
``document_record`` the commit record written after all of a document's chunks,
``problem_record``/``problem_fields`` a document's recorded problem and
``unread_record`` the scope's counts of unread files (the layout: ``mapping``). Pure
functions, no I/O.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from knowledge.core.model import DocumentChunk
from knowledge.core.scope import KnowledgeScope
from knowledge.ranking.analysis import keyword_terms
from knowledge.ranking.headings import heading_terms
from knowledge.stores.opensearch.mapping import (
    AGENT,
    CHUNK_COUNT,
    CHUNK_INDEX,
    CONTENT,
    CONTENT_HASH,
    CONTENT_TERMS,
    CONTEXT,
    DOCUMENT_ID,
    DOCUMENT_NAME,
    DOCUMENT_PATH,
    EMBEDDED_CHUNKS,
    EMBEDDING,
    EMBEDDING_KEY,
    FORMAT,
    GENERATION,
    INDEXED_AT,
    METADATA,
    ORIGIN,
    PAGE_TERMS,
    PROBLEM,
    PROBLEM_AT,
    RECORD,
    RECORD_CHUNK,
    RECORD_DOCUMENT,
    RECORD_UNREAD,
    REUSED_CHUNKS,
    SIZE,
    UNREAD_FILES,
    VERSION,
    is_zero_vector,
)
from knowledge.stores.opensearch.metadata_pairs import (
    metadata_terms,
)
from knowledge.stores.protocol import DocumentHeader

__all__ = [
    "chunk_document",
    "document_record",
    "problem_fields",
    "problem_record",
    "unread_record",
]


def _utc_text(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


def _document_facts(
    scope: KnowledgeScope, header: DocumentHeader, generation: str
) -> dict[str, Any]:
    return {
        AGENT: scope.agent,
        CONTEXT: scope.context,
        DOCUMENT_ID: header.document_id,
        DOCUMENT_PATH: header.path,
        DOCUMENT_NAME: posixpath.basename(header.path),
        CONTENT_HASH: header.content_hash,
        VERSION: header.version,
        INDEXED_AT: _utc_text(header.indexed_at),
        GENERATION: generation,
    }


def chunk_document(
    scope: KnowledgeScope,
    header: DocumentHeader,
    chunk: DocumentChunk,
    *,
    vector: Sequence[float] | None,
    generation: str,
    embedding_key: str | None = None,
    metadata_pairs: bool = True,
    headings: bool = True,
    text_terms: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The ``_source`` of one chunk: scope, document facts, generation, content, its
    keyword terms (with ``headings``, its title and heading terms among them), metadata
    (and, with ``metadata_pairs``, its key/value terms: an index of schema 4), vector and
    its ``embedding_key``. A zero vector is left out (see ``is_zero_vector``):
    the chunk is then found by keyword search only (its key stays: a key without a
    vector stands for the zero vector when it is reused)."""
    metadata = _json_safe({**dict(header.metadata), **dict(chunk.metadata)})
    source: dict[str, Any] = {
        RECORD: RECORD_CHUNK,
        **_document_facts(scope, header, generation),
        CHUNK_INDEX: chunk.chunk_index,
        CONTENT: chunk.content,
        METADATA: metadata,
    }
    if metadata_pairs:
        source.update(metadata_terms(metadata))
    # ``text_terms``: the chunk's keyword_terms when the writer has them already.
    terms = list(text_terms) if text_terms is not None else keyword_terms(chunk.content)
    if headings:
        terms += heading_terms(chunk.metadata)
    if terms:
        source[CONTENT_TERMS] = " ".join(terms)
    if vector is not None and not is_zero_vector(vector):
        source[EMBEDDING] = [float(x) for x in vector]
    if vector is not None and embedding_key is not None:
        source[EMBEDDING_KEY] = embedding_key
    return source


def document_record(
    scope: KnowledgeScope,
    header: DocumentHeader,
    *,
    chunk_count: int,
    generation: str,
    format: str | None = None,
    origin: str | None = None,
    size: int | None = None,
    embedded_chunks: int = 0,
    reused_chunks: int = 0,
    page_terms: Sequence[str] = (),
) -> dict[str, Any]:
    """The ``_source`` of a document's record (no content, no vector): its facts, the
    generation of its chunks that searches show, how many of them were embedded and how
    many kept their vector, no problem (a write succeeded), and its page row
    (``page_terms``: its chunks' keyword terms, ``knowledge.ranking.page_signal``)."""
    record: dict[str, Any] = {
        RECORD: RECORD_DOCUMENT,
        **_document_facts(scope, header, generation),
        CHUNK_COUNT: chunk_count,
        EMBEDDED_CHUNKS: embedded_chunks,
        REUSED_CHUNKS: reused_chunks,
        FORMAT: format,
        ORIGIN: origin,
        SIZE: size,
        PROBLEM: None,
        PROBLEM_AT: None,
    }
    if page_terms:
        record[PAGE_TERMS] = " ".join(page_terms)
    return record


def unread_record(scope: KnowledgeScope, counts: Mapping[str, int], at: datetime) -> dict[str, Any]:
    """The scope's record of the files no pattern selects (``IndexStatus.unread_files``):
    no document id or path, so no document count, listing or problem query reads it."""
    return {
        RECORD: RECORD_UNREAD,
        AGENT: scope.agent,
        CONTEXT: scope.context,
        INDEXED_AT: _utc_text(at),
        UNREAD_FILES: {str(k): int(v) for k, v in counts.items()},
    }


def problem_fields(reason: str, at: datetime) -> dict[str, Any]:
    """What ``record_problem`` merges into a document's record."""
    return {PROBLEM: reason[:2000], PROBLEM_AT: _utc_text(at)}


def problem_record(
    scope: KnowledgeScope, document_id: str, path: str, reason: str, at: datetime
) -> dict[str, Any]:
    """A record for a document that has a problem and no indexed version (no generation:
    it counts as no document)."""
    return {
        RECORD: RECORD_DOCUMENT,
        AGENT: scope.agent,
        CONTEXT: scope.context,
        DOCUMENT_ID: document_id,
        DOCUMENT_PATH: path,
        DOCUMENT_NAME: posixpath.basename(path),
        **problem_fields(reason, at),
    }


def _json_safe(value: Any) -> Any:
    """Metadata as JSON: tuples become lists, datetimes ISO strings, other objects strings."""
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_json_safe(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)
