"""How the embedded store ranks: fusing its two sides, and when a page reads deeper.

``Fusion`` holds the store's fusion settings (``"weighted"`` with its weights, or
``"rrf"`` with its ``k``; the vector side's relevance floor) and fuses one search's
candidates (``fusion.keyword_only``, ``vector_only``, ``fuse_weighted``, ``fuse_rrf``).
``read_deeper`` says when a single-mode page left short by the per-document cap is read
again at ``DEEPEST``; ``unit_query_vector`` is the query's unit vector, and
``search_results`` the chosen page as results. Pure functions
over candidates, no SQL.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from knowledge.core.errors import EmbeddingError
from knowledge.core.model import MAX_MAX_RESULTS, SearchMode, SearchQuery, SearchResult
from knowledge.core.scope import KnowledgeScope
from knowledge.core.scope_set import library_hit, marked
from knowledge.embedding.base import EmbeddingClient
from knowledge.ranking.fusion import (
    Fused,
    above_floor,
    candidate_count,
    fuse_rrf,
    fuse_weighted,
    hybrid_weights,
    keyword_only,
    vector_only,
)
from knowledge.ranking.page_signal import PageScores
from knowledge.ranking.synonyms import QueryTerms
from knowledge.ranking.weighted_page import Page

from .candidates import Candidate, ChunkKey
from .schema import Identity, load_json

__all__ = [
    "DEEPEST",
    "Fusion",
    "document_of",
    "read_deeper",
    "search_results",
    "unit_query_vector",
]


def document_of(key: ChunkKey) -> tuple[str, str, str]:
    """The document of a candidate key ``(path, chunk_index, context, agent)``."""
    return key[3], key[2], key[0]


DEEPEST = candidate_count(MAX_MAX_RESULTS)
"""The candidate depth of a single-mode search's deepest page (``offset + max_results``
at its maximum)."""


def read_deeper(
    mode: SearchMode,
    query: SearchQuery,
    *,
    limit: int,
    chosen: int,
    fused: list[Fused[ChunkKey]],
    keyword: list[Candidate],
    vector: list[Candidate],
) -> bool:
    """Whether a single-mode page left short (by the per-document cap) must be read again
    at ``DEEPEST``: only if the side returned ``limit`` candidates (more exist) and its
    weakest still counted (above the floor; ``min_score`` is on the absolute scale,
    which does not follow the rank order, so a candidate past the depth may pass it), so
    that every page of a query is a slice of the order its deepest page sees. Hybrid
    has one fixed depth."""
    side = keyword if mode is SearchMode.KEYWORD else vector
    return (
        mode is not SearchMode.HYBRID
        and chosen < query.max_results
        and limit < DEEPEST
        and len(side) == limit
        and len(fused) == limit
        and min(item.score for item in fused) > 0.0
    )


@dataclass(frozen=True, slots=True)
class Fusion:
    """A store's fusion settings (module docstring); ``embedder_name`` picks the default
    hybrid weights (``fusion.hybrid_weights``) where none are given."""

    method: str
    rrf_k: int
    floor: float
    keyword_weight: float | None
    vector_weight: float | None
    embedder_name: str | None

    def fuse(
        self,
        mode: SearchMode,
        keyword: list[Candidate],
        vector: list[Candidate],
        *,
        cjk_query: bool = False,
    ) -> list[Fused[ChunkKey]]:
        if mode is SearchMode.KEYWORD:
            return keyword_only({c.key: c.score for c in keyword})
        kept = above_floor({c.key: c.score for c in vector}, self.floor)
        vector = [c for c in vector if c.key in kept]
        if mode is SearchMode.VECTOR:
            return vector_only({c.key: c.score for c in vector})
        if self.method == "rrf":
            return fuse_rrf([c.key for c in keyword], [c.key for c in vector], self.rrf_k)
        return fuse_weighted(
            {c.key: c.score for c in keyword},
            {c.key: c.score for c in vector},
            *hybrid_weights(
                self.embedder_name,
                self.keyword_weight,
                self.vector_weight,
                cjk_query=cjk_query,
            ),
        )

    def trace(
        self,
        scope: KnowledgeScope,
        query: SearchQuery,
        mode: SearchMode,
        sides: tuple[list[Candidate], list[Candidate]],
        *,
        cjk: bool,
        pages: PageScores[ChunkKey, Any] | None = None,
        synonyms: QueryTerms | None = None,
    ) -> dict[str, Any]:
        """The store's part of an explained search (``ranking.explain.record_search``):
        the sides as ``fuse`` got them, the keyword side's two parts (``pages``), the
        floor, the weights or RRF's ``k``."""
        keyword, vector = sides
        above = above_floor({c.key: c.score for c in vector}, self.floor)
        kept = [c for c in vector if c.key in above]
        hybrid = mode is SearchMode.HYBRID
        weighted = hybrid and self.method != "rrf"
        pair = None
        if weighted:
            pair = hybrid_weights(
                self.embedder_name, self.keyword_weight, self.vector_weight, cjk_query=cjk
            )
        return {
            "store": "embedded",
            "scope": f"{scope.agent}/*" if query.cross_context else scope.key,
            "mode": mode.value,
            "fusion": self.method if hybrid else mode.value,
            "keyword": None if mode is SearchMode.VECTOR else {c.key: c.score for c in keyword},
            "page": None if mode is SearchMode.VECTOR else pages,
            "vector": None if mode is SearchMode.KEYWORD else {c.key: c.score for c in kept},
            "vector_found": len(vector),
            "floor": self.floor,
            "hybrid_weights": pair,
            "rrf_k": self.rrf_k if hybrid and not weighted else None,
            "orders": (
                ([c.key for c in keyword], [c.key for c in kept])
                if hybrid and not weighted
                else None
            ),
            "synonyms": synonyms,
        }


