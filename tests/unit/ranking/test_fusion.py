from __future__ import annotations

import math
import random

import pytest

from knowledge.core.errors import ValidationError
from knowledge.ranking import fusion
from knowledge.ranking.fusion import (
    Fused,
    candidate_count,
    cosine_to_unit,
    fuse_rrf,
    fuse_weighted,
    keyword_only,
    min_max,
    normalize_by_max,
    select,
    vector_only,
)


def _assert_ranked(results: list[Fused[str]]) -> None:
    for item in results:
        assert 0.0 <= item.score <= 1.0
        for side in (item.keyword_score, item.vector_score):
            assert side is None or 0.0 <= side <= 1.0
    pairs = [(-item.score, item.key) for item in results]
    assert pairs == sorted(pairs)


def _random_scores(rng: random.Random, prefix: str, scale: float) -> dict[str, float]:
    return {f"{prefix}{i}": rng.random() * scale for i in range(rng.randint(0, 12))}


def test_all_is_the_public_api() -> None:
    assert sorted(fusion.__all__) == sorted(
        [
            "CONFIDENCE_RANK",
            "DEFAULT_KEYWORD_WEIGHT",
            "DEFAULT_RRF_K",
            "DEFAULT_VECTOR_WEIGHT",
            "EMBEDDER_WEIGHTS",
            "ENGLISH_ONLY_EMBEDDERS",
            "HYBRID_CANDIDATES",
            "KEYWORD_LEANING_WEIGHTS",
            "MAX_CANDIDATES",
            "MIN_CANDIDATES",
            "RELEVANCE_FLOORS",
            "Fused",
            "above_floor",
            "candidate_count",
            "cosine_to_unit",
            "english_only",
            "fuse_rrf",
            "fuse_weighted",
            "hybrid_weights",
            "keyword_only",
            "min_max",
            "model_family",
            "normalize_by_max",
            "relevance_floor",
            "select",
            "side_confidence",
            "vector_only",
        ]
    )


# normalize_by_max


def test_normalize_by_max_divides_by_the_largest() -> None:
    assert normalize_by_max({"a": 4.0, "b": 2.0, "c": 1.0}) == {"a": 1.0, "b": 0.5, "c": 0.25}


def test_normalize_by_max_all_zero_stays_zero() -> None:
    assert normalize_by_max({"a": 0.0, "b": 0.0}) == {"a": 0.0, "b": 0.0}


def test_normalize_by_max_clamps_negative_and_non_finite_to_zero() -> None:
    result = normalize_by_max({"a": -3.0, "b": 2.0, "c": math.nan, "d": math.inf})
    assert result == {"a": 0.0, "b": 1.0, "c": 0.0, "d": 0.0}


def test_normalize_by_max_empty() -> None:
    assert normalize_by_max({}) == {}


# min_max


def test_min_max_maps_min_to_zero_and_max_to_one() -> None:
    assert min_max({"a": 10.0, "b": 6.0, "c": 2.0}) == {"a": 1.0, "b": 0.5, "c": 0.0}


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ({}, {}),
        ({"only": 3.5}, {"only": 1.0}),
        ({"only": 0.0}, {"only": 0.0}),
        ({"a": 0.7, "b": 0.7, "c": 0.7}, {"a": 1.0, "b": 1.0, "c": 1.0}),
        ({"a": 0.0, "b": 0.0}, {"a": 0.0, "b": 0.0}),
        ({"a": -1.0, "b": 2.0}, {"a": 0.0, "b": 1.0}),
    ],
    ids=["empty", "one-positive", "one-zero", "all-equal", "all-zero", "negative-clamped"],
)
def test_min_max_edge_cases(scores: dict[str, float], expected: dict[str, float]) -> None:
    assert min_max(scores) == expected


def test_min_max_treats_rounding_noise_as_equal() -> None:
    assert min_max({"a": 0.7, "b": 0.7 + 1e-17, "c": 0.1 * 7}) == {"a": 1.0, "b": 1.0, "c": 1.0}


