"""knowledge.ranking.fusion at its edges, with literal expected values: the constants, the
defaults, non-finite and negative inputs, weight types, the per-side scores of RRF."""

from __future__ import annotations

import math

import pytest

from knowledge.core.errors import ValidationError
from knowledge.ranking import fusion
from knowledge.ranking.fusion import (
    Fused,
    above_floor,
    candidate_count,
    cosine_to_unit,
    fuse_rrf,
    fuse_weighted,
    hybrid_weights,
    keyword_only,
    min_max,
    normalize_by_max,
    select,
    side_confidence,
    vector_only,
)


def test_the_constants_are_pinned() -> None:
    assert fusion.DEFAULT_KEYWORD_WEIGHT == 0.3
    assert fusion.DEFAULT_VECTOR_WEIGHT == 0.7
    assert fusion.DEFAULT_RRF_K == 60
    assert fusion.HYBRID_CANDIDATES == 100
    assert fusion.CONFIDENCE_RANK == 10
    assert fusion.KEYWORD_LEANING_WEIGHTS == (0.7, 0.3)
    assert dict(fusion.EMBEDDER_WEIGHTS) == {
        "hashing": (0.7, 0.3),
        "multilingual:universal-sentence-encoder-multilingual-3": (0.7, 0.3),
    }
    assert sorted(fusion.ENGLISH_ONLY_EMBEDDERS) == ["local:sentence-transformers/all-MiniLM-L6-v2"]
    assert dict(fusion.RELEVANCE_FLOORS) == {
        "hashing": 0.52,
        "local:sentence-transformers/all-MiniLM-L6-v2": 0.62,
        "multilingual:universal-sentence-encoder-multilingual-3": 0.54,
    }
    assert (fusion.MIN_CANDIDATES, fusion.MAX_CANDIDATES) == (20, 200)


# --- cosine_to_unit -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cos", "unit"),
    [
        (math.inf, 0.0),
        (-math.inf, 0.0),
        (math.nan, 0.0),
        (-0.5, 0.25),
        (0.5, 0.75),
        (2.0, 1.0),
        (-3.0, 0.0),
    ],
)
def test_cosine_to_unit_literal_values(cos: float, unit: float) -> None:
    assert cosine_to_unit(cos) == unit


# --- weights --------------------------------------------------------------------------------


def test_fuse_weighted_defaults_are_0_3_keyword_and_0_7_vector() -> None:
    # "k" is the keyword side's best and the vector side's worst, "v" the other way round:
    # combined k = 0.3 * 1 + 0.7 * 0 and v = 0.3 * 0 + 0.7 * 1, then divided by 0.7.
    results = fuse_weighted({"k": 4.0, "v": 0.0}, {"k": 0.2, "v": 0.9})
    assert results == [
        Fused(key="v", score=1.0, keyword_score=0.0, vector_score=1.0),
        Fused(key="k", score=pytest.approx(3 / 7), keyword_score=1.0, vector_score=0.0),
    ]


def test_fuse_weighted_given_weights_and_an_integer_weight() -> None:
    results = fuse_weighted({"k": 4.0, "v": 0.0}, {"k": 0.2, "v": 0.9}, 1, 3)
    assert [(r.key, r.score) for r in results] == [("v", 1.0), ("k", pytest.approx(1 / 3))]


@pytest.mark.parametrize(
    ("weight", "shown"),
    [(True, "True"), (False, "False"), ("0.5", "'0.5'"), ([0.5], "[0.5]")],
)
def test_a_weight_that_is_not_a_number_is_refused_by_name(weight: object, shown: str) -> None:
    for args, field in (((weight, 0.7), "keyword_weight"), ((0.3, weight), "vector_weight")):
        with pytest.raises(ValidationError) as info:
            fuse_weighted({"a": 1.0}, {"a": 0.5}, *args)  # type: ignore[arg-type]
        assert (info.value.field, info.value.message) == (field, f"must be a number, got {shown}")
        with pytest.raises(ValidationError) as info:
            hybrid_weights("hashing", *args)  # type: ignore[arg-type]
        assert (info.value.field, info.value.message) == (field, f"must be a number, got {shown}")


