"""The embedded store's vector search: exact kNN over a scope's vectors, in one process.

Vectors are unit-normalised float32 BLOBs (little-endian) in the chunk rows (``encode``).
A search reads the scope's vectors into one matrix (kept in ``VectorCache`` between
searches until the agent's next write, ``vector_cache_bytes``, 256 MiB by default) and
takes the cosine of every row with the query. That is exact kNN, meant for local scale:
up to some 50,000 chunks per scope. Beyond that use the OpenSearch backend (HNSW).

**No BLAS threads.** The cosines are ``numpy.vecdot`` of the matrix with the query: one
dot product per row, which numpy computes in the calling thread (OpenBLAS only splits a
single dot product of more than 10,000 dimensions). ``matrix @ query`` would call BLAS
``sgemv``, which hands every product of more than a few thousand numbers to all of
OpenBLAS's threads: with many searches at once, those threads fight over the cores
(measured: 16 concurrent clients got a fifth of one client's throughput on 2 cores).
Not relying on ``OPENBLAS_NUM_THREADS`` (the user's environment) or on changing
process-wide BLAS settings (threadpoolctl) that the host application may depend on.
``bench/runs/store_threads.py`` measures both products at 1 and 16 threads.

**Freshness.** Every write transaction bumps its agent's generation (``schema``); an
entry serves only a search whose snapshot has the same generation, so a cached matrix is
never stale, also when another process wrote the file.

numpy is imported only by vector searches and vector writes.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from knowledge.core.errors import EmbeddingError, EmbeddingMismatchError, StoreError
from knowledge.core.model import SearchQuery
from knowledge.core.path_filters import matches_file_patterns, matches_metadata
from knowledge.core.scope import KnowledgeScope
from knowledge.core.scope_set import searched_scopes
from knowledge.ranking.fusion import cosine_to_unit

from .candidates import FETCH_BATCH, Candidate, ChunkKey, metadata_of, pairs_condition
from .filter_sql import filter_sql
from .schema import Identity, generation

__all__ = [
    "DEFAULT_VECTOR_CACHE_BYTES",
    "ScopeVectors",
    "VectorCache",
    "cosines",
    "encode",
    "vector_candidates",
]

DEFAULT_VECTOR_CACHE_BYTES: Final = 256 * 1024 * 1024
"""Memory for vectors kept between searches (all scopes together)."""

CacheKey = tuple[str, str | None]  # (agent, context), context None for cross-context


@dataclass(frozen=True, slots=True)
class ScopeVectors:
    """The vectors of one scope (or of one agent) as of one generation of the agent, and
    each row's chunk: its id, path, index and context. Kept as arrays and lists of shared
    strings, not as an object per row: a 120,000-chunk scope's keys as tuples took
    about 17 MB of small objects, which pinned the heap they were scattered over after they were
    freed (``maintenance``)."""

    generation: int
    agent: str
    rowids: array[int]
    paths: list[str]  # per row; one string object per document
    chunk_indexes: array[int]
    contexts: list[str]  # per row; one string object per context
    matrix: Any  # numpy float32 (chunks x dimensions), unit rows; numpy is not imported here

    def key(self, position: int) -> ChunkKey:
        """The ``ChunkKey`` of the row at ``position``."""
        return (
            self.paths[position],
            self.chunk_indexes[position],
            self.contexts[position],
            self.agent,
        )

    @property
    def nbytes(self) -> int:
        """The matrix's bytes and the rows' keys' (their shared strings aside)."""
        per_row = self.rowids.itemsize + self.chunk_indexes.itemsize + 16  # two list slots
        return int(self.matrix.nbytes) + per_row * len(self.rowids)


