"""Node index bytes per chunk and keyword p50 on the Korean sets (and FAQ en).

What the keyword analysis costs on the node: index bytes per chunk and keyword latency.

Indexes each Korean set (and the English FAQ) into a fresh keyword-only index on the
node (no vector field, so the bytes are the text's: ``_source`` and the keyword
fields), refreshes and force-merges it to one segment, and reads ``_stats`` (primary
store bytes) over the number of chunks. Then, after a warm-up pass, sends every query
``--passes`` times in keyword mode through ``OpenSearchKnowledgeStore.search`` and
reports the wall-clock p50 / p90 (ms). Run it on two checkouts against one node
(``KB_OPENSEARCH_URL``) to compare analyses: the figures are only comparable within one
run on one machine. Writes ``bench/results/korean-cost[-<label>].json``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench.common.environment import log, opensearch_node, write_result
from bench.common.metrics import percentile
from bench.common.stores import SCOPE, delete_index, open_store, unique_index_name
from bench.corpora.faq import load_faq
from bench.corpora.gimp_help import load_gimp_help
from bench.corpora.manpages import Corpus
from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.ingest.pipeline import reindex_source
from knowledge.ingest.sources.folders import LocalDirectorySource
from knowledge.ranking.analysis import ANALYSIS

__all__ = ["add_arguments", "main"]


def _stats(url: str, index: str) -> tuple[int, int]:
    from opensearchpy import OpenSearch

    client = OpenSearch(hosts=[url], timeout=300)
    try:
        client.indices.refresh(index=index)
        client.indices.forcemerge(index=index, max_num_segments=1)
        stats = client.indices.stats(index=index, metric="store,docs")
        primaries = stats["indices"][index]["primaries"]
        return int(primaries["store"]["size_in_bytes"]), int(primaries["docs"]["count"])
    finally:
        client.close()


def _measure(url: str, corpus: Corpus, passes: int) -> dict[str, Any]:
    index = unique_index_name("bench-korean-cost")
    store = open_store("opensearch", None, workdir=None, node_url=url, index_name=index)
    try:
        result = reindex_source(
            store, SCOPE, LocalDirectorySource(corpus.docs_dir), IndexOptions(max_documents=100_000)
        )
        size, records = _stats(url, index)
        queries = [q.text for q in corpus.queries]
        for text in queries:  # warm-up
            store.search(SCOPE, SearchQuery(text, mode=SearchMode.KEYWORD, max_results=10))
        times: list[float] = []
        for _ in range(passes):
            for text in queries:
                started = time.perf_counter()
                store.search(SCOPE, SearchQuery(text, mode=SearchMode.KEYWORD, max_results=10))
                times.append((time.perf_counter() - started) * 1000)
    finally:
        store.close()
        delete_index(url, index)
    chunks = result.indexed_chunks
    entry = {
        "chunks": chunks,
        "records": records,  # chunks + one commit record per document
        "store_bytes": size,
        "bytes_per_chunk": round(size / chunks, 1),
        "searches": len(times),
        "keyword_p50_ms": round(percentile(times, 50), 2),
        "keyword_p90_ms": round(percentile(times, 90), 2),
    }
    log(f"{corpus.name}: {entry}")
    return entry


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--passes", type=int, default=3, help="timed passes over the queries")
    parser.add_argument("--label", default="", help="suffix of the result file name")


def main(args: argparse.Namespace) -> None:
    corpora = [load_gimp_help(), load_faq("ko"), load_faq("en")]
    with opensearch_node() as url:
        results = {corpus.name: _measure(url, corpus, args.passes) for corpus in corpora}
    label = f"-{args.label}" if args.label else ""
    write_result(f"korean-cost{label}", {"analysis": ANALYSIS, "corpora": results})