# cosine_to_unit


@pytest.mark.parametrize(
    ("cos", "unit"),
    [
        (-1.0, 0.0),
        (0.0, 0.5),
        (1.0, 1.0),
        (0.6, 0.8),
        (1.0000001, 1.0),
        (-1.5, 0.0),
        (math.nan, 0.0),
    ],
)
def test_cosine_to_unit(cos: float, unit: float) -> None:
    assert cosine_to_unit(cos) == pytest.approx(unit)


# fuse_weighted


def test_fuse_weighted_follows_the_design_formula() -> None:
    keyword = {"a": 12.0, "b": 6.0, "c": 0.0}  # min-max: a 1, b .5, c 0
    vector = {"b": 0.9, "d": 0.7, "a": 0.5}  # min-max: b 1, d .5, a 0
    results = fuse_weighted(keyword, vector, keyword_weight=0.3, vector_weight=0.7)
    # combined: a .3, b .15 + .7 = .85, c 0, d .35; divided by .85
    by_key = {item.key: item for item in results}
    assert [item.key for item in results] == ["b", "d", "a", "c"]
    assert by_key["b"].score == 1.0
    assert by_key["d"].score == pytest.approx(0.35 / 0.85)
    assert by_key["a"].score == pytest.approx(0.3 / 0.85)
    assert by_key["c"].score == 0.0
    assert (by_key["b"].keyword_score, by_key["b"].vector_score) == (0.5, 1.0)
    # a side that did not return a candidate scores 0.0 on it (the side was searched)
    assert by_key["d"].keyword_score == 0.0
    assert by_key["d"].vector_score == pytest.approx(0.5)
    assert (by_key["c"].keyword_score, by_key["c"].vector_score) == (0.0, 0.0)


def test_fuse_weighted_raw_keyword_scale_does_not_swamp_the_vector_side() -> None:
    # the seed's pitfall: raw BM25 (>> 1) must be normalised, not added as-is
    keyword = {"kw-hit": 250.0, "both": 200.0}
    vector = {"both": 0.95, "vec-hit": 0.90}
    results = fuse_weighted(keyword, vector)
    assert results[0].key == "both"
    assert {item.key for item in results} == {"kw-hit", "both", "vec-hit"}


def test_fuse_weighted_one_candidate_per_side() -> None:
    results = fuse_weighted({"a": 3.0}, {"b": 0.8}, keyword_weight=0.3, vector_weight=0.7)
    assert [(item.key, item.score) for item in results] == [
        ("b", 1.0),
        ("a", pytest.approx(0.3 / 0.7)),
    ]


def test_fuse_weighted_empty_side_uses_the_other() -> None:
    results = fuse_weighted({}, {"a": 0.9, "b": 0.6})
    assert [(item.key, item.score) for item in results] == [("a", 1.0), ("b", 0.0)]
    assert results[0].keyword_score == 0.0


def test_fuse_weighted_both_empty_is_empty() -> None:
    assert fuse_weighted({}, {}) == []


def test_fuse_weighted_max_zero_is_empty() -> None:
    assert fuse_weighted({"a": 0.0, "b": 0.0}, {"a": 0.0}) == []
    # keyword weight 0 and only keyword candidates: every combination is 0
    assert fuse_weighted({"a": 5.0}, {}, keyword_weight=0.0, vector_weight=1.0) == []


def test_fuse_weighted_all_equal_scores_tie_and_sort_by_key() -> None:
    results = fuse_weighted({"c": 2.0, "a": 2.0, "b": 2.0}, {})
    assert [(item.key, item.score) for item in results] == [("a", 1.0), ("b", 1.0), ("c", 1.0)]


