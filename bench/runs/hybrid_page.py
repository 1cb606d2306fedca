"""Hybrid: the page read as a second request vs one-request alternatives.

Hybrid search in one request? The page read against the one-request alternatives.

A hybrid search on the node sends two requests (``stores/opensearch/search.py``): one
``_msearch`` with both sides' candidates (ids and scores, no ``_source``), then, after
fusion, a ``_search`` for the page's chunks (``queries.chunks_by_id_body``). The second
round trip is most of why hybrid's overhead over ``took`` is about twice a single mode's
(bench/REPORT.md 3). This benchmark measures, per query and in rotating order on one
index, what the ways of reading the page's text in the *same* request cost:

- ``product``: the store's hybrid search (``OpenSearchKnowledgeStore.search``), timed
  through ``recording_client.RecordingClient``: "in requests" is the time inside the
  client's calls (both round trips, JSON, opensearch-py);
- ``top-K``: the product's two candidate searches in one ``_msearch``, each with a
  ``top_hits`` aggregation of its first K hits with their result fields. The page is
  read from those when every chunk of the product's page is among them (``covered``);
  otherwise a page read follows (a ``chunks_by_id_body`` request of ``max_results`` ids,
  timed and added);
- ``sources``: both candidate lists (100 each) with their result fields in one
  ``_msearch`` (the form before REPORT 3c).

Only the requests differ between the ways, so the comparison is "time in requests" per
search (the product's fusion and cap would run the same on each), with the node's
``took`` beside it: a form that moves work into ``took`` lowers the overhead over
``took`` without making the search faster. Writes ``bench/results/hybrid-page.json``.
"""

from __future__ import annotations

import argparse
import time
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
from knowledge.ranking.fusion import HYBRID_CANDIDATES

__all__ = ["add_arguments", "main"]

_TOPS = "responses.aggregations.top.hits.hits._source"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=0, help="pages (0 = all, the default)")
    parser.add_argument("--iterations", type=int, default=400, help="measured queries")
    parser.add_argument("--warmup", type=int, default=50, help="unmeasured queries")
    parser.add_argument("--max-results", type=int, default=10)
    parser.add_argument("--tops", default="10,20,30", help="K values of the top-K way")


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0


def main(args: argparse.Namespace) -> None:
    from knowledge.stores.opensearch import request_filters
    from knowledge.stores.opensearch.client import create_client
    from knowledge.stores.opensearch.read import queries
    from knowledge.stores.opensearch.settings import OpenSearchConfig

    tops = [int(k) for k in args.tops.split(",")]
    ways = ["product", *(f"top-{k}" for k in tops), "sources"]
    corpus = load_corpus(args.limit or None)
    texts = [q.text for q in corpus.queries]
    embedder = HashingEmbedder()
    filters = request_filters.query_filters(SCOPE)
    fields = queries.chunks_by_id_body([], filters)["_source"]  # the page's result fields
    samples: dict[str, dict[str, list[float]]] = {
        way: {"requests_ms": [], "took_ms": []} for way in ways
    }
    covered = dict.fromkeys(tops, 0)
    with opensearch_node() as url:
        name = unique_index_name("bench-hybrid-page")
        probe = RecordingClient(create_client(OpenSearchConfig(url=url)))
        raw = create_client(OpenSearchConfig(url=url))
        store = open_store(
            "opensearch", embedder, workdir=None, node_url=url, index_name=name, client=probe
        )
        try:
            result = index_source(
                store,
                SCOPE,
                LocalDirectorySource(corpus.docs_dir),
                IndexOptions(max_documents=100_000),
            )
            log(f"indexed {result.indexed_documents} docs / {result.indexed_chunks} chunks")

            def candidates(text: str) -> list[dict[str, Any]]:
                vector = embedder.embed(text).vector
                return [
                    queries.keyword_search_body(text, filters, HYBRID_CANDIDATES, candidates=True),
                    queries.vector_search_body(vector, filters, HYBRID_CANDIDATES, candidates=True),
                ]

            for i in range(args.warmup + args.iterations):
                text = texts[i % len(texts)]
                keep = i >= args.warmup
                # The product first: its page says what the top-K way must cover.
                probe.took_sum = 0
                probe.seconds.clear()
                page = store.search(
                    SCOPE,
                    SearchQuery(
                        text, mode=SearchMode.HYBRID, max_results=args.max_results, min_score=0.0
                    ),
                )
                wanted = {(r.document_path, r.chunk_index) for r in page}
                timings: dict[str, tuple[float, float]] = {
                    "product": (sum(probe.seconds.values()) * 1000.0, float(probe.took_sum))
                }
                order = ways[1:] if i % 2 == 0 else ways[:0:-1]
                for way in order:
                    bodies = candidates(text)
                    if way == "sources":
                        for body in bodies:
                            body["_source"] = fields
                        started = time.perf_counter()
                        answer = raw.msearch(index=name, body=queries.msearch_body(bodies))
                        took = max(float(r["took"]) for r in answer["responses"])
                        timings[way] = (_ms(started), took)
                        continue
                    k = int(way.removeprefix("top-"))
                    for body in bodies:
                        body["aggs"] = {"top": {"top_hits": {"size": k, "_source": fields}}}
                    path = f"{queries.CANDIDATES_FILTER_PATH},{_TOPS}"
                    started = time.perf_counter()
                    answer = raw.msearch(
                        index=name, body=queries.msearch_body(bodies), filter_path=path
                    )
                    took = max(float(r["took"]) for r in answer["responses"])
                    found = {
                        (hit["_source"]["document_path"], hit["_source"]["chunk_index"])
                        for r in answer["responses"]
                        for hit in r["aggregations"]["top"]["hits"]["hits"]
                    }
                    if wanted <= found:
                        covered[k] += keep
                    else:
                        ids = [h["_id"] for h in answer["responses"][0]["hits"]["hits"]]
                        read = queries.chunks_by_id_body(ids[: args.max_results], filters)
                        page_answer = raw.search(index=name, body=read)
                        took += float(page_answer["took"])
                    timings[way] = (_ms(started), took)
                if keep:
                    for way, (requests_ms, took) in timings.items():
                        samples[way]["requests_ms"].append(requests_ms)
                        samples[way]["took_ms"].append(took)
        finally:
            store.close()
            delete_index(url, name)
    summary = {
        way: {key: summarize(values) for key, values in rows.items()}
        for way, rows in samples.items()
    }
    for way in ways:
        log(
            f"{way}: in requests p50 {summary[way]['requests_ms']['p50']} ms, "
            f"took p50 {summary[way]['took_ms']['p50']} ms"
        )
    write_result(
        "hybrid-page",
        {
            "indexed": {
                "documents": result.indexed_documents,
                "chunks": result.indexed_chunks,
            },
            "iterations": args.iterations,
            "max_results": args.max_results,
            "ways": summary,
            "covered": {str(k): covered[k] / args.iterations for k in tops},
        },
    )
