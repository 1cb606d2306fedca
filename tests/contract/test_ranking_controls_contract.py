"""Origin weights, lesson cards and the explain trace on every store and mode (issue 29).

Files go through the whole pipeline from a bucket folder with their sidecars; the
assertions compare a search with weights to the same search without, so they say
exactly which results a weight moves (its ``rank_score``; the absolute ``score`` is the
evidence's, which no weight moves); and every score is recomputed from the trace. The
searches ask for every candidate (``min_score`` 0): the ranking is the subject.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from knowledge.core.model import IndexOptions, SearchMode, SearchQuery, SearchResult
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.sources.folders import BucketFolderSource
from knowledge.ranking import explain
from knowledge.ranking.origin_weights import RankWeights
from knowledge.stores.protocol import KnowledgeStore

SCOPE = KnowledgeScope("rank-bot", "team")

FILES: dict[str, tuple[str, dict[str, object] | None]] = {
    "upload/walrus.md": ("# Walrus\n\nThe walrus rota: walrus duty on Monday.", None),
    "upload/walrus-two.md": ("# Herd\n\nA walrus herd note.", None),
    "notes/walrus.txt": ("Manual note: walrus drills, walrus feeding.", {"origin": "manual"}),
    "repo/walrus.md": ("# Walrus repo\n\nwalrus code walrus.", {"origin": "repo"}),
    "lessons/walrus.md": (
        "# Lesson\n\nLesson learned: check the walrus gate twice.",
        {"kind": "lesson"},
    ),
    "other/ferret.md": ("# Ferret\n\nNothing about the other animal here.", None),
}


def put_files(bucket: Path, files: dict[str, tuple[str, dict[str, object] | None]]) -> None:
    for rel, (text, attributes) in files.items():
        path = bucket / SCOPE.agent / SCOPE.context / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if attributes is not None:
            sidecar = path.with_name(path.name + ".metadata.json")
            sidecar.write_text(json.dumps({"metadataAttributes": attributes}))


@pytest.fixture
def indexed(store: KnowledgeStore, bucket: Path) -> KnowledgeStore:
    put_files(bucket, FILES)
    result = index_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions())
    assert result.errors == ()
    return store


def run(store: KnowledgeStore, mode: SearchMode, **fields: object) -> list[SearchResult]:
    fields = {"max_results": 20, "min_score": 0.0, **fields}
    return store.search(SCOPE, SearchQuery("walrus", mode=mode, **fields))


def scores(results: list[SearchResult]) -> dict[str, float]:
    """Each document's ``rank_score`` (of its first result)."""
    found: dict[str, float] = {}
    for r in results:
        assert r.rank_score is not None
        found.setdefault(r.document_path, r.rank_score)
    return found


def absolute(results: list[SearchResult]) -> dict[tuple[str, int], float]:
    return {(r.document_path, r.chunk_index): r.score for r in results}


NO_LESSONS = RankWeights(lesson=1.0, extra_lessons=0)


def test_neutral_weights_change_nothing(indexed: KnowledgeStore, mode: SearchMode) -> None:
    plain = run(indexed, mode, weights=NO_LESSONS)
    assert plain, "the corpus matches the query"
    neutral = run(indexed, mode, weights=RankWeights({"upload": 1.0}, 1.0, 0))
    assert [(r.document_path, r.chunk_index, r.rank_score, r.score) for r in neutral] == [
        (r.document_path, r.chunk_index, r.rank_score, r.score) for r in plain
    ]


def test_an_origin_weight_moves_exactly_that_origins_results(
    indexed: KnowledgeStore, mode: SearchMode
) -> None:
    plain = run(indexed, mode, weights=NO_LESSONS)
    before = scores(plain)
    halved = run(indexed, mode, weights=RankWeights({"manual": 0.5}, 1.0, 0))
    after = scores(halved)
    assert set(after) == set(before)
    for path, score in before.items():
        expected = score * 0.5 if path == "notes/walrus.txt" else score
        assert after[path] == pytest.approx(expected, abs=1e-9), path
    assert absolute(halved) == absolute(plain)  # the evidence is the same
    # A weight above 1 that lifts a score past 1: every score divided by the highest.
    lifted = run(indexed, mode, weights=RankWeights({"repo": 3.0}, 1.0, 0))
    assert lifted[0].document_path == "repo/walrus.md"
    assert lifted[0].rank_score == pytest.approx(1.0)
    top = before["repo/walrus.md"] * 3.0
    divisor = max(1.0, top)
    for result in lifted:
        factor = 3.0 if result.document_path == "repo/walrus.md" else 1.0
        expected = before[result.document_path] * factor / divisor
        assert result.rank_score == pytest.approx(expected, abs=1e-9)
        assert result.rank_score is not None
        assert 0.0 <= result.rank_score <= 1.0
    assert absolute(lifted) == absolute(plain)


