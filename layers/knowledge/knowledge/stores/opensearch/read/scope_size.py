"""How a vector search walks a scope, chosen by the scope's size.

A vector search filters the shared index to one scope while it walks the HNSW graph
(``queries.vector_search_body``). The lucene engine scores a filtered subset exactly
when the walk would visit more vectors than the filter lets through, so a scope that is
a small part of its index is found whole (recall 1.00). A scope that is a large part of
its index (a big scope among others, or any scope of more than a few hundred chunks in
an index of its own, ``IndexPerAgent``) is walked, and the walk misses neighbours:
bench/REPORT.md section 9.2 measured recall@10 0.77-0.78 for a 56,000-chunk scope of a
260,000-chunk index at ``ef_search`` 200, 0.92-0.94 for a 4,800-chunk scope and 0.97
(one query 0.7) for a 1,053-chunk scope in an index of its own; a longer walk costs more
than scoring the scope (``ef_search`` 1,600 reached 0.953 at 2.4x the p50 of 200, while
exact scoring took 1.4x and finds the true top 10), and scoring a small scope exactly was
faster than walking it in every layout measured.

So, from the scope's chunk count (``scope_chunks_body``: a count of the scope's chunk
documents, read once per scope and kept ``SCOPE_SIZE_TTL_S`` seconds, ``ScopeSizes``):

- up to ``LARGE_SCOPE_CHUNKS`` (200, the default ``ef_search``: a candidate list as long
  as the scope) chunks: the knn query with the configured ``ef_search``
  (``OPENSEARCH_EF_SEARCH``, 200);
- more, up to ``EXACT_MAX_CHUNKS`` (60,000): every chunk of the scope scored exactly
  (``exact_for``: ``script_score`` with ``knn_score``, the knn query's own score), except
  on Serverless, where the knn query is kept (exact scoring there is not verified);
- more (or on Serverless): the knn query with ``ef_search`` = max(configured, chunks /
  ``CHUNKS_PER_EF``), at most ``MAX_EF_SEARCH`` (``ef_search_for``).

``ef_search`` 0 (send none) keeps the knn query and sends no count, whatever the scope.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from knowledge.core.scope import KnowledgeScope
from knowledge.stores.opensearch import request_filters
from knowledge.stores.opensearch.mapping import RECORD, RECORD_CHUNK

SizeKey = tuple[str, KnowledgeScope, bool, tuple[KnowledgeScope, ...]]
"""(index, scope, cross_context, shared libraries): what one count covers."""

__all__ = [
    "CHUNKS_PER_EF",
    "EXACT_MAX_CHUNKS",
    "LARGE_SCOPE_CHUNKS",
    "MAX_EF_SEARCH",
    "SCOPE_SIZE_TTL_S",
    "ScopeSizes",
    "ef_search_for",
    "exact_for",
    "parse_chunk_total",
    "scope_chunks_body",
]

LARGE_SCOPE_CHUNKS = 200
"""Up to this many chunks (the default ``ef_search``: the walk's candidate list holds the
whole scope) a scope is walked with the configured ``ef_search``. It was 2,000 until
REPORT 9.2's second full-size run measured recall@10 0.970 (one query 0.7) at 200 for a
1,053-chunk scope in an index of its own and 0.945 at 2,550 chunks (the first run:
0.993 and 0.980), while exact scoring of those scopes took 3 ms against the walk's 5-6
(in the shared index 5-11 ms against 10-16)."""

EXACT_MAX_CHUNKS = 60_000
"""Up to this many chunks a larger scope is scored exactly (REPORT 9.2: 56,061 chunks of
256 dimensions in 1.2-1.4x the p50 of the knn query at ``ef_search`` 200; exact scoring's
cost grows with the scope's chunks and the vectors' dimensions)."""

CHUNKS_PER_EF = 12
"""Above ``EXACT_MAX_CHUNKS`` (or on Serverless, above ``LARGE_SCOPE_CHUNKS``) a scope is
walked with ``ef_search`` = its chunks / this (REPORT 9.2: a twelfth, 400 at 4,775
chunks in an index of its own, gave 0.972; 0.997 or more from 7,800 to 56,000 chunks in
the shared index; at 56,000 chunks it costs 2.7x the p50 of 200). On Serverless a
twelfth passes the configured 200 only above 2,400 chunks."""

MAX_EF_SEARCH = 10_000
"""The k-NN plugin's own bound of ``ef_search``."""

SCOPE_SIZE_TTL_S = 300.0
"""How long a scope's chunk count is trusted (a scope grows by indexing, slowly)."""


def ef_search_for(
    configured: int,
    chunks: int | None,
    *,
    chunks_per_ef: float = CHUNKS_PER_EF,
    large_scope_chunks: int = LARGE_SCOPE_CHUNKS,
) -> int:
    """The ``ef_search`` to send for a scope of ``chunks`` chunks (module docstring);
    ``chunks_per_ef`` and ``large_scope_chunks`` other than the product's only for
    benchmarks (bench/runs/scope_recall.py)."""
    if configured <= 0 or chunks is None or chunks <= large_scope_chunks:
        return configured
    return min(MAX_EF_SEARCH, max(configured, math.ceil(chunks / chunks_per_ef)))


def exact_for(
    chunks: int | None,
    *,
    serverless: bool = False,
    large_scope_chunks: int = LARGE_SCOPE_CHUNKS,
    exact_max_chunks: int = EXACT_MAX_CHUNKS,
) -> bool:
    """True when a scope of ``chunks`` chunks is scored exactly rather than walked (module
    docstring); the bounds other than the product's only for benchmarks."""
    if serverless or chunks is None:
        return False
    return large_scope_chunks < chunks <= exact_max_chunks


def scope_chunks_body(
    scope: KnowledgeScope,
    *,
    cross_context: bool,
    libraries: Sequence[KnowledgeScope] = (),
) -> dict[str, Any]:
    """A count of the chunk documents a search of ``scope`` (and its shared ``libraries``)
    filters to (no hits)."""
    scope_filters = request_filters.searched_scope_filters(
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
