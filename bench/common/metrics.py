"""Retrieval metrics at document level, and the summary statistics the reports use.

A search returns ranked *chunks*; the benchmark ranks *documents*: ``document_ranking``
keeps each document's first (best) position, so any chunk of the relevant page counts
and ranks are of distinct documents. ``reciprocal_rank`` and ``recall_at`` score one
query; ``evaluate`` averages them over a query set (MRR@10, Recall@5, Recall@10).
``token_f1`` compares an extracted text with a reference text (bag of word tokens).

Pure standard library, so the unit tests need no benchmark dependency.
"""

from __future__ import annotations

import math
import re
import statistics
import unicodedata
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "QualityScores",
    "TokenScores",
    "document_ranking",
    "evaluate",
    "first_relevant_rank",
    "percentile",
    "pooled_token_scores",
    "recall_at",
    "reciprocal_rank",
    "summarize",
    "text_tokens",
    "token_f1",
    "token_scores",
]


def document_ranking(paths: Iterable[str]) -> list[str]:
    """Distinct document paths in the order of their first appearance (best chunk first)."""
    seen: set[str] = set()
    ranking: list[str] = []
    for path in paths:
        if path not in seen:
            seen.add(path)
            ranking.append(path)
    return ranking


def first_relevant_rank(ranking: Sequence[str], relevant: Collection[str]) -> int | None:
    """1-based rank of the first relevant document, ``None`` if none is ranked."""
    for position, path in enumerate(ranking, start=1):
        if path in relevant:
            return position
    return None


def reciprocal_rank(ranking: Sequence[str], relevant: Collection[str], k: int = 10) -> float:
    """``1 / rank`` of the first relevant document within the top ``k``, else 0."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    rank = first_relevant_rank(ranking[:k], relevant)
    return 0.0 if rank is None else 1.0 / rank


def recall_at(ranking: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Share of the relevant documents found in the top ``k`` (documents, not chunks)."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if not relevant:
        raise ValueError("a query needs at least one relevant document")
    wanted = set(relevant)
    return len(wanted.intersection(ranking[:k])) / len(wanted)


@dataclass(frozen=True, slots=True)
class QualityScores:
    """Mean scores over a query set."""

    queries: int
    mrr_at_10: float
    recall_at_5: float
    recall_at_10: float

    def to_dict(self) -> dict[str, float | int]:
        return {
            "queries": self.queries,
            "mrr_at_10": round(self.mrr_at_10, 4),
            "recall_at_5": round(self.recall_at_5, 4),
            "recall_at_10": round(self.recall_at_10, 4),
        }


def evaluate(judged: Iterable[tuple[Sequence[str], Collection[str]]]) -> QualityScores:
    """Average MRR@10, Recall@5 and Recall@10 over ``(document ranking, relevant)`` pairs."""
    rr: list[float] = []
    r5: list[float] = []
    r10: list[float] = []
    for ranking, relevant in judged:
        rr.append(reciprocal_rank(ranking, relevant, 10))
        r5.append(recall_at(ranking, relevant, 5))
        r10.append(recall_at(ranking, relevant, 10))
    if not rr:
        raise ValueError("no queries to evaluate")
    return QualityScores(
        queries=len(rr),
        mrr_at_10=math.fsum(rr) / len(rr),
        recall_at_5=math.fsum(r5) / len(r5),
        recall_at_10=math.fsum(r10) / len(r10),
    )


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) with linear interpolation between order statistics
    (numpy's default method)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= p <= 100.0:
        raise ValueError(f"p must be in [0, 100], got {p}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * p / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    fraction = position - low
    return ordered[low] + (ordered[high] - ordered[low]) * fraction


def summarize(values: Sequence[float]) -> dict[str, float | int]:
    """n, p50, p95, mean, min, max of ``values`` (rounded to 3 decimals)."""
    if not values:
        raise ValueError("summary of no values")
    return {
        "n": len(values),
        "p50": round(percentile(values, 50), 3),
        "p95": round(percentile(values, 95), 3),
        "mean": round(statistics.fmean(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


_WORD = re.compile(r"\w+")


def text_tokens(text: str) -> list[str]:
    """Word tokens of ``text`` for comparing extractions: NFKC-normalised (so the ligature
    "\ufb01" is "fi" and a full-width digit is a digit), case-folded, then each maximal run of
    Unicode word characters (letters, digits, underscore) is a token; punctuation, spaces
    and line breaks only separate tokens."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


@dataclass(frozen=True, slots=True)
class TokenScores:
    """Bag-of-tokens agreement of a candidate text with a reference text."""

    candidate_tokens: int
    reference_tokens: int
    common_tokens: int
    precision: float
    recall: float
    f1: float

    def to_dict(self) -> dict[str, float | int]:
        return {
            "candidate_tokens": self.candidate_tokens,
            "reference_tokens": self.reference_tokens,
            "common_tokens": self.common_tokens,
            "precision": round(self.precision, 4),
            "recall": round(self.recall, 4),
            "f1": round(self.f1, 4),
        }


def token_f1(candidate: str, reference: str) -> TokenScores:
    """Token-level precision, recall and F1 of ``candidate`` against ``reference``.

    Tokens are ``text_tokens``; each is counted as often as it occurs (a multiset, as in
    SQuAD's F1), so a dropped or doubled paragraph costs its tokens, while reading order
    does not matter. Common = sum over tokens of min(count in candidate, count in
    reference); precision = common / candidate tokens, recall = common / reference
    tokens. Two empty texts agree fully (1.0); one empty text scores 0.0."""
    found = Counter(text_tokens(candidate))
    wanted = Counter(text_tokens(reference))
    common = sum((found & wanted).values())
    return token_scores(sum(found.values()), sum(wanted.values()), common)


def token_scores(candidate_tokens: int, reference_tokens: int, common_tokens: int) -> TokenScores:
    """Precision, recall and F1 from token counts (see ``token_f1``)."""
    if not 0 <= common_tokens <= min(candidate_tokens, reference_tokens):
        raise ValueError(
            f"common tokens ({common_tokens}) must be between 0 and both totals "
            f"({candidate_tokens}, {reference_tokens})"
        )
    if candidate_tokens == 0 and reference_tokens == 0:
        return TokenScores(0, 0, 0, 1.0, 1.0, 1.0)
    precision = common_tokens / candidate_tokens if candidate_tokens else 0.0
    recall = common_tokens / reference_tokens if reference_tokens else 0.0
    f1 = 2 * precision * recall / (precision + recall) if common_tokens else 0.0
    return TokenScores(candidate_tokens, reference_tokens, common_tokens, precision, recall, f1)


def pooled_token_scores(scores: Iterable[TokenScores]) -> TokenScores:
    """Micro average over documents: the token counts summed, then scored once (a long
    document weighs by its tokens, not as one document)."""
    items = list(scores)
    if not items:
        raise ValueError("no scores to pool")
    return token_scores(
        sum(s.candidate_tokens for s in items),
        sum(s.reference_tokens for s in items),
        sum(s.common_tokens for s in items),
    )
