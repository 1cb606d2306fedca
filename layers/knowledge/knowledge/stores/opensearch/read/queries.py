"""Request bodies of the OpenSearch store's reads: pure builders, no I/O.

Searches (keyword, vector, the hybrid candidates and the page's chunks by id, as
``_search`` or ``_msearch``), the document id pages a delete walks, and the aggregations
the status, the listing of scopes and the stored documents are read from. Every body
filters on the scope (``request_filters``); the answers are read by ``answers``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from knowledge.core.scope import KnowledgeScope
from knowledge.ranking.synonym_expansion import SYNONYM_WEIGHT, QueryTerms, expand
from knowledge.stores.opensearch.mapping import (
    AGENT,
    CHUNK_COUNT,
    CHUNK_INDEX,
    CONTENT_HASH,
    CONTENT_TERMS,
    CONTEXT,
    DOCUMENT_ID,
    DOCUMENT_PATH,
    EMBEDDED_CHUNKS,
    EMBEDDING,
    GENERATION,
    INDEXED_AT,
    PAGE_TERMS,
    RECORD,
    RECORD_CHUNK,
    RECORD_DOCUMENT,
    RECORD_SYNONYMS,
    RECORD_UNREAD,
    REPLACES,
    REUSED_CHUNKS,
    SOURCE_FIELDS,
    UNREAD_FILES,
    VERSION,
)
from knowledge.stores.opensearch.request_filters import (
    document_filters,
    scope_query,
)

__all__ = [
    "CANDIDATES_FILTER_PATH",
    "CANDIDATE_FIELDS",
    "chunks_by_id_body",
    "keyword_search_body",
    "msearch_body",
    "named_filters",
    "page_search_body",
    "scope_stats_body",
    "scopes_page_body",
    "stored_document_body",
    "stored_documents_body",
    "vector_search_body",
    "with_named",
]


_CARDINALITY_PRECISION = 40_000


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
        "hits.hits.matched_queries",
        "responses.error",
        "responses.status",
        "responses.took",
        "responses.hits.hits._id",
        "responses.hits.hits._score",
        "responses.hits.hits.fields",
        "responses.hits.hits.matched_queries",
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
    text: str | QueryTerms,
    filters: Sequence[Mapping[str, Any]],
    size: int,
    *,
    candidates: bool = False,
    candidate_path: bool = False,
    candidate_facts: bool = True,
    named: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """BM25 on ``content_terms`` with the query's distinct
    ``knowledge.ranking.analysis.keyword_terms``
    (the terms the embedded store looks up, in the one field that holds a chunk's text
    and heading terms: ``mapping``), OR-ed, inside the filters; each hit with its result
    fields, or with ``candidates`` its ``_id`` and score, with ``CANDIDATE_FIELDS`` as
    doc values if ``candidate_facts`` (server-made ids) and ``document_path`` if
    ``candidate_path``. A query without terms matches nothing. ``named`` clauses
    (``with_named``) say which hits they match without changing a score. ``text`` as
    ``QueryTerms`` (``ranking.synonym_expansion.expand``): the terms a synonym added are a second
    ``match`` boosted ``SYNONYM_WEIGHT`` (BM25 sums the clauses, as the other stores do).
    """
    found = expand(text, None) if isinstance(text, str) else text
    # A named clause that asks whether a hit holds one of the query's own terms is the
    # scored clause of that term, named: the node evaluates each term once.
    scored = {term for term in (*found.typed, *found.expanded)}
    names: dict[str, str] = {}
    rest: dict[str, Mapping[str, Any]] = {}
    for name, clause in (named or {}).items():
        term = _content_term(clause)
        if term is not None and term in scored and term not in names:
            names[term] = name
        else:
            rest[name] = clause
    should = _term_clauses(CONTENT_TERMS, found, names)
    return {
        "size": size,
        "track_total_hits": False,
        **(
            _candidate_fields(candidate_path, candidate_facts)
            if candidates
            else {"_source": _source()}
        ),
        "query": with_named(
            {
                "bool": {
                    "filter": list(filters),
                    "should": should,
                    "minimum_should_match": 1,
                }
            },
            rest,
        ),
    }


def _content_term(clause: Mapping[str, Any]) -> str | None:
    """The term of a ``{"term": {"content_terms": term}}`` clause, else ``None``."""
    if set(clause) != {"term"} or not isinstance(clause["term"], Mapping):
        return None
    inner = clause["term"]
    value = inner.get(CONTENT_TERMS) if set(inner) == {CONTENT_TERMS} else None
    return value if isinstance(value, str) else None


def _term_clauses(
    field: str, text: str | QueryTerms, names: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The ``should`` clauses of a keyword query on ``field``: the typed terms, and the
    terms a synonym added as a second clause boosted ``SYNONYM_WEIGHT`` (BM25 sums the
    clauses). Without ``names`` each is one ``match`` of its terms; with ``names`` (a
    term's clause name) each term is a ``term`` clause of its own inside them, named, so
    a hit says which terms it holds. A ``match`` of whitespace-separated terms on this
    field's whitespace analysis is exactly the ``bool`` of their ``term`` clauses, so the
    scores are the same either way."""
    found = expand(text, None) if isinstance(text, str) else text
    if not found.typed:
        return [{"match_none": {}}]
    groups: list[tuple[tuple[str, ...], float]] = [(found.typed, 1.0)]
    if found.expanded:
        groups.append((found.expanded, SYNONYM_WEIGHT))
    should: list[dict[str, Any]] = []
    for terms, boost in groups:
        weight = {} if boost == 1.0 else {"boost": boost}
        if not names:
            should.append({"match": {field: {"query": " ".join(terms), **weight}}})
            continue
        clauses = [
            {"term": {field: {"value": term, **({"_name": names[term]} if term in names else {})}}}
            for term in terms
        ]
        should.append({"bool": {"should": clauses, **weight}})
    return should


