"""Score normalisation and hybrid fusion: pure functions shared by every store.

Every function returns scores in [0, 1], higher is better (docs/architecture.md, "Score
contract"). Lists of ``Fused`` are sorted by score descending, ties by key ascending, so
equal inputs give equal output order on every store. Keys are whatever identifies a
chunk (a chunk id, or a ``(document_path, chunk_index)`` tuple); they must be hashable
and mutually orderable.
Raw scores that are negative or not finite count as 0.

Weighted hybrid (the default; docs/architecture.md, "Score contract"):

1. each side is min-max normalised over its own candidates (``min_max``), because raw
   BM25 is unbounded and cosine crowds into a narrow band (unrelated texts often score
   0.5-0.7), so absolute values would not mix;
2. each side's weight is scaled by that side's confidence for this query
   (``side_confidence``): ``(best - 10th best) / (best - lowest)`` of its raw scores, in
   [0, 1]. A side whose first ten candidates stand out from the rest of its list keeps
   its weight; a side whose first ten are nearly tied with each other (it cannot tell
   them apart) loses weight to the other side. A side with fewer than 10 candidates, or
   all scores equal, has confidence 1.0; a side with no candidates (or none above 0)
   has 0.0, since it says nothing; when both effective weights are 0 the configured
   ones are used (so a side that cannot tell its first ten apart still ranks them when
   the other side found nothing);
3. over the union of both candidate sets (missing side = 0):
   ``combined = keyword_weight * conf_kw * kw + vector_weight * conf_vec * vec``;
4. divided by the batch maximum, so the best candidate scores 1.0 and ``min_score``
   means the same in every mode; a batch maximum of 0 gives no results.

``keyword_score`` / ``vector_score`` of a hybrid result are the side's min-max
normalised score of that chunk (step 1, 0.0 if that side did not return it), not
scaled by weight or confidence; ``score`` is the fused value of step 4.

Why this formula and these constants, with the benchmark figures of every lever that was
measured and left out: docs/ranking.md, section 3 ("Hybrid: fusion" and "History of
the formula").

**Default weights, per embedder** (``hybrid_weights``). 0.3 keyword / 0.7 vector for
semantic embedders (MiniLM, OpenAI, Bedrock: their vector side is the stronger one),
0.7 / 0.3 for the ``hashing`` embedder, whose "vectors" are hashed terms (its vector side
is the weaker one, a fuzzy echo of the keyword side), and for the offline
``multilingual`` one (USE multilingual v3: its vector side is below keyword on every
benchmark). An English-only embedder (``ENGLISH_ONLY_EMBEDDERS``) cannot read a query in
Korean, Chinese or Japanese: such a query runs without its vector side
(``ranking.vector_side``). Min-max
stays the normalisation (docs/ranking.md). Each side fetches
``HYBRID_CANDIDATES`` candidates, whatever the page asked for, so every page of one
query is a slice of one fused order.

RRF (``fuse_rrf``) is the rank-based alternative: ``sum 1 / (k + rank)``, rescaled so
the top is 1.0.

**Relevance floor.** Cosine similarity is never 0 for real text, so a vector search
always "finds" something. ``RELEVANCE_FLOORS`` holds, per embedder name, the unit score
(``cosine_to_unit``) below which a vector candidate is not a candidate at all
(``above_floor``): in vector mode it is not returned, in hybrid it brings nothing from
the vector side (a keyword match still counts). So "nothing relevant" is a possible
answer in every mode. The floors are calibrated on the benchmarks (docs/ranking.md,
section 2): at most about 2% of the answers that vector search ranks are lost. An
embedder without a calibrated floor gets none (0.0). ``min_score`` still applies on
top, to the final score.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from knowledge.core.errors import ValidationError

__all__ = [
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

DEFAULT_KEYWORD_WEIGHT = 0.3
DEFAULT_VECTOR_WEIGHT = 0.7
DEFAULT_RRF_K = 60
HYBRID_CANDIDATES = 100
"""Candidates per side of every hybrid search (module docstring); >= ``MAX_MAX_RESULTS``."""
CONFIDENCE_RANK = 10
"""The rank whose score ``side_confidence`` compares with the best (module docstring)."""
KEYWORD_LEANING_WEIGHTS = (0.7, 0.3)
EMBEDDER_WEIGHTS: Mapping[str, tuple[float, float]] = {
    "hashing": KEYWORD_LEANING_WEIGHTS,
    # Its vector side is the weaker one on every benchmark (docs/korean.md).
    "multilingual:universal-sentence-encoder-multilingual-3": KEYWORD_LEANING_WEIGHTS,
}
"""Default ``(keyword_weight, vector_weight)`` by embedder name; others get the defaults."""
ENGLISH_ONLY_EMBEDDERS: frozenset[str] = frozenset({"local:sentence-transformers/all-MiniLM-L6-v2"})
"""Embedders trained on English only: a query with CJK characters is noise to them, so
its search runs without the vector side (``ranking.vector_side``)."""
RELEVANCE_FLOORS: Mapping[str, float] = {
    "hashing": 0.52,
    "local:sentence-transformers/all-MiniLM-L6-v2": 0.62,
    "multilingual:universal-sentence-encoder-multilingual-3": 0.54,
}
"""Calibrated unit-score floors of vector candidates, by embedder name (module docstring)."""
MIN_CANDIDATES = 20
MAX_CANDIDATES = 200
_CANDIDATES_PER_RESULT = 4
# Differences below this (relative to the largest score) are rounding noise, not ranking.
_RELATIVE_TOLERANCE = 1e-12
_MIN_SCORE_TOLERANCE = 1e-12


class _Key(Protocol):
    def __hash__(self) -> int: ...

    def __lt__(self, other: Any, /) -> bool: ...


K = TypeVar("K", bound=_Key)


@dataclass(slots=True)  # not frozen: see below
class Fused(Generic[K]):
    """One ranked candidate: ``score`` in [0, 1] and the per-side scores that made it.

    ``keyword_score`` / ``vector_score`` are ``None`` when that side was not searched,
    and 0.0 when it was searched but did not return this candidate.

    Treat it as a value: never change one. It is not ``frozen`` because a hybrid search
    builds one per candidate (up to 400) on the hot path, and a frozen dataclass's
    ``__init__`` costs about five times a plain one's (``object.__setattr__`` per field).
    """

    key: K
    score: float
    keyword_score: float | None = None
    vector_score: float | None = None


def _clean(score: float) -> float:
    return score if math.isfinite(score) and score > 0.0 else 0.0


def _unit(value: float) -> float:
    return min(1.0, max(0.0, value))


def _ranked(items: Iterable[Fused[K]]) -> list[Fused[K]]:
    return sorted(items, key=lambda item: (-item.score, item.key))


def normalize_by_max(scores: Mapping[K, float]) -> dict[K, float]:
    """Divide every score by the largest, so the best is 1.0 (all 0 stay 0)."""
    cleaned = {key: _clean(score) for key, score in scores.items()}
    top = max(cleaned.values(), default=0.0)
    if top <= 0.0:
        return dict.fromkeys(cleaned, 0.0)
    return {key: _unit(score / top) for key, score in cleaned.items()}


def min_max(scores: Mapping[K, float]) -> dict[K, float]:
    """Map the lowest score to 0 and the highest to 1, linearly.

    Defined edge cases: empty -> empty; when all scores are equal (including a single
    candidate) they are all 1.0 if positive, all 0.0 if 0.
    """
    cleaned = _cleaned(scores)
    if not cleaned:
        return {}
    return _min_max_cleaned(cleaned, max(cleaned.values()), min(cleaned.values()))


def _cleaned(scores: Mapping[K, float]) -> dict[K, float]:
    return {key: _clean(score) for key, score in scores.items()}


def _min_max_cleaned(cleaned: Mapping[K, float], high: float, low: float) -> dict[K, float]:
    """``min_max`` of cleaned scores whose highest and lowest are known."""
    span = high - low
    if span <= _RELATIVE_TOLERANCE * high:
        flat = 1.0 if high > 0.0 else 0.0
        return dict.fromkeys(cleaned, flat)
    return {key: _unit((score - low) / span) for key, score in cleaned.items()}


def cosine_to_unit(cos: float) -> float:
    """Map cosine similarity [-1, 1] to [0, 1] as ``(1 + cos) / 2``.

    The same as OpenSearch's lucene ``cosinesimil`` score; not finite -> 0.
    """
    if not math.isfinite(cos):
        return 0.0
    return _unit((1.0 + cos) / 2.0)


def _check_weight(field: str, weight: float) -> float:
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        raise ValidationError(field, f"must be a number, got {weight!r}")
    if not math.isfinite(weight) or weight < 0.0:
        raise ValidationError(field, f"must be a finite number >= 0, got {weight!r}")
    return float(weight)


def fuse_weighted(
    keyword: Mapping[K, float],
    vector: Mapping[K, float],
    keyword_weight: float = DEFAULT_KEYWORD_WEIGHT,
    vector_weight: float = DEFAULT_VECTOR_WEIGHT,
    *,
    by_confidence: bool = True,
) -> list[Fused[K]]:
    """Weighted linear hybrid of RAW side scores (see the module docstring), best first.

    ``keyword``: raw BM25-class scores (>= 0); ``vector``: unit scores in [0, 1]
    (``cosine_to_unit``). Both sides count as searched, so a side's score for a candidate
    it did not return is 0.0, never ``None``. Weights must be >= 0 with a positive sum;
    they need not sum to 1 (the final division by the maximum makes the scale moot).
    Each weight is scaled by its side's ``side_confidence`` unless ``by_confidence`` is
    false (the fixed-weight formula, kept for the benchmark's ablation). Returns ``[]``
    when the best combined score is 0.
    """
    kw_weight = _check_weight("keyword_weight", keyword_weight)
    vec_weight = _check_weight("vector_weight", vector_weight)
    if kw_weight + vec_weight <= 0.0:
        raise ValidationError(
            "keyword_weight", "keyword_weight + vector_weight must be > 0 (both are 0)"
        )
    kw_scores, kw_confidence = _side(keyword)
    vec_scores, vec_confidence = _side(vector)
    if by_confidence:
        kw_confident = kw_weight * kw_confidence
        vec_confident = vec_weight * vec_confidence
        if kw_confident + vec_confident > 0.0:
            kw_weight, vec_weight = kw_confident, vec_confident
    kw_of, vec_of = kw_scores.get, vec_scores.get
    totals = [
        (kw_weight * kw_of(key, 0.0) + vec_weight * vec_of(key, 0.0), key)
        for key in kw_scores.keys() | vec_scores.keys()
    ]
    top = max((total for total, _ in totals), default=0.0)
    if top <= 0.0:
        return []
    # Ranked as plain tuples (score descending, then key), the order ``_ranked`` gives.
    ranked = sorted((-_unit(total / top), key) for total, key in totals)
    return [
        Fused(
            key=key, score=-negative, keyword_score=kw_of(key, 0.0), vector_score=vec_of(key, 0.0)
        )
        for negative, key in ranked
    ]


def _side(scores: Mapping[K, float]) -> tuple[dict[K, float], float]:
    """One side of ``fuse_weighted``: its ``min_max`` scores and its ``side_confidence``,
    from one pass over its cleaned scores."""
    cleaned = _cleaned(scores)
    if not cleaned:
        return {}, 0.0
    ordered = sorted(cleaned.values(), reverse=True)
    normalised = _min_max_cleaned(cleaned, ordered[0], ordered[-1])
    return normalised, _confidence(ordered, CONFIDENCE_RANK)


def side_confidence(scores: Mapping[K, float], rank: int = CONFIDENCE_RANK) -> float:
    """How far one side's best candidates stand out for this query, in [0, 1].

    ``(best - rank-th best) / (best - lowest)`` over the side's raw scores (cleaned as
    everywhere: negative or not finite count as 0). 1.0 when the side has at most
    ``rank`` candidates (the ``rank``-th best is then the lowest), or when all its
    scores are equal and positive; 0.0 when its first ``rank`` candidates tie, and when
    it has no candidate above 0 (no candidates at all included).
    """
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValidationError("rank", f"must be an integer >= 1, got {rank!r}")
    return _confidence(sorted((_clean(score) for score in scores.values()), reverse=True), rank)


def _confidence(ordered: Sequence[float], rank: int) -> float:
    """``side_confidence`` of cleaned scores sorted best first."""
    if not ordered or ordered[0] <= 0.0:
        return 0.0  # a side that found nothing says nothing
    if len(ordered) <= rank:
        return 1.0
    best, lowest = ordered[0], ordered[-1]
    span = best - lowest
    if span <= _RELATIVE_TOLERANCE * best:
        return 1.0
    return _unit((best - ordered[rank - 1]) / span)


def _reciprocal_ranks(ranked: Sequence[K], k: int) -> dict[K, float]:
    """Per-side RRF term scaled so rank 1 is 1.0: ``(k + 1) / (k + rank)``; first rank wins."""
    scores: dict[K, float] = {}
    for rank, key in enumerate(ranked, start=1):
        if key not in scores:
            scores[key] = (k + 1) / (k + rank)
    return scores


def fuse_rrf(
    keyword_ranked: Sequence[K], vector_ranked: Sequence[K], k: int = DEFAULT_RRF_K
) -> list[Fused[K]]:
    """Reciprocal rank fusion: ``sum over sides of 1 / (k + rank)`` (rank 1-based), best first.

    Scores are divided by the batch maximum, so the top is 1.0. A key listed twice on one
    side counts at its best rank. ``keyword_score``/``vector_score`` are the side's term
    scaled so that rank 1 is 1.0 (0.0 when absent); ``score`` is their sum over its maximum.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValidationError("k", f"must be an integer >= 0, got {k!r}")
    kw_scores = _reciprocal_ranks(keyword_ranked, k)
    vec_scores = _reciprocal_ranks(vector_ranked, k)
    combined = {
        key: kw_scores.get(key, 0.0) + vec_scores.get(key, 0.0) for key in {*kw_scores, *vec_scores}
    }
    top = max(combined.values(), default=0.0)
    if top <= 0.0:
        return []
    return _ranked(
        Fused(
            key=key,
            score=_unit(total / top),
            keyword_score=kw_scores.get(key, 0.0),
            vector_score=vec_scores.get(key, 0.0),
        )
        for key, total in combined.items()
    )