def test_fuse_weighted_weights_need_not_sum_to_one() -> None:
    keyword, vector = {"a": 3.0, "b": 1.0}, {"b": 0.9, "a": 0.2}
    scaled = fuse_weighted(keyword, vector, 3.0, 7.0)
    unscaled = fuse_weighted(keyword, vector, 0.3, 0.7)
    assert [item.key for item in scaled] == [item.key for item in unscaled]
    assert [item.score for item in scaled] == pytest.approx([item.score for item in unscaled])


def test_fuse_weighted_tuple_keys() -> None:
    results = fuse_weighted({("doc.md", 1): 2.0, ("doc.md", 0): 2.0}, {})
    assert [item.key for item in results] == [("doc.md", 0), ("doc.md", 1)]


@pytest.mark.parametrize(
    ("keyword_weight", "vector_weight", "field"),
    [
        (-0.1, 0.7, "keyword_weight"),
        (0.3, -1.0, "vector_weight"),
        (0.0, 0.0, "keyword_weight"),
        (math.nan, 0.7, "keyword_weight"),
        (0.3, math.inf, "vector_weight"),
    ],
)
def test_fuse_weighted_rejects_bad_weights(
    keyword_weight: float, vector_weight: float, field: str
) -> None:
    with pytest.raises(ValidationError) as info:
        fuse_weighted({"a": 1.0}, {}, keyword_weight, vector_weight)
    assert info.value.field == field


def test_fuse_weighted_properties_on_random_inputs() -> None:
    rng = random.Random(20240601)
    for _ in range(300):
        keyword = _random_scores(rng, "k", scale=rng.choice([0.0, 1.0, 40.0]))
        vector = _random_scores(rng, "v", scale=1.0)
        # make some keys shared between the sides
        for key in list(keyword)[: rng.randint(0, len(keyword))]:
            vector[key] = rng.random()
        weights = (rng.random(), rng.random() + 0.01)
        results = fuse_weighted(keyword, vector, *weights)
        _assert_ranked(results)
        if results:
            assert results[0].score == 1.0
            assert {item.key for item in results} == set(keyword) | set(vector)
            for item in results:
                assert item.keyword_score is not None
                assert item.vector_score is not None


# fuse_rrf


def test_fuse_rrf_standard_formula() -> None:
    results = fuse_rrf(["a", "b", "c"], ["c", "a", "d"], k=60)
    raw = {
        "a": 1 / 61 + 1 / 62,
        "b": 1 / 62,
        "c": 1 / 63 + 1 / 61,
        "d": 1 / 63,
    }
    top = max(raw.values())
    assert [item.key for item in results] == ["a", "c", "b", "d"]
    for item in results:
        assert item.score == pytest.approx(raw[item.key] / top)
    assert results[0].score == 1.0


def test_fuse_rrf_side_scores_are_rank_terms_scaled_to_one() -> None:
    by_key = {item.key: item for item in fuse_rrf(["a", "b"], ["b"], k=60)}
    assert by_key["a"].keyword_score == 1.0
    assert by_key["a"].vector_score == 0.0
    assert by_key["b"].keyword_score == pytest.approx(61 / 62)
    assert by_key["b"].vector_score == 1.0


def test_fuse_rrf_agreement_beats_a_single_top_rank() -> None:
    results = fuse_rrf(["solo", "shared"], ["other", "shared"], k=60)
    assert results[0].key == "shared"


def test_fuse_rrf_duplicate_counts_at_best_rank() -> None:
    assert fuse_rrf(["a", "b", "a"], []) == fuse_rrf(["a", "b"], [])


def test_fuse_rrf_empty_and_bad_k() -> None:
    assert fuse_rrf([], []) == []
    with pytest.raises(ValidationError) as info:
        fuse_rrf(["a"], [], k=-1)
    assert info.value.field == "k"


