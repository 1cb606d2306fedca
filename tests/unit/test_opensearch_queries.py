"""The OpenSearch request bodies and response readers, tested as data (no node, no client)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from fnmatch import fnmatchcase

import pytest

from knowledge.core.filter_language import parse_filter
from knowledge.core.path_filters import matches_file_patterns
from knowledge.core.scope import KnowledgeScope
from knowledge.ranking.analysis import keyword_terms
from knowledge.stores.opensearch import answers, queries, records
from knowledge.stores.opensearch.answers import (
    INCOMPLETE_HASH,
    Hit,
    ScopeStats,
    chunk_id_facts,
    newest_generations,
    parse_candidates,
    parse_hits,
    parse_scope_stats,
    parse_scopes_page,
    parse_stored_document,
    parse_stored_documents,
)
from knowledge.stores.opensearch.queries import (
    chunks_by_id_body,
    document_ids_page_body,
    keyword_search_body,
    msearch_body,
    scope_stats_body,
    stored_document_body,
    stored_documents_body,
    vector_search_body,
)
from knowledge.stores.opensearch.records import (
    RecordState,
    bulk_delete_action,
    bulk_index_action,
    bulk_record_action,
    generation_chunk_id,
    parse_problems,
    parse_records_mget,
    parse_stored_vectors,
    stored_vectors_body,
)
from knowledge.stores.opensearch.request_filters import (
    MATCH_NOTHING,
    file_pattern_filter,
    glob_to_regexp,
    glob_to_wildcard,
    metadata_filters,
    query_filters,
    scope_filters,
    scope_query,
)
from knowledge.stores.protocol import StoredDocument

SCOPE = KnowledgeScope("ops-bot", "runbooks")
SOURCE = {
    "includes": [
        "agent",
        "context",
        "document_path",
        "chunk_index",
        "content",
        "metadata",
        "document_id",
        "generation",
    ]
}
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
        ("[!z-a]x", "?x"),  # a negated empty class is any one character, as in fnmatch
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
        ("[X]", "[X]"),  # only \\ ] ^ - [ are escaped in a class
        ("a[!]]", "a[^\\]]"),  # ']' right after '[!' is literal too, not only at the start
        ("[a-]", "[a\\-]"),  # a '-' last in a class is a literal '-', not a range
        ("[a-a]x", "[a-a]x"),  # a one-character range is kept
        ("[ab-d]", "[ab-d]"),  # a range after a single character
        ("[a-cx]", "[a-cx]"),  # a single character after a range
        ("[!z-a]x", ".x"),  # a negated empty class is any one character, as in fnmatch
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
    "a[!]]",
    "[a-]",
    "[ab-d]",
    "[a-cx]",
    "[!z-a]x",
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
    "-",
    "a-",
    "ab",
    "c",
    "x",
    "ax",
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


def test_keyword_body_matches_the_query_keyword_terms_in_one_field_inside_the_filters() -> None:
    filters = query_filters(SCOPE, metadata={"team": "ops"})
    assert keyword_search_body("배포실패가 Deploying 東京", filters, 5) == {
        "size": 5,
        "track_total_hits": False,
        "_source": SOURCE,
        "query": {
            "bool": {
                "filter": [AGENT_TERM, CONTEXT_TERM, {"term": {"metadata.team": "ops"}}],
                # The query's keyword_terms (MeCab-ko morphemes, English stems, CJK
                # bigrams), as the writer sends a chunk's: one field, as in FTS5.
                "should": [
                    {
                        "match": {
                            "content_terms": {
                                "query": " ".join(keyword_terms("배포실패가 Deploying 東京"))
                            }
                        }
                    }
                ],
                "minimum_should_match": 1,
            }
        },
    }


def test_keyword_body_sends_each_term_once() -> None:
    body = keyword_search_body("deploy deploying Deploy", [AGENT_TERM], 5)
    assert body["query"]["bool"]["should"] == [{"match": {"content_terms": {"query": "deploy"}}}]


def test_page_body_scores_the_candidates_document_records_inside_the_scope() -> None:
    # The page part (knowledge.ranking.page_signal): the records of the named documents
    # only, inside the search's scope filters, on page_terms with the query's terms.
    body = queries.page_search_body(
        "Deploying deploy 배포", [AGENT_TERM, CONTEXT_TERM], ["d2", "d1"]
    )
    assert body == {
        "size": 2,
        "track_total_hits": False,
        "_source": False,
        "docvalue_fields": ["document_id"],
        "query": {
            "bool": {
                "filter": [
                    AGENT_TERM,
                    CONTEXT_TERM,
                    {"term": {"record": "document"}},
                    {"terms": {"document_id": ["d2", "d1"]}},
                ],
                "should": [
                    {"match": {"page_terms": {"query": " ".join(keyword_terms("deploy 배포"))}}}
                ],
                "minimum_should_match": 1,
            }
        },
    }
    empty = queries.page_search_body("the a of", [AGENT_TERM], ["d1"])
    assert empty["query"]["bool"]["should"] == [{"match_none": {}}]


def test_keyword_body_without_terms_matches_nothing() -> None:
    # Stop words and one-letter words only: no term, so no chunk (never every chunk).
    body = keyword_search_body("the a of", [AGENT_TERM], 5)
    assert body["query"]["bool"]["should"] == [{"match_none": {}}]
    assert body["query"]["bool"]["minimum_should_match"] == 1


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


def test_vector_search_sends_ef_search_as_a_method_parameter() -> None:
    filters = query_filters(SCOPE)
    knn = vector_search_body([1, 0.5], filters, 40, ef_search=100)["query"]["knn"]["embedding"]
    assert knn == {
        "vector": [1.0, 0.5],
        "k": 40,
        "filter": {"bool": {"filter": filters}},
        "method_parameters": {"ef_search": 100},
    }
    # 0: none sent (the engine then walks with ef = k).
    plain = vector_search_body([1, 0.5], filters, 40, ef_search=0)["query"]["knn"]["embedding"]
    assert "method_parameters" not in plain


def test_an_exact_vector_search_scores_every_chunk_of_the_scope() -> None:
    filters = query_filters(SCOPE)
    body = vector_search_body([1, 0.5], filters, 40, ef_search=400, exact=True)
    assert body["size"] == 40
    assert body["_source"] == SOURCE
    assert body["query"] == {
        "script_score": {
            "query": {"bool": {"filter": [*filters, {"exists": {"field": "embedding"}}]}},
            "script": {
                "source": "knn_score",
                "lang": "knn",
                "params": {
                    "field": "embedding",
                    "query_value": [1.0, 0.5],
                    "space_type": "cosinesimil",
                },
            },
        }
    }
    # As candidates (hybrid), the same fields as the knn query's: only the query differs.
    exact = vector_search_body([1, 0.5], filters, 40, exact=True, candidates=True)
    walked = vector_search_body([1, 0.5], filters, 40, candidates=True)
    assert {**exact, "query": None} == {**walked, "query": None}


def test_hybrid_sends_both_searches_in_one_msearch() -> None:
    filters = query_filters(SCOPE)
    keyword = keyword_search_body("q", filters, 20)
    vector = vector_search_body([0.1, 0.2], filters, 20)
    # The index is in the request path: the headers name none.
    assert msearch_body([keyword, vector]) == [{}, keyword, {}, vector]


def test_hybrid_candidates_are_doc_values_without_the_stored_source() -> None:
    filters = query_filters(SCOPE)
    for body in (
        keyword_search_body("q", filters, 100, candidates=True),
        vector_search_body([0.1, 0.2], filters, 100, candidates=True),
    ):
        assert body["_source"] is False
        assert body["docvalue_fields"] == ["document_id", "generation", "chunk_index"]
        assert body["size"] == 100
    for body in (
        keyword_search_body("q", filters, 100, candidates=True, candidate_path=True),
        vector_search_body([0.1, 0.2], filters, 100, candidates=True, candidate_path=True),
    ):
        assert body["docvalue_fields"] == [
            "document_id",
            "generation",
            "chunk_index",
            "document_path",
        ]
    assert keyword_search_body("q", filters, 5)["_source"] == SOURCE


def test_hybrid_candidates_whose_ids_carry_the_facts_are_ids_and_scores_only() -> None:
    filters = query_filters(SCOPE)
    for body in (
        keyword_search_body("q", filters, 100, candidates=True, candidate_facts=False),
        vector_search_body([0.1, 0.2], filters, 100, candidates=True, candidate_facts=False),
    ):
        assert body["_source"] is False
        assert "docvalue_fields" not in body
    body = keyword_search_body(
        "q", filters, 100, candidates=True, candidate_path=True, candidate_facts=False
    )
    assert body["docvalue_fields"] == ["document_path"]


@pytest.mark.parametrize(
    ("chunk_id", "expected"),
    [
        (
            "3f2a:0000001764500000000-9c1d2e3f:12",
            {
                "document_id": "3f2a",
                "generation": "0000001764500000000-9c1d2e3f",
                "chunk_index": 12,
            },
        ),
        ("3f2a:7", {"document_id": "3f2a", "chunk_index": 7}),  # schema 1
        ("1%3A0%3ApX8mQo", {}),  # server-made (Serverless)
        ("a:b:c", {}),
        (":gen:3", {}),
        ("doc::3", {}),
        ("doc:gen:3:4", {}),
        (":7", {}),  # schema 1 without a document
        ("3f2a:x", {}),
        ("", {}),
    ],
)
def test_chunk_id_facts(chunk_id: str, expected: dict[str, object]) -> None:
    assert chunk_id_facts(chunk_id) == expected


def test_parse_candidates_reads_the_id_and_lets_doc_values_win() -> None:
    response = {
        "hits": {
            "hits": [
                {"_id": "d1:g2:0", "_score": 3.5},
                {"_id": "d1:g2:1", "_score": None, "fields": {"document_path": ["a.md"]}},
                {
                    "_id": "srv-made",
                    "_score": 1.0,
                    "fields": {"document_id": ["d9"], "generation": ["g9"], "chunk_index": [4]},
                },
            ]
        }
    }
    assert parse_candidates(response) == [
        Hit("d1:g2:0", 3.5, {"document_id": "d1", "generation": "g2", "chunk_index": 0}),
        Hit(
            "d1:g2:1",
            0.0,
            {"document_id": "d1", "generation": "g2", "chunk_index": 1, "document_path": "a.md"},
        ),
        Hit("srv-made", 1.0, {"document_id": "d9", "generation": "g9", "chunk_index": 4}),
    ]
    assert parse_candidates({}) == []


def test_the_page_is_read_by_id_inside_the_same_filters() -> None:
    filters = query_filters(SCOPE, file_patterns=("*.md",))
    body = chunks_by_id_body(["a:0", "b:3"], filters)
    assert body["size"] == 2
    assert body["_source"] == SOURCE
    assert body["query"]["bool"]["filter"] == [*filters, {"ids": {"values": ["a:0", "b:3"]}}]
    assert body["query"]["bool"]["filter"][:2] == [
        {"term": {"agent": "ops-bot"}},
        {"term": {"context": "runbooks"}},
    ]


def test_parse_hits_reads_doc_values_in_place_of_a_source() -> None:
    response = {
        "hits": {
            "hits": [
                {
                    "_id": "a:0",
                    "_score": 1.5,
                    "fields": {"document_path": ["a.md"], "chunk_index": [0], "generation": []},
                },
                {"_id": "b:1", "_score": 0.5},
            ]
        }
    }
    assert parse_hits(response) == [
        Hit("a:0", 1.5, {"document_path": "a.md", "chunk_index": 0}),
        Hit("b:1", 0.5, {}),
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


def test_a_record_is_created_or_replaced_only_if_unchanged_since_it_was_read() -> None:
    state = RecordState(seq_no=7, primary_term=2, version="01", generation="g1", chunk_count=3)
    assert bulk_record_action("doc1", {"record": "document"}, None) == {
        "_op_type": "create",
        "_id": "doc1",
        "_source": {"record": "document"},
    }
    assert bulk_record_action("doc1", {"record": "document"}, state) == {
        "_op_type": "index",
        "_id": "doc1",
        "if_seq_no": 7,
        "if_primary_term": 2,
        "_source": {"record": "document"},
    }


def test_records_read_by_mget_keep_the_condition_and_what_they_point_at() -> None:
    response = {
        "docs": [
            {
                "_id": "doc1",
                "found": True,
                "_seq_no": 4,
                "_primary_term": 1,
                "_source": {"version": "0A", "generation": "g2", "chunk_count": 5},
            },
            {"_id": "doc2", "found": False},
        ]
    }
    assert parse_records_mget(response) == {
        "doc1": RecordState(seq_no=4, primary_term=1, version="0A", generation="g2", chunk_count=5)
    }


def test_a_record_after_a_missing_one_in_the_mget_is_still_read() -> None:
    response = {
        "docs": [
            {"_id": "doc0", "found": False},
            {
                "_id": "doc1",
                "found": True,
                "_seq_no": 7,
                "_primary_term": 2,
                "_source": {"version": "0B", "generation": "g3", "chunk_count": 1},
            },
        ]
    }
    assert parse_records_mget(response) == {
        "doc1": RecordState(seq_no=7, primary_term=2, version="0B", generation="g3", chunk_count=1)
    }


def test_each_document_shows_only_its_newest_generation_among_the_hits() -> None:
    def hit(i: str, doc: str, gen: str | None) -> Hit:
        source = {"document_id": doc, "chunk_index": int(i)}
        source |= {} if gen is None else {"generation": gen}
        return Hit(id=i, score=1.0, source=source)

    hits = [hit("1", "a", "g1"), hit("2", "a", "g2"), hit("3", "b", "g1"), hit("4", "c", None)]
    assert [h.id for h in newest_generations(hits)] == ["2", "3", "4"]


def test_a_chunk_stored_twice_in_one_generation_is_one_hit() -> None:
    def hit(i: str, chunk: int) -> Hit:
        source = {"document_id": "a", "generation": "g1", "chunk_index": chunk}
        return Hit(id=i, score=1.0, source=source)

    assert [h.id for h in newest_generations([hit("1", 0), hit("2", 0), hit("3", 1)])] == [
        "1",
        "3",
    ]


def test_chunk_ids_are_per_generation() -> None:
    assert generation_chunk_id("doc1", "g7", 3) == "doc1:g7:3"


def test_problems_are_one_per_path_most_recent_first() -> None:
    response = {
        "hits": {
            "hits": [
                {"_id": "1", "_source": {"document_path": "b.pdf", "problem": "encrypted PDF"}},
                {"_id": "2", "_source": {"document_path": "a.md", "problem": "too large"}},
                {"_id": "3", "_source": {"document_path": "b.pdf", "problem": "older"}},
            ]
        }
    }
    assert parse_problems(response, 10) == [("b.pdf", "encrypted PDF"), ("a.md", "too large")]
    assert parse_problems(response, 1) == [("b.pdf", "encrypted PDF")]


@pytest.mark.parametrize(
    ("doc_id", "expected"),
    [
        ("doc1:0", {"_op_type": "index", "_id": "doc1:0", "_source": {"a": 1}}),
        # Serverless vector collections refuse client ids: the server picks one.
        (None, {"_op_type": "index", "_source": {"a": 1}}),
    ],
)
def test_bulk_index_action(doc_id: str | None, expected: dict) -> None:
    assert bulk_index_action(doc_id, {"a": 1}) == expected


def test_bulk_delete_action() -> None:
    assert bulk_delete_action("x") == {"_op_type": "delete", "_id": "x"}


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
        "sort": [
            {"document_id": "asc"},
            {"generation": "asc"},
            {"chunk_index": "asc"},
            {"indexed_at": "asc"},
        ],
    }
    if expected_after is not None:
        expected["search_after"] = expected_after
    assert body == expected


# --- status and stored documents ------------------------------------------------------------


INDEXED_RECORD = {
    "bool": {"filter": [{"term": {"record": "document"}}, {"exists": {"field": "generation"}}]}
}


def test_scope_stats_body() -> None:
    assert scope_stats_body(SCOPE) == {
        "size": 0,
        "track_total_hits": False,
        "query": scope_query(SCOPE),
        "aggs": {
            "chunks": {"filter": {"term": {"record": "chunk"}}},
            "unread": {
                "filter": {"term": {"record": "unread"}},
                "aggs": {
                    "latest": {
                        "top_hits": {
                            "size": 1,
                            "sort": [{"indexed_at": "desc"}],
                            "_source": {"includes": ["unread_files"]},
                        }
                    }
                },
            },
            "records": {
                "filter": INDEXED_RECORD,
                "aggs": {
                    "documents": {
                        "cardinality": {"field": "document_id", "precision_threshold": 40000}
                    },
                    "last_indexed": {"max": {"field": "indexed_at"}},
                    "embedded": {"sum": {"field": "embedded_chunks"}},
                    "reused": {"sum": {"field": "reused_chunks"}},
                },
            },
        },
    }


@pytest.mark.parametrize(
    ("aggs", "expected"),
    [
        ({}, ScopeStats(0, 0, None)),
        (
            {
                "chunks": {"doc_count": 7},
                "records": {
                    "documents": {"value": 3},
                    "last_indexed": {
                        "value": 1.7e12,
                        "value_as_string": "2023-11-14T22:13:20.000Z",
                    },
                },
            },
            ScopeStats(3, 7, datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)),
        ),
        (
            # The formatted value wins over the number (it keeps the index's precision).
            {
                "chunks": {"doc_count": 1},
                "records": {
                    "documents": {"value": 1},
                    "last_indexed": {"value": 0, "value_as_string": "2024-05-01T10:00:00.5Z"},
                },
            },
            ScopeStats(1, 1, datetime(2024, 5, 1, 10, 0, 0, 500000, tzinfo=UTC)),
        ),
        (
            {
                "chunks": {"doc_count": 0},
                # two empty documents: records, no chunks
                "records": {"documents": {"value": 2}, "last_indexed": {"value": 1.7e12}},
            },
            ScopeStats(2, 0, datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)),
        ),
        (
            # sums come as doubles (0.0 when no record has the field)
            {
                "chunks": {"doc_count": 9},
                "records": {
                    "documents": {"value": 2},
                    "last_indexed": {"value": 1.7e12},
                    "embedded": {"value": 2.0},
                    "reused": {"value": 7.0},
                },
            },
            ScopeStats(2, 9, datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC), 2, 7),
        ),
    ],
)
def test_parse_scope_stats(aggs: dict, expected: ScopeStats) -> None:
    assert parse_scope_stats({"aggregations": aggs}) == expected


DOCUMENT_AGGS = {
    "record": {
        "filter": INDEXED_RECORD,
        "aggs": {
            "latest": {
                "top_hits": {
                    "size": 1,
                    "sort": [{"generation": "desc"}],
                    "_source": {
                        "includes": [
                            "content_hash",
                            "version",
                            "chunk_count",
                            "generation",
                            "replaces",
                        ]
                    },
                }
            }
        },
    },
    "chunks": {
        "filter": {"term": {"record": "chunk"}},
        "aggs": {"generations": {"terms": {"field": "generation", "size": 20}}},
    },
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


def _bucket(path: str, records: list[dict], chunks: int | dict[str, int]) -> dict:
    by_generation = {"g1": chunks} if isinstance(chunks, int) else chunks
    total = sum(by_generation.values())
    return {
        "key": {"path": path},
        "doc_count": len(records) + total,
        "record": {
            "doc_count": len(records),
            "latest": {"hits": {"hits": [{"_source": r} for r in records[:1]]}},
        },
        "chunks": {
            "doc_count": total,
            "generations": {
                "buckets": [{"key": g, "doc_count": n} for g, n in by_generation.items() if n]
            },
        },
    }


RECORD = {"content_hash": "h1", "version": "0A", "chunk_count": 2, "generation": "g1"}


@pytest.mark.parametrize(
    ("records", "chunks", "expected"),
    [
        ([RECORD], 2, StoredDocument("a.md", "h1", "0A", 2, "g1")),
        (
            [{**RECORD, "chunk_count": 0, "version": None}],
            0,
            StoredDocument("a.md", "h1", None, 0, "g1"),
        ),
        # A newer generation being written (or an older one not yet removed) beside it.
        ([RECORD], {"g1": 2, "g2": 3}, StoredDocument("a.md", "h1", "0A", 5, "g1")),
        ([RECORD, RECORD], 2, StoredDocument("a.md", "h1", "0A", 2, "g1")),
        # A write that died half-way: chunks without their record, or fewer than declared.
        ([], 2, StoredDocument("a.md", INCOMPLETE_HASH, None, 2)),
        ([RECORD], 1, StoredDocument("a.md", INCOMPLETE_HASH, "0A", 1, "g1")),
        ([RECORD], {"g0": 2}, StoredDocument("a.md", INCOMPLETE_HASH, "0A", 2, "g1")),
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
        "query": {"bool": {"must_not": [{"terms": {"record": ["unread", "synonyms"]}}]}},
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
    scopes, after = answers.parse_scopes_page(response)
    assert scopes == [KnowledgeScope("ops-bot", "runbooks")]
    assert after == {"agent": "ops-bot", "context": "runbooks"}
    assert answers.parse_scopes_page({"aggregations": {"scopes": {"buckets": []}}}) == ([], None)


def test_stored_vectors_body_reads_one_document_of_the_scope_newest_generation_first() -> None:
    scope = KnowledgeScope("ops-bot", "runbooks")
    body = records.stored_vectors_body(scope, "doc-1", 500, ["g9", 3])
    assert body["_source"] == {"includes": ["embedding_key", "embedding"]}
    assert body["query"]["bool"]["filter"] == [
        {"term": {"agent": "ops-bot"}},
        {"term": {"context": "runbooks"}},
        {"term": {"document_id": "doc-1"}},
        {"term": {"record": "chunk"}},
    ]
    assert body["sort"] == [{"generation": "desc"}, {"chunk_index": "asc"}]
    assert (body["size"], body["search_after"]) == (500, ["g9", 3])


def test_parse_stored_vectors_keeps_the_first_of_a_key_and_right_sized_vectors() -> None:
    def hit(source: dict[str, object], sort: list[object]) -> dict[str, object]:
        return {"_source": source, "sort": sort}

    response = {
        "hits": {
            "hits": [
                hit({"embedding_key": "a", "embedding": [0.1, 0.2]}, ["g2", 0]),
                hit({"embedding_key": "zero"}, ["g2", 1]),  # stored without its zero vector
                hit({"embedding_key": "wide", "embedding": [1.0, 2.0, 3.0]}, ["g2", 2]),
                hit({"embedding": [0.5, 0.5]}, ["g2", 3]),  # no key: written before schema 3
                hit({"embedding_key": "a", "embedding": [9.0, 9.0]}, ["g1", 0]),  # older
            ]
        }
    }
    vectors, after, count = records.parse_stored_vectors(response, 2)
    assert vectors == {"a": [0.1, 0.2], "zero": [0.0, 0.0]}
    assert (after, count) == (["g1", 0], 5)
    assert records.parse_stored_vectors({"hits": {"hits": []}}, 2) == ({}, None, 0)


# --- bodies the store's write path sends, as literal data (issue 15) ----------------------


def test_problems_body_is_the_scopes_problem_records_most_recent_first() -> None:
    assert records.problems_body(SCOPE, 100) == {
        "size": 100,
        "track_total_hits": False,
        "_source": {"includes": ["document_path", "problem", "problem_at", "generation"]},
        "query": {
            "bool": {
                "filter": [
                    AGENT_TERM,
                    CONTEXT_TERM,
                    {"term": {"record": "document"}},
                    {"exists": {"field": "problem_at"}},
                ]
            }
        },
        "sort": [{"problem_at": "desc"}],
    }


def test_a_problem_is_merged_into_the_record_or_creates_one() -> None:
    fields = {"problem": "too large", "problem_at": "2026-01-01T00:00:00Z"}
    upsert = {"record": "document", **fields}
    assert records.bulk_problem_action("doc1", fields, upsert) == {
        "_op_type": "update",
        "_id": "doc1",
        "retry_on_conflict": 3,
        "doc": {"problem": "too large", "problem_at": "2026-01-01T00:00:00Z"},
        "upsert": {
            "record": "document",
            "problem": "too large",
            "problem_at": "2026-01-01T00:00:00Z",
        },
    }


def test_other_generations_are_every_record_and_chunk_but_the_kept_one() -> None:
    document = [AGENT_TERM, CONTEXT_TERM, {"term": {"document_id": "doc1"}}]
    assert records.other_generations_query(SCOPE, "doc1", "g2") == {
        "bool": {"filter": document, "must_not": [{"term": {"generation": "g2"}}]}
    }
    assert records.other_generations_query(SCOPE, "doc1", None) == {"bool": {"filter": document}}


def test_chunk_generations_pages_the_document_generation_pairs_of_the_scopes_chunks() -> None:
    query = {
        "bool": {
            "filter": [
                AGENT_TERM,
                CONTEXT_TERM,
                {"term": {"record": "chunk"}},
                {"terms": {"document_id": ["doc1", "doc2"]}},
            ]
        }
    }
    sources = [
        {"document": {"terms": {"field": "document_id"}}},
        {"generation": {"terms": {"field": "generation"}}},
    ]
    assert records.chunk_generations_body(SCOPE, ("doc1", "doc2")) == {
        "size": 0,
        "track_total_hits": False,
        "query": query,
        "aggs": {"pairs": {"composite": {"size": 1000, "sources": sources}}},
    }
    after = {"document": "doc1", "generation": "g2"}
    paged = records.chunk_generations_body(SCOPE, ["doc1", "doc2"], after)
    assert paged["aggs"]["pairs"]["composite"] == {
        "size": 1000,
        "sources": sources,
        "after": {"document": "doc1", "generation": "g2"},
    }
    assert paged["query"] == query


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        ({}, ([], None)),
        ({"aggregations": {"pairs": {"buckets": []}}}, ([], None)),
        # The last page: no buckets, even if an after key came with it.
        ({"aggregations": {"pairs": {"buckets": [], "after_key": {"x": 1}}}}, ([], None)),
        (
            {
                "aggregations": {
                    "pairs": {
                        "buckets": [
                            {"key": {"document": "doc1", "generation": "g1"}, "doc_count": 3},
                            {"key": {"document": "doc1", "generation": "g2"}, "doc_count": 3},
                        ],
                        "after_key": {"document": "doc1", "generation": "g2"},
                    }
                }
            },
            ([("doc1", "g1"), ("doc1", "g2")], {"document": "doc1", "generation": "g2"}),
        ),
        (
            # Buckets without an after key (or a malformed one): no next page.
            {
                "aggregations": {
                    "pairs": {
                        "buckets": [{"key": {"document": "d", "generation": "g"}}],
                        "after_key": "not a key",
                    }
                }
            },
            ([("d", "g")], None),
        ),
    ],
)
def test_read_generation_pairs(found: dict, expected: tuple) -> None:
    assert records.read_generation_pairs(found) == expected


def test_named_generations_are_terms_per_document_never_a_range() -> None:
    body = records.named_generations_query(SCOPE, {"doc1": ["g1", "g2"], "doc2": ("g0",)})
    assert body == {
        "bool": {
            "filter": [AGENT_TERM, CONTEXT_TERM, {"term": {"record": "chunk"}}],
            "should": [
                {
                    "bool": {
                        "filter": [
                            {"term": {"document_id": "doc1"}},
                            {"terms": {"generation": ["g1", "g2"]}},
                        ]
                    }
                },
                {
                    "bool": {
                        "filter": [
                            {"term": {"document_id": "doc2"}},
                            {"terms": {"generation": ["g0"]}},
                        ]
                    }
                },
            ],
            "minimum_should_match": 1,
        }
    }


def test_stale_generations_are_the_chunks_older_than_each_documents_bound() -> None:
    body = records.stale_generations_query(SCOPE, {"doc1": "g5", "doc2": "0193"})
    assert body == {
        "bool": {
            # Chunks only, of this scope: the records stay.
            "filter": [AGENT_TERM, CONTEXT_TERM, {"term": {"record": "chunk"}}],
            # Each document with its own bound, strictly older than it; one must hold.
            "should": [
                {
                    "bool": {
                        "filter": [
                            {"term": {"document_id": "doc1"}},
                            {"range": {"generation": {"lt": "g5"}}},
                        ]
                    }
                },
                {
                    "bool": {
                        "filter": [
                            {"term": {"document_id": "doc2"}},
                            {"range": {"generation": {"lt": "0193"}}},
                        ]
                    }
                },
            ],
            "minimum_should_match": 1,
        }
    }


def test_records_are_read_once_each_in_order() -> None:
    assert records.records_mget_body(["b", "a", "b", "c", "a"]) == {"ids": ["b", "a", "c"]}
    assert records.records_mget_body([]) == {"ids": []}


def test_a_record_without_a_count_or_version_reads_as_none_and_zero() -> None:
    response = {
        "docs": [
            {"_id": 7, "found": True, "_seq_no": "3", "_primary_term": "2", "_source": None},
            {
                "_id": "x",
                "found": True,
                "_seq_no": 0,
                "_primary_term": 1,
                "_source": {"version": 12, "generation": 5, "chunk_count": "4"},
            },
        ]
    }
    assert parse_records_mget(response) == {
        "7": RecordState(seq_no=3, primary_term=2, version=None, generation=None, chunk_count=0),
        "x": RecordState(seq_no=0, primary_term=1, version="12", generation="5", chunk_count=0),
    }
    assert parse_records_mget({}) == {}


def test_problems_without_a_path_or_reason_are_skipped() -> None:
    response = {
        "hits": {
            "hits": [
                {"_id": "1", "_source": {"document_path": "a.md"}},
                {"_id": "2", "_source": {"problem": "too large"}},
                {"_id": "3", "_source": {"document_path": 5, "problem": "x"}},
                {"_id": "4", "_source": {"document_path": "c.md", "problem": "corrupt file"}},
                {"_id": "5", "_source": {"document_path": "d.md", "problem": "too large"}},
            ]
        }
    }
    assert parse_problems(response, 2) == [("c.md", "corrupt file"), ("d.md", "too large")]
    assert parse_problems(response, 1) == [("c.md", "corrupt file")]


# --- readers of responses that lack a part (an empty index, a missing aggregation) --------


@pytest.mark.parametrize(
    "response",
    [{}, {"aggregations": {}}, {"aggregations": {"chunks": {}, "records": {}}}],
)
def test_scope_stats_of_a_response_without_aggregations_are_empty(response: dict) -> None:
    assert parse_scope_stats(response) == ScopeStats(0, 0, None)


@pytest.mark.parametrize(
    "response",
    [
        {},
        {"aggregations": {}},
        {"aggregations": {"documents": {}}},
        {"aggregations": {"documents": {"after_key": {"path": "z"}}}},
    ],
)
def test_stored_documents_of_a_response_without_buckets_end_the_paging(response: dict) -> None:
    assert parse_stored_documents(response) == ({}, None)


def test_a_record_without_source_or_counts_is_an_incomplete_write() -> None:
    aggs = {"record": {"latest": {"hits": {"hits": [{}]}}}, "chunks": {"doc_count": 2}}
    assert parse_stored_document({"aggregations": aggs}, "a.md") == StoredDocument(
        "a.md", INCOMPLETE_HASH, None, 2
    )


def test_a_record_of_no_chunks_without_generation_buckets_is_complete() -> None:
    record = {"content_hash": "h1", "chunk_count": 0, "generation": "g1"}
    aggs = {"record": {"latest": {"hits": {"hits": [{"_source": record}]}}}}
    assert parse_stored_document({"aggregations": aggs}, "a.md") == StoredDocument(
        "a.md", "h1", None, 0, "g1"
    )
    # A generation bucket without a count counts no chunk.
    aggs["chunks"] = {"generations": {"buckets": [{"key": "g1"}]}}
    assert parse_stored_document({"aggregations": aggs}, "a.md") == StoredDocument(
        "a.md", "h1", None, 0, "g1"
    )


def test_a_complete_record_without_a_hash_reports_an_empty_hash() -> None:
    record = {"chunk_count": 1, "generation": "g1", "version": 3}
    aggs = {
        "record": {"latest": {"hits": {"hits": [{"_source": record}]}}},
        "chunks": {"doc_count": 1, "generations": {"buckets": [{"key": "g1", "doc_count": 1}]}},
    }
    assert parse_stored_document({"aggregations": aggs}, "a.md") == StoredDocument(
        "a.md", "", "3", 1, "g1"
    )


def test_scopes_page_of_a_response_without_buckets_ends_the_paging() -> None:
    assert answers.parse_scopes_page({}) == ([], None)
    assert answers.parse_scopes_page({"aggregations": {}}) == ([], None)
    empty = {"aggregations": {"scopes": {"buckets": [], "after_key": {"agent": "a"}}}}
    assert answers.parse_scopes_page(empty) == ([], None)


def test_a_pair_that_is_no_scope_does_not_hide_the_ones_after_it() -> None:
    response = {
        "aggregations": {
            "scopes": {
                "buckets": [
                    {"key": {"agent": "Bad Agent", "context": "x"}},
                    {"key": {"agent": "ops-bot", "context": "runbooks"}},
                ]
            }
        }
    }
    assert answers.parse_scopes_page(response) == (
        [KnowledgeScope("ops-bot", "runbooks")],
        None,
    )


@pytest.mark.parametrize(
    "key",
    [{}, {"agent": None, "context": None}, {"agent": "ops-bot"}, {"context": "runbooks"}],
)
def test_a_bucket_without_an_agent_and_context_is_no_scope(key: dict) -> None:
    # Not the scope "None/None" or "ops-bot/None": a missing value names no scope (a
    # composite aggregation with missing buckets would send null).
    response = {"aggregations": {"scopes": {"buckets": [{"key": key}, {}]}}}
    assert answers.parse_scopes_page(response) == ([], None)


# --- mutation survivors of the round-3 run (literal expected values) ---------------------


def test_reads_by_id_and_vector_pages_do_not_count_total_hits() -> None:
    assert chunks_by_id_body(["c1"], [])["track_total_hits"] is False
    assert stored_vectors_body(SCOPE, "doc1", 10)["track_total_hits"] is False


def test_scope_buckets_missing_a_part_are_skipped_and_the_rest_read() -> None:
    response = {
        "aggregations": {
            "scopes": {
                "buckets": [
                    {"key": {"agent": "ops-bot"}},
                    {"key": {"context": "runbooks"}},
                    {"key": {"agent": "ops-bot", "context": "runbooks"}},
                ],
                "after_key": {"agent": "ops-bot", "context": "runbooks"},
            }
        }
    }
    assert parse_scopes_page(response) == (
        [KnowledgeScope("ops-bot", "runbooks")],
        {"agent": "ops-bot", "context": "runbooks"},
    )


def test_a_vector_page_without_hits_is_empty() -> None:
    assert parse_stored_vectors({}, 2) == ({}, None, 0)
    assert parse_stored_vectors({"hits": {}}, 2) == ({}, None, 0)


def test_a_vector_hit_without_a_key_is_skipped_and_the_next_one_read() -> None:
    response = {
        "hits": {
            "hits": [
                {"_source": {}, "sort": ["g2", 0]},
                {"_source": {"embedding_key": "k1", "embedding": [1, 2]}, "sort": ["g2", 1]},
            ]
        }
    }
    assert parse_stored_vectors(response, 2) == ({"k1": [1.0, 2.0]}, ["g2", 1], 2)


def test_ef_search_of_one_is_sent() -> None:
    knn = vector_search_body([1, 0.5], [], 5, ef_search=1)["query"]["knn"]["embedding"]
    assert knn["method_parameters"] == {"ef_search": 1}


def test_the_newest_generation_wins_whatever_the_order_of_the_hits() -> None:
    def hit(i: str, doc: str, gen: str | None) -> Hit:
        source = {"document_id": doc, "chunk_index": int(i)}
        source |= {} if gen is None else {"generation": gen}
        return Hit(id=i, score=1.0, source=source)

    # The newest first, then an older one: the older is left out.
    assert [h.id for h in newest_generations([hit("1", "a", "g2"), hit("2", "a", "g1")])] == ["1"]
    # A generation that sorts before any letter is still a generation.
    assert [h.id for h in newest_generations([hit("3", "b", "1")])] == ["3"]
    # A hit without a generation is kept, and so are the hits after it.
    assert [h.id for h in newest_generations([hit("4", "c", None), hit("5", "d", "g1")])] == [
        "4",
        "5",
    ]


def test_newest_generations_edge_hits_keep_their_meaning() -> None:
    def hit(i: str, source: dict[str, object]) -> Hit:
        return Hit(id=i, score=1.0, source=source)

    # Every hit of one generation, no chunk twice: all kept, in order, in a new list.
    alike = [hit("1", {"document_id": "a", "generation": "g1", "chunk_index": 0})]
    alike.append(hit("2", {"document_id": "b", "generation": "g9", "chunk_index": 0}))
    kept = newest_generations(alike)
    assert [h.id for h in kept] == ["1", "2"]
    assert kept is not alike
    # A generation without a document is no document's newest: left out, wherever it is.
    orphan = hit("3", {"generation": "g1", "chunk_index": 0})
    assert [h.id for h in newest_generations([*alike, orphan])] == ["1", "2"]
    assert [h.id for h in newest_generations([orphan, *alike])] == ["1", "2"]
    # Hits without a generation (schema 1) are all kept, even two alike.
    old = [hit("4", {"document_id": "c", "chunk_index": 0}) for _ in range(2)]
    assert [h.id for h in newest_generations(old)] == ["4", "4"]
    # A hit without a generation first does not hide an older generation after it.
    newer = hit("6", {"document_id": "a", "generation": "g2", "chunk_index": 1})
    assert [h.id for h in newest_generations([old[0], *alike, newer])] == ["4", "2", "6"]
    # A chunk stored twice is one hit even when nothing else is dropped.
    twice = [alike[0], hit("5", {"document_id": "a", "generation": "g1", "chunk_index": 0})]
    assert [h.id for h in newest_generations(twice)] == ["1"]


def test_the_search_filter_is_the_last_filter() -> None:
    search_filter = parse_filter({"field": "team", "op": "eq", "value": "ops"})
    assert query_filters(SCOPE, search_filter=search_filter) == [
        {"term": {"agent": "ops-bot"}},
        {"term": {"context": "runbooks"}},
        {"term": {"metadata.team": "ops"}},
    ]


def test_a_scope_without_documents_has_no_last_indexed_time_even_if_a_number_comes() -> None:
    response = {
        "aggregations": {
            "chunks": {"doc_count": 0},
            "records": {"documents": {"value": 0}, "last_indexed": {"value": 1.7e12}},
        }
    }
    assert parse_scope_stats(response) == ScopeStats(
        document_count=0, chunk_count=0, last_indexed_at=None
    )


def test_named_clauses_wrap_a_search_without_changing_what_it_matches() -> None:
    q = queries
    lesson = {"term": {"metadata_terms": "kind\x1flesson"}}
    plain = q.keyword_search_body("walrus", [], 10, candidates=True)
    named = q.keyword_search_body("walrus", [], 10, candidates=True, named={"lesson": lesson})
    assert named["query"] == {
        "bool": {
            "must": [plain["query"]],
            "should": [{"constant_score": {"filter": lesson, "boost": 0.0, "_name": "lesson"}}],
        }
    }
    assert q.keyword_search_body("walrus", [], 10, named={}) == q.keyword_search_body(
        "walrus", [], 10
    )
    vector = q.vector_search_body([1.0, 0.0], [], 5, candidates=True, named={"lesson": lesson})
    # The vector side's clauses go inside the knn filter as optional ones: wrapping the
    # knn query would change which neighbours a walk with ef_search returns.
    should = vector["query"]["knn"]["embedding"]["filter"]["bool"]["should"]
    assert should == [{"constant_score": {"filter": lesson, "boost": 0.0, "_name": "lesson"}}]
    assert vector["query"]["knn"]["embedding"]["filter"]["bool"]["minimum_should_match"] == 0
    hits = answers.parse_candidates(
        {"hits": {"hits": [{"_id": "d:g:0", "_score": 1.0, "matched_queries": ["lesson"]}]}}
    )
    assert hits[0].source[answers.MATCHED] == ("lesson",)
    assert "hits.hits.matched_queries" in q.CANDIDATES_FILTER_PATH
