"""The memory store's TF-IDF pieces shared by its chunk and page scoring: the sublinear
term frequency, a chunk's document and the page rows' scores
(``knowledge.ranking.page_signal``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from knowledge.stores.memory_snapshots import ChunkKey, Snapshot

__all__ = ["document_of", "page_scores", "sublinear"]


def sublinear(count: float) -> float:
    """``1 + ln tf``; below 1 (a term only in the headings, weighed < 1) ``tf`` itself,
    so a term counts more the more it occurs, and never negatively."""
    return 1.0 + math.log(count) if count >= 1.0 else count


def document_of(key: ChunkKey) -> tuple[str, str]:
    """A chunk key's document: (scope key, path)."""
    return key[2], key[0]


def page_scores(
    snapshots: Sequence[Snapshot],
    terms: Mapping[str, float],
    wanted: set[tuple[str, str]],
    pages: dict[tuple[str, str], float],
) -> None:
    """Add the page-row scores of the ``wanted`` documents (scope key, path) of
    ``snapshots``, scored as chunks are (each term at its weight: a term a synonym added
    at ``SYNONYM_WEIGHT``, ``knowledge.ranking.synonyms``), with ``N`` and ``df``
    counted over those snapshots' documents."""
    total = sum(len(s.documents) for s in snapshots)
    frequencies = {t: sum(len(s.page_postings.get(t, ())) for s in snapshots) for t in terms}
    for snapshot in snapshots:
        key = snapshot.scope.key
        for term, weight in terms.items():
            for path, count in snapshot.page_postings.get(term, {}).items():
                if (key, path) in wanted:
                    idf = weight * math.log(1.0 + total / frequencies[term])
                    pages[key, path] = pages.get((key, path), 0.0) + sublinear(count) * idf