def test_a_lesson_card_is_weighted_and_pulled_in_past_the_page(
    indexed: KnowledgeStore, mode: SearchMode
) -> None:
    plain = run(indexed, mode, weights=NO_LESSONS)
    lesson = next(r for r in plain if r.document_path == "lessons/walrus.md")
    weighted = run(indexed, mode, weights=RankWeights(lesson=1.4, extra_lessons=0))
    divisor = max(1.0, *((r.rank_score or 0.0) * (1.4 if r is lesson else 1.0) for r in plain))
    for result in weighted:
        factor = 1.4 if result.document_path == "lessons/walrus.md" else 1.0
        expected = scores(plain)[result.document_path] * factor / divisor
        assert result.rank_score == pytest.approx(expected)
    assert absolute(weighted) == absolute(plain)
    # A page of one that the lesson is not on gets it appended, marked extra.
    page = indexed.search(
        SCOPE,
        SearchQuery(
            "walrus",
            mode=mode,
            max_results=1,
            weights=RankWeights({"manual": 10.0}, lesson=1.0, extra_lessons=2),
            min_score=0.0,
        ),
    )
    assert [r.document_path for r in page] == ["notes/walrus.txt", "lessons/walrus.md"]
    assert [r.extra for r in page] == [False, True]
    assert page[1].to_dict()["extra"] is True
    assert "extra" not in page[0].to_dict()
    # None on a later page, and none when turned off.
    second = indexed.search(
        SCOPE,
        SearchQuery(
            "walrus",
            mode=mode,
            max_results=1,
            offset=1,
            weights=RankWeights({"manual": 10.0}, lesson=1.0, extra_lessons=2),
            min_score=0.0,
        ),
    )
    assert not any(r.extra for r in second)
    assert len(second) == 1
    off = indexed.search(
        SCOPE,
        SearchQuery(
            "walrus",
            mode=mode,
            max_results=1,
            weights=RankWeights({"manual": 10.0}, lesson=1.0, extra_lessons=0),
            min_score=0.0,
        ),
    )
    assert [r.document_path for r in off] == ["notes/walrus.txt"]


def test_the_trace_recomputes_every_score(indexed: KnowledgeStore, mode: SearchMode) -> None:
    for weights in (None, RankWeights({"manual": 0.5, "repo": 2.0}, 1.4, 2)):
        with explain.explaining() as trace:
            query = SearchQuery(
                "walrus gates", mode=mode, max_results=3, weights=weights, min_score=0.0
            )
            results = indexed.search(SCOPE, query)
        body = trace.to_dict(results)
        assert results
        assert len(body["results"]) == len(results)
        (search,) = body["searches"]
        assert search["query"]["terms"] == ["walrus", "gate"]  # analysed: "gates" stemmed
        assert search["mode"] == mode.value
        for index, result in enumerate(results):
            assert body["results"][index] is not None
            recomputed = explain.recompute(result.to_dict(), body, index)
            assert result.rank_score is not None
            assert math.isclose(recomputed, result.rank_score, abs_tol=1e-9), (index, body)
            relevance = explain.recompute_relevance(body, index)
            assert math.isclose(relevance, result.score, abs_tol=1e-9), (index, body)
        assert search["page"]["returned"] + search["page"]["extra_lessons"] == len(results)
    # Nothing recorded outside explaining(), and no explanation on the results.
    assert all(r.explanation is None for r in run(indexed, mode))


