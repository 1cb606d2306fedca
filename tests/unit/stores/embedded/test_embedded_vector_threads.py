"""Vector search never hands work to BLAS worker threads, whatever the environment asks.

On a small machine, BLAS threads started per request by many concurrent searches fight
over the cores (issue 9: 178 searches/s with one client, 34 with 16). The check runs in
a fresh process that asks OpenBLAS for 4 threads, and reads from ``/proc`` how much CPU
every thread other than the searching one used while it searched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PROBE = textwrap.dedent(
    """
    import json, os, sys
    import numpy as np
    from datetime import UTC, datetime
    from knowledge.core.model import DocumentChunk, SearchQuery
    from knowledge.core.scope import KnowledgeScope
    from knowledge.stores.protocol import DocumentHeader, EmbeddedChunk
    from knowledge.stores.embedded import EmbeddedKnowledgeStore

    class Embedder:
        name = "random"
        dimensions = 384
        def embed(self, text):
            from knowledge.embedding.base import Embedding
            return Embedding(tuple(np.random.default_rng(len(text)).standard_normal(384)), 1)
        def embed_batch(self, texts):
            return [self.embed(t) for t in texts]

    def cpu_ticks():
        ticks = {}
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ticks[int(tid)] = int(fields[11]) + int(fields[12])  # utime + stime
        return ticks

    scope = KnowledgeScope("agent", "ctx")
    store = EmbeddedKnowledgeStore(sys.argv[1], embedder=Embedder())
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((6000, 384))
    with store.write_session(scope) as session:
        session.put_document(
            DocumentHeader("big.md", "doc", "hash", datetime.now(UTC)),
            (
                EmbeddedChunk(DocumentChunk("big.md", n, f"chunk {n}", {}), tuple(v))
                for n, v in enumerate(vectors)
            ),
        )
    query = SearchQuery("a question", mode="vector", max_results=5)
    store.search(scope, query)  # warm: the scope's vectors are read once
    me = os.getpid()
    before = cpu_ticks()
    for _ in range(300):
        store.search(scope, query)
    after = cpu_ticks()
    others = sum(after[t] - before.get(t, 0) for t in after if t != me)
    print(json.dumps({"threads": len(after), "other_ticks": others,
                      "own_ticks": after[me] - before[me]}))
    """
)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_vector_search_uses_no_blas_worker_threads(tmp_path: Path) -> None:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "4", "OMP_NUM_THREADS": "4"}
    env.pop("MKL_NUM_THREADS", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "kb.db")],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        check=True,
    )
    measured = json.loads(done.stdout)
    assert measured["threads"] > 1  # the BLAS workers exist: the check can fail
    assert measured["own_ticks"] > 0
    assert measured["other_ticks"] == 0, measured


@pytest.mark.parametrize("rows", [1, 5, 256, 257, 1000, 3000])
def test_best_first_order_is_the_full_stable_order(rows: int) -> None:
    import numpy as np

    from knowledge.stores.embedded.vector_search import _best_first

    rng = np.random.default_rng(rows)
    # Few distinct values: many ties, also at the edge of the first batch.
    similarity = rng.integers(0, 7, size=rows).astype(np.float32) / 7
    expected = sorted(range(rows), key=lambda p: (-float(similarity[p]), p))
    got = [p for batch in _best_first(similarity, 256) for p in batch]
    assert got == expected
