"""Fusion levers: variants of the product's weighted hybrid, one part of its formula
changed at a time, each compared query by query with the product on the same two
candidate lists.

Every lever starts from the product's formula (``fusion.fuse_weighted``: each side
min-max normalised, each weight scaled by ``fusion.side_confidence``, missing side 0) and
changes one thing:

- ``presence-vector-D``: a vector candidate's side score is ``D + (1 - D) * min-max``, so
  the side's lowest candidate (above the floor, within the 100) scores ``D`` and a chunk
  the vector side did not return scores 0, "below every candidate" rather than equal to
  the lowest one (with plain min-max both are 0); ``presence-both-D``: both sides so;
- ``conf-power-P``: each weight scaled by ``confidence ** P`` (the confidence's shape);
- ``conf-floor-F``: each weight scaled by ``max(confidence, F)`` (a floor on the scaled
  weight);
- ``share-shift-A``: the sides' confidences used relative to each other, additively: the
  keyword share of the weight is ``configured share + A * (conf_kw - conf_vec)``, clamped
  to [0, 1];
- ``agree-product-B``: ``+ B * kw * vec`` (agreement: a chunk both sides rank high);
- ``agree-mnz-B``: a chunk returned by both sides has its fused score times ``1 + B``
  (CombMNZ-like);
- ``conf-document``: the confidence computed over each document's best chunk rather than
  over chunks (a side whose first ten chunks are all of one page is sure of that page);
- ``fixed-weights``: no confidence (fixed weights, the product's earlier formula), for scale;
- ``vector-depth-N``: only the vector side's first N candidates (depth for a weak
  embedder).

For each lever: MRR@10, and how many queries rank their relevant document higher
(``up``) or lower (``down``) than with the product: a lever whose MRR gain rests on as
many losses as wins is within the noise of these sets.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench.common.metrics import document_ranking, reciprocal_rank
from knowledge.ranking import fusion

__all__ = ["LEVERS", "compare_levers"]

Key = tuple[str, int]
Scores = Mapping[Key, float]
Weights = tuple[float, float]
Ranker = Callable[[Scores, Scores, Weights], list[str]]


def _order(scores: Mapping[Key, float]) -> list[str]:
    ranked = sorted(scores, key=lambda key: (-scores[key], key))
    return document_ranking(path for path, _ in ranked)


def _order_fused(fused: Sequence[fusion.Fused[Key]]) -> list[str]:
    return document_ranking(item.key[0] for item in fused)


def _lifted(side: Scores, presence: float) -> dict[Key, float]:
    return {key: presence + (1.0 - presence) * v for key, v in fusion.min_max(side).items()}


def _fuse(
    keyword: Scores,
    vector: Scores,
    weights: Weights,
    *,
    confidence: Callable[[Scores], float] = fusion.side_confidence,
    shape: Callable[[Weights, float, float], Weights] | None = None,
    kw_presence: float = 0.0,
    vec_presence: float = 0.0,
    agree_product: float = 0.0,
    agree_mnz: float = 0.0,
) -> list[str]:
    """The product's formula with one part swapped (module docstring)."""
    kw_conf, vec_conf = confidence(keyword), confidence(vector)
    if shape is not None:
        kw_weight, vec_weight = shape(weights, kw_conf, vec_conf)
    else:
        kw_weight, vec_weight = weights[0] * kw_conf, weights[1] * vec_conf
        if kw_weight + vec_weight <= 0.0:
            kw_weight, vec_weight = weights
    kw = _lifted(keyword, kw_presence)
    vec = _lifted(vector, vec_presence)
    scores = {}
    for key in {*kw, *vec}:
        a, b = kw.get(key, 0.0), vec.get(key, 0.0)
        total = kw_weight * a + vec_weight * b + agree_product * a * b
        if agree_mnz and key in kw and key in vec:
            total *= 1.0 + agree_mnz
        scores[key] = total
    return _order(scores)


def _power(p: float) -> Callable[[Weights, float, float], Weights]:
    def shape(weights: Weights, kw_conf: float, vec_conf: float) -> Weights:
        kw, vec = weights[0] * kw_conf**p, weights[1] * vec_conf**p
        return (kw, vec) if kw + vec > 0.0 else weights

    return shape