def keyword_only(scores: Mapping[K, float]) -> list[Fused[K]]:
    """Keyword mode: raw scores divided by their maximum (``normalize_by_max``), best first."""
    return _ranked(
        Fused(key=key, score=score, keyword_score=score, vector_score=None)
        for key, score in normalize_by_max(scores).items()
    )


def vector_only(scores: Mapping[K, float]) -> list[Fused[K]]:
    """Vector mode: unit scores (already in [0, 1], e.g. ``cosine_to_unit``) as given, best first.

    Not rescaled: an absolute similarity is meaningful for ``min_score`` in vector mode.
    Values outside [0, 1] are clamped.
    """
    units = {key: _unit(_clean(score)) for key, score in scores.items()}
    return _ranked(
        Fused(key=key, score=unit, keyword_score=None, vector_score=unit)
        for key, unit in units.items()
    )


def select(
    fused: Iterable[Fused[K]],
    min_score: float,
    max_results: int,
    *,
    offset: int = 0,
    per_document: int | None = None,
    document_of: Callable[[K], Hashable] | None = None,
) -> list[Fused[K]]:
    """One page of results: candidates with ``score >= min_score``, best first (ties by
    key), at most ``per_document`` of each document (``document_of(key)`` names it; the
    document's best chunks are kept), then ``max_results`` of them from ``offset`` on.

    The order is total, so consecutive pages (``offset`` 0, n, 2n, ...) of one candidate
    set never repeat or skip a result.
    """
    if not math.isfinite(min_score) or not 0.0 <= min_score <= 1.0:
        raise ValidationError("min_score", f"must be in [0, 1], got {min_score!r}")
    if isinstance(max_results, bool) or not isinstance(max_results, int) or max_results < 1:
        raise ValidationError("max_results", f"must be an integer >= 1, got {max_results!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValidationError("offset", f"must be an integer >= 0, got {offset!r}")
    if per_document is not None and (
        isinstance(per_document, bool) or not isinstance(per_document, int) or per_document < 1
    ):
        raise ValidationError(
            "max_chunks_per_document", f"must be an integer >= 1, got {per_document!r}"
        )
    # A tolerance so that min_score=0.3 keeps a candidate computed as 0.29999999999999993.
    kept = _ranked(item for item in fused if item.score + _MIN_SCORE_TOLERANCE >= min_score)
    if per_document is not None and document_of is not None:
        taken: dict[Hashable, int] = {}
        capped: list[Fused[K]] = []
        for item in kept:
            document = document_of(item.key)
            if taken.get(document, 0) < per_document:
                taken[document] = taken.get(document, 0) + 1
                capped.append(item)
                if len(capped) == offset + max_results:
                    break  # the page is full; later items cannot enter it
        kept = capped
    return kept[offset : offset + max_results]


def model_family(embedder_name: str | None) -> str:
    """The key an embedder's calibrated defaults are looked up by: its name, lower-cased,
    with the folder or hub owner of a local model dropped, so the same model has the same
    defaults however it was given ("local:sentence-transformers/all-MiniLM-L6-v2", a copy
    in "/models/all-MiniLM-L6-v2": ``local:all-minilm-l6-v2``)."""
    name = (embedder_name or "").strip().lower()
    provider, separator, model = name.partition(":")
    if provider == "local" and separator:
        return f"local:{model.rstrip('/').rsplit('/', 1)[-1]}"
    return name


_WEIGHTS_BY_FAMILY = {model_family(name): pair for name, pair in EMBEDDER_WEIGHTS.items()}
_FLOORS_BY_FAMILY = {model_family(name): floor for name, floor in RELEVANCE_FLOORS.items()}
_ENGLISH_ONLY_FAMILIES = frozenset(model_family(name) for name in ENGLISH_ONLY_EMBEDDERS)


def hybrid_weights(
    embedder_name: str | None,
    keyword_weight: float | None = None,
    vector_weight: float | None = None,
) -> tuple[float, float]:
    """``(keyword_weight, vector_weight)``: the given ones, else the embedder's defaults
    (looked up by ``model_family``: ``EMBEDDER_WEIGHTS``, else ``DEFAULT_KEYWORD_WEIGHT``
    / ``DEFAULT_VECTOR_WEIGHT``). Validated as ``fuse_weighted`` does."""
    default_kw, default_vec = _WEIGHTS_BY_FAMILY.get(
        model_family(embedder_name), (DEFAULT_KEYWORD_WEIGHT, DEFAULT_VECTOR_WEIGHT)
    )
    kw = _check_weight("keyword_weight", default_kw if keyword_weight is None else keyword_weight)
    vec = _check_weight("vector_weight", default_vec if vector_weight is None else vector_weight)
    if kw + vec <= 0.0:
        raise ValidationError(
            "keyword_weight", "keyword_weight + vector_weight must be > 0 (both are 0)"
        )
    return kw, vec


def english_only(embedder_name: str | None) -> bool:
    """Whether ``embedder_name``'s model is one of ``ENGLISH_ONLY_EMBEDDERS`` (by family):
    its vector side says nothing of a query in Korean, Chinese or Japanese."""
    return model_family(embedder_name) in _ENGLISH_ONLY_FAMILIES


def relevance_floor(embedder_name: str) -> float:
    """The calibrated floor for ``embedder_name``'s model (``RELEVANCE_FLOORS`` looked up
    by ``model_family``), 0.0 if none."""
    return _FLOORS_BY_FAMILY.get(model_family(embedder_name), 0.0)


def above_floor(vector: Mapping[K, float], floor: float) -> dict[K, float]:
    """The vector candidates whose unit score is at least ``floor`` (others are dropped)."""
    if not math.isfinite(floor) or not 0.0 <= floor <= 1.0:
        raise ValidationError("relevance_floor", f"must be in [0, 1], got {floor!r}")
    return {key: score for key, score in vector.items() if _clean(score) >= floor}


def candidate_count(max_results: int) -> int:
    """How many candidates each side fetches for a hybrid search returning ``max_results``.

    ``4 * max_results``, at least 20 and at most 200: enough overlap between the sides
    for fusion to matter, bounded so a large ``max_results`` cannot make a huge query.
    """
    if isinstance(max_results, bool) or not isinstance(max_results, int) or max_results < 1:
        raise ValidationError("max_results", f"must be an integer >= 1, got {max_results!r}")
    return min(max(_CANDIDATES_PER_RESULT * max_results, MIN_CANDIDATES), MAX_CANDIDATES)
