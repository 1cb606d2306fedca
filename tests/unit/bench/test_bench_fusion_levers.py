"""bench.common.fusion_levers on tiny hand-made candidate lists, expected values computed by hand
(each side has at most 10 candidates, so both side confidences are 1)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bench.common.fusion_levers import LEVERS, compare_levers

# keyword min-max: a 1, b 0.5, c 0; vector min-max: c 1, d 0.5, e 0
KEYWORD = {("a", 0): 10.0, ("b", 0): 5.5, ("c", 0): 1.0}
VECTOR = {("c", 0): 0.8, ("d", 0): 0.7, ("e", 0): 0.6}
HALF = (0.5, 0.5)


def test_the_product_order_ties_the_middle_candidates_and_breaks_ties_by_key() -> None:
    # product: a .5, c .5, b .25, d .25, e 0 -> a, c, b, d, e
    assert LEVERS["fixed-weights"](KEYWORD, VECTOR, HALF) == ["a", "c", "b", "d", "e"]


def test_vector_presence_puts_a_vector_candidate_above_an_equal_keyword_one() -> None:
    # vector side 0.1 + 0.9 * min-max: c 1, d 0.55, e 0.1
    # -> a .5, c .5, d .275, b .25, e .05
    assert LEVERS["presence-vector-0.1"](KEYWORD, VECTOR, HALF) == ["a", "c", "d", "b", "e"]


def test_agreement_lifts_a_chunk_both_sides_returned_above_one_side_s_best() -> None:
    keyword = {("x", 0): 4.0, ("both", 0): 3.0, ("k", 0): 0.0}  # x 1, both .75, k 0
    vector = {("v", 0): 0.9, ("both", 0): 0.8, ("w", 0): 0.5}  # v 1, both .75, w 0
    weights = (0.8, 0.2)
    # product: x .8, both .6 + .15 = .75, v .2, k 0, w 0
    assert LEVERS["fixed-weights"](keyword, vector, weights) == ["x", "both", "v", "k", "w"]
    # + 0.2 * kw * vec: both .75 + .2 * .5625 = .8625 > x .8
    assert LEVERS["agree-product-0.2"](keyword, vector, weights)[:2] == ["both", "x"]
    # returned by both sides, times 1.1: both .825 > x .8
    assert LEVERS["agree-mnz-0.1"](keyword, vector, weights)[:2] == ["both", "x"]


def test_compare_levers_counts_queries_up_and_down_against_the_product() -> None:
    queries = [
        (("d",), KEYWORD, VECTOR, HALF),  # product rank 4, presence rank 3: up
        (("b",), KEYWORD, VECTOR, HALF),  # product rank 3, presence rank 4: down
        (("a",), KEYWORD, VECTOR, HALF),  # rank 1 both: unchanged
    ]
    result = compare_levers(queries)
    presence = result["presence-vector-0.1"]
    assert (presence["up"], presence["down"]) == (1, 1)
    # (1/3 + 1/4 + 1) / 3, same as the product's (1/4 + 1/3 + 1) / 3
    assert presence["mrr_at_10"] == pytest.approx(round((1 / 3 + 1 / 4 + 1) / 3, 4))
    # a vector depth of 40 keeps all three vector candidates: nothing moves
    assert (result["vector-depth-40"]["up"], result["vector-depth-40"]["down"]) == (0, 0)
