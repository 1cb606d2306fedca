"""knowledge.ranking.origin_weights and knowledge.ranking.explain as pure functions
(issue 29): parsing and bounds, the weighing and its divisor, the lesson extras, the
trace of a reciprocal-rank fusion and its text form."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge.core.errors import ValidationError
from knowledge.core.model import SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import upsert_document
from knowledge.ranking import explain
from knowledge.ranking.fusion import Fused
from knowledge.ranking.origin_weights import (
    NEUTRAL,
    RankWeights,
    is_lesson,
    lesson_extras,
    parse_origin_weights,
    ranking_arguments,
    weigh,
    weights_from_body,
)
from knowledge.stores.embedded import EmbeddedKnowledgeStore


def fused(*scores: float) -> list[Fused[str]]:
    return [Fused(f"k{i}", s) for i, s in enumerate(scores)]


FACTS = {"k0": ("upload", False), "k1": ("manual", False), "k2": ("shared", True)}


def test_parsing_names_the_field_and_the_bounds() -> None:
    assert parse_origin_weights("manual=1.5, shared = 0.5") == {"manual": 1.5, "shared": 0.5}
    for bad, field in (
        ("manual", "origin_weights"),
        ("manual=x", "origin_weights.manual"),
        ({"shared": 0.05}, "origin_weights.shared"),
        ({"shared": float("nan")}, "origin_weights.shared"),
        ({"git": 1}, "origin_weights"),
    ):
        with pytest.raises(ValidationError) as caught:
            parse_origin_weights(bad)
        assert caught.value.field == field
    with pytest.raises(ValidationError, match="extra_lessons"):
        RankWeights(extra_lessons=6)
    assert ranking_arguments(["shared=0.5"], 2.0) == {
        "origin_weights": {"shared": 0.5},
        "lesson_weight": 2.0,
    }
    assert weights_from_body({}, None) is None
    over = weights_from_body({"origin_weights": {"repo": 2}}, RankWeights({"manual": 3}))
    assert over is not None
    assert (over.origins["repo"], over.origins["manual"], over.lesson) == (2.0, 3.0, 1.4)


def test_is_lesson_reads_a_kind_or_a_list_of_kinds() -> None:
    assert is_lesson({"kind": "lesson"})
    assert is_lesson({"kind": ["faq", "lesson"]})
    assert not is_lesson({"kind": "Lesson learned"})
    assert not is_lesson({})


def test_weigh_multiplies_and_divides_only_past_one() -> None:
    weights = RankWeights({"manual": 0.5}, lesson=1.4)
    ranked, weighing = weigh(fused(1.0, 0.8, 0.5), FACTS.__getitem__, weights)
    assert [(i.key, i.score) for i in ranked] == [("k0", 1.0), ("k2", 0.7), ("k1", 0.4)]
    assert weighing.divisor == 1.0
    assert weighing.lessons == {"k2"}
    lifted, weighing = weigh(fused(1.0, 0.8, 0.9), FACTS.__getitem__, weights)
    assert weighing.divisor == pytest.approx(1.26)
    assert [i.key for i in lifted] == ["k2", "k0", "k1"]
    assert lifted[0].score == pytest.approx(1.0)
    assert lifted[1].score == pytest.approx(1.0 / 1.26)


def test_inert_weights_read_no_facts() -> None:
    def facts(_key: str) -> tuple[object, bool]:
        raise AssertionError("facts read")

    inert = RankWeights(lesson=1.0, extra_lessons=0)
    candidates = fused(1.0, 0.5)
    ranked, weighing = weigh(candidates, facts, inert)
    assert ranked is candidates
    assert weighing.divisor == 1.0
    unchanged, _ = weigh(candidates, lambda _k: ("upload", False), NEUTRAL)
    assert unchanged is candidates  # neutral and no lesson: the same list


def test_lesson_extras_are_bounded_first_page_only_and_above_min_score() -> None:
    facts = {f"k{i}": ("upload", i >= 2) for i in range(6)}
    weights = RankWeights(lesson=1.0, extra_lessons=2)
    ranked, weighing = weigh(fused(1.0, 0.9, 0.8, 0.7, 0.6, 0.05), facts.__getitem__, weights)
    page = ranked[:1]
    extras = lesson_extras(ranked, page, weighing, weights, offset=0, min_score=0.1)
    assert [i.key for i in extras] == ["k2", "k3"]
    assert lesson_extras(ranked, page, weighing, weights, offset=1, min_score=0.0) == []
    tail = lesson_extras(ranked, ranked[:4], weighing, weights, offset=0, min_score=0.1)
    assert [i.key for i in tail] == ["k4"]  # k5 is below min_score


def test_the_trace_of_reciprocal_rank_fusion_recomputes_its_scores(tmp_path: Path) -> None:
    scope = KnowledgeScope("a", "c")
    store = EmbeddedKnowledgeStore(tmp_path / "k.db", embedder=HashingEmbedder(64), fusion="rrf")
    try:
        for i, text in enumerate(
            ["otter dam river", "otter otter", "river bank", "dam building river otter"]
        ):
            data = text.encode()
            upsert_document(store, scope, SourceDocument(f"d{i}.md", len(data), lambda d=data: d))
        with explain.explaining() as recorded:
            results = store.search(
                scope,
                SearchQuery("otter river", mode=SearchMode.HYBRID, max_results=4, min_score=0.0),
            )
        body = recorded.to_dict(results)
        assert body["searches"][0]["fusion"]["method"] == "rrf"
        assert results
        for index, result in enumerate(results):
            assert explain.recompute(result.to_dict(), body, index) == pytest.approx(
                result.rank_score, abs=1e-12
            )
            assert explain.recompute_relevance(body, index) == pytest.approx(
                result.score, abs=1e-12
            )
        text = explain.format_trace(body, [r.to_dict() for r in results])
        assert "terms: otter, river" in text
        assert "fusion: rrf" in text
        assert all(f"[{i}] " in text for i in range(1, len(results) + 1))
    finally:
        store.close()


def test_lesson_extras_keep_the_per_document_cap() -> None:
    facts = {f"k{i}": ("upload", True) for i in range(4)}
    weights = RankWeights(lesson=1.0, extra_lessons=2)
    ranked, weighing = weigh(fused(1.0, 0.9, 0.8, 0.7), facts.__getitem__, weights)
    document = {"k0": "a", "k1": "a", "k2": "a", "k3": "b"}.__getitem__
    extras = lesson_extras(
        ranked,
        ranked[:2],
        weighing,
        weights,
        offset=0,
        min_score=0.0,
        per_document=2,
        document_of=document,
    )
    assert [i.key for i in extras] == ["k3"]  # document a has its 2 chunks on the page


def _explained(tmp_path: Path, mode: SearchMode) -> tuple[dict, list[dict]]:
    scope = KnowledgeScope("a", "c")
    store = EmbeddedKnowledgeStore(tmp_path / "k.db", embedder=HashingEmbedder(64))
    try:
        for i, text in enumerate(
            ["otter dam river otter", "otter bank", "river bank otter dam building", "dam"]
        ):
            data = text.encode()
            upsert_document(store, scope, SourceDocument(f"d{i}.md", len(data), lambda d=data: d))
        with explain.explaining() as recorded:
            query = SearchQuery("otter dam", mode=mode, max_results=4, min_score=0.0)
            results = store.search(scope, query)
        return recorded.to_dict(results), [r.to_dict() for r in results]
    finally:
        store.close()


def test_the_keyword_mode_line_shows_raw_over_the_maximum_not_min_max(tmp_path: Path) -> None:
    body, results = _explained(tmp_path, SearchMode.KEYWORD)
    (search,) = body["searches"]
    top = search["keyword"]["max"]
    assert search["keyword"]["min"] < top  # min-max would differ from raw / max
    lines = explain.format_trace(body, results).splitlines()[-len(results) :]
    assert len(results) > 1
    for line, entry, result in zip(lines, body["results"], results, strict=True):
        raw = entry["keyword"]["raw"]
        # what the score is computed from: raw / max, which is the fused score
        rank = entry["keyword"]["rank"]
        side = entry["keyword"]
        parts = f" [chunk {side['chunk']:.4g}, page {side['page']:.4g}]" if "page" in side else ""
        assert f"kw {raw:.4g}{parts} (#{rank}) / max {top:.4g}: fused {raw / top:.4g} x" in line
        assert f"-> {entry['keyword']['normalised']:.4g}" not in line or raw == top
        assert explain.recompute(result, body, results.index(result)) == pytest.approx(
            result["rank_score"], abs=1e-5
        )
        assert explain.recompute_relevance(body, results.index(result)) == pytest.approx(
            result["score"], abs=1e-5
        )


def test_the_vector_mode_line_says_the_unit_score_is_used_as_it_is(tmp_path: Path) -> None:
    body, results = _explained(tmp_path, SearchMode.VECTOR)
    lines = explain.format_trace(body, results).splitlines()[-len(results) :]
    for line, entry in zip(lines, body["results"], strict=True):
        raw = entry["vector"]["raw"]
        rank = entry["vector"]["rank"]
        assert f"vec {raw:.4g} (#{rank}, unit score): fused {raw:.4g} x" in line