def test_fuse_rrf_properties_on_random_inputs() -> None:
    rng = random.Random(7)
    keys = [f"c{i}" for i in range(30)]
    for _ in range(200):
        keyword_ranked = rng.sample(keys, rng.randint(0, 15))
        vector_ranked = rng.sample(keys, rng.randint(0, 15))
        results = fuse_rrf(keyword_ranked, vector_ranked, k=rng.randint(0, 100))
        _assert_ranked(results)
        assert {item.key for item in results} == set(keyword_ranked) | set(vector_ranked)
        if results:
            assert results[0].score == 1.0


# keyword_only / vector_only


def test_keyword_only_normalises_by_max() -> None:
    results = keyword_only({"a": 2.0, "b": 8.0, "c": 4.0})
    assert [(item.key, item.score) for item in results] == [("b", 1.0), ("c", 0.5), ("a", 0.25)]
    assert all(item.keyword_score == item.score for item in results)
    assert all(item.vector_score is None for item in results)


def test_vector_only_keeps_unit_scores_as_given() -> None:
    results = vector_only({"a": 0.62, "b": 0.81, "c": 1.3, "d": -0.2})
    assert [(item.key, item.score) for item in results] == [
        ("c", 1.0),
        ("b", 0.81),
        ("a", 0.62),
        ("d", 0.0),
    ]
    assert all(item.vector_score == item.score for item in results)
    assert all(item.keyword_score is None for item in results)


def test_single_side_modes_on_random_inputs() -> None:
    rng = random.Random(3)
    for _ in range(200):
        _assert_ranked(keyword_only(_random_scores(rng, "k", scale=50.0)))
        _assert_ranked(vector_only(_random_scores(rng, "v", scale=1.0)))


# select


def _fused(*scores: float) -> list[Fused[str]]:
    return [Fused(key=f"k{i}", score=score) for i, score in enumerate(scores)]


def test_select_filters_sorts_and_cuts() -> None:
    fused = _fused(0.2, 1.0, 0.5, 0.7, 0.5)
    result = select(fused, min_score=0.5, max_results=3)
    assert [(item.key, item.score) for item in result] == [("k1", 1.0), ("k3", 0.7), ("k2", 0.5)]


def test_select_min_score_is_inclusive_despite_rounding() -> None:
    score = 0.1 + 0.2  # 0.30000000000000004
    assert select(_fused(0.3 - 1e-16, score), min_score=0.3, max_results=5) != []
    assert len(select(_fused(0.3 - 1e-16, score), min_score=0.3, max_results=5)) == 2
    assert select(_fused(0.29), min_score=0.3, max_results=5) == []


def test_select_min_score_one_keeps_only_the_top() -> None:
    top = fuse_weighted({"a": 3.0, "b": 1.0}, {"a": 0.9, "b": 0.8})
    assert [item.key for item in select(top, 1.0, 5)] == ["a"]


