"""The OpenSearch search bodies: keyword, vector (walked or exact) and hybrid, the page side,
the page read by id, named clauses; tested as data (no node, no client)."""

from __future__ import annotations

import pytest
from opensearch_requests import AGENT_TERM, CONTEXT_TERM, SCOPE, SOURCE

from knowledge.ranking.analysis import keyword_terms
from knowledge.stores.opensearch.hits import MATCHED
from knowledge.stores.opensearch.read import answers, queries
from knowledge.stores.opensearch.read.queries import (
    chunks_by_id_body,
    keyword_search_body,
    msearch_body,
    vector_search_body,
)
from knowledge.stores.opensearch.request_filters import (
    query_filters,
    scope_filters,
)


def test_public_names_are_exported() -> None:
    assert set(queries.__all__) <= set(dir(queries))


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


def test_ef_search_of_one_is_sent() -> None:
    knn = vector_search_body([1, 0.5], [], 5, ef_search=1)["query"]["knn"]["embedding"]
    assert knn["method_parameters"] == {"ef_search": 1}


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
    assert hits[0].source[MATCHED] == ("lesson",)
    assert "hits.hits.matched_queries" in q.CANDIDATES_FILTER_PATH