class VectorCache:
    """The vector matrices of recently searched scopes, so a search skips reading them.

    Bounded in bytes, least recently used out first; ``max_bytes=0`` disables it. An
    entry of an older generation than its agent's can never serve a search again:
    ``drop_stale`` frees it when a write ends (a deleted 120,000-chunk document's matrix
    is 120 MB), and a search on an older snapshot that finishes later does not put one
    back.
    """

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._entries: OrderedDict[CacheKey, ScopeVectors] = OrderedDict()
        self._newest: dict[str, int] = {}  # per agent, the generation drop_stale was told
        self._lock = threading.Lock()

    def get(self, key: CacheKey, generation: int) -> ScopeVectors | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.generation != generation:
                return None
            self._entries.move_to_end(key)
            return entry

    def put(self, key: CacheKey, entry: ScopeVectors) -> None:
        if entry.nbytes > self._max_bytes:
            return
        with self._lock:
            current = self._entries.get(key)
            if current is not None and current.generation > entry.generation:
                return  # a search on an older snapshot finished late
            if entry.generation < self._newest.get(key[0], 0):
                return  # likewise, after its agent's stale entries were dropped
            self._entries[key] = entry
            self._entries.move_to_end(key)
            total = sum(e.nbytes for e in self._entries.values())
            while total > self._max_bytes:
                _, dropped = self._entries.popitem(last=False)
                total -= dropped.nbytes

    def drop_stale(self, agent: str, current: int) -> int:
        """Drop ``agent``'s entries of another generation than ``current`` (its current
        one); the bytes freed."""
        with self._lock:
            self._newest[agent] = max(current, self._newest.get(agent, 0))
            stale = [
                key
                for key, entry in self._entries.items()
                if key[0] == agent and entry.generation != current
            ]
            return sum(self._entries.pop(key).nbytes for key in stale)

    def agents(self) -> set[str]:
        """The agents with an entry."""
        with self._lock:
            return {key[0] for key in self._entries}

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._newest.clear()


def cosines(matrix: Any, query_vector: Sequence[float]) -> Any:
    """The cosine of every (unit) row of ``matrix`` with the unit ``query_vector``,
    computed in the calling thread (module docstring: no BLAS threads)."""
    import numpy as np  # lazy: keyword-only use never loads numpy

    return np.vecdot(matrix, np.asarray(query_vector, dtype=np.float32))


def encode(vector: Sequence[float], identity: Identity, where: str) -> bytes:
    """The unit-normalised little-endian float32 BLOB of ``vector``; ``where`` names the
    chunk in errors. Raises ``EmbeddingMismatchError`` for another dimension and
    ``EmbeddingError`` for a non-finite vector."""
    import numpy as np  # lazy: keyword-only use never loads numpy

    values = np.asarray(vector, dtype=np.float64)
    if values.shape != (identity.dimensions,):
        raise EmbeddingMismatchError(
            f"{where} has a vector of shape {values.shape}; {identity.describe()} was expected"
        )
    norm = float(np.linalg.norm(values))
    if not math.isfinite(norm):
        raise EmbeddingError(f"{where} has a non-finite vector")
    if norm > 0.0:
        values = values / norm
    return values.astype("<f4").tobytes()


def vector_candidates(
    conn: sqlite3.Connection,
    cache: VectorCache,
    scope: KnowledgeScope,
    query: SearchQuery,
    *,
    query_vector: Sequence[float],
    limit: int,
    display: str,
) -> list[Candidate]:
    """The ``limit`` chunks of the scope and the query's shared libraries nearest
    ``query_vector`` that pass the filters, best first; equal cosines in ``ChunkKey``
    order. Each scope's vectors are their own matrix (cached apart); the best of each are
    ranked together, which is the exact kNN of the union."""
    pairs = searched_scopes(scope, query.cross_context, query.shared_libraries)
    found: list[Candidate] = []
    for agent, context in pairs:
        found.extend(
            _part_candidates(
                conn,
                cache,
                (agent, context),
                query,
                query_vector=query_vector,
                limit=limit,
                display=display,
            )
        )
    if len(pairs) > 1:
        found.sort(key=lambda c: (-c.score, c.key))
    return found[:limit]


def _part_candidates(
    conn: sqlite3.Connection,
    cache: VectorCache,
    part: CacheKey,
    query: SearchQuery,
    *,
    query_vector: Sequence[float],
    limit: int,
    display: str,
) -> list[Candidate]:
    """``vector_candidates`` of one (agent, context) pair (context ``None``: the agent's
    every context)."""
    vectors = _scope_vectors(conn, cache, part, dimensions=len(query_vector), display=display)
    if vectors is None:
        return []
    similarity = cosines(vectors.matrix, query_vector)
    allowed = _filtered_rowids(conn, part, query)
    found: list[Candidate] = []
    for positions in _best_first(similarity, FETCH_BATCH):
        passing = [
            p
            for p in positions
            if matches_file_patterns(vectors.paths[p], query.file_patterns)
            and (allowed is None or vectors.rowids[p] in allowed)
        ]
        metadata = metadata_of(conn, [vectors.rowids[p] for p in passing]) if query.metadata else {}
        for p in passing:
            rowid = vectors.rowids[p]
            if query.metadata and not matches_metadata(metadata[rowid], query.metadata):
                continue
            found.append(Candidate(rowid, vectors.key(p), cosine_to_unit(float(similarity[p]))))
            if len(found) == limit:
                return found
    return found


