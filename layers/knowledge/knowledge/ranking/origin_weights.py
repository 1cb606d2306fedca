"""Ranking a team can steer: a weight per origin, and lesson cards.

The design's pipeline normalises each source to [0, 1] and then multiplies by a priority
weight per source, with short, high-signal *lesson cards* weighted 1.4x and pulled in
even when they fall just outside the top results. Here:

- **Origin weights** (``RankWeights.origins``): one multiplier per origin
  (``knowledge.core.origin.ORIGINS``: ``upload``, ``repo``, ``manual``, ``shared``), 1.0 each
  by default (neutral: every score and every benchmark figure is what it was without
  them). The deployment sets its defaults (``KB_ORIGIN_WEIGHTS``, the template's
  ``OriginWeights``: ``"manual=1.2,shared=0.8"``); a search may override any of them
  (body field ``origin_weights``: ``{"shared": 0.5}``) within ``WEIGHT_BOUNDS``.
- **Lesson cards**: a document whose metadata sidecar says ``"kind": "lesson"``
  (``{"metadataAttributes": {"kind": "lesson"}}``; the key is ordinary user metadata, so
  every store already keeps it on every chunk) is weighted ``RankWeights.lesson``
  (``DEFAULT_LESSON_WEIGHT`` 1.4; ``KB_LESSON_WEIGHT``, the body field
  ``lesson_weight``), and up to ``RankWeights.extra_lessons`` (``KB_LESSON_EXTRA``,
  default 2, at most ``MAX_EXTRA_LESSONS``) lesson chunks that matched but ranked past
  the first page are appended to it, each marked ``"extra": true`` (``lesson_extras``).

**Where they apply** (``weigh``): in every store, on every mode, to the store's score of
each candidate after each side was normalised and fused (``knowledge.ranking.fusion``), before
``min_score``, the per-document cap and the page cut (``grouping.select_page``, in
``weighted_page``), and so before a
reranker and any token budget. ``score = fused * origin weight * lesson weight /
divisor``.

**Scores stay in [0, 1]**: the ``divisor`` is 1.0 unless some weighted score exceeds 1
(a weight above 1 on a candidate near the top); then it is that highest weighted score,
so every score of the search is divided by it, the best is 1.0 and the order is the
weighted one. Weights below 1 are never scaled back up. The shared library's hits are
candidates of the same store query as the agent's own (``knowledge.core.scope_set``),
so ``shared`` at 0.5 halves their scores inside that one ranking, before the page is
cut, with one divisor for the whole search.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from knowledge.core.errors import ConfigurationError, ValidationError
from knowledge.core.rank_weights import (
    DEFAULT_EXTRA_LESSONS,
    DEFAULT_LESSON_WEIGHT,
    MAX_EXTRA_LESSONS,
    NEUTRAL,
    WEIGHT_BOUNDS,
    RankWeights,
    check_weight,
    parse_origin_weights,
)
from knowledge.ranking.fusion import Fused, K

if TYPE_CHECKING:
    from knowledge.core.model import SearchResult

__all__ = [
    "BODY_FIELDS",
    "DEFAULT_EXTRA_LESSONS",
    "DEFAULT_LESSON_WEIGHT",
    "ENV_LESSON_EXTRA",
    "ENV_LESSON_WEIGHT",
    "ENV_ORIGIN_WEIGHTS",
    "KIND",
    "LESSON",
    "MAX_EXTRA_LESSONS",
    "NEUTRAL",
    "WEIGHT_BOUNDS",
    "RankWeights",
    "Weighing",
    "is_lesson",
    "lesson_extras",
    "parse_origin_weights",
    "pick_extra_lessons",
    "rank_weights_from_env",
    "ranking_arguments",
    "weigh",
    "weights_body",
    "weights_from_body",
]

KIND: Final = "kind"
"""The metadata key that marks a lesson card (``LESSON``)."""
LESSON: Final = "lesson"
ENV_ORIGIN_WEIGHTS: Final = "KB_ORIGIN_WEIGHTS"
ENV_LESSON_WEIGHT: Final = "KB_LESSON_WEIGHT"
ENV_LESSON_EXTRA: Final = "KB_LESSON_EXTRA"


BODY_FIELDS: Final = ("origin_weights", "lesson_weight", "extra_lessons")
"""The search body's fields for the weights (``weights_from_body``)."""