def test_weights_rank_a_page_of_documents_without_extras(
    indexed: KnowledgeStore, mode: SearchMode
) -> None:
    weights = RankWeights({"manual": 0.5}, lesson=1.4, extra_lessons=2)
    plain = scores(run(indexed, mode, weights=NO_LESSONS, group_by="document"))
    chunks = run(indexed, mode, weights=weights)
    with explain.explaining() as trace:
        grouped = run(indexed, mode, weights=weights, group_by="document")
    # Each document by its best weighted chunk, as the chunk-level search ranks it.
    assert scores(grouped) == pytest.approx(scores(chunks))
    first = {r.document_path: r.score for r in reversed(chunks)}  # its best chunk's
    assert {r.document_path: r.score for r in grouped} == first
    assert scores(grouped)["notes/walrus.txt"] < plain["notes/walrus.txt"]
    assert not any(r.extra for r in grouped)
    assert all(r.matching_chunks for r in grouped)
    body = trace.to_dict(grouped)
    assert body["searches"][0]["page"]["group_by"] == "document"
    for index, result in enumerate(grouped):
        recomputed = explain.recompute(result.to_dict(), body, index)
        assert result.rank_score is not None
        assert math.isclose(recomputed, result.rank_score, abs_tol=1e-9), (index, body)
        relevance = explain.recompute_relevance(body, index)
        assert math.isclose(relevance, result.score, abs_tol=1e-9), (index, body)
    # A page of one: the lesson is not appended.
    page = run(indexed, mode, max_results=1, weights=weights, group_by="document")
    assert len(page) == 1


def test_the_tools_controls_weigh_group_and_explain_on_every_store(
    indexed: KnowledgeStore, mode: SearchMode
) -> None:
    """The ``KnowledgeSearch`` tool (``knowledge.agent_tools.tool_controls``): a model's weight
    moves the results a body's weight moves, the trace recomputes every score, and
    ``group_by`` lists each document once."""
    from knowledge.agent_tools.tool import KnowledgeSearchTool, ToolContext

    tool = KnowledgeSearchTool()
    context = ToolContext(store=indexed, scope=SCOPE, mode=mode, weights=NO_LESSONS)
    arguments = {"query": "walrus", "max_results": 20, "max_tokens": 200_000}
    weighted = tool.run({**arguments, "origin_weights": {"repo": 3}, "explain": True}, context)
    assert not weighted.is_error, weighted.content
    # The tool searches without a min_score (it has none to give): the default.
    expected = run(indexed, mode, weights=RankWeights({"repo": 3.0}, 1.0, 0), min_score=None)
    headers = [line for line in weighted.content.splitlines() if line.startswith("[1] ")]
    assert headers[0].startswith(f"[1] {expected[0].document_path} ")
    trace = weighted.trace
    assert trace is not None
    assert trace["searches"][0]["weights"]["origins"]["repo"] == 3.0
    assert len(trace["results"]) == len(expected)
    for index, result in enumerate(expected):
        recomputed = explain.recompute(result.to_dict(), trace, index)
        assert result.rank_score is not None
        assert math.isclose(recomputed, result.rank_score, abs_tol=1e-9), index
        relevance = explain.recompute_relevance(trace, index)
        assert math.isclose(relevance, result.score, abs_tol=1e-9), index
    assert trace["budget"]["dropped"] == []
    grouped = tool.run({**arguments, "group_by": "document"}, context)
    paths = [line.split()[1] for line in grouped.content.splitlines() if line[:1] == "["]
    assert len(paths) == len(set(paths)) == len({r.document_path for r in expected})


def test_the_default_weights_change_nothing_where_no_document_is_a_lesson(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    """What a search gets unless told (``NEUTRAL``: lessons at 1.4, 2 extras) on a corpus
    with no lesson card, as every quality set in bench/REPORT.md is: the same results and
    scores as weights that read nothing (on OpenSearch the score-0 named clauses ride
    along and must not move a score), so those sets' figures cannot move."""
    from knowledge.ranking.origin_weights import NEUTRAL

    put_files(bucket, {k: v for k, v in FILES.items() if not k.startswith("lessons/")})
    assert index_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions()).errors == ()
    for fields in ({}, {"group_by": "document"}, {"offset": 2}):
        inert = run(store, mode, weights=NO_LESSONS, **fields)
        default = run(store, mode, weights=NEUTRAL, **fields)
        assert inert
        assert [(r.document_path, r.chunk_index, r.rank_score, r.score) for r in default] == [
            (r.document_path, r.chunk_index, r.rank_score, r.score) for r in inert
        ], fields