def test_a_none_weight_is_refused_by_fuse_weighted_and_is_the_default_elsewhere() -> None:
    with pytest.raises(ValidationError) as info:
        fuse_weighted({"a": 1.0}, {}, None, 0.7)  # type: ignore[arg-type]
    assert (info.value.field, info.value.message) == (
        "keyword_weight",
        "must be a number, got None",
    )
    assert hybrid_weights("hashing", None, None) == (0.7, 0.3)


@pytest.mark.parametrize(
    ("weight", "shown"), [(-0.1, "-0.1"), (math.nan, "nan"), (math.inf, "inf"), (-1, "-1")]
)
def test_a_negative_or_non_finite_weight_is_refused_by_name(weight: float, shown: str) -> None:
    with pytest.raises(ValidationError) as info:
        fuse_weighted({"a": 1.0}, {}, 0.3, weight)
    assert (info.value.field, info.value.message) == (
        "vector_weight",
        f"must be a finite number >= 0, got {shown}",
    )


def test_zero_weights_name_both() -> None:
    message = "keyword_weight + vector_weight must be > 0 (both are 0)"
    for call in (
        lambda: fuse_weighted({"a": 1.0}, {}, 0.0, 0.0),
        lambda: hybrid_weights(None, 0.0, 0.0),
    ):
        with pytest.raises(ValidationError) as info:
            call()
        assert (info.value.field, info.value.message) == ("keyword_weight", message)


def test_one_zero_weight_is_allowed() -> None:
    assert hybrid_weights(None, 0.0, 0.5) == (0.0, 0.5)
    assert hybrid_weights(None, 0.5, 0.0) == (0.5, 0.0)
    results = fuse_weighted({"a": 2.0, "b": 1.0}, {"b": 1.0}, 0.0, 1.0)
    assert [(r.key, r.score) for r in results] == [("b", 1.0), ("a", 0.0)]


def test_hybrid_weights_returns_floats() -> None:
    kw, vec = hybrid_weights(None, 1, 2)
    assert (kw, vec) == (1.0, 2.0)
    assert type(kw) is float
    assert type(vec) is float


# --- negative and non-finite raw scores ---------------------------------------------------


def test_negative_scores_between_minus_one_and_zero_count_as_zero() -> None:
    assert normalize_by_max({"a": 2.0, "b": -0.5, "c": -0.01}) == {"a": 1.0, "b": 0.0, "c": 0.0}
    # cleaned first: the lowest is 0, not -0.5, so "c" is 0.5 and not 1 / 1.5
    assert min_max({"a": 1.0, "b": -0.5, "c": 0.5}) == {"a": 1.0, "b": 0.0, "c": 0.5}
    assert vector_only({"a": -0.5, "b": 0.5}) == [
        Fused(key="b", score=0.5, keyword_score=None, vector_score=0.5),
        Fused(key="a", score=0.0, keyword_score=None, vector_score=0.0),
    ]
    assert keyword_only({"a": -0.5, "b": 4.0}) == [
        Fused(key="b", score=1.0, keyword_score=1.0, vector_score=None),
        Fused(key="a", score=0.0, keyword_score=0.0, vector_score=None),
    ]


def test_non_finite_scores_count_as_zero() -> None:
    assert normalize_by_max({"a": math.inf, "b": 2.0}) == {"a": 0.0, "b": 1.0}
    assert min_max({"a": math.inf, "b": 2.0, "c": 1.0}) == {"a": 0.0, "b": 1.0, "c": 0.5}
    assert vector_only({"a": math.nan, "b": math.inf}) == [
        Fused(key="a", score=0.0, keyword_score=None, vector_score=0.0),
        Fused(key="b", score=0.0, keyword_score=None, vector_score=0.0),
    ]


def test_min_max_single_and_equal_scores() -> None:
    assert min_max({"a": 3.0}) == {"a": 1.0}
    assert min_max({"a": 0.0}) == {"a": 0.0}
    assert min_max({"a": 0.5, "b": 0.5}) == {"a": 1.0, "b": 1.0}
    assert min_max({}) == {}
    assert normalize_by_max({"a": 0.0, "b": -1.0}) == {"a": 0.0, "b": 0.0}


def test_vector_only_clamps_above_one() -> None:
    assert vector_only({"a": 1.5}) == [Fused(key="a", score=1.0, vector_score=1.0)]