def weights_from_body(data: Mapping[str, Any], base: RankWeights | None) -> RankWeights | None:
    """A search body's weights: the deployment's ``base`` (``None``: ``NEUTRAL``) with the
    body's ``origin_weights`` / ``lesson_weight`` / ``extra_lessons`` (``null``: not
    given) over it; a bad one is a ``ValidationError`` naming its field. ``base`` when
    none is set."""
    origins, lesson = data.get("origin_weights"), data.get("lesson_weight")
    extra = data.get("extra_lessons")
    if origins is None and lesson is None and extra is None:
        return base
    return (base or NEUTRAL).override(
        None if origins is None else parse_origin_weights(origins, "origin_weights"),
        None if lesson is None else check_weight(lesson, "lesson_weight"),
        extra,
    )


def weights_body(weights: RankWeights | None) -> dict[str, Any]:
    """The body fields that carry ``weights`` whole (a client sending a query's weights)."""
    if weights is None:
        return {}
    return {
        "origin_weights": dict(weights.origins),
        "lesson_weight": weights.lesson,
        "extra_lessons": weights.extra_lessons,
    }


def ranking_arguments(
    origin_weights: Sequence[str] | None, lesson_weight: float | None
) -> dict[str, Any]:
    """A search body's ranking fields from command-line values (``ORIGIN=WEIGHT`` items
    and a lesson weight), only those given; checked as the API checks them."""
    fields: dict[str, Any] = {}
    if origin_weights:
        fields["origin_weights"] = parse_origin_weights(",".join(origin_weights))
    if lesson_weight is not None:
        fields["lesson_weight"] = check_weight(lesson_weight, "lesson_weight")
    return fields


def rank_weights_from_env(environ: Mapping[str, str] | None = None) -> RankWeights:
    """The deployment's defaults from ``KB_ORIGIN_WEIGHTS``, ``KB_LESSON_WEIGHT`` and
    ``KB_LESSON_EXTRA`` (unset or blank: the defaults); a bad value is a
    ``ConfigurationError`` naming the variable."""
    env = os.environ if environ is None else environ
    origins = env.get(ENV_ORIGIN_WEIGHTS, "").strip()
    lesson = env.get(ENV_LESSON_WEIGHT, "").strip()
    extra = env.get(ENV_LESSON_EXTRA, "").strip()
    try:
        return RankWeights(
            parse_origin_weights(origins, ENV_ORIGIN_WEIGHTS) if origins else {},
            float(lesson) if lesson else DEFAULT_LESSON_WEIGHT,
            int(extra) if extra else DEFAULT_EXTRA_LESSONS,
        )
    except ValueError as exc:
        raise ConfigurationError(f"{ENV_LESSON_WEIGHT} / {ENV_LESSON_EXTRA}: {exc}") from None
    except ValidationError as exc:
        raise ConfigurationError(f"ranking weights from the environment: {exc}") from None


def is_lesson(metadata: Mapping[str, Any]) -> bool:
    """Whether a chunk's metadata marks a lesson card (``"kind": "lesson"``; a list of
    kinds holding it counts too, as a metadata filter would match it)."""
    kind = metadata.get(KIND)
    if isinstance(kind, str):
        return kind == LESSON
    if isinstance(kind, list | tuple):
        return LESSON in kind
    return False


@dataclass(frozen=True, slots=True)
class Weighing:
    """What ``weigh`` did: each weighted candidate's ``(origin weight, lesson weight)``
    (only those not 1.0 and 1.0), the lesson candidates, and the ``divisor``."""

    factors: Mapping[Any, tuple[float, float]]
    lessons: frozenset[Any]
    divisor: float
    before: Mapping[Any, float]

    def factor(self, key: object) -> tuple[float, float]:
        return self.factors.get(key, (1.0, 1.0))


