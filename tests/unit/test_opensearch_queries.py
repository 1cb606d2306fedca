"""The OpenSearch request bodies and response readers, tested as data (no node, no client)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from fnmatch import fnmatchcase

import pytest

from knowledge.filters import matches_file_patterns
from knowledge.scope import KnowledgeScope
from knowledge.store import StoredDocument
from knowledge.stores.opensearch import queries
from knowledge.stores.opensearch.queries import (
    INCOMPLETE_HASH,
    MATCH_NOTHING,
    Hit,
    ScopeStats,
    bulk_delete_action,
    bulk_index_action,
    chunk_extents_body,
    document_ids_page_body,
    file_pattern_filter,
    glob_to_regexp,
    glob_to_wildcard,
    keyword_search_body,
    metadata_filters,
    msearch_body,
    parse_chunk_extents,
    parse_hits,
    parse_scope_stats,
    parse_stored_document,
    parse_stored_documents,
    query_filters,
    scope_filters,
    scope_query,
    scope_stats_body,
    stale_chunks_query,
    stored_document_body,
    stored_documents_body,
    vector_search_body,
)

SCOPE = KnowledgeScope("ops-bot", "runbooks")
SOURCE = {"includes": ["agent", "context", "document_path", "chunk_index", "content", "metadata"]}
AGENT_TERM = {"term": {"agent": "ops-bot"}}
CONTEXT_TERM = {"term": {"context": "runbooks"}}


def test_public_names_are_exported() -> None:
    assert set(queries.__all__) <= set(dir(queries))


# --- scope ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cross_context", "expected"),
    [
        (False, [AGENT_TERM, CONTEXT_TERM]),
        (True, [AGENT_TERM]),  # the agent boundary is never lifted
    ],
)
def test_scope_filters(cross_context: bool, expected: list[dict]) -> None:
    assert scope_filters(SCOPE, cross_context=cross_context) == expected


def test_scope_query_is_the_exact_scope() -> None:
    assert scope_query(SCOPE) == {"bool": {"filter": [AGENT_TERM, CONTEXT_TERM]}}


# --- file patterns ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "wildcard"),
    [
        ("*.md", "*.md"),
        ("runbooks/*.md", "runbooks/*.md"),
        ("deploy.md", "deploy.md"),
        ("doc?.txt", "doc?.txt"),
        ("**/x", "*/x"),  # consecutive stars are one star, as in fnmatch
        ("a\\b", "a\\\\b"),  # a backslash is literal in fnmatch, escaped in wildcard
        ("[abc].md", None),  # a class needs a regexp
        ("unclosed[", "unclosed["),  # no closing bracket: a literal '['
    ],
)
def test_glob_to_wildcard(pattern: str, wildcard: str | None) -> None:
    assert glob_to_wildcard(pattern) == wildcard


@pytest.mark.parametrize(
    ("pattern", "regexp"),
    [
        ("*.md", ".*\\.md"),
        ("[abc].md", "[abc]\\.md"),
        ("[a-c]*", "[a-c].*"),
        ("[!a-c]?", "[^a-c]."),
        ("[]x]", "[\\]x]"),  # ']' first in a class is literal
        ("[^x]", "[\\^x]"),  # '^' is literal in fnmatch classes
        ("[!]", "\\[\\!\\]"),  # no ']' after "[!]": literal brackets, as in fnmatch
        ("a+b(c)|d", "a\\+b\\(c\\)\\|d"),  # regexp operators are literal
        ("배포*.md", "배포.*\\.md"),
        ("[z-a]x", None),  # an empty class matches nothing
        ("[]", "\\[\\]"),  # no closing bracket after ']': literal brackets
    ],
)
def test_glob_to_regexp(pattern: str, regexp: str | None) -> None:
    assert glob_to_regexp(pattern) == regexp


GLOBS = [
    "*.md",
    "runbooks/*",
    "[a-d]*.txt",
    "[!r]*",
    "doc?.md",
    "*/deploy.md",
    "x[]]y",
    "[z-a]",
    "[!]",
]
PATHS = [
    "deploy.md",
    "runbooks/deploy.md",
    "runbooks/sub/db.txt",
    "b.txt",
    "docs.md",
    "doc1.md",
    "x]y",
    "r.md",
    "배포.md",
    "[!]",
]


@pytest.mark.parametrize("pattern", GLOBS)
def test_glob_translation_agrees_with_fnmatch(pattern: str) -> None:
    # Lucene regexp, as generated here, reads the same in Python's re.
    regexp = glob_to_regexp(pattern)
    for path in PATHS:
        expected = fnmatchcase(path, pattern)
        actual = regexp is not None and re.fullmatch(regexp, path) is not None
        assert actual == expected, (pattern, path)


def test_no_file_patterns_is_no_filter() -> None:
    assert file_pattern_filter(()) is None


def test_file_patterns_match_path_or_base_name() -> None:
    assert file_pattern_filter(["*.md", "[ab]*"]) == {
        "bool": {
            "should": [
                {"wildcard": {"document_path": {"value": "*.md"}}},
                {"wildcard": {"document_name": {"value": "*.md"}}},
                {"regexp": {"document_path": {"value": "[ab].*", "flags": "NONE"}}},
                {"regexp": {"document_name": {"value": "[ab].*", "flags": "NONE"}}},
            ],
            "minimum_should_match": 1,
        }
    }


def test_file_patterns_that_cannot_match_filter_everything_out() -> None:
    assert file_pattern_filter(["[z-a]"]) == MATCH_NOTHING
    # a literal body, not the module's own constant: a misspelt key would match nothing
    assert MATCH_NOTHING == {"bool": {"must_not": [{"match_all": {}}]}}


@pytest.mark.parametrize(("path", "pattern"), [(p, g) for p in PATHS for g in GLOBS])
def test_path_or_base_name_semantics_match_knowledge_filters(path: str, pattern: str) -> None:
    base = path.rsplit("/", 1)[-1]
    regexp = glob_to_regexp(pattern)
    engine = regexp is not None and any(re.fullmatch(regexp, s) for s in (path, base))
    assert engine == matches_file_patterns(path, [pattern])


# --- metadata ---------------------------------------------------------------------------


def test_metadata_filters_are_sorted_term_filters() -> None:
    assert metadata_filters({"team": "ops", "env": "prod"}) == [
        {"term": {"metadata.env": "prod"}},
        {"term": {"metadata.team": "ops"}},
    ]
    assert metadata_filters({}) == []


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, [AGENT_TERM, CONTEXT_TERM]),
        ({"cross_context": True}, [AGENT_TERM]),
        (
            {"file_patterns": ["*.md"], "metadata": {"team": "ops"}},
            [
                AGENT_TERM,
                CONTEXT_TERM,
                {
                    "bool": {
                        "should": [
                            {"wildcard": {"document_path": {"value": "*.md"}}},
                            {"wildcard": {"document_name": {"value": "*.md"}}},
                        ],
                        "minimum_should_match": 1,
                    }
                },
                {"term": {"metadata.team": "ops"}},
            ],
        ),
    ],
)
def test_query_filters(kwargs: dict, expected: list[dict]) -> None:
    assert query_filters(SCOPE, **kwargs) == expected


# --- search bodies ------------------------------------------------------------------------


def test_keyword_body_matches_words_or_cjk_bigrams_inside_the_filters() -> None:
    filters = query_filters(SCOPE, metadata={"team": "ops"})
    assert keyword_search_body("배포 실패", filters, 5) == {
        "size": 5,
        "track_total_hits": False,
        "_source": SOURCE,
        "query": {
            "bool": {
                "filter": [AGENT_TERM, CONTEXT_TERM, {"term": {"metadata.team": "ops"}}],
                "should": [
                    {"match": {"content": {"query": "배포 실패"}}},
                    {"match": {"content.cjk": {"query": "배포 실패"}}},
                ],
                "minimum_should_match": 1,
            }
        },
    }


@pytest.mark.parametrize("cross_context", [False, True])
def test_vector_body_puts_the_scope_inside_the_knn_clause(cross_context: bool) -> None:
    filters = query_filters(SCOPE, cross_context=cross_context)
    assert vector_search_body([1, 0.5], filters, 20) == {
        "size": 20,
        "track_total_hits": False,
        "_source": SOURCE,
        "query": {
            "knn": {
                "embedding": {
                    "vector": [1.0, 0.5],
                    "k": 20,
                    "filter": {
                        "bool": {"filter": scope_filters(SCOPE, cross_context=cross_context)}
                    },
                }
            }
        },
    }


def test_hybrid_sends_both_searches_in_one_msearch() -> None:
    filters = query_filters(SCOPE)
    keyword = keyword_search_body("q", filters, 20)
    vector = vector_search_body([0.1, 0.2], filters, 20)
    assert msearch_body("kb", [keyword, vector]) == [
        {"index": "kb"},
        keyword,
        {"index": "kb"},
        vector,
    ]


def test_parse_hits() -> None:
    response = {
        "hits": {
            "hits": [
                {"_id": "a:0", "_score": 2.5, "_source": {"content": "x"}},
                {"_id": "b:1", "_score": None, "_source": {}},
            ]
        }
    }
    assert parse_hits(response) == [
        Hit("a:0", 2.5, {"content": "x"}),
        Hit("b:1", 0.0, {}),
    ]
    assert parse_hits({}) == []


# --- writes -------------------------------------------------------------------------------


def test_stale_chunks_are_chunks_of_the_document_from_the_new_count_on() -> None:
    assert stale_chunks_query(SCOPE, "doc1", 3) == {
        "bool": {
            "filter": [
                AGENT_TERM,
                CONTEXT_TERM,
                {"term": {"record": "chunk"}},
                {"term": {"document_id": "doc1"}},
                {"range": {"chunk_index": {"gte": 3}}},
            ]
        }
    }


def test_chunk_extents_ask_for_the_last_chunk_of_each_document_in_one_request() -> None:
    body = chunk_extents_body(SCOPE, ["doc1", "doc2", "doc1"])
    assert body == {
        "size": 0,
        "track_total_hits": False,
        "query": {
            "bool": {
                "filter": [
                    AGENT_TERM,
                    CONTEXT_TERM,
                    {"term": {"record": "chunk"}},
                    {"terms": {"document_id": ["doc1", "doc2"]}},
                ]
            }
        },
        "aggs": {
            "documents": {
                "terms": {"field": "document_id", "size": 2},
                "aggs": {"last": {"max": {"field": "chunk_index"}}},
            }
        },
    }


def test_chunk_extents_are_the_last_index_plus_one() -> None:
    response = {
        "aggregations": {
            "documents": {
                "buckets": [
                    {"key": "doc1", "doc_count": 4, "last": {"value": 3.0}},
                    {"key": "doc2", "doc_count": 1, "last": {"value": 0.0}},
                    {"key": "doc3", "doc_count": 0, "last": {"value": None}},
                ]
            }
        }
    }
    assert parse_chunk_extents(response) == {"doc1": 4, "doc2": 1}
    assert parse_chunk_extents({}) == {}


@pytest.mark.parametrize(
    ("doc_id", "expected"),
    [
        ("doc1:0", {"_op_type": "index", "_index": "kb", "_id": "doc1:0", "_source": {"a": 1}}),
        # Serverless vector collections refuse client ids: the server picks one.
        (None, {"_op_type": "index", "_index": "kb", "_source": {"a": 1}}),
    ],
)
def test_bulk_index_action(doc_id: str | None, expected: dict) -> None:
    assert bulk_index_action("kb", doc_id, {"a": 1}) == expected


def test_bulk_delete_action() -> None:
    assert bulk_delete_action("kb", "x") == {"_op_type": "delete", "_index": "kb", "_id": "x"}


@pytest.mark.parametrize(
    ("after", "expected_after"),
    [(None, None), (["d", 3, 17], ["d", 3, 17])],
)
def test_serverless_delete_pages_ids_without_source(after, expected_after) -> None:
    body = document_ids_page_body(scope_query(SCOPE), 1000, after)
    expected = {
        "size": 1000,
        "_source": False,
        "track_total_hits": False,
        "query": scope_query(SCOPE),
        "sort": [{"document_id": "asc"}, {"chunk_index": "asc"}, {"indexed_at": "asc"}],
    }
    if expected_after is not None:
        expected["search_after"] = expected_after
    assert body == expected


# --- status and stored documents ------------------------------------------------------------


def test_scope_stats_body() -> None:
    assert scope_stats_body(SCOPE) == {
        "size": 0,
        "track_total_hits": False,
        "query": scope_query(SCOPE),
        "aggs": {
            "chunks": {"filter": {"term": {"record": "chunk"}}},
            "documents": {"cardinality": {"field": "document_id", "precision_threshold": 40000}},
            "last_indexed": {"max": {"field": "indexed_at"}},
        },
    }


@pytest.mark.parametrize(
    ("aggs", "expected"),
    [
        ({}, ScopeStats(0, 0, None)),
        (
            {
                "chunks": {"doc_count": 7},
                "documents": {"value": 3},
                "last_indexed": {"value": 1.7e12, "value_as_string": "2023-11-14T22:13:20.000Z"},
            },
            ScopeStats(3, 7, datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)),
        ),
        (
            {
                "chunks": {"doc_count": 0},
                "documents": {"value": 2},  # two empty documents: records, no chunks
                "last_indexed": {"value": 1.7e12},
            },
            ScopeStats(2, 0, datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)),
        ),
    ],
)
def test_parse_scope_stats(aggs: dict, expected: ScopeStats) -> None:
    assert parse_scope_stats({"aggregations": aggs}) == expected


DOCUMENT_AGGS = {
    "record": {
        "filter": {"term": {"record": "document"}},
        "aggs": {
            "latest": {
                "top_hits": {
                    "size": 1,
                    "sort": [{"indexed_at": "desc"}],
                    "_source": {"includes": ["content_hash", "version", "chunk_count"]},
                }
            }
        },
    },
    "chunks": {"filter": {"term": {"record": "chunk"}}},
}


@pytest.mark.parametrize(
    ("after", "composite_after"),
    [(None, {}), ({"path": "b.md"}, {"after": {"path": "b.md"}})],
)
def test_stored_documents_body_pages_a_composite_aggregation(after, composite_after) -> None:
    assert stored_documents_body(SCOPE, 500, after) == {
        "size": 0,
        "track_total_hits": False,
        "query": scope_query(SCOPE),
        "aggs": {
            "documents": {
                "composite": {
                    "size": 500,
                    "sources": [{"path": {"terms": {"field": "document_path"}}}],
                    **composite_after,
                },
                "aggs": DOCUMENT_AGGS,
            }
        },
    }


def test_stored_document_body() -> None:
    assert stored_document_body(SCOPE, "a.md") == {
        "size": 0,
        "track_total_hits": False,
        "query": {
            "bool": {"filter": [AGENT_TERM, CONTEXT_TERM, {"term": {"document_path": "a.md"}}]}
        },
        "aggs": DOCUMENT_AGGS,
    }


def _bucket(path: str, records: list[dict], chunks: int) -> dict:
    return {
        "key": {"path": path},
        "doc_count": len(records) + chunks,
        "record": {
            "doc_count": len(records),
            "latest": {"hits": {"hits": [{"_source": r} for r in records[:1]]}},
        },
        "chunks": {"doc_count": chunks},
    }


RECORD = {"content_hash": "h1", "version": "0A", "chunk_count": 2}


@pytest.mark.parametrize(
    ("records", "chunks", "expected"),
    [
        ([RECORD], 2, StoredDocument("a.md", "h1", "0A", 2)),
        ([{**RECORD, "chunk_count": 0, "version": None}], 0, StoredDocument("a.md", "h1", None, 0)),
        # A write that died half-way: chunks without their record, or fewer than declared.
        ([], 2, StoredDocument("a.md", INCOMPLETE_HASH, None, 2)),
        ([RECORD], 1, StoredDocument("a.md", INCOMPLETE_HASH, "0A", 1)),
        ([RECORD, RECORD], 2, StoredDocument("a.md", INCOMPLETE_HASH, "0A", 2)),
    ],
)
def test_stored_documents_report_incomplete_writes(records, chunks, expected) -> None:
    response = {
        "aggregations": {
            "documents": {
                "buckets": [_bucket("a.md", records, chunks)],
                "after_key": {"path": "a.md"},
            }
        }
    }
    assert parse_stored_documents(response) == ({"a.md": expected}, {"path": "a.md"})
    single = {"aggregations": _bucket("a.md", records, chunks)}
    assert parse_stored_document(single, "a.md") == expected


def test_last_stored_documents_page_ends_the_paging() -> None:
    response = {"aggregations": {"documents": {"buckets": [], "after_key": {"path": "z"}}}}
    assert parse_stored_documents(response) == ({}, None)


def test_missing_document_is_none() -> None:
    assert parse_stored_document({"aggregations": _bucket("a.md", [], 0)}, "a.md") is None
    assert parse_stored_document({}, "a.md") is None


def test_scopes_page_body_is_a_composite_on_agent_and_context() -> None:
    assert queries.scopes_page_body(50, {"agent": "a", "context": "b"}) == {
        "size": 0,
        "track_total_hits": False,
        "aggs": {
            "scopes": {
                "composite": {
                    "size": 50,
                    "sources": [
                        {"agent": {"terms": {"field": "agent"}}},
                        {"context": {"terms": {"field": "context"}}},
                    ],
                    "after": {"agent": "a", "context": "b"},
                }
            }
        },
    }
    assert "after" not in queries.scopes_page_body(50)["aggs"]["scopes"]["composite"]


def test_parse_scopes_page_skips_pairs_that_are_no_scope() -> None:
    response = {
        "aggregations": {
            "scopes": {
                "buckets": [
                    {"key": {"agent": "ops-bot", "context": "runbooks"}, "doc_count": 3},
                    {"key": {"agent": "Bad Agent", "context": "x"}, "doc_count": 1},
                ],
                "after_key": {"agent": "ops-bot", "context": "runbooks"},
            }
        }
    }
    scopes, after = queries.parse_scopes_page(response)
    assert scopes == [KnowledgeScope("ops-bot", "runbooks")]
    assert after == {"agent": "ops-bot", "context": "runbooks"}
    assert queries.parse_scopes_page({"aggregations": {"scopes": {"buckets": []}}}) == ([], None)