def test_above_floor_keeps_the_floor_itself_and_drops_below() -> None:
    assert above_floor({"a": 0.52, "b": 0.5199, "c": -0.5, "d": 1.0}, 0.52) == {
        "a": 0.52,
        "d": 1.0,
    }
    # a floor of 0 keeps everything, negative and not finite included (they count as 0)
    assert list(above_floor({"c": -0.5, "n": math.nan, "a": 0.1}, 0.0)) == ["c", "n", "a"]
    for floor, shown in ((-0.1, "-0.1"), (1.1, "1.1"), (math.nan, "nan")):
        with pytest.raises(ValidationError) as info:
            above_floor({}, floor)
        assert (info.value.field, info.value.message) == (
            "relevance_floor",
            f"must be in [0, 1], got {shown}",
        )
    assert above_floor({"a": 0.3}, 0.0) == {"a": 0.3}
    assert above_floor({"a": 0.3}, 1.0) == {}


# --- RRF ------------------------------------------------------------------------------------


def test_rrf_a_key_found_only_by_vector_search_has_keyword_score_zero() -> None:
    results = fuse_rrf(["a"], ["b", "a"])
    assert results == [
        # a: 61/61 + 61/62 (default k = 60), the top; b: 61/61 over that
        Fused(key="a", score=1.0, keyword_score=1.0, vector_score=pytest.approx(61 / 62)),
        Fused(key="b", score=pytest.approx(62 / 123), keyword_score=0.0, vector_score=1.0),
    ]


def test_rrf_default_k_is_60() -> None:
    results = fuse_rrf(["a", "b", "c"], [])
    assert [(r.key, r.score) for r in results] == [
        ("a", 1.0),
        ("b", pytest.approx(61 / 62)),
        ("c", pytest.approx(61 / 63)),
    ]


def test_rrf_k_zero_and_bad_k() -> None:
    results = fuse_rrf(["a", "b"], [], k=0)
    assert [(r.key, r.score) for r in results] == [("a", 1.0), ("b", 0.5)]
    for k, shown in ((True, "True"), (1.5, "1.5"), ("60", "'60'"), (-1, "-1")):
        with pytest.raises(ValidationError) as info:
            fuse_rrf(["a"], [], k=k)  # type: ignore[arg-type]
        assert (info.value.field, info.value.message) == (
            "k",
            f"must be an integer >= 0, got {shown}",
        )


# --- select and candidate_count -----------------------------------------------------------


def _fused(*scores: float) -> list[Fused[str]]:
    return [Fused(key=f"c{i}", score=s) for i, s in enumerate(scores)]


def test_select_bounds_and_messages() -> None:
    items = _fused(0.9, 0.5, 0.1)
    assert [r.key for r in select(items, 0.0, 10)] == ["c0", "c1", "c2"]
    assert [r.key for r in select(items, 1.0, 10)] == []
    assert [r.key for r in select(items, 0.5, 10)] == ["c0", "c1"]
    assert [r.key for r in select(items, 0.0, 1, offset=2)] == ["c2"]
    assert [r.key for r in select(items, 0.0, 1, offset=3)] == []
    cases = [
        ({"min_score": -0.1}, "min_score", "must be in [0, 1], got -0.1"),
        ({"min_score": 1.1}, "min_score", "must be in [0, 1], got 1.1"),
        ({"min_score": math.inf}, "min_score", "must be in [0, 1], got inf"),
        ({"max_results": 0}, "max_results", "must be an integer >= 1, got 0"),
        ({"max_results": True}, "max_results", "must be an integer >= 1, got True"),
        ({"max_results": 2.0}, "max_results", "must be an integer >= 1, got 2.0"),
        ({"offset": -1}, "offset", "must be an integer >= 0, got -1"),
        ({"offset": False}, "offset", "must be an integer >= 0, got False"),
        ({"offset": 1.0}, "offset", "must be an integer >= 0, got 1.0"),
        ({"per_document": 0}, "max_chunks_per_document", "must be an integer >= 1, got 0"),
        ({"per_document": True}, "max_chunks_per_document", "must be an integer >= 1, got True"),
        ({"per_document": 1.0}, "max_chunks_per_document", "must be an integer >= 1, got 1.0"),
    ]
    for override, field, message in cases:
        kwargs: dict[str, object] = {"min_score": 0.0, "max_results": 10, **override}
        min_score, max_results = kwargs.pop("min_score"), kwargs.pop("max_results")
        with pytest.raises(ValidationError) as info:
            select(items, min_score, max_results, **kwargs)  # type: ignore[arg-type]
        assert (info.value.field, info.value.message) == (field, message)


