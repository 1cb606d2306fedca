"""The OpenSearch store's write-side requests: chunk ids, document records and their
generations, problems, stored vectors, and ``_bulk`` actions (pure builders and parsers,
no I/O; the read side is ``queries``). Module docstring of ``generations`` for how a
write uses them."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from knowledge.core.scope import KnowledgeScope
from knowledge.stores.opensearch.hits import INCOMPLETE_HASH, parse_hits
from knowledge.stores.opensearch.mapping import (
    CHUNK_COUNT,
    CHUNK_INDEX,
    CONTENT_HASH,
    DOCUMENT_ID,
    DOCUMENT_PATH,
    EMBEDDING,
    EMBEDDING_KEY,
    GENERATION,
    INDEXED_AT,
    PROBLEM,
    PROBLEM_AT,
    RECORD,
    RECORD_CHUNK,
    RECORD_DOCUMENT,
    VERSION,
)
from knowledge.stores.opensearch.request_filters import scope_filters
from knowledge.stores.protocol import StoredDocument

__all__ = [
    "RecordState",
    "as_of_record",
    "bulk_delete_action",
    "bulk_index_action",
    "bulk_problem_action",
    "bulk_record_action",
    "chunk_generations_body",
    "document_ids_page_body",
    "generation_chunk_id",
    "named_generations_query",
    "other_generations_query",
    "parse_problems",
    "parse_records_mget",
    "parse_stored_vectors",
    "problems_body",
    "read_generation_pairs",
    "records_mget_body",
    "stale_generations_query",
    "stored_vectors_body",
]


def generation_chunk_id(document_id: str, generation: str, chunk_index: int) -> str:
    """A chunk's id: each write of a document has its own ids, so a new version is written
    beside the old one and the old one is removed only once the new one is complete."""
    return f"{document_id}:{generation}:{chunk_index}"


def document_ids_page_body(
    query: Mapping[str, Any], size: int, search_after: Sequence[Any] | None = None
) -> dict[str, Any]:
    """One page of matching chunk ids (no source), for deleting where there is no
    ``_delete_by_query`` (Serverless). Sorted on indexed fields, paged by ``search_after``."""
    body: dict[str, Any] = {
        "size": size,
        "_source": False,
        "track_total_hits": False,
        "query": dict(query),
        "sort": [
            {DOCUMENT_ID: "asc"},
            {GENERATION: "asc"},
            {CHUNK_INDEX: "asc"},
            {INDEXED_AT: "asc"},
        ],
    }
    if search_after is not None:
        body["search_after"] = list(search_after)
    return body


def records_mget_body(record_ids: Sequence[str]) -> dict[str, Any]:
    """``_mget`` of document records (real time: no refresh needed), with what a
    conditional write needs (``_seq_no``/``_primary_term``) and the facts it compares."""
    return {"ids": list(dict.fromkeys(record_ids))}


@dataclass(frozen=True, slots=True)
class RecordState:
    """A document record as ``_mget`` read it: the condition for replacing it, and what
    it points at (the generation searches show, its chunk count, its version)."""

    seq_no: int
    primary_term: int
    version: str | None
    generation: str | None
    chunk_count: int
    content_hash: str | None = None


def parse_records_mget(response: Mapping[str, Any]) -> dict[str, RecordState]:
    """``{record id: RecordState}`` for the records that exist."""
    states: dict[str, RecordState] = {}
    for doc in response.get("docs", []):
        if not doc.get("found"):
            continue
        source = doc.get("_source") or {}
        version = source.get(VERSION)
        generation = source.get(GENERATION)
        count = source.get(CHUNK_COUNT)
        states[str(doc["_id"])] = RecordState(
            seq_no=int(doc["_seq_no"]),
            primary_term=int(doc["_primary_term"]),
            version=None if version is None else str(version),
            generation=None if generation is None else str(generation),
            chunk_count=count if isinstance(count, int) else 0,
            content_hash=None if source.get(CONTENT_HASH) is None else str(source[CONTENT_HASH]),
        )
    return states


def as_of_record(
    searched: StoredDocument | None, record: RecordState | None, path: str
) -> StoredDocument | None:
    """The stored document a search read (``searched``: up to the last refresh), checked
    against its record read in real time (``record``). A search that shows the record as
    it is now is right (its chunk counts say whether the version is complete); one that
    lags (the record was written, replaced or removed since the last refresh) is
    reported with the record's facts and ``INCOMPLETE_HASH``, a hash nothing equals: the
    document is written again (under its ``Precondition``), never skipped as unchanged
    on a version the index no longer holds."""
    if record is None or record.generation is None:
        if searched is None:
            return None
        return StoredDocument(path, INCOMPLETE_HASH, None, searched.chunk_count)
    if (
        searched is not None
        and searched.generation == record.generation
        and searched.content_hash in (record.content_hash, INCOMPLETE_HASH)
    ):
        return dataclasses.replace(searched, version=record.version)
    return StoredDocument(
        path, INCOMPLETE_HASH, record.version, record.chunk_count, record.generation
    )


def other_generations_query(
    scope: KnowledgeScope, document_id: str, keep: str | None
) -> dict[str, Any]:
    """Every record and chunk of a document that is not of generation ``keep`` (``None``:
    all of them): what a write removes once its own generation is complete, where it
    cannot name them by id (Serverless)."""
    query: dict[str, Any] = {
        "bool": {"filter": [*scope_filters(scope), {"term": {DOCUMENT_ID: document_id}}]}
    }
    if keep is not None:
        query["bool"]["must_not"] = [{"term": {GENERATION: keep}}]
    return query


def stale_generations_query(scope: KnowledgeScope, before: Mapping[str, str]) -> dict[str, Any]:
    """The chunks of each document of ``before`` (document id -> a generation id, or a
    prefix of one: they sort by time) whose generation is older than that bound: what a
    write that committed those documents removes at its end, the chunks of writers that
    died before their record switch included. Records are not matched."""
    return _chunks_of_documents(
        scope,
        {document: {"range": {GENERATION: {"lt": bound}}} for document, bound in before.items()},
    )


def chunk_generations_body(
    scope: KnowledgeScope, documents: Sequence[str], after: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """One page of the (document id, generation) pairs of the chunks of ``documents``: a
    ``composite`` aggregation, paged by its ``after_key``. What the stale sweep reads
    where the domain refuses a ``range`` on a keyword field (``stale_generations_query``
    then becomes ``named_generations_query``)."""
    sources = [
        {"document": {"terms": {"field": DOCUMENT_ID}}},
        {"generation": {"terms": {"field": GENERATION}}},
    ]
    composite: dict[str, Any] = {"size": 1000, "sources": sources}
    if after is not None:
        composite["after"] = dict(after)
    return {
        "size": 0,
        "track_total_hits": False,
        "query": {
            "bool": {
                "filter": [
                    *scope_filters(scope),
                    {"term": {RECORD: RECORD_CHUNK}},
                    {"terms": {DOCUMENT_ID: list(documents)}},
                ]
            }
        },
        "aggs": {"pairs": {"composite": composite}},
    }


def read_generation_pairs(
    response: Mapping[str, Any],
) -> tuple[list[tuple[str, str]], dict[str, Any] | None]:
    """``([(document id, generation)], after key)`` of a ``chunk_generations_body``
    answer; the after key is ``None`` once the last page was read."""
    found = response.get("aggregations", {}).get("pairs", {})
    buckets = found.get("buckets") or []
    pairs = [(str(b["key"]["document"]), str(b["key"]["generation"])) for b in buckets]
    after = found.get("after_key")
    return pairs, (dict(after) if buckets and isinstance(after, Mapping) else None)


def named_generations_query(
    scope: KnowledgeScope, generations: Mapping[str, Sequence[str]]
) -> dict[str, Any]:
    """The chunks of each document (id -> the generations to remove), by ``term``s only."""
    return _chunks_of_documents(
        scope,
        {document: {"terms": {GENERATION: list(names)}} for document, names in generations.items()},
    )


def _chunks_of_documents(
    scope: KnowledgeScope, generations: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """The scope's chunks (never a record) of each document whose generation matches that
    document's clause (document id -> a clause on ``generation``)."""
    return {
        "bool": {
            "filter": [*scope_filters(scope), {"term": {RECORD: RECORD_CHUNK}}],
            "should": [
                {"bool": {"filter": [{"term": {DOCUMENT_ID: document}}, clause]}}
                for document, clause in generations.items()
            ],
            "minimum_should_match": 1,
        }
    }


