"""``python -m bench <command>``: run one benchmark (or ``all``), or write the report.

Run from the repository root with the bench venv: ``.venv-bench/bin/python -m bench ...``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

__all__ = ["main"]

COMMANDS = {
    "quality": "retrieval quality per store, embedder and mode (man-pages benchmark)",
    "fusion_sweep": "hybrid fusion ablation: normalisation, weights, depth per embedder",
    "indexing": "indexing throughput: embedded store, OpenSearch store, raw bulk",
    "latency": "search latency per mode on the real node, next to OpenSearch's took",
    "latency_ab": "search latency of an older version and this one, interleaved on one node",
    "coldstart": "import time of the Lambda handlers next to a naive handler",
    "memory": "peak RSS of indexing one large Markdown file",
    "resources": "kb serve: RSS, index file and WAL after a ~120k-chunk document comes and goes",
    "store_threads": "embedded store searches from 1 and 16 threads (no BLAS thread fights)",
    "concurrency": "kb serve --workers 1 and 2: searches/s at 1 vs 16 clients, p95 at 120k chunks",
    "formats": "format parity: the man-pages benchmark as PDF, DOCX and HTML vs Markdown",
    "pdf-fidelity": "token F1 of PDF text (pypdfium2, pypdf, product) against pdftotext",
    "pdf-throughput": "PDF pages/s per library; peak memory on a long PDF and a big XLSX",
    "embedding-pool": "concurrent embedding vs sequential against a fake remote embedder",
    "index-command": "kb index, start to exit, against a Titan-like quota (vs another version)",
    "filters": "embedded store: search filter SQL over one scope, next to no filter",
    "scale": "OpenSearch store: one index growing 25x over 1,000 scopes (HNSW, recall, bytes)",
    "scope-recall": "vector recall@10 by scope size in a 253k-chunk index; ef_search, own index",
    "bm25": "man-pages keyword MRR@10 under other BM25 k1/b on the real node (a probe)",
    "korean-analysis": "Korean keyword analysis speed: MeCab-ko morphemes vs Hangul bigrams",
    "korean-cost": "node index bytes per chunk and keyword p50 on the Korean sets (and FAQ en)",
    "korean-variants": "Korean term-stream variants on the help-page and FAQ ko sets (a probe)",
    "korean-ablation": "Korean sets: which part of the product's ranking costs it vs plain BM25",
    "page-signal": "the page-level keyword signal's weight on every set, both stores",
    "hybrid-page": "hybrid: the page read as a second request vs one-request alternatives",
    "grouping": "group_by document on the node: the product's grouping vs field collapse",
    "hashing-variants": "a probe: richer hashing embedders (stop words, stems, dimensions)",
    "rerank": "search latency with the Bedrock reranking stage (fake endpoint) vs without",
    "repo-sync": "a 5,000-file Git repository synced, then after a one-file commit",
    "repo-sync-incremental": "the 5,000-file repository: incremental vs full fetch, same run",
    "shared-library": "a granted agent's search with its libraries: one store query vs N",
    "ranking-cost": "embedded store: search p50 with origin/lesson weights and explain vs inert",
    "synonym-probe": "a probe: a scope's synonyms file on abbreviated / Korean loanword queries",
    "named-clauses": "node: hybrid/grouped p50 with the score-0 origin/lesson clauses vs none",
    "relevance": "top score: answerable vs unanswerable questions (raw per-question records)",
    "relevance-fit": "fit the absolute relevance calibration on the fit sets' relevance records",
    "keyword-scale": "embedded store: keyword p50/p95 in a ~120k-chunk scope vs plain FTS5",
    "noisy-neighbour": "kb serve: a new one-line file's latency while another agent indexes",
    "report": "write bench/REPORT.md and the plots from bench/results/*.json",
}


# Commands whose module name differs from the command.
MODULES = {
    "formats": "format_parity",
    "pdf-fidelity": "pdf_fidelity",
    "pdf-throughput": "document_throughput",
    "embedding-pool": "embedding_pool",
    "index-command": "index_command",
    "korean-analysis": "korean_analysis",
    "korean-cost": "korean_cost",
    "korean-variants": "korean_variants",
    "korean-ablation": "korean_ablation",
    "page-signal": "page_signal",
    "hybrid-page": "hybrid_page",
    "hashing-variants": "hashing_variants",
    "repo-sync": "repo_sync",
    "repo-sync-incremental": "repo_sync_incremental",
    "shared-library": "shared_library",
    "ranking-cost": "ranking_cost",
    "synonym-probe": "synonym_probe",
    "named-clauses": "named_clauses",
    "scope-recall": "scope_recall",
    "relevance-fit": "relevance_fit",
    "keyword-scale": "keyword_scale",
    "noisy-neighbour": "noisy_neighbour",
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_text in COMMANDS.items():
        module = importlib.import_module(f"bench.{MODULES.get(name, name)}")
        sub = commands.add_parser(name, help=help_text, description=module.__doc__)
        module.add_arguments(sub)
    args = parser.parse_args(argv)
    importlib.import_module(f"bench.{MODULES.get(args.command, args.command)}").main(args)


if __name__ == "__main__":
    main(sys.argv[1:])
