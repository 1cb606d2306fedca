"""A granted agent's search with its shared libraries: one store query vs one per scope.

Round 9 searched the agent's scope and then each granted library apart and merged the
lists by score (``n-search`` here, rebuilt from that code); the product now runs one
query over the scope set (``knowledge.core.scope_set``). Both answer the same request: the
agent's scope (``--own-docs`` documents) and ``--libraries`` library scopes
(``--library-docs`` each), a synthetic corpus of seeded random words (latency does not
need real text). Per store and mode the two are timed in turns (the first of each pair
alternating, ``--iterations`` queries each after ``--warmup``), so both see the same
machine; the answer is the p50/p95 wall time and one-query/N-search p50 ratio. Writes
``bench/results/shared-library.json``. ``--opensearch`` adds the real node (shared index
and index per agent).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.environment import log, opensearch_node, write_result
from bench.metrics import summarize

__all__ = ["add_arguments", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--own-docs", type=int, default=600, help="documents of the agent")
    parser.add_argument("--libraries", type=int, default=3, help="granted library scopes")
    parser.add_argument("--library-docs", type=int, default=300, help="documents per library")
    parser.add_argument("--iterations", type=int, default=200, help="measured queries per mode")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--max-results", type=int, default=10)
    parser.add_argument("--opensearch", action="store_true", help="also on the real node")


def _corpus(count: int, rng: random.Random, vocabulary: list[str]) -> Iterator[tuple[str, str]]:
    for n in range(count):
        words = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(60, 160)))
        yield f"doc-{n:05d}.md", f"# Document {n}\n\n{words}\n"


def _n_search(store: Any, scope: Any, libraries: tuple[Any, ...], query: Any) -> list[Any]:
    """Round 9's ``SharedLibraryStore.search``: one search per scope, merged by score."""
    wanted = query.offset + query.max_results
    each = replace(query, offset=0, max_results=wanted, shared_libraries=())
    ranked = [(h.score, 0, r, h) for r, h in enumerate(store.search(scope, each))]
    library_query = replace(each, cross_context=False)
    for order, library in enumerate(libraries, start=1):
        for rank, hit in enumerate(store.search(library, library_query)):
            ranked.append((hit.score, order, rank, hit))
    ranked.sort(key=lambda item: (-item[0], item[1], item[2]))
    return [hit for *_, hit in ranked[query.offset : wanted]]


def _fill(
    store: Any, args: argparse.Namespace, root: Path
) -> tuple[Any, tuple[Any, ...], list[str]]:
    """Write the corpus under ``root`` (``<agent>/<context>/``) and index each scope in one
    run (one write session: the node refreshes once per scope, not per document)."""
    from knowledge.core.model import IndexOptions
    from knowledge.core.scope import KnowledgeScope
    from knowledge.ingest.pipeline import index_source
    from knowledge.ingest.sources.local import BucketFolderSource

    rng = random.Random(7)
    vocabulary = [f"w{n}" for n in range(3000)]
    own = KnowledgeScope("ops-bot", "runbooks")
    libraries = tuple(KnowledgeScope("_shared", f"lib{n}") for n in range(args.libraries))
    for scope, count in ((own, args.own_docs), *((lib, args.library_docs) for lib in libraries)):
        folder = root / scope.agent / scope.context
        if not folder.exists():
            folder.mkdir(parents=True)
            for path, text in _corpus(count, rng, vocabulary):
                (folder / path).write_text(text, "utf-8")
        result = index_source(store, scope, BucketFolderSource(root), IndexOptions())
        if result.errors:
            raise RuntimeError(f"{scope}: {result.errors[:3]}")
    rng = random.Random(11)
    queries = [
        " ".join(rng.choice(vocabulary) for _ in range(3))
        for _ in range(args.warmup + args.iterations)
    ]
    return own, libraries, queries


def _measure(
    store: Any, args: argparse.Namespace, own: Any, libraries: tuple[Any, ...], texts: list[str]
) -> dict[str, Any]:
    from knowledge.core.model import SearchMode, SearchQuery
    from knowledge.search.shared import SharedLibraryStore

    one_query = SharedLibraryStore(store, libraries)
    answers: dict[str, Any] = {}
    for mode in sorted(store.supported_modes, key=lambda m: m.value):
        times: dict[str, list[float]] = {"one-query": [], "n-search": []}
        ways: dict[str, Callable[[Any], list[Any]]] = {
            "one-query": lambda q: one_query.search(own, q),
            "n-search": lambda q: _n_search(store, own, libraries, q),
        }
        for n, text in enumerate(texts):
            query = SearchQuery(text, mode=SearchMode(mode), max_results=args.max_results)
            order = ("one-query", "n-search") if n % 2 else ("n-search", "one-query")
            for name in order:
                started = time.perf_counter()
                ways[name](query)
                if n >= args.warmup:
                    times[name].append((time.perf_counter() - started) * 1000.0)
        summaries = {name: summarize(values) for name, values in times.items()}
        ratio = summaries["one-query"]["p50"] / summaries["n-search"]["p50"]
        answers[mode.value] = {**summaries, "p50_ratio_one_over_n": round(ratio, 3)}
        log(
            f"{store.name} {mode.value}: one query p50 {summaries['one-query']['p50']} ms, "
            f"N searches {summaries['n-search']['p50']} ms (x{ratio:.2f})"
        )
    return answers


def main(args: argparse.Namespace) -> None:
    from knowledge.embedding.hashing import HashingEmbedder
    from knowledge.stores.embedded import EmbeddedKnowledgeStore
    from knowledge.stores.memory import MemoryKnowledgeStore

    results: dict[str, Any] = {}
    url = ""
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        stores: list[tuple[str, Callable[[], Any]]] = [
            ("memory", MemoryKnowledgeStore),
            (
                "embedded",
                lambda: EmbeddedKnowledgeStore(folder / "kb.db", embedder=HashingEmbedder()),
            ),
            (
                "embedded-isolation-agent",
                lambda: EmbeddedKnowledgeStore(
                    folder / "kb-agent.db", embedder=HashingEmbedder(), isolation="agent"
                ),
            ),
        ]
        if args.opensearch:
            from knowledge.stores.opensearch import OpenSearchConfig, OpenSearchKnowledgeStore

            url = stack.enter_context(opensearch_node())
            for label, per_agent in (("opensearch", False), ("opensearch-index-per-agent", True)):
                config = OpenSearchConfig(
                    url=url,
                    index_name=f"bench-shared-{'agent' if per_agent else 'one'}",
                    index_per_agent=per_agent,
                    number_of_shards=1,
                    number_of_replicas=0,
                    wait_for_refresh=True,
                )
                stores.append(
                    (
                        label,
                        lambda c=config: OpenSearchKnowledgeStore(c, embedder=HashingEmbedder()),
                    )
                )
        for label, make in stores:
            store = make()
            try:
                log(f"{label}: indexing ...")
                own, libraries, texts = _fill(store, args, folder / "bucket")
                results[label] = _measure(store, args, own, libraries, texts)
            finally:
                store.close()
                if label.startswith("opensearch"):
                    request = urllib.request.Request(f"{url}/bench-shared-*", method="DELETE")
                    urllib.request.urlopen(request, timeout=60).close()
    payload = {
        "corpus": {
            "own_documents": args.own_docs,
            "libraries": args.libraries,
            "documents_per_library": args.library_docs,
            "max_results": args.max_results,
            "iterations": args.iterations,
        },
        "stores": results,
    }
    log(f"wrote {write_result('shared-library', payload)}")