def page_search_body(
    text: str | QueryTerms,
    scope_filters: Sequence[Mapping[str, Any]],
    document_ids: Sequence[str],
) -> dict[str, Any]:
    """BM25 on the document records' ``page_terms`` (``knowledge.ranking.page_signal``)
    with the query's terms exactly as ``keyword_search_body`` sends them (a synonym's
    added terms a second ``match`` boosted ``SYNONYM_WEIGHT``), over the records of
    ``document_ids`` only (the keyword candidates' documents, which the search's
    filters chose) inside the search's ``scope_filters``: each hit its ``document_id``
    and score, at most one per document."""
    should = _term_clauses(PAGE_TERMS, text)
    return {
        "size": len(document_ids),
        "track_total_hits": False,
        # The id as a doc value: reading the record's _source would parse its page row.
        "_source": False,
        "docvalue_fields": [DOCUMENT_ID],
        "query": {
            "bool": {
                "filter": [
                    *scope_filters,
                    {"term": {RECORD: RECORD_DOCUMENT}},
                    {"terms": {DOCUMENT_ID: list(document_ids)}},
                ],
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
    named: Mapping[str, Mapping[str, Any]] | None = None,
    exact: bool = False,
) -> dict[str, Any]:
    """k-NN on ``embedding`` with the filters *inside* the knn clause (efficient filtering);
    each hit with its result fields, or a candidate as ``keyword_search_body`` says.
    ``named`` clauses (``named_filters``) go next to the filters, never around the knn
    clause: wrapped in a ``bool``, a knn clause with ``ef_search`` returned other
    neighbours than alone (the k-NN plugin's lucene engine, 2.19: the nearest chunk of a
    60-chunk scope went missing).

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
                "query": named_filters(
                    {"bool": {"filter": [*filters, {"exists": {"field": EMBEDDING}}]}}, named
                ),
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
            "filter": named_filters({"bool": {"filter": list(filters)}}, named),
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


def _named_clauses(named: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"constant_score": {"filter": dict(clause), "boost": 0.0, "_name": name}}
        for name, clause in named.items()
    ]


def named_filters(
    filters: dict[str, Any], named: Mapping[str, Mapping[str, Any]] | None
) -> dict[str, Any]:
    """A ``bool`` of ``filters`` with each of ``named`` (name: a filter clause) as an
    optional clause (``minimum_should_match`` 0): it matches what ``filters`` match, and
    each hit of the query it filters lists the names of the clauses it matches
    (``matched_queries``: the node checks every named clause of a request against every
    hit, wherever the clause is). For a query that must not be wrapped (``knn``)."""
    if not named:
        return filters
    return {
        "bool": {
            **filters["bool"],
            "should": _named_clauses(named),
            "minimum_should_match": 0,
        }
    }


def with_named(
    query: dict[str, Any], named: Mapping[str, Mapping[str, Any]] | None
) -> dict[str, Any]:
    """``query`` with each of ``named`` (name: a filter clause) as an optional clause of
    score 0: the hits and their scores stay the same, and each hit lists the names of
    the clauses it matches (``matched_queries``; ``answers.parse_candidates`` keeps them)."""
    if not named:
        return query
    return {"bool": {"must": [query], "should": _named_clauses(named)}}


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


def _document_aggs() -> dict[str, Any]:
    return {
        "record": {
            "filter": _INDEXED_RECORD,
            "aggs": {
                "latest": {
                    "top_hits": {
                        "size": 1,
                        "sort": [{GENERATION: "desc"}],
                        "_source": {
                            "includes": [CONTENT_HASH, VERSION, CHUNK_COUNT, GENERATION, REPLACES]
                        },
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
        "query": {"bool": {"must_not": [{"terms": {RECORD: [RECORD_UNREAD, RECORD_SYNONYMS]}}]}},
        "aggs": {"scopes": {"composite": composite}},
    }


_INDEXED_RECORD: dict[str, Any] = {
    "bool": {"filter": [{"term": {RECORD: RECORD_DOCUMENT}}, {"exists": {"field": GENERATION}}]}
}
"""A document record of an indexed version (a record holding only a problem has none)."""