def _floor(low: float) -> Callable[[Weights, float, float], Weights]:
    def shape(weights: Weights, kw_conf: float, vec_conf: float) -> Weights:
        return weights[0] * max(kw_conf, low), weights[1] * max(vec_conf, low)

    return shape


def _shift(alpha: float) -> Callable[[Weights, float, float], Weights]:
    def shape(weights: Weights, kw_conf: float, vec_conf: float) -> Weights:
        share = weights[0] / (weights[0] + weights[1]) + alpha * (kw_conf - vec_conf)
        share = min(1.0, max(0.0, share))
        return share, 1.0 - share

    return shape


def _document_confidence(side: Scores) -> float:
    """``(best - 10th best document) / (best - lowest chunk)``: ``side_confidence`` with
    each document counted once, at its best chunk; 1.0 with at most 10 documents."""
    best: dict[str, float] = {}
    for (path, _), score in side.items():
        best[path] = max(best.get(path, 0.0), score)
    ordered = sorted(best.values(), reverse=True)
    rank = fusion.CONFIDENCE_RANK
    if len(ordered) <= rank:
        return 1.0
    span = ordered[0] - min(side.values())
    return 1.0 if span <= 0.0 else min(1.0, (ordered[0] - ordered[rank - 1]) / span)


def _depth(n: int) -> Ranker:
    def rank(keyword: Scores, vector: Scores, weights: Weights) -> list[str]:
        kept = dict(sorted(vector.items(), key=lambda item: (-item[1], item[0]))[:n])
        return _fuse(keyword, kept, weights)

    return rank


LEVERS: dict[str, Ranker] = {
    "fixed-weights": lambda k, v, w: _order_fused(
        fusion.fuse_weighted(k, v, *w, by_confidence=False)
    ),
    "presence-vector-0.05": lambda k, v, w: _fuse(k, v, w, vec_presence=0.05),
    "presence-vector-0.1": lambda k, v, w: _fuse(k, v, w, vec_presence=0.1),
    "presence-both-0.1": lambda k, v, w: _fuse(k, v, w, kw_presence=0.1, vec_presence=0.1),
    "conf-power-0.5": lambda k, v, w: _fuse(k, v, w, shape=_power(0.5)),
    "conf-power-2": lambda k, v, w: _fuse(k, v, w, shape=_power(2.0)),
    "conf-floor-0.2": lambda k, v, w: _fuse(k, v, w, shape=_floor(0.2)),
    "share-shift-0.5": lambda k, v, w: _fuse(k, v, w, shape=_shift(0.5)),
    "agree-product-0.2": lambda k, v, w: _fuse(k, v, w, agree_product=0.2),
    "agree-mnz-0.1": lambda k, v, w: _fuse(k, v, w, agree_mnz=0.1),
    "conf-document": lambda k, v, w: _fuse(k, v, w, confidence=_document_confidence),
    "vector-depth-40": _depth(40),
}
"""Lever name -> ranking of the relevant documents' ranks (module docstring)."""


def compare_levers(
    queries: Sequence[tuple[tuple[str, ...], Scores, Scores, Weights]],
) -> dict[str, dict[str, Any]]:
    """Each lever's MRR@10 and queries up/down against the product on ``queries``
    (relevant documents, keyword side, vector side floored, the product's weights)."""

    base = [
        reciprocal_rank(_order_fused(fusion.fuse_weighted(k, v, *w)), rel)
        for rel, k, v, w in queries
    ]
    out: dict[str, dict[str, Any]] = {}
    for name, rank in LEVERS.items():
        ranks = [reciprocal_rank(rank(k, v, w), rel) for rel, k, v, w in queries]
        out[name] = {
            "mrr_at_10": round(sum(ranks) / len(ranks), 4) if ranks else 0.0,
            "up": sum(1 for new, old in zip(ranks, base, strict=True) if new > old + 1e-12),
            "down": sum(1 for new, old in zip(ranks, base, strict=True) if new < old - 1e-12),
        }
    return out
