"""bench.common.metrics on tiny hand-made rankings (document level, as the benchmark reports)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bench.common.metrics import (
    document_ranking,
    evaluate,
    first_relevant_rank,
    percentile,
    pooled_token_scores,
    recall_at,
    reciprocal_rank,
    summarize,
    text_tokens,
    token_f1,
    token_scores,
)


def test_document_ranking_keeps_each_document_at_its_best_chunk() -> None:
    chunks = ["a.md", "b.md", "a.md", "c.md", "b.md", "d.md"]
    assert document_ranking(chunks) == ["a.md", "b.md", "c.md", "d.md"]


def test_document_ranking_of_nothing_is_empty() -> None:
    assert document_ranking([]) == []


@pytest.mark.parametrize(
    ("ranking", "relevant", "expected"),
    [
        (["x", "y", "z"], {"x"}, 1.0),
        (["x", "y", "z"], {"z"}, 1 / 3),
        (["x", "y", "z"], {"y", "z"}, 0.5),  # the first relevant one counts
        (["x", "y", "z"], {"w"}, 0.0),
        ([], {"w"}, 0.0),
    ],
)
def test_reciprocal_rank(ranking: list[str], relevant: set[str], expected: float) -> None:
    assert reciprocal_rank(ranking, relevant) == pytest.approx(expected)


def test_reciprocal_rank_ignores_documents_past_k() -> None:
    ranking = [f"d{i}" for i in range(12)]
    assert reciprocal_rank(ranking, {"d9"}, k=10) == pytest.approx(0.1)
    assert reciprocal_rank(ranking, {"d10"}, k=10) == 0.0
    assert reciprocal_rank(ranking, {"d10"}, k=11) == pytest.approx(1 / 11)


def test_ranks_count_distinct_documents_not_chunks() -> None:
    # Chunk 1-3 are of two documents, so the relevant page is the 3rd document.
    ranking = document_ranking(["a", "a", "b", "a", "rel", "rel"])
    assert first_relevant_rank(ranking, {"rel"}) == 3
    assert reciprocal_rank(ranking, {"rel"}) == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    ("k", "expected"),
    [(1, 0.0), (2, 0.5), (4, 0.5), (5, 1.0)],
)
def test_recall_at_k(k: int, expected: float) -> None:
    ranking = ["n1", "r1", "n2", "n3", "r2", "n4"]
    assert recall_at(ranking, {"r1", "r2"}, k) == pytest.approx(expected)


def test_recall_and_rank_reject_bad_arguments() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        recall_at(["a"], {"a"}, 0)
    with pytest.raises(ValueError, match="relevant"):
        recall_at(["a"], set(), 5)
    with pytest.raises(ValueError, match="at least 1"):
        reciprocal_rank(["a"], {"a"}, k=0)


def test_evaluate_averages_over_queries() -> None:
    judged = [
        (["rel1", "x"], {"rel1"}),  # rank 1: RR 1, found at 5 and 10
        (["a", "b", "c", "d", "e", "f", "rel2"], {"rel2"}),  # rank 7: RR 1/7, only R@10
        (["a", "b"], {"rel3"}),  # not found
        (["a", "rel4", "b"], {"rel4"}),  # rank 2: RR 1/2
    ]
    scores = evaluate(judged)
    assert scores.queries == 4
    assert scores.mrr_at_10 == pytest.approx((1 + 1 / 7 + 0 + 0.5) / 4)
    assert scores.recall_at_5 == pytest.approx(2 / 4)
    assert scores.recall_at_10 == pytest.approx(3 / 4)
    assert scores.to_dict()["mrr_at_10"] == round((1 + 1 / 7 + 0.5) / 4, 4)


def test_evaluate_needs_queries() -> None:
    with pytest.raises(ValueError, match="no queries"):
        evaluate([])


def test_percentile_interpolates_like_numpy() -> None:
    values = [10.0, 1.0, 4.0, 2.0, 3.0]  # sorted: 1 2 3 4 10
    assert percentile(values, 50) == 3.0
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 10.0
    assert percentile(values, 95) == pytest.approx(4.0 + 0.8 * 6.0)
    assert percentile([7.0], 95) == 7.0


def test_summarize_reports_the_distribution() -> None:
    summary = summarize([1.0, 2.0, 3.0, 4.0])
    assert summary == {"n": 4, "p50": 2.5, "p95": 3.85, "mean": 2.5, "min": 1.0, "max": 4.0}
    with pytest.raises(ValueError, match="no values"):
        summarize([])


def test_text_tokens_fold_case_ligatures_and_punctuation() -> None:
    assert text_tokens("The \ufb01le: fork(2) -- RE-entrant!") == [
        "the",
        "file",
        "fork",
        "2",
        "re",
        "entrant",
    ]
    assert text_tokens("  \n\f ... ") == []


def test_token_f1_counts_each_token_as_often_as_it_occurs() -> None:
    # candidate: a a b c (4), reference: a b b d e (5); common: a (min 2,1 = 1) + b (1) = 2
    scores = token_f1("a a b c", "A, b. B d e")
    assert (scores.candidate_tokens, scores.reference_tokens, scores.common_tokens) == (4, 5, 2)
    assert scores.precision == pytest.approx(0.5)
    assert scores.recall == pytest.approx(0.4)
    assert scores.f1 == pytest.approx(4 / 9)
    assert scores.to_dict() == {
        "candidate_tokens": 4,
        "reference_tokens": 5,
        "common_tokens": 2,
        "precision": 0.5,
        "recall": 0.4,
        "f1": 0.4444,
    }


def test_token_f1_ignores_order_and_line_breaks() -> None:
    scores = token_f1("second line\nfirst line", "first line second\fline")
    assert scores.f1 == 1.0


def test_token_f1_of_empty_texts() -> None:
    assert token_f1("", " \n ").f1 == 1.0
    assert token_f1("", "word").f1 == 0.0
    assert token_f1("word", "").f1 == 0.0
    assert token_f1("x", "y").to_dict()["f1"] == 0.0


def test_pooled_token_scores_weigh_documents_by_their_tokens() -> None:
    # doc 1: 10 found, 10 wanted, 10 common (F1 1.0); doc 2: 90 found, 100 wanted, 45 common.
    pooled = pooled_token_scores([token_scores(10, 10, 10), token_scores(90, 100, 45)])
    assert (pooled.candidate_tokens, pooled.reference_tokens, pooled.common_tokens) == (
        100,
        110,
        55,
    )
    assert pooled.precision == pytest.approx(0.55)
    assert pooled.recall == pytest.approx(0.5)
    assert pooled.f1 == pytest.approx(2 * 0.55 * 0.5 / 1.05)  # 0.5238..., not the mean 0.7368


def test_token_scores_reject_impossible_counts() -> None:
    with pytest.raises(ValueError, match="common tokens"):
        token_scores(3, 5, 4)
    with pytest.raises(ValueError, match="no scores"):
        pooled_token_scores([])