def stored_vectors_body(
    scope: KnowledgeScope, document_id: str, size: int, search_after: Sequence[Any] | None = None
) -> dict[str, Any]:
    """One page of a document's chunks with their ``embedding_key`` and vector, newest
    generation first (embedding reuse). Every generation of the document is read: a key
    is a content address, so the vector under it is right whichever version holds it."""
    body: dict[str, Any] = {
        "size": size,
        "track_total_hits": False,
        "_source": {"includes": [EMBEDDING_KEY, EMBEDDING]},
        "query": {
            "bool": {
                "filter": [
                    *scope_filters(scope),
                    {"term": {DOCUMENT_ID: document_id}},
                    {"term": {RECORD: RECORD_CHUNK}},
                ]
            }
        },
        "sort": [{GENERATION: "desc"}, {CHUNK_INDEX: "asc"}],
    }
    if search_after is not None:
        body["search_after"] = list(search_after)
    return body


def parse_stored_vectors(
    response: Mapping[str, Any], dimensions: int
) -> tuple[dict[str, list[float]], list[Any] | None, int]:
    """``({embedding key: vector}, search_after of the last hit, hits on the page)``.

    A hit with a key and no vector had the zero vector (it is not stored, see
    ``mapping.is_zero_vector``); a vector of another dimension is not taken. The first
    hit of a key wins (the newest generation: the body sorts them first)."""
    vectors: dict[str, list[float]] = {}
    hits = response.get("hits", {}).get("hits", [])
    for hit in hits:
        source = hit.get("_source") or {}
        key = source.get(EMBEDDING_KEY)
        if not isinstance(key, str) or key in vectors:
            continue
        vector = source.get(EMBEDDING)
        if vector is None:
            vectors[key] = [0.0] * dimensions
        elif isinstance(vector, list) and len(vector) == dimensions:
            vectors[key] = [float(x) for x in vector]
    after = hits[-1].get("sort") if hits else None
    return vectors, after, len(hits)


