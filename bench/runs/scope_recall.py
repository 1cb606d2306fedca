"""Vector recall@10 by scope size in a 253k-chunk index; ef_search, own index.

Vector recall@10 by scope size in one big shared index, and the levers against it.

The issue's shape: a 53,000-chunk scope in a 253,000-chunk shared index. One index on
the real node is written by the product (``index_source`` into ``OpenSearchKnowledgeStore``, hashing
embedder, the synthetic corpus of ``bench/runs/scale.py``) with **probed scopes** of the sizes
``--sizes`` (default 1k, 2.5k, 4k, 5k, 8k, 15k, 50k chunks) and log-normal **filler**
scopes up to ``--chunks`` in all. The probed scopes grow in five steps between the
fillers' (the index is written over time, not one scope after another); nothing is
force-merged (segments as a live index has them; their count is recorded).

For each probed scope, ``--queries`` queries (six words of one of its sections), and
for each query, interleaved (the same noise on every variant):

- exact: the scope's top 10 by brute force (``script_score`` with the k-NN plugin's
  ``knn_score`` over every chunk of the scope), the truth, with its latency;
- the product's knn request (``queries.vector_search_body``, ``k`` as the store asks
  for 10 results, filters inside the knn clause) with each ``--variants`` entry as
  ``ef_search``: an int (fixed; 200 is today's default), ``rule:T:N`` (the size rule
  with threshold ``T`` and ratio ``N``: ``scope_size.ef_search_for`` with those
  values) or ``auto`` (what the product sends, from the scope's chunk count read from the
  index as the store reads it: the exact body where ``scope_size.exact_for`` says so,
  else the knn query with ``ef_search_for``'s value).

Each variant: recall@10 against exact (mean and minimum), p50/p95 of the request (client
side, after an untimed call of the same body).

``--own-index`` sizes: those probed scopes are also copied (``_reindex``, same mapping)
into an index of their own and measured the same way: what ``IndexPerAgent`` gives an
agent with one context (the scope is the whole index, the filter keeps everything).

``nice -n 10 .venv/bin/python -m bench scope-recall`` (full size) writes
``bench/results/scope-recall.json``; ``python -m bench report`` renders it (9.2).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from opensearchpy import OpenSearch

from bench.common.environment import log, opensearch_node, write_result
from bench.runs.scale import (
    OPTIONS,
    Corpus,
    CorpusSource,
    chunks_per_document,
    exact_body,
    index_facts,
    scope_of,
    summary,
    timed_ms,
)
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import index_source
from knowledge.ranking.fusion import candidate_count
from knowledge.stores.opensearch import OpenSearchConfig, OpenSearchKnowledgeStore, request_filters
from knowledge.stores.opensearch.read import queries
from knowledge.stores.opensearch.read.scope_size import (
    ef_search_for,
    exact_for,
    parse_chunk_total,
    scope_chunks_body,
)
from knowledge.stores.opensearch.settings import DEFAULT_EF_SEARCH

__all__ = ["add_arguments", "main", "sent_ef"]

GROW = (0.2, 0.4, 0.6, 0.8, 1.0)
TOP = 10


def sent_ef(variant: str, chunks: int | None) -> int:
    """The ``ef_search`` a variant sends for a scope of ``chunks`` chunks."""
    if variant == "auto":
        return ef_search_for(DEFAULT_EF_SEARCH, chunks)
    if variant.startswith("rule:"):
        _, threshold, ratio = variant.split(":")
        return ef_search_for(
            DEFAULT_EF_SEARCH,
            chunks,
            large_scope_chunks=int(threshold),
            chunks_per_ef=float(ratio),
        )
    return int(variant)


def _ids(response: dict[str, Any]) -> list[str]:
    return [str(h["_id"]) for h in response["hits"]["hits"][:TOP]]


def measure_scope(
    client: Any,
    index: str,
    embedder: HashingEmbedder,
    corpus: Corpus,
    scope_id: int,
    documents: int,
    variants: Sequence[str],
    count: int,
    seed: int,
) -> dict[str, Any]:
    scope = scope_of(scope_id)
    rng = np.random.default_rng((seed, scope_id))
    texts = [corpus.query(scope_id, int(rng.integers(0, documents)), rng) for _ in range(count)]
    chunks = parse_chunk_total(
        client.search(index=index, body=scope_chunks_body(scope, cross_context=False))
    )
    k = max(2 * TOP, candidate_count(TOP))
    filters = request_filters.query_filters(scope)
    sent = {v: sent_ef(v, chunks) for v in variants}
    exact = {v: v == "auto" and exact_for(chunks) for v in variants}
    exact_ms: list[float] = []
    hits: dict[str, list[float]] = {v: [] for v in variants}
    knn_ms: dict[str, list[float]] = {v: [] for v in variants}
    for number, text in enumerate(texts):
        vector = embedder.embed(text).vector
        body = exact_body(vector, scope, TOP)
        client.search(index=index, body=body)  # untimed: the same body once before
        ms, response = timed_ms(lambda b=body: client.search(index=index, body=b))
        exact_ms.append(ms)
        truth = set(_ids(response))
        shift = number % len(variants)  # rotate the order: no variant always runs first
        for variant in [*variants[shift:], *variants[:shift]]:
            body = queries.vector_search_body(
                vector, filters, k, ef_search=sent[variant], exact=exact[variant]
            )
            client.search(index=index, body=body)
            ms, response = timed_ms(lambda b=body: client.search(index=index, body=b))
            knn_ms[variant].append(ms)
            if truth:
                hits[variant].append(len(set(_ids(response)) & truth) / len(truth))
    return {
        "chunks": chunks,
        "exact_ms": summary(exact_ms),
        "variants": {
            v: {
                "ef_search": sent[v],
                "exact": exact[v],
                "recall_at_10": statistics.fmean(hits[v]) if hits[v] else float("nan"),
                "min_recall": min(hits[v]) if hits[v] else float("nan"),
                "knn_ms": summary(knn_ms[v]),
            }
            for v in variants
        },
    }


def filler_sizes(chunks: int, scopes: int, per_document: float, seed: int) -> list[int]:
    """Documents per filler scope: log-normal, ``chunks`` in all."""
    rng = np.random.default_rng(seed)
    raw = rng.lognormal(mean=0.0, sigma=1.0, size=scopes)
    total_docs = max(scopes, round(chunks / per_document))
    return [int(s) for s in np.maximum(1, np.round(raw * total_docs / raw.sum()))]


def copy_scope(client: Any, shared: str, target: str, scope_id: int) -> dict[str, Any]:
    """The scope's records into an index of its own with the shared index's mapping."""
    source = client.indices.get(index=shared)[shared]
    settings = source["settings"]["index"]
    client.indices.delete(index=target, ignore=[404])
    client.indices.create(
        index=target,
        body={
            "settings": {
                "index": {
                    "knn": True,
                    "number_of_shards": 1,
                    "number_of_replicas": 0,
                    **({"analysis": settings["analysis"]} if "analysis" in settings else {}),
                }
            },
            "mappings": source["mappings"],
        },
    )
    started = time.perf_counter()
    client.reindex(
        body={
            "source": {
                "index": shared,
                "query": {"bool": {"filter": request_filters.scope_filters(scope_of(scope_id))}},
            },
            "dest": {"index": target},
        },
        request_timeout=3600,
        refresh=True,
    )
    return {"seconds": time.perf_counter() - started, **index_facts(client, target)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chunks", type=int, default=253_000, help="chunks in the index")
    parser.add_argument(
        "--sizes", default="1000,2500,4000,5000,8000,15000,50000", help="probed scopes' chunks"
    )
    parser.add_argument("--fillers", type=int, default=1_000, help="filler scopes")
    parser.add_argument("--queries", type=int, default=40, help="queries per probed scope")
    parser.add_argument(
        "--variants",
        default="200,400,800,1600,3200,auto",
        help="ef_search per request: ints, rule:THRESHOLD:RATIO, auto (the product's)",
    )
    parser.add_argument(
        "--own-index", default="5000,50000", help="probed sizes also copied to their own index"
    )
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--name", default="scope-recall", help="bench/results/<name>.json")


def main(args: argparse.Namespace) -> None:
    sizes = [int(x) for x in str(args.sizes).split(",") if x]
    variants = [x for x in str(args.variants).split(",") if x]
    own = {int(x) for x in str(args.own_index).split(",") if x}
    corpus = Corpus(args.seed)
    per_document = chunks_per_document(corpus)
    probed_docs = [max(1, round(size / per_document)) for size in sizes]
    rest = max(0, args.chunks - sum(sizes))
    fillers = filler_sizes(rest, args.fillers, per_document, args.seed)
    first_filler = len(sizes)
    embedder = HashingEmbedder()
    result: dict[str, Any] = {
        "chunks_planned": args.chunks,
        "chunks_per_document": per_document,
        "sizes_planned": sizes,
        "fillers": len(fillers),
        "queries": args.queries,
        "variants": variants,
        "store_ef_search": DEFAULT_EF_SEARCH,
    }
    with opensearch_node() as url:
        index = f"bench-scope-recall-{int(time.time())}"
        config = OpenSearchConfig(
            url=url,
            index_name=index,
            number_of_shards=1,
            number_of_replicas=0,
            timeout=300.0,
            search_timeout=60.0,
        )
        result["hnsw"] = {"m": config.hnsw_m, "ef_construction": config.hnsw_ef_construction}
        store = OpenSearchKnowledgeStore(config, embedder=embedder)
        client = OpenSearch(url, timeout=600)
        copies: list[str] = []
        try:
            started = time.perf_counter()
            written = 0
            placed = 0
            for fraction in GROW:
                while placed < round(fraction * len(fillers)):
                    scope_id = first_filler + placed
                    outcome = index_source(
                        store,
                        scope_of(scope_id),
                        CorpusSource(corpus, scope_id, fillers[placed]),
                        OPTIONS,
                    )
                    written += outcome.indexed_chunks
                    placed += 1
                for scope_id, documents in enumerate(probed_docs):
                    outcome = index_source(
                        store,
                        scope_of(scope_id),
                        CorpusSource(corpus, scope_id, max(1, round(fraction * documents))),
                        OPTIONS,
                    )
                    written += outcome.indexed_chunks
                log(f"written {written} chunks ({time.perf_counter() - started:.0f} s)")
            seconds = time.perf_counter() - started
            client.indices.refresh(index=index)
            result["indexing"] = {
                "chunks": written,
                "seconds": seconds,
                "chunks_per_s": written / seconds,
                **index_facts(client, index),
            }
            log(f"index: {result['indexing']}")
            scopes: list[dict[str, Any]] = []
            for scope_id, (size, documents) in enumerate(zip(sizes, probed_docs, strict=True)):
                measured = measure_scope(
                    client,
                    index,
                    embedder,
                    corpus,
                    scope_id,
                    documents,
                    variants,
                    args.queries,
                    args.seed,
                )
                scopes.append({"layout": "shared", "planned": size, **measured})
                log(f"shared {size}: {scopes[-1]}")
            for scope_id, (size, documents) in enumerate(zip(sizes, probed_docs, strict=True)):
                if size not in own:
                    continue
                target = f"{index}-own-{scope_id}"
                copies.append(target)
                facts = copy_scope(client, index, target, scope_id)
                measured = measure_scope(
                    client,
                    target,
                    embedder,
                    corpus,
                    scope_id,
                    documents,
                    variants,
                    args.queries,
                    args.seed,
                )
                scopes.append({"layout": "own", "planned": size, "index": facts, **measured})
                log(f"own {size}: {scopes[-1]}")
            result["scopes"] = scopes
        finally:
            for name in [index, *copies]:
                client.indices.delete(index=name, ignore=[404])
            store.close()
    write_result(args.name, result)