@pytest.mark.parametrize(
    ("min_score", "max_results", "field"),
    [
        (-0.1, 5, "min_score"),
        (1.1, 5, "min_score"),
        (math.nan, 5, "min_score"),
        (0.0, 0, "max_results"),
    ],
)
def test_select_rejects_bad_arguments(min_score: float, max_results: int, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        select(_fused(0.5), min_score, max_results)
    assert info.value.field == field


def test_select_pages_through_one_order() -> None:
    rng = random.Random(5)
    fused = [Fused(key=f"k{i:02}", score=round(rng.random(), 1)) for i in range(30)]
    whole = select(fused, 0.0, 30)
    pages = [select(fused, 0.0, 7, offset=start) for start in range(0, 35, 7)]
    assert [item for page in pages for item in page] == whole
    assert select(fused, 0.0, 5, offset=30) == []


def test_select_keeps_at_most_n_best_chunks_per_document() -> None:
    scores = {("a", 0): 0.9, ("a", 1): 1.0, ("a", 2): 0.8, ("a", 3): 0.95, ("b", 0): 0.5}
    fused = [Fused(key=key, score=score) for key, score in scores.items()]
    kept = select(fused, 0.0, 10, per_document=2, document_of=lambda key: key[0])
    assert [item.key for item in kept] == [("a", 1), ("a", 3), ("b", 0)]
    # The cap applies before paging: page 2 starts after the capped list's first page.
    assert [
        item.key
        for item in select(fused, 0.0, 1, offset=2, per_document=2, document_of=lambda key: key[0])
    ] == [("b", 0)]
    assert len(select(fused, 0.0, 10)) == 5  # no cap without per_document


@pytest.mark.parametrize(
    ("offset", "per_document", "field"),
    [(-1, None, "offset"), (1.5, None, "offset"), (0, 0, "max_chunks_per_document")],
)
def test_select_rejects_a_bad_offset_or_cap(
    offset: object, per_document: object, field: str
) -> None:
    with pytest.raises(ValidationError) as info:
        select(
            _fused(0.5),
            0.0,
            5,
            offset=offset,
            per_document=per_document,  # type: ignore[arg-type]
            document_of=str,
        )
    assert info.value.field == field


# candidate_count


@pytest.mark.parametrize(
    ("max_results", "expected"), [(1, 20), (5, 20), (6, 24), (10, 40), (50, 200), (100, 200)]
)
def test_candidate_count(max_results: int, expected: int) -> None:
    assert candidate_count(max_results) == expected


def test_candidate_count_rejects_non_positive() -> None:
    with pytest.raises(ValidationError) as info:
        candidate_count(0)
    assert info.value.field == "max_results"


def test_hybrid_weights_are_the_embedders_unless_given() -> None:
    assert fusion.hybrid_weights("hashing") == (0.7, 0.3)
    assert fusion.hybrid_weights("openai:text-embedding-3-small") == (0.3, 0.7)
    assert fusion.hybrid_weights(None) == (0.3, 0.7)
    assert fusion.hybrid_weights("hashing", keyword_weight=0.2) == (0.2, 0.3)
    assert fusion.hybrid_weights("x", 0.5, 0.5) == (0.5, 0.5)
    assert fusion.hybrid_weights("local:sentence-transformers/all-MiniLM-L6-v2") == (0.3, 0.7)
    with pytest.raises(ValidationError) as info:
        fusion.hybrid_weights("x", 0.0, 0.0)
    assert info.value.field == "keyword_weight"


def test_relevance_floor_is_the_embedders_or_none() -> None:
    assert fusion.relevance_floor("hashing") == fusion.RELEVANCE_FLOORS["hashing"] > 0.5
    assert fusion.relevance_floor("an-uncalibrated-model") == 0.0
    kept = fusion.above_floor({"a": 0.9, "b": 0.51, "c": math.nan}, 0.52)
    assert kept == {"a": 0.9}
    with pytest.raises(ValidationError):
        fusion.above_floor({}, 1.5)


def test_a_model_has_its_calibrated_defaults_however_it_was_given() -> None:
    # The same MiniLM from the hub name, a folder copy, or another case: one model family.
    for name in (
        "local:sentence-transformers/all-MiniLM-L6-v2",
        "local:all-MiniLM-L6-v2",
        "local:/opt/models/all-minilm-l6-v2/",
    ):
        assert fusion.model_family(name) == "local:all-minilm-l6-v2"
        assert fusion.relevance_floor(name) == 0.62
        assert fusion.english_only(name)
    assert fusion.model_family("HASHING") == "hashing"
    assert fusion.relevance_floor("HASHING") == 0.52
    assert fusion.model_family("bedrock:amazon.titan-embed-text-v2:0") == (
        "bedrock:amazon.titan-embed-text-v2:0"
    )
    # Another model, or a provider that only shares the last name part, gets none.
    assert fusion.relevance_floor("local:all-MiniLM-L12-v2") == 0.0
    assert fusion.relevance_floor("openai:all-MiniLM-L6-v2") == 0.0
    assert not fusion.english_only("local:all-MiniLM-L12-v2")
