"""One memory measurement in a fresh interpreter: ``python bench/probes/memory.py FOLDER OUT``.

Indexes every Markdown file of ``FOLDER`` into a new embedded store (hashing embedder)
with the product's ``index_source`` and writes to ``OUT`` (JSON) the peak resident set
size (``ru_maxrss``) before indexing (interpreter, imports, store, numpy) and after.
Run by ``bench.runs.memory``.
"""

import json
import resource
import sys
import tempfile
import time
from pathlib import Path

from knowledge.ingest.pipeline import index_source


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def main() -> None:
    folder, out = Path(sys.argv[1]), Path(sys.argv[2])
    import numpy  # noqa: F401 - the store loads it on the first vector write; count it as baseline

    from knowledge.core.model import IndexOptions
    from knowledge.core.scope import KnowledgeScope
    from knowledge.embedding.hashing import HashingEmbedder
    from knowledge.ingest.sources.folders import LocalDirectorySource
    from knowledge.stores.embedded import EmbeddedKnowledgeStore

    with tempfile.TemporaryDirectory(prefix="kb-memory-") as tmp:
        store = EmbeddedKnowledgeStore(Path(tmp) / "memory.db", embedder=HashingEmbedder())
        scope = KnowledgeScope("bench", "memory")
        baseline = _peak_mib()
        started = time.perf_counter()
        result = index_source(
            store, scope, LocalDirectorySource(folder), IndexOptions(max_documents=100_000)
        )
        seconds = time.perf_counter() - started
        peak = _peak_mib()
        store.close()
    if result.errors or result.skipped:
        raise SystemExit(f"not everything was indexed: {result.errors} {result.skipped}")
    out.write_text(
        json.dumps(
            {
                "baseline_peak_mib": round(baseline, 1),
                "peak_mib": round(peak, 1),
                "growth_mib": round(peak - baseline, 1),
                "documents": result.indexed_documents,
                "chunks": result.indexed_chunks,
                "seconds": round(seconds, 1),
            }
        ),
        encoding="utf-8",
    )


if __name__ == "__main__":
    main()
