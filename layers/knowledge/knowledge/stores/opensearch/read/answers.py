"""Readers of the read side's answers: candidates, scope facts, stored documents, scopes.

The value types a read answer becomes (``ScopeStats``, ``StoredDocument``) and the pure
functions that read them from a response (``parse_*``), plus ``newest_generations``:
only each document's newest generation among the hits, so a document being replaced
never shows twice. A hit itself (``Hit``, ``parse_hits``) is ``hits``', which the write
side reads too; the request bodies are ``queries``'. No I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from knowledge.core.errors import InvalidScopeError
from knowledge.core.scope import KnowledgeScope
from knowledge.stores.opensearch.hits import INCOMPLETE_HASH, MATCHED, Hit, doc_values
from knowledge.stores.opensearch.mapping import (
    CHUNK_COUNT,
    CHUNK_INDEX,
    CONTENT_HASH,
    DOCUMENT_ID,
    GENERATION,
    REPLACES,
    UNREAD_FILES,
    VERSION,
)
from knowledge.stores.protocol import StoredDocument

__all__ = [
    "ScopeStats",
    "chunk_id_facts",
    "newest_generations",
    "parse_candidates",
    "parse_scope_stats",
    "parse_scopes_page",
    "parse_stored_document",
    "parse_stored_documents",
    "replaced_still_shown",
]


def parse_candidates(response: Mapping[str, Any]) -> list[Hit]:
    """The hits of a hybrid candidate request (``_candidate_fields``), in order, each with
    what its ``_id`` says of it (``chunk_id_facts``) and its doc values (which win)."""
    candidates: list[Hit] = []
    for h in response.get("hits", {}).get("hits", []):
        chunk_id = str(h["_id"])
        facts = chunk_id_facts(chunk_id)
        if "fields" in h:
            facts.update(doc_values(h["fields"]))
        if h.get("matched_queries"):
            facts[MATCHED] = tuple(h["matched_queries"])
        candidates.append(Hit(chunk_id, float(h.get("_score") or 0.0), facts))
    return candidates


def chunk_id_facts(chunk_id: str) -> dict[str, Any]:
    """``document_id``, ``generation`` and ``chunk_index`` as a chunk id made by
    ``generation_chunk_id`` says them (``document_id`` and ``chunk_index`` of a schema-1
    ``<document>:<index>`` id); nothing for an id of another form (a server-made one)."""
    parts = chunk_id.split(":")
    if len(parts) == 3 and parts[0] and parts[1] and parts[2].isdigit():
        return {DOCUMENT_ID: parts[0], GENERATION: parts[1], CHUNK_INDEX: int(parts[2])}
    if len(parts) == 2 and parts[0] and parts[1].isdigit():
        return {DOCUMENT_ID: parts[0], CHUNK_INDEX: int(parts[1])}
    return {}


@dataclass(frozen=True, slots=True)
class ScopeStats:
    document_count: int
    chunk_count: int
    last_indexed_at: datetime | None
    embedded_chunks: int = 0
    reused_chunks: int = 0
    unread_files: Mapping[str, int] = dataclasses.field(default_factory=dict)


def parse_scope_stats(response: Mapping[str, Any]) -> ScopeStats:
    aggs = response.get("aggregations", {})
    chunks = int(aggs.get("chunks", {}).get("doc_count") or 0)
    records = aggs.get("records", {})
    documents = int(records.get("documents", {}).get("value") or 0)
    last = records.get("last_indexed", {})
    last_text = last.get("value_as_string")
    last_ms = last.get("value")
    last_at: datetime | None = None
    if documents and last_text:
        last_at = datetime.fromisoformat(str(last_text))  # reads "Z" since Python 3.11
    elif documents and last_ms is not None:
        last_at = datetime.fromtimestamp(float(last_ms) / 1000.0, tz=UTC)
    return ScopeStats(
        document_count=documents,
        chunk_count=chunks,
        last_indexed_at=last_at,
        embedded_chunks=int(records.get("embedded", {}).get("value") or 0),
        reused_chunks=int(records.get("reused", {}).get("value") or 0),
        unread_files=_unread_files(aggs.get("unread", {})),
    )


def _unread_files(agg: Mapping[str, Any]) -> dict[str, int]:
    hits = agg.get("latest", {}).get("hits", {}).get("hits") or []
    counts = (hits[0].get("_source") or {}).get(UNREAD_FILES) if hits else None
    if not isinstance(counts, Mapping):
        return {}
    return {
        str(k): int(v) for k, v in counts.items() if isinstance(v, int) and not isinstance(v, bool)
    }


def replaced_still_shown(record: Mapping[str, Any], buckets: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the generation a document ``record`` replaced (``REPLACES``) is among the
    generations searches show for the document (``buckets`` of a ``terms`` aggregation on
    ``GENERATION``): the write's step 3 has not reached the searches yet."""
    replaced = record.get(REPLACES)
    return isinstance(replaced, str) and any(b.get("key") == replaced for b in buckets)


