"""``format_trace``: the text of an explain trace, line by line, for every stage a trace
can hold (a weighted hybrid search with a shared library, synonyms, the vector side's
floor and the page signal; a keyword one with no floor; a reranker; a token budget)."""

from __future__ import annotations

from typing import Any

from knowledge.ranking.explain_format import format_trace


def _search(number: int, **changes: Any) -> dict[str, Any]:
    search: dict[str, Any] = {
        "search": number,
        "store": "embedded",
        "scope": "ops/runbooks",
        "libraries": [],
        "mode": "keyword",
        "query": {"text": "helm rollback", "terms": ["helm", "rollback"], "analysis": "icu"},
        "keyword": {"candidates": 3, "max": 2.0, "min": 0.5},
        "vector": None,
        "fusion": {"method": "keyword", "candidates": 3, "divisor": 2.0},
        "weights": {
            "origins": {"upload": 1.0, "shared": 0.5},
            "lesson": 1.4,
            "extra_lessons": 1,
            "divisor": 1.25,
            "weighted": 3,
            "lessons": 0,
        },
        "min_score": {"value": None, "dropped": 0},
        "relevance": None,
        "cap": {"max_chunks_per_document": 3, "dropped": 1},
    }
    search.update(changes)
    return search


HYBRID = _search(
    0,
    libraries=["playbooks"],
    mode="hybrid",
    vector_side="",
    query={
        "text": "k8s rollback",
        "terms": [],
        "analysis": "icu",
        "synonyms": {
            "expanded": ["kubernet"],
            "matches": [{"from": ["k8s"], "adds": ["kubernet"]}],
            "weight": 0.5,
        },
    },
    keyword={
        "candidates": 4,
        "max": 3.5,
        "min": 0.25,
        "chunk_max": 2.0,
        "page_max": 7.0,
        "page_weight": 0.3,
        "weight": 0.5,
        "confidence": 0.8,
        "effective_weight": 0.4,
    },
    vector={
        "candidates": 2,
        "max": 0.9,
        "min": 0.6,
        "found": 5,
        "floor": 0.55,
        "below_floor": 3,
        "weight": 0.5,
        "confidence": 0.2,
    },
    fusion={"method": "weighted", "candidates": 5, "divisor": 0.75},
    min_score={"value": 0.3, "dropped": 2},
    relevance={
        "best": 0.62,
        "evidence_floor": 0.7,
        "abstained": True,
        "result_floor": 0.35,
        "calibration": {"family": "hashing"},
        "terms": {"chunks": 40},
    },
)
KEYWORD = _search(
    1,
    vector_side="the embedder cannot read the query",
    fusion={"method": "keyword", "candidates": 3},
)


def _entry(search: int, **changes: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "search": search,
        "keyword": {"raw": 1.5, "rank": 1, "normalised": 0.75},
        "vector": None,
        "fused": 0.75,
        "origin_weight": 1.0,
        "lesson_weight": 1.0,
        "searched": 0.6,
        "extra": False,
    }
    entry.update(changes)
    return entry


def test_every_stage_of_a_trace_has_its_line() -> None:
    """The unexplained result (``None``) has no line; the others keep their numbers."""
    trace = {
        "searches": [HYBRID, KEYWORD],
        "results": [
            _entry(
                0,
                keyword={"raw": 3.5, "rank": 1, "normalised": 1.0, "chunk": 2.0, "page": 7.0},
                vector={"raw": None, "rank": None, "normalised": 0.0},
                rerank={"from_rank": 3, "to_rank": 1},
                relevance={"coverage": 0.5, "vector": 0.8, "strength": "strong"},
            ),
            None,
            _entry(
                1,
                extra=True,
                origin_weight=0.5,
                relevance={"coverage": 1.0, "vector": None, "strength": "weak"},
            ),
            _entry(1),
        ],
        "rerank": {"reranker": "amazon.rerank-v1:0", "candidates": 10, "moves": [{}, {}]},
        "budget": {
            "used_tokens": 90,
            "max_tokens": 120,
            "kept": 2,
            "cut": True,
            "dropped": [{"document_path": "a.md", "chunks": 2, "score": 0.25, "tokens": 70}],
        },
    }
    results = [
        {"document_path": "a.md", "chunk_index": 0, "rank_score": 0.9, "score": 0.7},
        {"document_path": "unexplained.md", "chunk_index": 0, "rank_score": 0.5, "score": 0.5},
        {"document_path": "b.md", "chunk_index": 2, "rank_score": None, "score": 0.5},
        {"document_path": "c.md", "chunk_index": 1, "rank_score": 0.125, "score": 1},
    ]
    assert format_trace(trace, results).splitlines() == [
        "search 0: embedded ops/runbooks + playbooks (hybrid)",
        "  terms: (none)  [icu]",
        "  synonyms: + kubernet (weight 0.5 each): k8s -> kubernet",
        "  keyword: 4 candidates, raw 0.25..3.5 (chunk / 2 + 0.3 x page / 7), confidence 0.8,"
        " weight 0.5 -> 0.4",
        "  vector: 2 candidates (5 found, 3 below floor 0.55), raw 0.6..0.9, confidence 0.2,"
        " weight 0.5",
        "  fusion: weighted, 5 candidates, divisor 0.75",
        "  weights: upload=1 shared=0.5 lesson=1.4 (extra 1); 3 weighted, 0 lessons, divisor 1.25",
        "  min_score 0.3: 2 dropped; per-document cap 3: 1 passed over",
        "  relevance: best 0.62, evidence floor 0.7 (nothing answered), result floor 0.35;"
        " calibration hashing, 40 chunks",
        "search 1: embedded ops/runbooks (keyword)",
        "  vector side: the embedder cannot read the query",
        "  terms: helm, rollback  [icu]",
        "  keyword: 3 candidates, raw 0.5..2",
        "  fusion: keyword, 3 candidates",
        "  weights: upload=1 shared=0.5 lesson=1.4 (extra 1); 3 weighted, 0 lessons, divisor 1.25",
        "  min_score default: 0 dropped; per-document cap 3: 1 passed over",
        "rerank: amazon.rerank-v1:0, 10 candidates, 2 moved",
        "budget: 90 of 120 tokens, 2 passages kept, 1 dropped, the first cut",
        "  dropped a.md#2 (score 0.25, 70 tokens)",
        "[1] a.md#0 (search 0): kw 3.5 [chunk 2, page 7] (#1) -> 1 vec - fused 0.75 x1 x1 = 0.6;"
        " rerank #3 -> #1; rank_score 0.9; coverage 0.5, vector 0.8 -> score 0.7 (strong)",
        "[3] b.md#2 (search 1): kw 1.5 (#1) / max 2: fused 0.75 x0.5 x1 = 0.6 (extra lesson);"
        " rank_score 0; coverage 1 -> score 0.5 (weak)",
        "[4] c.md#1 (search 1): kw 1.5 (#1) / max 2: fused 0.75 x1 x1 = 0.6; rank_score 0.125;"
        " score 1",
    ]


def test_the_relevance_line_names_the_query_script_the_calibration_used() -> None:
    """A CJK query has its own intercept (``ranking.relevance``): the text says which."""
    relevance = {**HYBRID["relevance"], "script": "cjk"}
    trace = {"searches": [{**HYBRID, "relevance": relevance}], "results": []}
    (line,) = [x for x in format_trace(trace, []).splitlines() if "relevance:" in x]
    assert line.endswith("; calibration hashing (cjk script), 40 chunks")
