"""A search worker of ``bench/runs/keyword_scale.py``: one embedded store, keyword searches.

Run as ``python bench/probes/keyword_scale.py DB AGENT CONTEXT`` with the product to measure
first on ``PYTHONPATH``. Reads one JSON request a line on stdin, answers one JSON line:
``{"package": true}`` -> the ``knowledge`` package's folder; ``{"query": text,
"max_results": n}`` -> the search's milliseconds (timed here, around ``store.search``:
wall time, and the process's CPU time, which other work on the machine moves less) and
its results as ``[path, chunk_index, score, rank_score, keyword_score]``. Its own process, so two
checkouts of the product can be measured in one run, taking turns.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main(db: str, agent: str, context: str) -> None:
    import knowledge
    from knowledge.core.model import SearchMode, SearchQuery
    from knowledge.core.scope import KnowledgeScope
    from knowledge.embedding.hashing import HashingEmbedder
    from knowledge.stores.embedded import EmbeddedKnowledgeStore

    store = EmbeddedKnowledgeStore(db, embedder=HashingEmbedder())
    scope = KnowledgeScope(agent, context)
    try:
        for line in sys.stdin:
            request = json.loads(line)
            if request.get("package"):
                answer: dict[str, object] = {"package": str(Path(knowledge.__file__).parent)}
            else:
                query = SearchQuery(
                    text=request["query"],
                    mode=SearchMode.KEYWORD,
                    max_results=int(request["max_results"]),
                )
                started, cpu = time.perf_counter(), time.process_time()
                results = store.search(scope, query)
                ms = (time.perf_counter() - started) * 1000.0
                answer = {
                    "ms": ms,
                    "cpu_ms": (time.process_time() - cpu) * 1000.0,
                    "results": [
                        [r.document_path, r.chunk_index, r.score, r.rank_score, r.keyword_score]
                        for r in results
                    ],
                }
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()
    finally:
        store.close()


if __name__ == "__main__":
    main(*sys.argv[1:4])