def _filtered_rowids(
    conn: sqlite3.Connection, part: CacheKey, query: SearchQuery
) -> set[int] | None:
    """The part's chunk ids that pass the search filter (``filter_sql``); ``None``: no
    filter, every chunk passes. The cached matrix holds the whole part, so the filter is
    one SQL read beside it rather than part of the cache key."""
    if query.filter is None:
        return None
    scope_sql, params = pairs_condition([part], "c.")
    condition, filter_params = filter_sql(query.filter)
    rows = conn.execute(
        f"SELECT c.id FROM chunks AS c WHERE {scope_sql} AND ({condition})",  # noqa: S608
        [*params, *filter_params],
    )
    return {row[0] for row in rows}


def _best_first(similarity: Any, batch: int) -> Iterator[list[int]]:
    """Row positions by descending ``similarity``, equal values in row order, ``batch`` at
    a time. Most searches need only the first batch: it is found by a partition (linear)
    and only its rows are sorted; the whole order is sorted only if more is asked for."""
    import numpy as np  # lazy: keyword-only use never loads numpy

    count = len(similarity)
    if count > batch:
        # Every row at least as similar as the batch-th best: ties at the edge included,
        # so this is exactly the first len(head) positions of the full order.
        edge = similarity[np.argpartition(-similarity, batch - 1)[batch - 1]]
        candidates = np.flatnonzero(similarity >= edge)
        head = candidates[np.lexsort((candidates, -similarity[candidates]))]
        yield [int(p) for p in head]
        done = len(head)
        if done >= count:
            return
    else:
        done = 0
    order = np.argsort(-similarity, kind="stable")
    for start in range(done, count, batch):
        yield [int(p) for p in order[start : start + batch]]


def _scope_vectors(
    conn: sqlite3.Connection,
    cache: VectorCache,
    part: CacheKey,
    *,
    dimensions: int,
    display: str,
) -> ScopeVectors | None:
    """The part's vectors in ``ChunkKey`` order, cached per generation of its agent; in
    the caller's read transaction."""
    import numpy as np  # lazy: keyword-only use never loads numpy

    agent = part[0]
    current = generation(conn, agent)
    cached = cache.get(part, current)
    if cached is not None:
        return cached
    scope_sql, params = pairs_condition([part])
    where = f"{scope_sql} AND vector IS NOT NULL"
    # Counted first (same snapshot), so the rows are copied straight into the matrix: all
    # the rows' BLOBs at once, joined, would take twice the matrix and leave as much freed
    # heap behind (``maintenance.release_memory``).
    counted = conn.execute(f"SELECT count(*) FROM chunks WHERE {where}", params)  # noqa: S608
    count = int(counted.fetchone()[0])
    if count == 0:
        return None
    width = 4 * dimensions
    matrix = np.empty((count, dimensions), dtype="<f4")
    flat = matrix.data.cast("B")
    rowids = array("q")
    chunk_indexes = array("q")
    paths: list[str] = []
    contexts: list[str] = []
    shared: dict[str, str] = {}  # one string per path and context, not one per chunk
    cursor = conn.execute(
        "SELECT id, path, chunk_index, context, vector FROM chunks"  # noqa: S608
        f" WHERE {where} ORDER BY path, chunk_index, context",
        params,
    )
    while batch := cursor.fetchmany(FETCH_BATCH):
        for rowid, path, chunk_index, context, blob in batch:
            if len(blob) != width:
                raise StoreError(
                    f"index {display} holds vectors of another dimension than {dimensions}; "
                    "reindex into a new file"
                )
            at = len(rowids) * width
            if at == len(flat):  # never within one read transaction, the caller's
                raise StoreError(f"index {display}: the vectors changed while being read")
            flat[at : at + width] = blob
            rowids.append(rowid)
            chunk_indexes.append(chunk_index)
            paths.append(shared.setdefault(path, path))
            contexts.append(shared.setdefault(context, context))
    flat.release()
    matrix.flags.writeable = False  # shared by every search that finds it in the cache
    entry = ScopeVectors(current, agent, rowids, paths, chunk_indexes, contexts, matrix)
    cache.put(part, entry)
    return entry