def unit_query_vector(
    embedder: EmbeddingClient, identity: Identity, text: str
) -> list[float] | None:
    """The query's unit vector, or ``None`` when it is the zero vector (no signal)."""
    vector = list(embedder.embed(text).vector)
    if len(vector) != identity.dimensions:
        raise EmbeddingError(
            f"embedder {identity.name} returned {len(vector)} dimensions for the "
            f"query; it declares {identity.dimensions}"
        )
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if not math.isfinite(norm):
        raise EmbeddingError(f"embedder {identity.name} returned a non-finite vector")
    if norm == 0.0:
        return None
    return [x / norm for x in vector]


def search_results(
    page: Page[ChunkKey],
    rowids: dict[ChunkKey, int],
    rows: dict[int, tuple[str, int, str, str]],
    scope: KnowledgeScope,
    libraries: tuple[KnowledgeScope, ...],
) -> list[SearchResult]:
    """The page's candidates (``ranking.weighted_page``) as results, from their chunk rows
    (``candidates.chunk_rows``); a hit of one of the query's shared ``libraries`` names it
    (``core.scope_set.marked``); a grouped search's ``matching_chunks``
    (``ranking.grouping``), the lesson extras marked, each with its explanation
    (``ranking.explain``)."""
    explained = page.explanations()
    results = []
    for fused in page.chosen:
        path, chunk_index, content, metadata = rows[rowids[fused.key]]
        library = library_hit(scope, libraries, fused.key[3], fused.key[2])
        results.append(
            SearchResult(
                document_path=path,
                chunk_index=chunk_index,
                content=content,
                score=page.score(fused.key),
                rank_score=fused.score,
                keyword_score=fused.keyword_score,
                vector_score=fused.vector_score,
                metadata=marked(load_json(metadata), library),
                matching_chunks=page.counts.get(fused.key),
                extra=fused.key in page.extras,
                explanation=explained(fused.key),
            )
        )
    return results
