"""A granted agent's search with its libraries: one store query vs N.

A granted agent's search with its shared libraries: one store query vs one per scope.

The product used to search the agent's scope and then each granted library apart and merged the
lists by score (``n-search`` here, rebuilt from that code); the product now runs one
query over the scope set (``knowledge.core.scope_set``). Both answer the same request: the
agent's scope (``--own-docs`` documents) and ``--libraries`` library scopes
(``--library-docs`` each), a synthetic corpus of seeded random words (latency does not
need real text). Per store and mode the two are timed in turns (the first of each pair
alternating, ``--iterations`` queries each after ``--warmup``), so both see the same
machine; the answer is the p50/p95 wall time and one-query/N-search p50 ratio. Writes
``bench/results/shared-library.json``. ``--opensearch`` adds the real node (shared index
and index per agent).

**Layout** (the stores that isolate statistics: embedded ``isolation="agent"``, OpenSearch
index per agent). Each library is a table / index of its own there, so the one query
reads 1 + ``--libraries`` of them; before, every library shared ``_shared``'s one (2 in
all). Timed in turns as above: the one query over the libraries (``per-library``) and
the one query over one library holding all their documents (``one-library``: the old
layout's shape, the same documents in one table / index beside the agent's).
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

from bench.common.environment import log, opensearch_node, write_result
from bench.common.metrics import summarize

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
    """The earlier ``SharedLibraryStore.search``: one search per scope, merged by score."""
    wanted = query.offset + query.max_results
    each = replace(query, offset=0, max_results=wanted, shared_libraries=())
    ranked = [(h.rank_score, 0, r, h) for r, h in enumerate(store.search(scope, each))]
    library_query = replace(each, cross_context=False)
    for order, library in enumerate(libraries, start=1):
        for rank, hit in enumerate(store.search(library, library_query)):
            ranked.append((hit.rank_score, order, rank, hit))
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
    from knowledge.ingest.sources.folders import BucketFolderSource

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
    if _isolates(store):  # every library's documents in one more library (the layout)
        together = root / "_shared" / "all"
        if not together.exists():
            together.mkdir(parents=True)
            for library in libraries:
                for source in sorted((root / library.agent / library.context).iterdir()):
                    (together / f"{library.context}-{source.name}").write_bytes(source.read_bytes())
        combined = KnowledgeScope("_shared", "all")
        result = index_source(store, combined, BucketFolderSource(root), IndexOptions())
        if result.errors:
            raise RuntimeError(f"{combined}: {result.errors[:3]}")
    rng = random.Random(11)
    queries = [
        " ".join(rng.choice(vocabulary) for _ in range(3))
        for _ in range(args.warmup + args.iterations)
    ]
    return own, libraries, queries


def _isolates(store: Any) -> bool:
    """Whether the store keeps each library's statistics apart (a table / index each)."""
    return getattr(store, "isolation", None) == "agent" or bool(
        getattr(getattr(store, "config", None), "index_per_agent", False)
    )


def _turns(
    store: Any,
    args: argparse.Namespace,
    texts: list[str],
    ways: dict[str, Callable[[Any], list[Any]]],
) -> dict[str, Any]:
    """Per mode, the two ``ways`` timed in turns (the first alternating) and the p50 ratio
    of the first over the second."""
    from knowledge.core.model import SearchMode, SearchQuery

    first, second = ways
    answers: dict[str, Any] = {}
    for mode in sorted(store.supported_modes, key=lambda m: m.value):
        times: dict[str, list[float]] = {first: [], second: []}
        for n, text in enumerate(texts):
            query = SearchQuery(text, mode=SearchMode(mode), max_results=args.max_results)
            for name in (first, second) if n % 2 else (second, first):
                started = time.perf_counter()
                ways[name](query)
                if n >= args.warmup:
                    times[name].append((time.perf_counter() - started) * 1000.0)
        summaries = {name: summarize(values) for name, values in times.items()}
        ratio = summaries[first]["p50"] / summaries[second]["p50"]
        answers[mode.value] = {**summaries, f"p50_ratio_{first}_over_{second}": round(ratio, 3)}
        log(
            f"{store.name} {mode.value}: {first} p50 {summaries[first]['p50']} ms, "
            f"{second} {summaries[second]['p50']} ms (x{ratio:.2f})"
        )
    return answers


def _measure(
    store: Any, args: argparse.Namespace, own: Any, libraries: tuple[Any, ...], texts: list[str]
) -> dict[str, Any]:
    from knowledge.agent_tools.shared import SharedLibraryStore

    one_query = SharedLibraryStore(store, libraries)
    answers = _turns(
        store,
        args,
        texts,
        {
            "one-query": lambda q: one_query.search(own, q),
            "n-search": lambda q: _n_search(store, own, libraries, q),
        },
    )
    for run in answers.values():  # the name the report reads
        run["p50_ratio_one_over_n"] = run.pop("p50_ratio_one-query_over_n-search")
    return answers


def _measure_layout(
    store: Any, args: argparse.Namespace, own: Any, libraries: tuple[Any, ...], texts: list[str]
) -> dict[str, Any]:
    """The one query over a table / index per library against the same query over one
    library holding all their documents (module docstring, *Layout*)."""
    from knowledge.agent_tools.shared import SharedLibraryStore
    from knowledge.core.scope import KnowledgeScope

    apart = SharedLibraryStore(store, libraries)
    together = SharedLibraryStore(store, (KnowledgeScope("_shared", "all"),))
    return _turns(
        store,
        args,
        texts,
        {
            "per-library": lambda q: apart.search(own, q),
            "one-library": lambda q: together.search(own, q),
        },
    )


def main(args: argparse.Namespace) -> None:
    from knowledge.embedding.hashing import HashingEmbedder
    from knowledge.stores.embedded import EmbeddedKnowledgeStore
    from knowledge.stores.memory import MemoryKnowledgeStore

    results: dict[str, Any] = {}
    layouts: dict[str, Any] = {}
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
                if _isolates(store):
                    layouts[label] = _measure_layout(store, args, own, libraries, texts)
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
        "layout": layouts,
    }
    log(f"wrote {write_result('shared-library', payload)}")
