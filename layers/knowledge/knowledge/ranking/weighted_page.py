"""The last step of every store's search: weights, the page, lesson extras, the trace.

Each store fuses its candidates (``knowledge.ranking.fusion``) and hands them here
(``weighted_page``), so the order of the stages is one copy for all of them: origin and
lesson weights (``origin_weights.weigh``; a shared library's hits are candidates of the
same query, so the ``shared`` weight and the divisor see them with the rest), then the
absolute scores (``relevance``) and ``min_score`` on them, the per-document cap and the
page cut, or one result per document with ``group_by`` (``grouping.select_page``, which
also counts ``matching_chunks``), then the lesson cards appended to a first chunk-level
page (``origin_weights.lesson_extras``), and, inside ``explain.explaining()``, the record
of the search (``explain.record_search``).

A grouped page (``group_by: "document"``) gets no lesson extras: it answers "which
documents", each at most once, so a lesson document competes for its place on the page
with its lesson weight like any other document (an extra past ``max_results`` would be
a document without its ``matching_chunks`` count, and a second copy of a document the
next page lists).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Generic

from knowledge.core.model import SearchQuery
from knowledge.ranking import explain
from knowledge.ranking.fusion import Fused, K
from knowledge.ranking.grouping import select_page
from knowledge.ranking.origin_weights import NEUTRAL, lesson_extras, weigh
from knowledge.ranking.relevance import Judged

__all__ = ["Page", "weighted_page"]


@dataclass(slots=True)
class Page(Generic[K]):
    """The page's candidates (the page, then its ``extras``), each grouped one's
    ``matching_chunks`` (``counts``, empty for a chunk-level page), and the candidates
    after the weights (``ranked``, best first), for a store's read-deeper decision.
    ``explanations`` records the search (once, after the store's last read) and explains
    its results."""

    chosen: list[Fused[K]]
    extras: frozenset[K]
    counts: dict[K, int]
    ranked: list[Fused[K]]
    judged: Judged[K]
    _record: Callable[[], Callable[[K, bool], dict[str, Any]]] | None

    @property
    def page_size(self) -> int:
        """Results on the page without the extras."""
        return len(self.chosen) - len(self.extras)

    def score(self, key: K) -> float:
        """A chosen candidate's absolute score (``ranking.relevance``): its ``score``."""
        return self.judged.score(key)

    def explanations(self) -> Callable[[K], Mapping[str, Any] | None]:
        """Record the search (when explaining) and return what explains one result."""
        if self._record is None or explain.current() is None:
            return lambda _key: None
        explainer = self._record()
        return lambda key: explainer(key, key in self.extras)


def weighted_page(
    fused: list[Fused[K]],
    facts: Callable[[K], tuple[object, bool]],
    query: SearchQuery,
    *,
    document_of: Callable[[K], Hashable],
    judge: Callable[[list[Fused[K]]], Judged[K]],
    trace: Callable[[], dict[str, Any]] | None = None,
) -> Page[K]:
    """One page of ``fused`` for ``query`` (module docstring). ``facts(key)`` is a
    candidate's ``(origin, is_lesson)``; ``judge(candidates)`` their absolute scores
    (``ranking.relevance``), which ``min_score`` applies to while the order stays the
    ranking's; ``trace()`` the store's part of the record (``explain.record_search``'s
    side arguments), called only when explaining."""
    weights = query.weights or NEUTRAL
    ranked, weighing = weigh(fused, facts, weights)
    judged = judge(ranked)
    # The floors apply to the absolute scores; the order stays the ranking's.
    passing = judged.passing(ranked, query)
    page, counts = select_page(passing, query, document_of)
    grouped = query.group_by is not None
    extras = (
        []
        if grouped  # a page of documents gets none (module docstring)
        else lesson_extras(
            passing,
            page,
            weighing,
            weights,
            offset=query.offset,
            min_score=0.0,
            per_document=query.max_chunks_per_document,
            document_of=document_of,
        )
    )

    def record() -> Callable[[K, bool], dict[str, Any]]:
        assert trace is not None
        return explain.record_search(
            **trace(),
            text=query.text,
            ranked=ranked,
            weighing=weighing,
            weights=weights,
            min_score=query.result_floor,
            judged=judged,
            query=query,
            # A page of documents keeps one chunk of each: its cap is 1.
            max_chunks_per_document=1 if grouped else query.max_chunks_per_document,
            document_of=document_of,
            group_by=query.group_by,
            libraries=[library.key for library in query.shared_libraries],
            offset=query.offset,
            max_results=query.max_results,
            returned=len(page),
            extras=len(extras),
        )

    return Page(
        [*page, *extras],
        frozenset(item.key for item in extras),
        counts,
        ranked,
        judged,
        None if trace is None else record,
    )
