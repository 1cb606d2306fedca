"""knowledge.ranking.fusion's per-query side confidence in weighted hybrid fusion, with literal,
hand-computed expected values (issue 11: hybrid never below its better side)."""

from __future__ import annotations

import math

import pytest

from knowledge.ranking.fusion import fuse_weighted


def _eleven_descending() -> dict[str, float]:
    # k00: 20, k01: 18, ..., k10: 0; best 20, 10th best (k09) 2, lowest 0
    return {f"k{i:02d}": 20.0 - 2.0 * i for i in range(11)}


def test_a_side_whose_first_ten_tie_gives_way_to_the_other() -> None:
    # keyword: ten candidates tied at 10 and one at 0 -> confidence (10 - 10) / 10 = 0;
    # vector: two candidates (fewer than 10) -> confidence 1
    keyword = {f"k{i}": 10.0 for i in range(10)} | {"z": 0.0}
    vector = {"z": 0.9, "k0": 0.5}
    results = fuse_weighted(keyword, vector, keyword_weight=0.7, vector_weight=0.3)
    # effective weights 0 and 0.3: z = 0.3 * 1 (top), every k = 0.3 * 0 -> 0
    assert results[0].key == "z"
    assert results[0].score == 1.0
    assert [item.score for item in results[1:]] == [0.0] * 10
    # the per-side scores are the plain min-max ones, whatever the weights
    by_key = {item.key: item for item in results}
    assert (by_key["k0"].keyword_score, by_key["k0"].vector_score) == (1.0, 0.0)
    assert (by_key["z"].keyword_score, by_key["z"].vector_score) == (0.0, 1.0)


def test_partial_confidence_scales_the_weight() -> None:
    # keyword confidence (20 - 2) / (20 - 0) = 0.9; vector (two candidates) 1.0;
    # effective weights 0.5 * 0.9 = 0.45 and 0.5
    vector = {"v": 0.8, "k10": 0.6}  # min-max: v 1, k10 0
    results = fuse_weighted(_eleven_descending(), vector, keyword_weight=0.5, vector_weight=0.5)
    by_key = {item.key: item.score for item in results}
    # combined: v 0.5 (top), k00 0.45 * 1, k01 0.45 * 0.9, k10 0
    assert [item.key for item in results[:3]] == ["v", "k00", "k01"]
    assert by_key["v"] == 1.0
    assert by_key["k00"] == pytest.approx(0.45 / 0.5)
    assert by_key["k01"] == pytest.approx(0.405 / 0.5)
    assert by_key["k10"] == 0.0


def test_fixed_weights_without_confidence() -> None:
    vector = {"v": 0.8, "k10": 0.6}
    results = fuse_weighted(
        _eleven_descending(), vector, keyword_weight=0.5, vector_weight=0.5, by_confidence=False
    )
    # combined: k00 0.5 and v 0.5 tie at the top (key order), k01 0.45
    assert [(item.key, item.score) for item in results[:3]] == [
        ("k00", 1.0),
        ("v", 1.0),
        ("k01", pytest.approx(0.9)),
    ]


def test_both_sides_without_confidence_fall_back_to_the_given_weights() -> None:
    # both sides: ten tied at the top and one lower -> both confidences 0
    keyword = {f"k{i}": 4.0 for i in range(10)} | {"low": 1.0}
    vector = {f"k{i}": 0.8 for i in range(10)} | {"low": 0.2}
    results = fuse_weighted(keyword, vector, keyword_weight=0.3, vector_weight=0.7)
    assert [(item.key, item.score) for item in results] == [
        *[(f"k{i}", 1.0) for i in range(10)],
        ("low", 0.0),
    ]


def test_bad_raw_scores_count_as_zero_for_the_confidence() -> None:
    # nan and -5 count as 0, like min_max: keyword is then _eleven_descending with k10
    # replaced by a nan at 0 -> confidence still 0.9
    keyword = _eleven_descending() | {"k10": math.nan, "neg": -5.0}
    vector = {"v": 0.8, "x": 0.6}
    results = fuse_weighted(keyword, vector, keyword_weight=0.5, vector_weight=0.5)
    by_key = {item.key: item.score for item in results}
    # 12 keyword candidates now: best 20, 10th best 2, lowest 0 -> 0.9
    assert by_key["k00"] == pytest.approx(0.45 / 0.5)
