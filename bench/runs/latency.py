"""Search latency per mode on the real node, next to OpenSearch's took.

Search latency per mode against the real node, next to OpenSearch's own ``took``.

The corpus is indexed once (hashing embedder, ``index_source``); then, per mode, after a
warm-up, each iteration sends the next man-pages query twice, in alternating order:

- ``store``: ``OpenSearchKnowledgeStore.search`` (the product path: validation, query
  embedding for vector/hybrid, request building, one ``_search`` or, for hybrid, one
  ``_msearch``, parsing, fusion), through ``recording_client.RecordingClient``, which keeps
  the ``took`` of the answer;
- ``raw``: the same request body (built with the product's pure ``queries`` functions,
  the vector embedded before the clock starts) sent with the bare client.

Overhead = wall-clock time of the call minus ``took`` of the same request(s) (``took`` is
whole milliseconds; a hybrid search's two requests, the candidates and the page's text,
count both). The product's own work = wall-clock time minus the time spent inside the
client's calls (HTTP round trips, JSON, opensearch-py). Writes
``bench/results/latency.json``.
"""

from __future__ import annotations

import argparse
import time
from functools import partial
from typing import Any

from bench.common.environment import log, opensearch_node, write_result
from bench.common.metrics import summarize
from bench.common.recording_client import RecordingClient
from bench.common.stores import SCOPE, delete_index, open_store, unique_index_name
from bench.corpora.manpages import load_corpus
from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.sources.folders import LocalDirectorySource
from knowledge.ranking import fusion
from knowledge.ranking.fusion import candidate_count
from knowledge.stores.protocol import KnowledgeStore

__all__ = ["add_arguments", "main"]

MODES = (SearchMode.KEYWORD, SearchMode.VECTOR, SearchMode.HYBRID)


def _raw_request(mode: SearchMode, text: str, max_results: int) -> tuple[str, Any]:
    """What the store would send for ``text`` (method name and body)."""
    from knowledge.stores.opensearch import request_filters
    from knowledge.stores.opensearch.read import queries

    filters = request_filters.query_filters(SCOPE)
    # The sizes the store asks for: every mode fetches candidate_count
    # (room for the per-document cap) and hybrid a fixed HYBRID_CANDIDATES per side.
    single = candidate_count(max_results) if hasattr(fusion, "HYBRID_CANDIDATES") else max_results
    if mode is SearchMode.KEYWORD:
        return "search", queries.keyword_search_body(text, filters, single)
    vector = list(HashingEmbedder().embed(text).vector)
    if mode is SearchMode.VECTOR:
        return "search", queries.vector_search_body(vector, filters, single)
    size = getattr(fusion, "HYBRID_CANDIDATES", candidate_count(max_results))
    return "msearch", [
        queries.keyword_search_body(text, filters, size),
        queries.vector_search_body(vector, filters, size),
    ]


def _time_store(
    store: KnowledgeStore, probe: RecordingClient, query: SearchQuery
) -> tuple[float, float, float]:
    """Wall-clock ms of one product search, the ``took`` of its requests (summed: a
    hybrid search reads its page's text with a second request), and the ms spent inside
    the client's calls (HTTP, JSON, opensearch-py): the rest is the product's own work."""
    probe.took_sum = 0
    probe.seconds.clear()
    started = time.perf_counter()
    store.search(SCOPE, query)
    elapsed = (time.perf_counter() - started) * 1000.0
    return elapsed, float(probe.took_sum), sum(probe.seconds.values()) * 1000.0


def _time_raw(raw: Any, index: str, method: str, body: Any) -> tuple[float, float]:
    """Wall-clock ms of the same request sent with the bare client, and its ``took``."""
    search = partial(raw.msearch if method == "msearch" else raw.search, index=index)
    started = time.perf_counter()
    response = search(body=body)
    elapsed = (time.perf_counter() - started) * 1000.0
    return elapsed, float(response["took"])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=0, help="pages (0 = all, the default)")
    parser.add_argument("--iterations", type=int, default=600, help="measured searches per mode")
    parser.add_argument("--warmup", type=int, default=100, help="unmeasured searches per mode")
    parser.add_argument("--max-results", type=int, default=10)
    parser.add_argument("--label", default="", help="suffix of the result file name")


