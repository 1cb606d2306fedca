"""The last step of every store's search: weights, the page, lesson extras, the trace.

Each store fuses its candidates (``knowledge.ranking.fusion``) and hands them here
(``weighted_page``), so the order of the stages is one copy for all of them: origin and
lesson weights (``origin_weights.weigh``), then ``min_score``, the per-document cap and
the page cut (``fusion.select``), then the lesson cards appended to a first page
(``origin_weights.lesson_extras``), and, inside ``explain.explaining()``, the record of
the search (``explain.record_search``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Generic

from knowledge.core.model import SearchQuery
from knowledge.ranking import explain
from knowledge.ranking.fusion import Fused, K, select
from knowledge.ranking.origin_weights import NEUTRAL, lesson_extras, weigh

__all__ = ["Page", "weighted_page"]


@dataclass(slots=True)
class Page(Generic[K]):
    """The page's candidates (the page, then its ``extras``), and the candidates after the
    weights (``ranked``, best first), for a store's read-deeper decision. ``explanations``
    records the search (once, after the store's last read) and explains its results."""

    chosen: list[Fused[K]]
    extras: frozenset[K]
    ranked: list[Fused[K]]
    _record: Callable[[], Callable[[K, bool], dict[str, Any]]] | None

    @property
    def page_size(self) -> int:
        """Results on the page without the extras."""
        return len(self.chosen) - len(self.extras)

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
    trace: Callable[[], dict[str, Any]] | None = None,
) -> Page[K]:
    """One page of ``fused`` for ``query`` (module docstring). ``facts(key)`` is a
    candidate's ``(origin, is_lesson)``; ``trace()`` the store's part of the record
    (``explain.record_search``'s side arguments), called only when explaining."""
    weights = query.weights or NEUTRAL
    ranked, weighing = weigh(fused, facts, weights)
    page = select(
        ranked,
        query.min_score,
        query.max_results,
        offset=query.offset,
        per_document=query.max_chunks_per_document,
        document_of=document_of,
    )
    extras = lesson_extras(
        ranked,
        page,
        weighing,
        weights,
        offset=query.offset,
        min_score=query.min_score,
        per_document=query.max_chunks_per_document,
        document_of=document_of,
    )

    def record() -> Callable[[K, bool], dict[str, Any]]:
        assert trace is not None
        return explain.record_search(
            **trace(),
            text=query.text,
            ranked=ranked,
            weighing=weighing,
            weights=weights,
            min_score=query.min_score,
            max_chunks_per_document=query.max_chunks_per_document,
            document_of=document_of,
            offset=query.offset,
            max_results=query.max_results,
            returned=len(page),
            extras=len(extras),
        )

    return Page(
        [*page, *extras],
        frozenset(item.key for item in extras),
        ranked,
        None if trace is None else record,
    )
