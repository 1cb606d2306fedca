"""The OpenSearch store's part of the absolute scores, as data (no node, no client): the
named term clauses every search body carries without changing a score, the scope's term
statistics request and its reader, and the answers that keep the matched names."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest

from knowledge.core.model import SearchMode
from knowledge.core.origin import REPO
from knowledge.core.rank_weights import RankWeights
from knowledge.core.scope import KnowledgeScope
from knowledge.ranking.fusion import Fused
from knowledge.ranking.relevance import calibration, judge, query_terms, query_weights
from knowledge.ranking.synonym_expansion import QueryTerms
from knowledge.stores.opensearch.hits import MATCHED, parse_hits
from knowledge.stores.opensearch.read import answers, queries
from knowledge.stores.opensearch.read.both_sides import Search, search_together
from knowledge.stores.opensearch.read.named_clauses import (
    TERM_CLAUSE,
    facts,
    matched_terms,
    named_clauses,
    term_clauses,
)
from knowledge.stores.opensearch.read.relevance_side import (
    STATISTICS_FILTER_PATH,
    judge_candidates,
    parse_statistics,
    statistics_body,
)
from knowledge.stores.opensearch.read.scope_size import scope_chunks_body
from knowledge.stores.opensearch.request_filters import query_filters, searched_scope_filters

SCOPE = KnowledgeScope("ops-bot", "runbooks")
LIBRARY = KnowledgeScope("_shared", "playbooks")
TERMS = QueryTerms(("deploy", "rollback"), ("revert",))
WANTED = query_terms(TERMS)


def test_one_named_term_clause_per_query_term_on_content_terms() -> None:
    assert WANTED == ["deploy", "rollback", "revert"]
    assert term_clauses(WANTED) == {
        "t:0": {"term": {"content_terms": "deploy"}},
        "t:1": {"term": {"content_terms": "rollback"}},
        "t:2": {"term": {"content_terms": "revert"}},
    }
    assert term_clauses([]) == {}


@pytest.mark.parametrize("candidates", [False, True])
def test_the_keyword_body_names_its_scored_term_clauses(candidates: bool) -> None:
    filters = query_filters(SCOPE)
    plain = queries.keyword_search_body(TERMS, filters, 20, candidates=candidates)
    lesson = {"term": {"metadata_terms": "kind\x1flesson"}}
    named = queries.keyword_search_body(
        TERMS, filters, 20, candidates=candidates, named={**term_clauses(WANTED), "lesson": lesson}
    )
    # Everything but the query is the same.
    assert {k: v for k, v in named.items() if k != "query"} == {
        k: v for k, v in plain.items() if k != "query"
    }
    # The plain query matches the typed terms, and a synonym's at its weight, in one
    # ``match`` each; the named one is the same clauses term by term, each named: the node
    # evaluates each term once, and BM25 sums the same clauses.
    assert plain["query"]["bool"]["should"] == [
        {"match": {"content_terms": {"query": "deploy rollback"}}},
        {"match": {"content_terms": {"query": "revert", "boost": 0.5}}},
    ]
    wrapper = named["query"]["bool"]
    assert set(wrapper) == {"must", "should"}  # only the lesson clause is added, at score 0
    assert wrapper["should"] == [
        {"constant_score": {"filter": lesson, "boost": 0.0, "_name": "lesson"}}
    ]
    (inner,) = wrapper["must"]
    assert inner["bool"]["filter"] == plain["query"]["bool"]["filter"]
    assert inner["bool"]["should"] == [
        {
            "bool": {
                "should": [
                    {"term": {"content_terms": {"value": "deploy", "_name": f"{TERM_CLAUSE}0"}}},
                    {"term": {"content_terms": {"value": "rollback", "_name": f"{TERM_CLAUSE}1"}}},
                ]
            }
        },
        {
            "bool": {
                "should": [
                    {"term": {"content_terms": {"value": "revert", "_name": f"{TERM_CLAUSE}2"}}}
                ],
                "boost": 0.5,
            }
        },
    ]


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("candidates", [False, True])
def test_the_vector_body_carries_the_term_clauses_next_to_its_filters(
    candidates: bool, exact: bool
) -> None:
    filters = query_filters(SCOPE)
    vector = [0.5, 0.5, 0.0, 0.0]
    plain = queries.vector_search_body(
        vector, filters, 50, ef_search=200, candidates=candidates, exact=exact
    )
    named = queries.vector_search_body(
        vector,
        filters,
        50,
        ef_search=200,
        candidates=candidates,
        exact=exact,
        named=term_clauses(WANTED),
    )
    assert {k: v for k, v in named.items() if k != "query"} == {
        k: v for k, v in plain.items() if k != "query"
    }
    # Never around the knn clause (a wrapped knn clause with ef_search found other
    # neighbours): optional clauses of its filter, which still matches what it matched.
    if exact:
        inner, plain_inner = (
            body["query"]["script_score"]["query"]["bool"] for body in (named, plain)
        )
        assert named["query"]["script_score"]["script"] == plain["query"]["script_score"]["script"]
    else:
        inner, plain_inner = (body["query"]["knn"]["embedding"] for body in (named, plain))
        assert {k: v for k, v in inner.items() if k != "filter"} == {
            k: v for k, v in plain_inner.items() if k != "filter"
        }
        inner, plain_inner = inner["filter"]["bool"], plain_inner["filter"]["bool"]
    assert inner["filter"] == plain_inner["filter"]
    assert inner["minimum_should_match"] == 0
    assert inner["should"] == [
        {
            "constant_score": {
                "filter": {"term": {"content_terms": term}},
                "boost": 0.0,
                "_name": f"{TERM_CLAUSE}{i}",
            }
        }
        for i, term in enumerate(WANTED)
    ]
    assert set(inner) == {"filter", "should", "minimum_should_match"}


def test_named_filters_without_names_are_the_filters() -> None:
    filters = {"bool": {"filter": [{"term": {"agent": "a"}}]}}
    assert queries.named_filters(filters, None) == filters
    assert queries.named_filters(filters, {}) == filters


def test_named_clauses_put_the_terms_next_to_lesson_and_origin_without_a_clash() -> None:
    weights = RankWeights({REPO: 1.5}, lesson=2.0)
    named = named_clauses(weights, pairs=True, terms=["lesson", "origin:repo"])
    assert list(named) == ["lesson", "origin:repo", "t:0", "t:1"]
    assert named["t:0"] == {"term": {"content_terms": "lesson"}}
    # Neutral weights: the term clauses alone.
    assert list(named_clauses(RankWeights(lesson=1.0, extra_lessons=0), False, WANTED)) == [
        "t:0",
        "t:1",
        "t:2",
    ]
    # A candidate that matched them says its facts and its terms, each read on its own.
    source = {MATCHED: ("lesson", "origin:repo", "t:1")}
    assert facts(source) == ("repo", True)
    assert matched_terms(source[MATCHED], ["lesson", "origin:repo"]) == {"origin:repo"}


def test_matched_terms_maps_names_back_and_ignores_the_rest() -> None:
    matched = ("t:2", "lesson", "origin:manual", "t:0", "t:9", "t:x", "t:")
    assert matched_terms(matched, WANTED) == {"deploy", "revert"}
    assert matched_terms((), WANTED) == frozenset()


def test_the_statistics_body_counts_the_scope_chunks_and_each_terms_chunks() -> None:
    body = statistics_body(SCOPE, cross_context=False, libraries=(), terms=WANTED)
    counted = scope_chunks_body(SCOPE, cross_context=False)
    assert body["size"] == 0
    assert body["track_total_hits"] is True
    assert body["query"] == counted["query"]  # the scope's chunk records, nothing else
    assert body["query"]["bool"]["filter"] == [
        {"term": {"agent": "ops-bot"}},
        {"term": {"context": "runbooks"}},
        {"term": {"record": "chunk"}},
    ]
    assert body["aggs"] == {
        "terms": {
            "filters": {
                "filters": {
                    "0": {"term": {"content_terms": "deploy"}},
                    "1": {"term": {"content_terms": "rollback"}},
                    "2": {"term": {"content_terms": "revert"}},
                }
            }
        }
    }


def test_the_statistics_cover_every_context_and_the_libraries_not_the_filters() -> None:
    body = statistics_body(SCOPE, cross_context=True, libraries=(LIBRARY,), terms=["x"])
    scope_part = searched_scope_filters(SCOPE, cross_context=True, libraries=(LIBRARY,))
    assert body["query"]["bool"]["filter"] == [*scope_part, {"term": {"record": "chunk"}}]
    # No file pattern, metadata or filter clause: those choose hits, not term weights.
    assert "document_path" not in str(body)
    assert "metadata" not in str(body)


def test_parse_statistics_reads_the_count_and_the_buckets_by_position() -> None:
    response = {
        "took": 2,
        "hits": {"total": {"value": 1234, "relation": "eq"}},
        "aggregations": {
            "terms": {"buckets": {"0": {"doc_count": 40}, "1": {"doc_count": 0}, "2": {}}}
        },
    }
    assert parse_statistics(response, WANTED) == (1234, {"deploy": 40, "rollback": 0, "revert": 0})
    assert parse_statistics({}, WANTED) == (0, {"deploy": 0, "rollback": 0, "revert": 0})
    assert STATISTICS_FILTER_PATH.split(",") == ["error", "took", "hits.total", "aggregations"]


def test_full_hits_and_candidates_keep_the_names_they_matched() -> None:
    response = {
        "hits": {
            "hits": [
                {
                    "_id": "d1:g1:0",
                    "_score": 3.0,
                    "_source": {"content": "deploy it"},
                    "matched_queries": ["t:0"],
                },
                {"_id": "d1:g1:1", "_score": 1.0, "_source": {"content": "other"}},
            ]
        }
    }
    full = parse_hits(response)
    assert full[0].source == {"content": "deploy it", MATCHED: ("t:0",)}
    assert full[1].source == {"content": "other"}  # no names: the source as it came
    assert response["hits"]["hits"][0]["_source"] == {"content": "deploy it"}  # not changed
    (candidate, _) = answers.parse_candidates(response)
    assert candidate.source[MATCHED] == ("t:0",)


def test_judge_candidates_is_relevance_judge_on_the_matched_terms() -> None:
    weights = query_weights(TERMS, {"deploy": 30, "rollback": 3, "revert": 1}, 2000)
    scale = calibration("hashing")
    candidates = [Fused("a", 1.0), Fused("b", 0.5), Fused("c", 0.2)]
    sources = {
        "a": {MATCHED: ("t:0", "t:1")},
        "b": {MATCHED: ("t:2",)},
        "c": {},
    }
    units = {"a": 0.9, "c": 0.7}  # b: a hit the vector side did not return
    judged = judge_candidates(
        candidates,
        mode=SearchMode.HYBRID,
        weights=weights,
        scale=scale,
        terms=WANTED,
        sources=sources,
        vector=units,
    )
    expected = judge(
        SearchMode.HYBRID,
        weights,
        scale,
        candidates,
        terms_of={"a": {"deploy", "rollback"}, "b": {"revert"}},
        vector=units,
    )
    assert judged.scores == expected.scores
    assert judged.evidence["b"].vector == 0.7  # the lowest the vector side returned
    assert math.isclose(judged.evidence["a"].coverage, 1.0)
    assert judged.evidence["c"].coverage == 0.0


class _Connection:
    """What ``search_together`` uses of a ``Connection``: its config and two calls."""

    def __init__(self, use_msearch: bool, responses: list[dict[str, Any]]) -> None:
        self.config = SimpleNamespace(use_msearch=use_msearch, url="http://node")
        self.responses = responses
        self.sent: list[tuple[str, str, str | None]] = []

    def search(
        self, index: str, action: str, body: Any, *, filter_path: str | None = None
    ) -> dict[str, Any]:
        self.sent.append(("search", action, filter_path))
        return self.responses.pop(0)

    def msearch(
        self, index: str, action: str, lines: Any, *, filter_path: str | None = None
    ) -> dict[str, Any]:
        self.sent.append(("msearch", action, filter_path))
        return {"responses": self.responses}


def test_the_statistics_go_in_the_sides_msearch_with_their_answer_parts() -> None:
    side = Search("keyword", {"size": 1}, queries.CANDIDATES_FILTER_PATH)
    stats = Search("term statistics", {"size": 0}, STATISTICS_FILTER_PATH, "count")
    connection = _Connection(True, [{"hits": {"hits": []}}, {"hits": {"total": 3}}])
    answered = search_together(connection, "kb", "search", [side, stats])  # type: ignore[arg-type]
    assert answered == [{"hits": {"hits": []}}, {"hits": {"total": 3}}]
    ((call, action, path),) = connection.sent
    assert (call, action) == ("msearch", "search")
    assert path is not None
    kept = path.split(",")
    assert all(p.startswith("responses.") for p in kept)
    for part in ("hits.total", "aggregations", "hits.hits.matched_queries", "error", "status"):
        assert f"responses.{part}" in kept
    # A side read untrimmed (full hits) leaves the whole answer untrimmed.
    connection = _Connection(True, [{}, {}])
    search_together(connection, "kb", "search", [side._replace(filter_path=None), stats])  # type: ignore[arg-type]
    assert connection.sent == [("msearch", "search", None)]


def test_without_msearch_each_search_is_sent_alone_with_its_own_action() -> None:
    side = Search("vector", {"size": 1}, None)
    stats = Search("term statistics", {"size": 0}, STATISTICS_FILTER_PATH, "search: statistics")
    connection = _Connection(False, [{"a": 1}, {"b": 2}])
    answered = search_together(connection, "kb", "search", [side, stats])  # type: ignore[arg-type]
    assert answered == [{"a": 1}, {"b": 2}]
    assert connection.sent == [
        ("search", "search", None),
        ("search", "search: statistics", STATISTICS_FILTER_PATH),
    ]