def problems_body(scope: KnowledgeScope, size: int) -> dict[str, Any]:
    """The scope's records that carry a problem, most recent first."""
    return {
        "size": size,
        "track_total_hits": False,
        "_source": {"includes": [DOCUMENT_PATH, PROBLEM, PROBLEM_AT, GENERATION]},
        "query": {
            "bool": {
                "filter": [
                    *scope_filters(scope),
                    {"term": {RECORD: RECORD_DOCUMENT}},
                    {"exists": {"field": PROBLEM_AT}},
                ]
            }
        },
        "sort": [{PROBLEM_AT: "desc"}],
    }


def parse_problems(response: Mapping[str, Any], limit: int) -> list[tuple[str, str]]:
    """``(path, reason)`` of each problem, most recent first, one per path."""
    seen: set[str] = set()
    problems: list[tuple[str, str]] = []
    for hit in parse_hits(response):
        path, reason = hit.source.get(DOCUMENT_PATH), hit.source.get(PROBLEM)
        if not isinstance(path, str) or not isinstance(reason, str) or path in seen:
            continue
        seen.add(path)
        problems.append((path, reason))
        if len(problems) >= limit:
            break
    return problems


# --- bulk actions ---------------------------------------------------------------------
# No ``_index``: a bulk request names its index in the path (``/<index>/_bulk``, see
# ``bulk.send_bulk``), so the roles need no grant on the domain root.


def bulk_index_action(doc_id: str | None, source: Mapping[str, Any]) -> dict[str, Any]:
    """An ``opensearchpy.helpers`` index action; ``doc_id=None`` lets the server pick the id."""
    action: dict[str, Any] = {"_op_type": "index", "_source": dict(source)}
    if doc_id is not None:
        action["_id"] = doc_id
    return action


def bulk_delete_action(doc_id: str) -> dict[str, Any]:
    return {"_op_type": "delete", "_id": doc_id}


def bulk_record_action(
    record_id: str, source: Mapping[str, Any], condition: RecordState | None
) -> dict[str, Any]:
    """Write a document record only if it is still what was read: ``create`` when there
    was none, else ``index`` with ``if_seq_no``/``if_primary_term`` (a 409 otherwise)."""
    if condition is None:
        return {"_op_type": "create", "_id": record_id, "_source": dict(source)}
    return {
        "_op_type": "index",
        "_id": record_id,
        "if_seq_no": condition.seq_no,
        "if_primary_term": condition.primary_term,
        "_source": dict(source),
    }


def bulk_problem_action(
    record_id: str, fields: Mapping[str, Any], upsert: Mapping[str, Any]
) -> dict[str, Any]:
    """Merge a problem into a document's record, or create a problem-only record."""
    return {
        "_op_type": "update",
        "_id": record_id,
        "retry_on_conflict": 3,
        "doc": dict(fields),
        "upsert": dict(upsert),
    }