def _stored(path: str, aggs: Mapping[str, Any]) -> StoredDocument | None:
    record = aggs.get("record", {})
    chunks = int(aggs.get("chunks", {}).get("doc_count") or 0)
    top = record.get("latest", {}).get("hits", {}).get("hits", [])
    if not top and not chunks:
        return None
    source: Mapping[str, Any] = top[0].get("_source", {}) if top else {}
    declared = source.get(CHUNK_COUNT)
    generations = aggs.get("chunks", {}).get("generations", {}).get("buckets", [])
    of_record = sum(
        int(b.get("doc_count") or 0) for b in generations if b.get("key") == source.get(GENERATION)
    )
    complete = (
        bool(top)
        and isinstance(declared, int)
        and declared == of_record
        and not replaced_still_shown(source, generations)
    )
    # Chunks without their record, two records, a count that does not match, or the
    # generation the record replaced still there: a write that did not finish. Reported
    # with a hash nothing equals, so it is written again.
    content_hash = str(source.get(CONTENT_HASH) or "") if complete else INCOMPLETE_HASH
    version, generation = source.get(VERSION), source.get(GENERATION)
    return StoredDocument(
        path=path,
        content_hash=content_hash,
        version=None if version is None else str(version),
        chunk_count=chunks,
        generation=None if generation is None else str(generation),
    )


def parse_stored_documents(
    response: Mapping[str, Any],
) -> tuple[dict[str, StoredDocument], dict[str, Any] | None]:
    """The documents of one composite page and the ``after`` key of the next (None: done)."""
    agg = response.get("aggregations", {}).get("documents", {})
    buckets = agg.get("buckets", [])
    documents: dict[str, StoredDocument] = {}
    for bucket in buckets:
        path = str(bucket["key"]["path"])
        stored = _stored(path, bucket)
        if stored is not None:
            documents[path] = stored
    after = agg.get("after_key") if buckets else None
    return documents, after


def parse_scopes_page(
    response: Mapping[str, Any],
) -> tuple[list[KnowledgeScope], dict[str, Any] | None]:
    """The scopes of one composite page and the ``after`` key of the next (None: done).
    A pair that is not a valid scope (written by something else) is left out."""
    agg = response.get("aggregations", {}).get("scopes", {})
    buckets = agg.get("buckets", [])
    scopes: list[KnowledgeScope] = []
    for bucket in buckets:
        key = bucket.get("key") or {}
        agent, context = key.get("agent"), key.get("context")
        if not isinstance(agent, str) or not isinstance(context, str):
            continue  # a missing value is no scope (str(None) would make one: "None")
        try:
            scopes.append(KnowledgeScope(agent, context))
        except InvalidScopeError:
            continue
    after = agg.get("after_key") if buckets else None
    return scopes, after


def parse_stored_document(response: Mapping[str, Any], path: str) -> StoredDocument | None:
    return _stored(path, response.get("aggregations", {}))


def newest_generations(hits: Sequence[Hit]) -> list[Hit]:
    """The hits of each document's newest generation among ``hits``, in order.

    While a document is being replaced (or on Serverless, where an older generation may
    stay searchable for a refresh interval or two), both versions can match: a search
    shows one version of a document, never a mix or a duplicate; and one hit per
    (document, generation, chunk). Hits without a generation (schema 1) are kept."""
    newest: dict[str, str] = {}
    keys: list[tuple[object, object, object]] = []
    dropping = False  # a document with hits of two generations, or a generation alone
    for hit in hits:
        source = hit.source
        document, generation = source.get(DOCUMENT_ID), source.get(GENERATION)
        keys.append((document, generation, source.get(CHUNK_INDEX)))
        if not isinstance(generation, str):
            continue
        if not isinstance(document, str):
            dropping = True
            continue
        known = newest.get(document)
        if known is None:
            newest[document] = generation
        elif generation != known:
            dropping = True
            if generation > known:
                newest[document] = generation
    if not dropping and len(set(keys)) == len(keys):
        return list(hits)  # the usual case: one generation each, no chunk twice
    kept: list[Hit] = []
    seen: set[tuple[object, object, object]] = set()
    for hit, key in zip(hits, keys, strict=True):
        document, generation, _ = key
        if not isinstance(generation, str):
            kept.append(hit)
            continue
        if generation != newest.get(str(document)):
            continue
        if key not in seen:
            seen.add(key)  # one hit per chunk (a retried bulk may store one twice)
            kept.append(hit)
    return kept