def weigh(
    fused: list[Fused[K]],
    facts: Callable[[K], tuple[object, bool]],
    weights: RankWeights,
) -> tuple[list[Fused[K]], Weighing]:
    """``fused`` (best first) with each score multiplied by its origin's weight and, for a
    lesson, the lesson weight, divided by the ``divisor`` (module docstring), best first
    again (ties by key). ``facts(key)`` says a candidate's ``(origin, is_lesson)``.

    Neutral weights and no lesson among the candidates: ``fused`` itself, unchanged;
    ``facts`` is not called at all when the weights are ``inert``."""
    factors: dict[Any, tuple[float, float]] = {}
    lessons: set[Any] = set()
    if weights.inert:  # nothing to weigh or pull in: no candidate's facts are read
        return fused, Weighing({}, frozenset(), 1.0, {item.key: item.score for item in fused})
    for item in fused:
        origin, lesson = facts(item.key)
        origin_weight = weights.origin_weight(origin)
        lesson_weight = weights.lesson if lesson else 1.0
        if lesson:
            lessons.add(item.key)
        if origin_weight != 1.0 or lesson_weight != 1.0:
            factors[item.key] = (origin_weight, lesson_weight)
    before = {item.key: item.score for item in fused}
    if not factors:
        return fused, Weighing({}, frozenset(lessons), 1.0, before)
    weighted = [(item.score * math.prod(factors.get(item.key, (1.0, 1.0))), item) for item in fused]
    top = max(score for score, _ in weighted)
    divisor = top if top > 1.0 else 1.0
    ranked = sorted(
        (
            Fused(item.key, min(1.0, score / divisor), item.keyword_score, item.vector_score)
            for score, item in weighted
        ),
        key=lambda item: (-item.score, item.key),
    )
    return ranked, Weighing(factors, frozenset(lessons), divisor, before)


def lesson_extras(
    ranked: list[Fused[K]],
    page: list[Fused[K]],
    weighing: Weighing,
    weights: RankWeights,
    *,
    offset: int,
    min_score: float,
    per_document: int | None = None,
    document_of: Callable[[K], Hashable] | None = None,
) -> list[Fused[K]]:
    """The lesson candidates appended to a first page (``offset`` 0): up to
    ``weights.extra_lessons`` of those at or above ``min_score`` that are not on it, in
    rank order, within the per-document cap (``per_document`` chunks of a document in
    all, page and extras; ``document_of`` names it). Later pages get none (a lesson
    appended to the first one is still listed at its own place when paging reaches it)."""
    if offset != 0 or weights.extra_lessons == 0 or not weighing.lessons:
        return []
    shown = {item.key for item in page}
    taken: dict[Hashable, int] = {}
    if document_of is not None:
        for item in page:
            taken[document_of(item.key)] = taken.get(document_of(item.key), 0) + 1
    extras: list[Fused[K]] = []
    for item in ranked:
        if len(extras) == weights.extra_lessons:
            break
        lesson = item.key in weighing.lessons and item.key not in shown
        if not lesson or item.score + 1e-12 < min_score:
            continue
        if document_of is not None and per_document is not None:
            document = document_of(item.key)
            if taken.get(document, 0) >= per_document:
                continue
            taken[document] = taken.get(document, 0) + 1
        extras.append(item)
    return extras


def pick_extra_lessons(
    page: Sequence[SearchResult], rest: Sequence[SearchResult], weights: RankWeights | None
) -> list[SearchResult]:
    """For a first page assembled from a longer list (a reranking stage): the first
    ``extra_lessons`` lesson results of ``rest`` (best first) that are not on ``page``,
    marked ``extra``."""
    limit = (weights or NEUTRAL).extra_lessons
    shown = {(r.document_path, r.chunk_index, r.metadata.get("source_key")) for r in page}
    picked: list[SearchResult] = []
    for result in rest:
        if len(picked) == limit:
            break
        where = (result.document_path, result.chunk_index, result.metadata.get("source_key"))
        if is_lesson(result.metadata) and where not in shown:
            shown.add(where)
            picked.append(replace(result, extra=True))
    return picked
