"""`group_by` document on the node: the product's grouping vs field collapse.

``group_by: "document"`` on the OpenSearch node: the product's grouping against ``collapse``.

The product groups the fused candidate list client-side (``knowledge.ranking.grouping``) and, so
that every page sees the same candidates, always reads its mode's deepest depth. The
alternative is the engine's field collapse on ``document_id``. On the man pages (many
chunks per page), per query and mode, in one run on one index:

- ``chunks``: the chunk-level search of ``max_results`` (the baseline);
- ``grouped``: the product's grouped search of ``max_results`` documents;
- ``collapse``: keyword: one BM25 ``_search`` with ``collapse`` on ``document_id``;
  hybrid: both sides collapsed in one ``_msearch`` (best chunk per document per side,
  ``HYBRID_CANDIDATES`` documents each), fused per document with the product's formula.

Reported: wall-time p50 of each (ratio against ``chunks``), and how often collapse's
first ``max_results`` documents are the product's, in the same order (``same_order``)
and as a set (``overlap`` mean). Collapse returns no count of matching chunks; the
product's ``matching_chunks`` has none to compare with. Writes
``bench/results/grouping.json``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench.common.environment import log, opensearch_node, write_result
from bench.common.metrics import summarize
from bench.common.stores import SCOPE, delete_index, open_store, unique_index_name
from bench.corpora.manpages import load_corpus
from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.sources.folders import LocalDirectorySource
from knowledge.ranking.fusion import (
    HYBRID_CANDIDATES,
    above_floor,
    fuse_weighted,
    hybrid_weights,
    relevance_floor,
)

__all__ = ["add_arguments", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=300, help="pages (0 = all)")
    parser.add_argument("--iterations", type=int, default=300, help="measured queries")
    parser.add_argument("--warmup", type=int, default=30, help="unmeasured queries")
    parser.add_argument("--max-results", type=int, default=10)


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0


def _collapsed(response: dict[str, Any]) -> dict[str, float]:
    """Best raw score per document of a collapsed answer (document path -> score)."""
    return {
        str(hit["_source"]["document_path"]): float(hit.get("_score") or 0.0)
        for hit in response.get("hits", {}).get("hits", [])
    }


def main(args: argparse.Namespace) -> None:
    from knowledge.stores.opensearch.client import create_client
    from knowledge.stores.opensearch.read import queries
    from knowledge.stores.opensearch.settings import OpenSearchConfig

    corpus = load_corpus(args.limit or None)
    texts = [q.text for q in corpus.queries]
    embedder = HashingEmbedder()
    filters = queries.query_filters(SCOPE)
    collapse = {"field": "document_id"}
    source = {"includes": ["document_path"]}
    weights = hybrid_weights(embedder.name, None, None)
    floor = relevance_floor(embedder.name)
    ways = ("chunks", "grouped", "collapse")
    modes = (SearchMode.KEYWORD, SearchMode.HYBRID)
    samples: dict[str, dict[str, list[float]]] = {m.value: {w: [] for w in ways} for m in modes}
    same = {m.value: 0 for m in modes}
    overlap: dict[str, list[float]] = {m.value: [] for m in modes}
    k = args.max_results
    with opensearch_node() as url:
        name = unique_index_name("bench-grouping")
        raw = create_client(OpenSearchConfig(url=url))
        store = open_store("opensearch", embedder, workdir=None, node_url=url, index_name=name)
        try:
            result = store.index(
                SCOPE, LocalDirectorySource(corpus.docs_dir), IndexOptions(max_documents=100_000)
            )
            log(f"indexed {result.indexed_documents} docs / {result.indexed_chunks} chunks")
            for i in range(args.warmup + args.iterations):
                text = texts[i % len(texts)]
                keep = i >= args.warmup
                for mode in modes:
                    timings: dict[str, float] = {}
                    order = ways if i % 2 == 0 else ways[::-1]
                    for way in order:
                        started = time.perf_counter()
                        if way == "chunks":
                            store.search(
                                SCOPE, SearchQuery(text, mode=mode, max_results=k, min_score=0.0)
                            )
                        elif way == "grouped":
                            grouped = store.search(
                                SCOPE,
                                SearchQuery(
                                    text,
                                    mode=mode,
                                    max_results=k,
                                    group_by="document",
                                    min_score=0.0,
                                ),
                            )
                        elif mode is SearchMode.KEYWORD:
                            body = queries.keyword_search_body(text, filters, k)
                            body.update(collapse=collapse, _source=source)
                            collapsed = list(_collapsed(raw.search(index=name, body=body)))
                        else:
                            vector = embedder.embed(text).vector
                            bodies = [
                                queries.keyword_search_body(text, filters, HYBRID_CANDIDATES),
                                queries.vector_search_body(vector, filters, HYBRID_CANDIDATES),
                            ]
                            for body in bodies:
                                body.update(collapse=collapse, _source=source)
                            answer = raw.msearch(index=name, body=queries.msearch_body(bodies))
                            sides = [_collapsed(r) for r in answer["responses"]]
                            # The engine's cosine score is already (1 + cos) / 2.
                            vector_side = above_floor(sides[1], floor)
                            fused = fuse_weighted(sides[0], vector_side, *weights)
                            collapsed = [item.key for item in fused[:k]]
                        timings[way] = _ms(started)
                    if keep:
                        for way, value in timings.items():
                            samples[mode.value][way].append(value)
                        product = [r.document_path for r in grouped]
                        same[mode.value] += product == collapsed[: len(product)]
                        if product:
                            common = len(set(product) & set(collapsed[:k]))
                            overlap[mode.value].append(common / len(product))
        finally:
            store.close()
            delete_index(url, name)
    summary: dict[str, Any] = {}
    for mode in modes:
        rows = {way: summarize(values) for way, values in samples[mode.value].items()}
        base = rows["chunks"]["p50"]
        summary[mode.value] = {
            "p50_ms": {way: rows[way]["p50"] for way in ways},
            "p50_ratio_to_chunks": {way: round(rows[way]["p50"] / base, 2) for way in ways},
            "same_order": round(same[mode.value] / args.iterations, 3),
            "overlap": round(sum(overlap[mode.value]) / max(1, len(overlap[mode.value])), 3),
        }
        log(f"{mode.value}: {summary[mode.value]}")
    write_result(
        "grouping",
        {
            "indexed": {"documents": result.indexed_documents, "chunks": result.indexed_chunks},
            "iterations": args.iterations,
            "max_results": k,
            "modes": summary,
        },
    )