def test_select_per_document_needs_document_of_and_counts_per_document() -> None:
    items = _fused(0.9, 0.8, 0.7, 0.6)
    document = {"c0": "x", "c1": "x", "c2": "y", "c3": "x"}.__getitem__
    picked = select(items, 0.0, 10, per_document=2, document_of=document)
    assert [r.key for r in picked] == ["c0", "c1", "c2"]
    picked = select(items, 0.0, 10, per_document=1, document_of=document)
    assert [r.key for r in picked] == ["c0", "c2"]
    # without document_of the cap cannot apply
    assert [r.key for r in select(items, 0.0, 10, per_document=1)] == ["c0", "c1", "c2", "c3"]


@pytest.mark.parametrize(
    ("max_results", "expected"), [(1, 20), (5, 20), (6, 24), (49, 196), (50, 200), (51, 200)]
)
def test_candidate_count_literal(max_results: int, expected: int) -> None:
    assert candidate_count(max_results) == expected


@pytest.mark.parametrize(("value", "shown"), [(0, "0"), (True, "True"), (2.0, "2.0")])
def test_candidate_count_message(value: object, shown: str) -> None:
    with pytest.raises(ValidationError) as info:
        candidate_count(value)  # type: ignore[arg-type]
    assert (info.value.field, info.value.message) == (
        "max_results",
        f"must be an integer >= 1, got {shown}",
    )


# side_confidence


def test_side_confidence_literal_values() -> None:
    eleven = {f"k{i:02d}": 20.0 - 2.0 * i for i in range(11)}  # 20, 18, ..., 0
    assert side_confidence(eleven) == pytest.approx(0.9)  # (20 - 2) / (20 - 0)
    assert side_confidence(eleven, rank=3) == pytest.approx(0.2)  # (20 - 16) / 20
    assert side_confidence(eleven, rank=1) == 0.0
    # at most `rank` candidates: the rank-th best is the lowest
    assert side_confidence({f"k{i}": float(i) for i in range(10)}) == 1.0
    # all equal: nothing to compare, full confidence
    assert side_confidence({f"k{i}": 3.0 for i in range(12)}) == 1.0
    # first ten tied above the rest: none
    assert side_confidence({f"k{i}": 3.0 for i in range(10)} | {"x": 1.0}) == 0.0
    # order of the mapping does not matter; negative and nan count as 0
    shuffled: dict[str, float] = {"a": 0.0, "b": 9.0, "c": -1.0}
    shuffled.update({f"m{i}": 4.5 for i in range(9)})
    assert side_confidence(shuffled) == pytest.approx(0.5)  # (9 - 4.5) / (9 - 0)
    assert side_confidence({**shuffled, "d": math.nan}) == pytest.approx(0.5)


def test_a_side_whose_first_ten_tie_is_still_ranked_when_the_other_side_found_nothing() -> None:
    # Ten chunks alike (a footer in ten files) above one other: the side cannot tell the
    # ten apart (confidence 0), and the other side returned nothing (every vector
    # candidate under the floor, or no keyword term matched). Hybrid still answers.
    tied = {f"k{i:02d}": 3.0 for i in range(10)} | {"x": 1.0}
    for keyword, vector in ((tied, {}), ({}, tied)):
        fused = fuse_weighted(keyword, vector, 0.3, 0.7)
        assert [item.key for item in fused] == [*sorted(set(tied) - {"x"}), "x"]
        assert [item.score for item in fused] == [1.0] * 10 + [0.0]
    # Scores apart by rounding noise only (relative 1e-13) count as equal: full confidence.
    noisy = {f"k{i:02d}": 1e6 for i in range(10)} | {"x": 1e6 - 1e-7}
    assert side_confidence(noisy) == 1.0
    # A side with no candidates, or none above 0, says nothing: confidence 0.
    assert side_confidence({}) == 0.0
    assert side_confidence({"a": 0.0, "b": -1.0}) == 0.0


@pytest.mark.parametrize("rank", [0, -1, 1.5, True])
def test_side_confidence_rejects_a_bad_rank(rank: object) -> None:
    with pytest.raises(ValidationError) as info:
        side_confidence({"a": 1.0}, rank=rank)  # type: ignore[arg-type]
    assert info.value.field == "rank"
    assert info.value.message == f"must be an integer >= 1, got {rank!r}"
