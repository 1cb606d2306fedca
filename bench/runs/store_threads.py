"""Embedded store searches from 1 and 16 threads (no BLAS thread fights).

Embedded store searches from 1 and from 16 threads at once.

Vector search takes the cosine of every chunk of the scope with the query. Done as a BLAS
matrix-vector product (``matrix @ query``), OpenBLAS hands each product to all its
threads, and many concurrent searches make those threads fight over the cores: on 2
cores, 16 clients got a fifth of one client's throughput. The store computes the
cosines with ``numpy.vecdot`` in the calling thread instead
(``knowledge.stores.embedded.vector_search``).

Measured in one run, on one store of ``--chunks`` random unit vectors (384 dims):

- ``store``: ``EmbeddedKnowledgeStore.search`` in vector and hybrid mode, as shipped;
- ``product``: the cosine step alone, ``matrix @ query`` (BLAS, the old way) next to
  ``vector_search.cosines`` (the store's), as a baseline from the same run.

Each figure is searches (or products) per second over ``--seconds`` with 1 and with 16
threads, plus p50/p99 latency; the ratio 16/1 is what must stay >= 1. Runs with the
project venv too: ``.venv/bin/python -m bench store_threads``.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common.environment import log, write_result

DIMENSIONS = 384
THREADS = (1, 16)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chunks", type=int, default=20_000, help="chunks in the scope")
    parser.add_argument("--seconds", type=float, default=4.0, help="measuring time per figure")


def _measure(work: Callable[[int], object], threads: int, seconds: float) -> dict[str, float]:
    """Call ``work(n)`` from ``threads`` threads for ``seconds``; rate and latencies."""
    latencies: list[list[float]] = [[] for _ in range(threads)]
    start = threading.Barrier(threads + 1)
    stop = threading.Event()

    def run(slot: int) -> None:
        start.wait()
        n = 0
        while not stop.is_set():
            began = time.perf_counter()
            work(slot * 1_000_003 + n)
            latencies[slot].append(time.perf_counter() - began)
            n += 1

    workers = [threading.Thread(target=run, args=(slot,)) for slot in range(threads)]
    for worker in workers:
        worker.start()
    start.wait()
    began = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - began
    every = sorted(x for slot in latencies for x in slot)
    return {
        "per_s": len(every) / elapsed,
        "p50_ms": every[len(every) // 2] * 1000.0,
        "p99_ms": every[min(len(every) - 1, int(len(every) * 0.99))] * 1000.0,
        "count": len(every),
    }


def _figures(name: str, work: Callable[[int], object], seconds: float) -> dict[str, Any]:
    work(0)  # warm: caches, lazy imports
    by_threads = {str(t): _measure(work, t, seconds) for t in THREADS}
    one, many = by_threads["1"]["per_s"], by_threads[str(THREADS[-1])]["per_s"]
    log(
        f"{name}: {one:.0f}/s with 1 thread, {many:.0f}/s with {THREADS[-1]} "
        f"(x{many / one:.2f}); p99 {by_threads[str(THREADS[-1])]['p99_ms']:.1f} ms"
    )
    return {"threads": by_threads, "ratio_16_to_1": many / one}


def main(args: argparse.Namespace) -> None:
    import numpy as np

    from knowledge.core.model import DocumentChunk, SearchMode, SearchQuery
    from knowledge.core.scope import KnowledgeScope
    from knowledge.embedding.hashing import HashingEmbedder
    from knowledge.stores.embedded import EmbeddedKnowledgeStore
    from knowledge.stores.embedded.vector_search import cosines
    from knowledge.stores.protocol import DocumentHeader, EmbeddedChunk

    scope = KnowledgeScope("bench", "threads")
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((args.chunks, DIMENSIONS)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    queries = rng.standard_normal((64, DIMENSIONS)).astype(np.float32)
    # Words of a 5,000-word vocabulary: a query word is in some 0.6 % of the chunks.
    vocabulary = [f"w{n}" for n in range(5000)]
    picks = rng.integers(0, len(vocabulary), size=(args.chunks, 30))
    results: dict[str, Any] = {"chunks": args.chunks, "dimensions": DIMENSIONS}
    with tempfile.TemporaryDirectory(prefix="kb-threads-") as folder:
        store = EmbeddedKnowledgeStore(Path(folder) / "kb.db", embedder=HashingEmbedder(DIMENSIONS))
        try:
            log(f"writing {args.chunks} chunks")
            with store.write_session(scope) as session:
                for start in range(0, args.chunks, 1000):
                    path = f"doc{start // 1000:03d}.md"
                    header = DocumentHeader(path, path, "hash", datetime.now(UTC))
                    session.put_document(
                        header,
                        (
                            EmbeddedChunk(
                                DocumentChunk(
                                    path,
                                    n,
                                    " ".join(vocabulary[w] for w in picks[start + n]),
                                    {},
                                ),
                                tuple(float(x) for x in matrix[start + n]),
                            )
                            for n in range(min(1000, args.chunks - start))
                        ),
                    )

            def search(mode: SearchMode) -> Callable[[int], object]:
                def one(n: int) -> object:
                    words = " ".join(
                        vocabulary[(n * k * 7919) % len(vocabulary)] for k in (1, 2, 3)
                    )
                    return store.search(scope, SearchQuery(words, mode=mode))

                return one

            results["store_vector"] = _figures(
                "store, vector", search(SearchMode.VECTOR), args.seconds
            )
            results["store_hybrid"] = _figures(
                "store, hybrid", search(SearchMode.HYBRID), args.seconds
            )
        finally:
            store.close()
    results["product_blas_matmul"] = _figures(
        "product, matrix @ query (BLAS)", lambda n: matrix @ queries[n % 64], args.seconds
    )
    results["product_store_cosines"] = _figures(
        "product, vector_search.cosines", lambda n: cosines(matrix, queries[n % 64]), args.seconds
    )
    write_result("store-threads", results)
