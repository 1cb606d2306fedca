"""One result per document (``group_by: "document"``): pure functions every store shares.

A grouped search answers "which documents talk about X": each document once, by its
best chunk, with the number of its chunks that matched. Every store ranks its chunks as
it does for a chunk-level search (the same candidates, the same fusion, the same scores
in [0, 1]) and then calls ``select_documents`` instead of ``fusion.select``:

- the candidates with ``score >= min_score`` are ranked best first, ties by key (the
  order ``fusion.select`` uses), and each document keeps its first, best chunk;
- ``matching_chunks`` of a document is how many of its chunks are among those
  candidates (at least 1);
- the page is ``max_results`` documents from ``offset`` on.

Pages are slices of one order only when every page sees the same candidates, so a
grouped search always reads its mode's deepest fixed candidate depth
(``GROUPED_DEPTH_NOTE``), whatever the page: the memory store scores every matching
chunk, the embedded and OpenSearch stores read ``fusion.candidate_count(MAX_MAX_RESULTS)``
candidates for one mode (200) and ``fusion.HYBRID_CANDIDATES`` per side for hybrid. A
document's count is therefore of its chunks among those candidates: exact on the
memory store, and on the others while the query matches fewer chunks than that depth.

Why not OpenSearch ``collapse``: a collapse groups the hits of one query by the engine's
own score. Hybrid scores are fused here, after both sides come back (``knowledge.ranking.fusion``),
so a collapse of either side would keep a chunk that is not the document's best fused
chunk and drop chunks the other side ranks first; and collapse alone gives no count
(``inner_hits`` or an aggregation per page would be another request). Grouping the
fused candidate list gives the same best chunk and the same scores a chunk-level search
shows, in every store and mode, with one copy of the logic.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any

from knowledge.ranking.fusion import Fused, K, select

if TYPE_CHECKING:
    from knowledge.core.model import SearchQuery

__all__ = ["GROUPED_DEPTH_NOTE", "select_documents", "select_page"]

GROUPED_DEPTH_NOTE = (
    "matching_chunks counts a document's chunks among the search's candidates "
    "(every matching chunk on the memory store; up to 200 per mode, 100 per side "
    "in hybrid, on the embedded and OpenSearch stores)"
)


def select_documents(
    fused: Iterable[Fused[K]],
    min_score: float,
    max_results: int,
    *,
    offset: int,
    document_of: Callable[[K], Hashable],
) -> list[tuple[Fused[K], int]]:
    """One page of documents: ``(best chunk, matching_chunks)`` pairs (module docstring).

    Validates like ``fusion.select`` (``ValidationError`` naming the argument)."""
    select([], min_score, max_results, offset=offset)  # the arguments' checks, once
    ranked: list[Fused[Any]] = select(
        fused, min_score, _ALL, per_document=None, document_of=document_of
    )
    counts: dict[Hashable, int] = {}
    best: list[tuple[Hashable, Fused[Any]]] = []
    for item in ranked:
        document = document_of(item.key)
        if document not in counts:
            counts[document] = 0
            best.append((document, item))
        counts[document] += 1
    page = best[offset : offset + max_results]
    return [(item, counts[document]) for document, item in page]


def select_page(
    fused: Iterable[Fused[K]],
    query: SearchQuery,
    document_of: Callable[[K], Hashable],
) -> tuple[list[Fused[K]], dict[K, int]]:
    """The page a store answers for ``query``: ``fusion.select`` (per-document cap) and no
    counts for a chunk-level search; for a grouped one ``select_documents`` and each
    chosen key's ``matching_chunks``. ``fused`` already passed the query's floors, which
    are on the absolute scores (``ranking.relevance``, ``weighted_page``), so no candidate
    is dropped here for its ``score``."""
    floor = 0.0
    if query.group_by is None:
        chosen = select(
            fused,
            floor,
            query.max_results,
            offset=query.offset,
            per_document=query.max_chunks_per_document,
            document_of=document_of,
        )
        return chosen, {}
    grouped = select_documents(
        fused, floor, query.max_results, offset=query.offset, document_of=document_of
    )
    return [item for item, _ in grouped], {item.key: count for item, count in grouped}


_ALL = 10**9
"""``fusion.select``'s page size for "every candidate" (it takes no ``None``)."""
