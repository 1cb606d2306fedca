"""``ef_search`` chosen by the size of the scope searched.

A vector search filters the shared index to one scope while it walks the HNSW graph
(``queries.vector_search_body``). A small scope is found whole (the engine searches its
few vectors exactly, recall 1.00); a big one (tens of thousands of chunks among
hundreds of thousands) is walked with a candidate list of ``ef_search``, and a fixed 200
misses a fifth of its nearest neighbours (bench/REPORT.md, section 9). The lucene engine
walks at most as many vectors as the filter lets through before it searches them exactly,
so a candidate list that grows with the scope buys recall where it is missing and costs
nothing where it is not.

``ef_search_for(configured, chunks)``: the configured ``ef_search`` (``OPENSEARCH_EF_SEARCH``,
200) up to ``LARGE_SCOPE_CHUNKS`` chunks, above that ``chunks / CHUNKS_PER_EF`` (a
fifteenth), at most ``MAX_EF_SEARCH``; ``0`` (send none) stays ``0``. The chunk count comes from the
index itself (``scope_chunks_body``: a count of the scope's chunk documents, no hits),
read once per scope and kept ``SCOPE_SIZE_TTL_S`` seconds (``ScopeSizes``), so a search
costs one more round trip only when its scope's count is not known or has aged.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from knowledge.core.scope import KnowledgeScope
from knowledge.stores.opensearch import query_filters
from knowledge.stores.opensearch.mapping import RECORD, RECORD_CHUNK

SizeKey = tuple[str, KnowledgeScope, bool, tuple[KnowledgeScope, ...]]
"""(index, scope, cross_context, shared libraries): what one count covers."""

__all__ = [
    "CHUNKS_PER_EF",
    "LARGE_SCOPE_CHUNKS",
    "MAX_EF_SEARCH",
    "SCOPE_SIZE_TTL_S",
    "ScopeSizes",
    "ef_search_for",
    "parse_chunk_total",
    "scope_chunks_body",
]

LARGE_SCOPE_CHUNKS = 5_000
"""Up to this many chunks a scope is searched with the configured ``ef_search``."""

CHUNKS_PER_EF = 15
"""A larger scope is walked with ``ef_search`` = its chunks / this (bench/REPORT.md section
9.2: a fifteenth kept recall@10 at 0.95 or more at under twice the p50 of ``ef_search``
200; a tenth cost 2.5x the p50 for a few thousandths more recall)."""

MAX_EF_SEARCH = 10_000
"""The k-NN plugin's own bound of ``ef_search``."""

SCOPE_SIZE_TTL_S = 300.0
"""How long a scope's chunk count is trusted (a scope grows by indexing, slowly)."""


def ef_search_for(
    configured: int, chunks: int | None, *, chunks_per_ef: float = CHUNKS_PER_EF
) -> int:
    """The ``ef_search`` to send for a scope of ``chunks`` chunks (module docstring);
    ``chunks_per_ef`` other than the product's only for benchmarks (bench/scale.py)."""
    if configured <= 0 or chunks is None or chunks <= LARGE_SCOPE_CHUNKS:
        return configured
    return min(MAX_EF_SEARCH, max(configured, math.ceil(chunks / chunks_per_ef)))


def scope_chunks_body(
    scope: KnowledgeScope,
    *,
    cross_context: bool,
    libraries: Sequence[KnowledgeScope] = (),
) -> dict[str, Any]:
    """A count of the chunk documents a search of ``scope`` (and its shared ``libraries``)
    filters to (no hits)."""
    scope_filters = query_filters.searched_scope_filters(
        scope, cross_context=cross_context, libraries=libraries
    )
    return {
        "size": 0,
        "track_total_hits": True,
        "query": {
            "bool": {
                "filter": [
                    *scope_filters,
                    {"term": {RECORD: RECORD_CHUNK}},
                ]
            }
        },
    }


def parse_chunk_total(response: Mapping[str, Any]) -> int | None:
    total = response.get("hits", {}).get("total")
    value = total.get("value") if isinstance(total, Mapping) else total
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class ScopeSizes:
    """Chunk counts by (index, scope, cross_context, libraries), each kept ``ttl`` seconds.
    Thread-safe."""

    def __init__(
        self, ttl: float = SCOPE_SIZE_TTL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._sizes: dict[SizeKey, tuple[float, int | None]] = {}

    def get(
        self,
        key: SizeKey,
        count: Callable[[], int | None],
    ) -> int | None:
        now = self._clock()
        with self._lock:
            known = self._sizes.get(key)
        if known is not None and known[0] > now:
            return known[1]
        chunks = count()
        with self._lock:
            self._sizes[key] = (now + self._ttl, chunks)
        return chunks