def main(args: argparse.Namespace) -> None:
    from knowledge.stores.opensearch.client import create_client
    from knowledge.stores.opensearch.read import queries
    from knowledge.stores.opensearch.settings import OpenSearchConfig

    corpus = load_corpus(args.limit or None)
    texts = [q.text for q in corpus.queries]
    modes: dict[str, Any] = {}
    with opensearch_node() as url:
        name = unique_index_name("bench-latency")
        probe = RecordingClient(create_client(OpenSearchConfig(url=url)))
        raw = create_client(OpenSearchConfig(url=url))
        store = open_store(
            "opensearch",
            HashingEmbedder(),
            workdir=None,
            node_url=url,
            index_name=name,
            client=probe,
        )
        try:
            result = index_source(
                store,
                SCOPE,
                LocalDirectorySource(corpus.docs_dir),
                IndexOptions(max_documents=100_000),
            )
            log(f"indexed {result.indexed_documents} docs / {result.indexed_chunks} chunks")
            for mode in MODES:
                samples: dict[str, list[float]] = {
                    "store_ms": [],
                    "store_took_ms": [],
                    "raw_ms": [],
                    "raw_took_ms": [],
                    "store_client_ms": [],
                }
                for i in range(args.warmup + args.iterations):
                    text = texts[i % len(texts)]
                    method, body = _raw_request(mode, text, args.max_results)
                    if method == "msearch":
                        body = queries.msearch_body(body)
                    query = SearchQuery(text, mode=mode, max_results=args.max_results)

                    if i % 2 == 0:
                        store_ms, store_took, client_ms = _time_store(store, probe, query)
                        raw_ms, raw_took = _time_raw(raw, name, method, body)
                    else:
                        raw_ms, raw_took = _time_raw(raw, name, method, body)
                        store_ms, store_took, client_ms = _time_store(store, probe, query)
                    if i >= args.warmup:
                        samples["store_ms"].append(store_ms)
                        samples["store_took_ms"].append(store_took)
                        samples["raw_ms"].append(raw_ms)
                        samples["raw_took_ms"].append(raw_took)
                        samples["store_client_ms"].append(client_ms)
                overhead = [
                    w - t
                    for w, t in zip(samples["store_ms"], samples["store_took_ms"], strict=True)
                ]
                raw_overhead = [
                    w - t for w, t in zip(samples["raw_ms"], samples["raw_took_ms"], strict=True)
                ]
                own_work = [
                    w - c
                    for w, c in zip(samples["store_ms"], samples["store_client_ms"], strict=True)
                ]
                embed_ms: list[float] = []
                if mode is not SearchMode.KEYWORD:
                    embedder = HashingEmbedder()
                    for text in texts:
                        started = time.perf_counter()
                        embedder.embed(text)
                        embed_ms.append((time.perf_counter() - started) * 1000.0)
                modes[mode.value] = {
                    "store": summarize(samples["store_ms"]),
                    "store_took": summarize(samples["store_took_ms"]),
                    "store_overhead": summarize(overhead),
                    "store_own_work": summarize(own_work),
                    "raw": summarize(samples["raw_ms"]),
                    "raw_took": summarize(samples["raw_took_ms"]),
                    "raw_overhead": summarize(raw_overhead),
                    "query_embedding": summarize(embed_ms) if embed_ms else None,
                    "request": "_msearch (keyword + knn)"
                    if mode is SearchMode.HYBRID
                    else "_search",
                }
                log(
                    f"{mode.value}: store p50 {modes[mode.value]['store']['p50']} ms, "
                    f"took p50 {modes[mode.value]['store_took']['p50']} ms, overhead p50 "
                    f"{modes[mode.value]['store_overhead']['p50']} ms"
                )
        finally:
            store.close()
            raw.close()
            delete_index(url, name)
    write_result(
        "latency" + (f"-{args.label}" if args.label else ""),
        {
            "corpus": corpus.describe(),
            "indexed": {"documents": result.indexed_documents, "chunks": result.indexed_chunks},
            "embedder": "hashing (256 dimensions)",
            "max_results": args.max_results,
            # The product's own depth: a fixed fusion.HYBRID_CANDIDATES (older code: the page's).
            "hybrid_candidates_per_side": getattr(
                fusion, "HYBRID_CANDIDATES", candidate_count(args.max_results)
            ),
            "iterations": args.iterations,
            "warmup": args.warmup,
            "modes": modes,
            "target_overhead_p50_ms": 5.0,
        },
    )
