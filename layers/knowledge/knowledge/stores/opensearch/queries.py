"""Request bodies and response readers for the OpenSearch store: pure functions, no I/O.

Every search carries the scope as ``term`` filters (agent and context; agent only with
``cross_context``) plus the query's file patterns, metadata and ``filter``
(``filter_query``), and the vector search carries them *inside* the ``knn`` clause, so
the engine filters while it walks the HNSW graph and a small scope still gets ``k``
neighbours (lucene/faiss efficient filtering).

File patterns follow ``knowledge.filters.matches_file_patterns``: a glob matches the whole
path or the base name, ``*`` also crosses ``/``, ``**/`` is zero or more folders (each
spelling of ``knowledge.filters.expand_globstars``), case-sensitive. A glob becomes a
``wildcard`` query (``*``/``?`` only) or a ``regexp`` query (with ``[...]`` classes) on
``document_path`` and on ``document_name``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from knowledge.errors import InvalidScopeError
from knowledge.filters import expand_globstars
from knowledge.scope import KnowledgeScope
from knowledge.search_filter import FilterNode
from knowledge.store import StoredDocument
from knowledge.stores.opensearch.filter_query import filter_query
from knowledge.stores.opensearch.mapping import (
    AGENT,
    CHUNK_COUNT,
    CHUNK_INDEX,
    CONTENT_HASH,
    CONTENT_TERMS,
    CONTEXT,
    DOCUMENT_ID,
    DOCUMENT_NAME,
    DOCUMENT_PATH,
    EMBEDDED_CHUNKS,
    EMBEDDING,
    GENERATION,
    INDEXED_AT,
    METADATA,
    RECORD,
    RECORD_CHUNK,
    RECORD_DOCUMENT,
    RECORD_UNREAD,
    REUSED_CHUNKS,
    SOURCE_FIELDS,
    UNREAD_FILES,
    VERSION,
)
from knowledge.stores.opensearch.metadata_pairs import METADATA_TERMS, text_term
from knowledge.text import keyword_terms

__all__ = [
    "CANDIDATES_FILTER_PATH",
    "CANDIDATE_FIELDS",
    "INCOMPLETE_HASH",
    "MATCH_NOTHING",
    "Hit",
    "ScopeStats",
    "chunk_id_facts",
    "chunks_by_id_body",
    "document_filters",
    "document_ids_page_body",
    "file_pattern_filter",
    "glob_to_regexp",
    "glob_to_wildcard",
    "keyword_search_body",
    "metadata_filters",
    "msearch_body",
    "newest_generations",
    "parse_candidates",
    "parse_hits",
    "parse_scope_stats",
    "parse_scopes_page",
    "parse_stored_document",
    "parse_stored_documents",
    "query_filters",
    "scope_filters",
    "scope_query",
    "scope_stats_body",
    "scopes_page_body",
    "stored_document_body",
    "stored_documents_body",
    "vector_search_body",
]

MATCH_NOTHING: dict[str, Any] = {"bool": {"must_not": [{"match_all": {}}]}}
"""A filter no document passes (file patterns that cannot match anything)."""

INCOMPLETE_HASH = ""
"""``content_hash`` reported for a document whose stored records are not one complete
write (chunks without the document record, or not as many as it declares): it never
equals a real hash, so the indexer writes the document again."""

# Cardinality is exact below this threshold (the maximum OpenSearch accepts).
_CARDINALITY_PRECISION = 40_000


# --- filters --------------------------------------------------------------------------


def scope_filters(scope: KnowledgeScope, *, cross_context: bool = False) -> list[dict[str, Any]]:
    """``term`` filters for the scope: agent and context, or agent only (never neither)."""
    filters: list[dict[str, Any]] = [{"term": {AGENT: scope.agent}}]
    if not cross_context:
        filters.append({"term": {CONTEXT: scope.context}})
    return filters


def glob_to_wildcard(pattern: str) -> str | None:
    """The ``wildcard`` query value for a glob of only ``*``/``?``/literals, else None.

    ``*`` and ``?`` mean the same in both; a literal backslash is escaped.
    """
    parts = _glob_parts(pattern)
    if parts is None or any(kind == "class" for kind, _ in parts):
        return None
    out: list[str] = []
    for kind, text in parts:
        if kind == "star":
            out.append("*")
        elif kind == "any":
            out.append("?")
        else:
            out.append(text.replace("\\", "\\\\").replace("*", "\\*").replace("?", "\\?"))
    return "".join(out)


def glob_to_regexp(pattern: str) -> str | None:
    """The Lucene ``regexp`` for a glob (``fnmatch`` syntax), or None if it matches nothing.

    ``[abc]``, ``[a-z]`` and ``[!abc]`` become Lucene character classes; every other
    non-alphanumeric character is escaped, so regexp operators are literal.
    """
    parts = _glob_parts(pattern)
    if parts is None:
        return None
    out: list[str] = []
    for kind, text in parts:
        if kind == "star":
            out.append(".*")
        elif kind == "any":
            out.append(".")
        elif kind == "class":
            out.append(text)
        else:
            out.append("".join(ch if ch.isalnum() else "\\" + ch for ch in text))
    return "".join(out)


def _class_char(ch: str) -> str:
    return "\\" + ch if ch in "\\]^-[" else ch


def _glob_parts(pattern: str) -> list[tuple[str, str]] | None:
    """Split a glob like ``fnmatch.translate`` does: star, any, literal, class.

    Returns None when the glob can never match (an empty character class).
    """
    parts: list[tuple[str, str]] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            if not parts or parts[-1][0] != "star":
                parts.append(("star", ""))
        elif c == "?":
            parts.append(("any", ""))
        elif c == "[":
            j = i
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                parts.append(("literal", "["))
                continue
            stuff = pattern[i:j]
            i = j + 1
            negate = stuff.startswith("!")
            if negate:
                stuff = stuff[1:]
            items: list[str] = []
            k = 0
            while k < len(stuff):
                if k + 2 < len(stuff) and stuff[k + 1] == "-":
                    lo, hi = stuff[k], stuff[k + 2]
                    if lo <= hi:
                        items.append(f"{_class_char(lo)}-{_class_char(hi)}")
                    k += 3
                else:
                    items.append(_class_char(stuff[k]))
                    k += 1
            if not items:
                if not negate:
                    return None
                parts.append(("any", ""))
            else:
                parts.append(("class", "[" + ("^" if negate else "") + "".join(items) + "]"))
        elif parts and parts[-1][0] == "literal":
            parts[-1] = ("literal", parts[-1][1] + c)
        else:
            parts.append(("literal", c))
    return parts


def _pattern_clauses(pattern: str) -> list[dict[str, Any]]:
    parts = _glob_parts(pattern)
    if parts is not None and all(kind == "literal" for kind, _ in parts):
        # No glob character: the pattern names a path or a base name. A ``term`` is the
        # same match, and a domain that refuses wildcard queries (expensive) accepts it.
        return [{"term": {DOCUMENT_PATH: pattern}}, {"term": {DOCUMENT_NAME: pattern}}]
    wildcard = glob_to_wildcard(pattern)
    if wildcard is not None:
        return [
            {"wildcard": {DOCUMENT_PATH: {"value": wildcard}}},
            {"wildcard": {DOCUMENT_NAME: {"value": wildcard}}},
        ]
    regexp = glob_to_regexp(pattern)
    if regexp is None:
        return []
    return [
        {"regexp": {DOCUMENT_PATH: {"value": regexp, "flags": "NONE"}}},
        {"regexp": {DOCUMENT_NAME: {"value": regexp, "flags": "NONE"}}},
    ]


def file_pattern_filter(patterns: Sequence[str]) -> dict[str, Any] | None:
    """One filter for the globs (any may match, on the path or the base name); None if none."""
    if not patterns:
        return None
    should = [
        clause
        for pattern in patterns
        for spelling in expand_globstars(pattern)
        for clause in _pattern_clauses(spelling)
    ]
    if not should:
        return MATCH_NOTHING
    return {"bool": {"should": should, "minimum_should_match": 1}}


def metadata_filters(metadata: Mapping[str, str], *, pairs: bool = False) -> list[dict[str, Any]]:
    """Exact-match ``term`` filters, one per key (sorted by key, for stable bodies): on the
    key's ``metadata_terms`` (``pairs``: schema 4, ``metadata_pairs``), else on
    ``metadata.<key>``.

    Metadata scalars are indexed as keywords (numbers and booleans by their JSON
    spelling) and a list matches if it contains the value, as
    ``knowledge.filters.matches_metadata`` defines.
    """
    if pairs:
        return [
            {"term": {METADATA_TERMS: text_term(key, metadata[key])}} for key in sorted(metadata)
        ]
    return [{"term": {f"{METADATA}.{key}": metadata[key]}} for key in sorted(metadata)]


def query_filters(
    scope: KnowledgeScope,
    *,
    cross_context: bool = False,
    file_patterns: Sequence[str] = (),
    metadata: Mapping[str, str] | None = None,
    search_filter: FilterNode | None = None,
    metadata_pairs: bool = False,
) -> list[dict[str, Any]]:
    """Every filter of a search: scope, then file patterns, then metadata, then the
    ``filter`` (``filter_query``); all must hold. ``metadata_pairs``: the index holds
    metadata as key/value terms (schema 4)."""
    filters = scope_filters(scope, cross_context=cross_context)
    patterns = file_pattern_filter(file_patterns)
    if patterns is not None:
        filters.append(patterns)
    filters.extend(metadata_filters(metadata or {}, pairs=metadata_pairs))
    if search_filter is not None:
        filters.append(filter_query(search_filter, pairs=metadata_pairs))
    return filters


# --- searches -------------------------------------------------------------------------


CANDIDATE_FIELDS: tuple[str, ...] = (DOCUMENT_ID, GENERATION, CHUNK_INDEX)
"""What fusion needs of a hybrid candidate (the newest generation, and the per-document
cap: ``document_id`` names one document of one scope). With the store's own chunk ids
(``generation_chunk_id``) the ``_id`` says all three (``chunk_id_facts``), so a candidate
is its ``_id`` and score only; with server-made ids (Serverless) they are read as doc
values (``_candidate_fields``). With file patterns ``document_path`` is read too (the
exact glob check). ``content`` and ``metadata`` only the chosen page needs
(``chunks_by_id_body``)."""

CANDIDATES_FILTER_PATH = ",".join(
    (
        "error",
        "took",
        "hits.hits._id",
        "hits.hits._score",
        "hits.hits.fields",
        "responses.error",
        "responses.status",
        "responses.took",
        "responses.hits.hits._id",
        "responses.hits.hits._score",
        "responses.hits.hits.fields",
    )
)
"""``filter_path`` of the hybrid candidate requests (``_search`` or ``_msearch``): only
what ``parse_candidates`` and the error checks read. Without it every hit also carries
its index name, and the answer its shard counts and totals. Only this answer of 200
candidates is trimmed: on a page of 10-40 results the node's filtering cost more than the
bytes it saved (~0.3 ms a search, bench/REPORT.md 3e)."""


def _source() -> dict[str, Any]:
    return {"includes": list(SOURCE_FIELDS)}


def _candidate_fields(with_path: bool, facts: bool) -> dict[str, Any]:
    # No ``_source`` at all: the node would parse each hit's whole stored source (its
    # vector included) to filter it; doc values are read column-wise (bench/REPORT.md 3b),
    # and none at all when the ``_id`` carries the facts (CANDIDATE_FIELDS).
    fields = [*(CANDIDATE_FIELDS if facts else ()), *((DOCUMENT_PATH,) if with_path else ())]
    return {"_source": False, "docvalue_fields": fields} if fields else {"_source": False}


def keyword_search_body(
    text: str,
    filters: Sequence[Mapping[str, Any]],
    size: int,
    *,
    candidates: bool = False,
    candidate_path: bool = False,
    candidate_facts: bool = True,
) -> dict[str, Any]:
    """BM25 on ``content_terms`` with the query's distinct ``knowledge.text.keyword_terms``
    (the terms the embedded store looks up, in the one field that holds a chunk's text
    and heading terms: ``mapping``), OR-ed, inside the filters; each hit with its result
    fields, or with ``candidates`` its ``_id`` and score, with ``CANDIDATE_FIELDS`` as
    doc values if ``candidate_facts`` (server-made ids) and ``document_path`` if
    ``candidate_path``. A query without terms matches nothing.
    """
    terms = " ".join(dict.fromkeys(keyword_terms(text)))
    should: list[dict[str, Any]] = [
        {"match": {CONTENT_TERMS: {"query": terms}}} if terms else {"match_none": {}}
    ]
    return {
        "size": size,
        "track_total_hits": False,
        **(
            _candidate_fields(candidate_path, candidate_facts)
            if candidates
            else {"_source": _source()}
        ),
        "query": {
            "bool": {
                "filter": list(filters),
                "should": should,
                "minimum_should_match": 1,
            }
        },
    }


def vector_search_body(
    vector: Sequence[float],
    filters: Sequence[Mapping[str, Any]],
    k: int,
    *,
    ef_search: int = 0,
    candidates: bool = False,
    candidate_path: bool = False,
    candidate_facts: bool = True,
    exact: bool = False,
) -> dict[str, Any]:
    """k-NN on ``embedding`` with the filters *inside* the knn clause (efficient filtering);
    each hit with its result fields, or a candidate as ``keyword_search_body`` says.

    ``exact``: every chunk the filters leave is scored instead (``script_score`` with the
    k-NN plugin's ``knn_score``, the same cosine score as the knn query), no graph walk:
    the true top ``k`` (``scope_size.exact_for`` says when).

    ``ef_search`` > 0 is sent as ``method_parameters.ef_search`` (k-NN 2.16+): the size
    of the candidate list the HNSW walk keeps. Without it the lucene engine walks with
    ``ef = k`` and a big scope loses recall (``docs/sizing.md``). A filter that leaves
    fewer documents than the walk would visit makes the engine score that subset
    exactly (lucene and faiss both), so a small scope gets exact results either way.
    """
    values = [float(x) for x in vector]
    query: dict[str, Any]
    if exact:
        query = {
            "script_score": {
                "query": {"bool": {"filter": [*filters, {"exists": {"field": EMBEDDING}}]}},
                "script": {
                    "source": "knn_score",
                    "lang": "knn",
                    "params": {
                        "field": EMBEDDING,
                        "query_value": values,
                        "space_type": "cosinesimil",
                    },
                },
            }
        }
    else:
        clause: dict[str, Any] = {
            "vector": values,
            "k": k,
            "filter": {"bool": {"filter": list(filters)}},
        }
        if ef_search > 0:
            clause["method_parameters"] = {"ef_search": ef_search}
        query = {"knn": {EMBEDDING: clause}}
    return {
        "size": k,
        "track_total_hits": False,
        **(
            _candidate_fields(candidate_path, candidate_facts)
            if candidates
            else {"_source": _source()}
        ),
        "query": query,
    }


def chunks_by_id_body(ids: Sequence[str], filters: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The chunks ``ids`` with their result fields, inside the same filters as the search
    that found them (the scope stays a filter of every read)."""
    return {
        "size": len(ids),
        "track_total_hits": False,
        "_source": _source(),
        "query": {"bool": {"filter": [*filters, {"ids": {"values": list(ids)}}]}},
    }


def msearch_body(bodies: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``_msearch`` lines: an empty header, then the search, for each body. The index is
    in the request path (``/<index>/_msearch``), never in a header, so the roles need no
    grant on the domain root and ``rest.action.multi.allow_explicit_index: false`` holds."""
    lines: list[dict[str, Any]] = []
    for body in bodies:
        lines.append({})
        lines.append(dict(body))
    return lines


@dataclass(slots=True)
class Hit:
    """One search hit: its id (unique in the index), raw engine score and stored fields.

    A value: never change one. Not ``frozen`` because a hybrid search parses 200 on the
    hot path and a frozen dataclass's ``__init__`` costs about five times a plain one's."""

    id: str
    score: float
    source: Mapping[str, Any]


def parse_hits(response: Mapping[str, Any]) -> list[Hit]:
    """The hits of a ``_search`` response (or of one ``_msearch`` response), in order;
    a hit without ``_source`` has its doc values (``fields``, one value each) instead."""
    hits = response.get("hits", {}).get("hits", [])
    return [
        Hit(
            id=str(h["_id"]),
            score=float(h.get("_score") or 0.0),
            source=h["_source"] if "_source" in h else _doc_values(h.get("fields", {})),
        )
        for h in hits
    ]


def parse_candidates(response: Mapping[str, Any]) -> list[Hit]:
    """The hits of a hybrid candidate request (``_candidate_fields``), in order, each with
    what its ``_id`` says of it (``chunk_id_facts``) and its doc values (which win)."""
    candidates: list[Hit] = []
    for h in response.get("hits", {}).get("hits", []):
        chunk_id = str(h["_id"])
        facts = chunk_id_facts(chunk_id)
        if "fields" in h:
            facts.update(_doc_values(h["fields"]))
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


def _doc_values(fields: Mapping[str, Any]) -> dict[str, Any]:
    return {
        name: values[0] for name, values in fields.items() if isinstance(values, list) and values
    }


# --- index facts ----------------------------------------------------------------------


def scope_query(scope: KnowledgeScope) -> dict[str, Any]:
    """Every chunk of exactly this scope (for ``_delete_by_query`` and counts)."""
    return {"bool": {"filter": scope_filters(scope)}}


def document_filters(scope: KnowledgeScope, path: str) -> list[dict[str, Any]]:
    """Every chunk of one document of the scope."""
    return [*scope_filters(scope), {"term": {DOCUMENT_PATH: path}}]


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


def scope_stats_body(scope: KnowledgeScope) -> dict[str, Any]:
    """Chunk count, distinct documents (chunks or records), the last indexed time and the
    latest unread-files record's counts."""
    return {
        "size": 0,
        "track_total_hits": False,
        "query": scope_query(scope),
        "aggs": {
            "chunks": {"filter": {"term": {RECORD: RECORD_CHUNK}}},
            "unread": {
                "filter": {"term": {RECORD: RECORD_UNREAD}},
                "aggs": {
                    "latest": {
                        "top_hits": {
                            "size": 1,
                            "sort": [{INDEXED_AT: "desc"}],
                            "_source": {"includes": [UNREAD_FILES]},
                        }
                    }
                },
            },
            "records": {
                "filter": _INDEXED_RECORD,
                "aggs": {
                    "documents": {
                        "cardinality": {
                            "field": DOCUMENT_ID,
                            "precision_threshold": _CARDINALITY_PRECISION,
                        }
                    },
                    "last_indexed": {"max": {"field": INDEXED_AT}},
                    "embedded": {"sum": {"field": EMBEDDED_CHUNKS}},
                    "reused": {"sum": {"field": REUSED_CHUNKS}},
                },
            },
        },
    }


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


def _document_aggs() -> dict[str, Any]:
    return {
        "record": {
            "filter": _INDEXED_RECORD,
            "aggs": {
                "latest": {
                    "top_hits": {
                        "size": 1,
                        "sort": [{GENERATION: "desc"}],
                        "_source": {"includes": [CONTENT_HASH, VERSION, CHUNK_COUNT, GENERATION]},
                    }
                }
            },
        },
        "chunks": {
            "filter": {"term": {RECORD: RECORD_CHUNK}},
            "aggs": {"generations": {"terms": {"field": GENERATION, "size": 20}}},
        },
    }


def stored_documents_body(
    scope: KnowledgeScope, page_size: int, after: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """One page of a composite aggregation over the scope's documents (by path): the
    document record's facts and the number of chunks actually stored."""
    composite: dict[str, Any] = {
        "size": page_size,
        "sources": [{"path": {"terms": {"field": DOCUMENT_PATH}}}],
    }
    if after is not None:
        composite["after"] = dict(after)
    return {
        "size": 0,
        "track_total_hits": False,
        "query": scope_query(scope),
        "aggs": {"documents": {"composite": composite, "aggs": _document_aggs()}},
    }


def stored_document_body(scope: KnowledgeScope, path: str) -> dict[str, Any]:
    """The same facts as ``stored_documents_body`` for one document."""
    return {
        "size": 0,
        "track_total_hits": False,
        "query": {"bool": {"filter": document_filters(scope, path)}},
        "aggs": _document_aggs(),
    }


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
    complete = bool(top) and isinstance(declared, int) and declared == of_record
    # Chunks without their record, two records, or a count that does not match: a write
    # that did not finish. Reported with a hash nothing equals, so it is written again.
    content_hash = str(source.get(CONTENT_HASH) or "") if complete else INCOMPLETE_HASH
    version = source.get(VERSION)
    return StoredDocument(
        path=path,
        content_hash=content_hash,
        version=None if version is None else str(version),
        chunk_count=chunks,
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


def scopes_page_body(page_size: int, after: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One page of a composite aggregation over every (agent, context) in the index that
    has a document or a problem (a scope's unread-files record alone is no scope)."""
    composite: dict[str, Any] = {
        "size": page_size,
        "sources": [
            {"agent": {"terms": {"field": AGENT}}},
            {"context": {"terms": {"field": CONTEXT}}},
        ],
    }
    if after is not None:
        composite["after"] = dict(after)
    return {
        "size": 0,
        "track_total_hits": False,
        "query": {"bool": {"must_not": [{"term": {RECORD: RECORD_UNREAD}}]}},
        "aggs": {"scopes": {"composite": composite}},
    }


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


# --- generations, records, problems ---------------------------------------------------

_INDEXED_RECORD: dict[str, Any] = {
    "bool": {"filter": [{"term": {RECORD: RECORD_DOCUMENT}}, {"exists": {"field": GENERATION}}]}
}
"""A document record of an indexed version (a record holding only a problem has none)."""


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
