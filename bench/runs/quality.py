"""Retrieval quality per store, embedder and mode (man-pages benchmark).

Retrieval quality (man pages; Debian FAQ questions in English and Korean), through the
production search path, next to plain baselines computed in the same run.

For each store (embedded, OpenSearch) the corpus is indexed with ``reindex_source`` from a
``LocalDirectorySource`` and every query is sent as a ``SearchQuery`` to
``store.search`` in each mode: nothing of the scoring is re-implemented here (an
evaluation measures the product, never a copy of it). A search asks for ``--chunks``
chunks (default 50); the chunks are turned into a ranking of distinct documents
(``metrics.document_ranking``), and MRR@10, Recall@5 and Recall@10 are computed on that
ranking.

Baselines (``bench/common/baselines.py``), scored the same way: plain FTS5 BM25 over whole
documents (``porter unicode61`` for English, ``trigram`` for Korean) and plain cosine
over the default chunks with the same embedder.

Writes ``bench/results/quality-<corpus>-<embedder>[-<label>].json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.common.baselines import CosineBaseline, Fts5Baseline
from bench.common.embedding_cache import CachingEmbedder
from bench.common.environment import log, node_if, write_result
from bench.common.metrics import document_ranking, evaluate, first_relevant_rank
from bench.common.stores import (
    EMBEDDERS,
    SCOPE,
    STORES,
    delete_index,
    make_embedder,
    open_store,
    refresh_index,
    unique_index_name,
)
from bench.corpora.faq import load_faq
from bench.corpora.gimp_help import load_gimp_help
from bench.corpora.gnome_apps_help import load_gnome_apps_help
from bench.corpora.gnome_help import load_gnome_help
from bench.corpora.manpages import Corpus, Query, load_corpus
from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.embedding.base import EmbeddingClient
from knowledge.ingest.pipeline import reindex_source
from knowledge.ingest.sources.folders import LocalDirectorySource
from knowledge.ranking.analysis import keyword_terms
from knowledge.stores.protocol import KnowledgeStore

__all__ = ["add_arguments", "evaluate_store", "main", "score_modes"]

MODES = (SearchMode.KEYWORD, SearchMode.VECTOR, SearchMode.HYBRID)
DEFAULT_CHUNKS = 50


def _scores(rankings: Sequence[list[str]], corpus: Corpus) -> dict[str, Any]:
    judged = [
        (ranking, query.relevant) for ranking, query in zip(rankings, corpus.queries, strict=True)
    ]
    return {
        **evaluate(judged).to_dict(),
        "ranks": [
            first_relevant_rank(r, q.relevant)
            for r, q in zip(rankings, corpus.queries, strict=True)
        ],
    }


def evaluate_baselines(corpus: Corpus, embedder: EmbeddingClient, language: str) -> dict[str, Any]:
    """The plain FTS5 and plain cosine baselines (module docstring) on ``corpus``."""
    tokenizer = "trigram" if language == "ko" else "porter unicode61"
    fts = Fts5Baseline(corpus.docs_dir, tokenizer)
    cosine = CosineBaseline(corpus.docs_dir, embedder)
    baselines = {
        "fts5": {
            "tokenizer": tokenizer,
            **_scores([fts.ranking(q.text, 10) for q in corpus.queries], corpus),
        },
        "cosine": _scores([cosine.ranking(q.text, 10) for q in corpus.queries], corpus),
    }
    if language == "ko":
        # Whitespace words with no analysis, and the product's morphemes alone: what the
        # product's Korean analysis is weighed against.
        for name, label, analyse in (
            ("fts5_unicode61", "unicode61", None),
            ("fts5_morphemes", "unicode61 over keyword_terms", keyword_terms),
        ):
            baseline = Fts5Baseline(corpus.docs_dir, "unicode61", analyse)
            baselines[name] = {
                "tokenizer": label,
                **_scores([baseline.ranking(q.text, 10) for q in corpus.queries], corpus),
            }
    for name, value in baselines.items():
        log(f"baseline {name}: MRR@10 {value['mrr_at_10']}, R@5 {value['recall_at_5']}")
    return baselines


def evaluate_store(
    store: KnowledgeStore,
    corpus: Corpus,
    chunks: int,
    after_index: Callable[[], None] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Index the corpus into ``store``, then (after ``after_index``: an OpenSearch refresh)
    score every mode; returns (index, modes)."""
    options = IndexOptions(max_documents=100_000)
    started = time.perf_counter()
    result = reindex_source(store, SCOPE, LocalDirectorySource(corpus.docs_dir), options)
    seconds = time.perf_counter() - started
    if result.errors:
        raise SystemExit(f"indexing failed for {len(result.errors)} documents: {result.errors[:3]}")
    indexing = {
        "documents": result.indexed_documents,
        "chunks": result.indexed_chunks,
        "seconds": round(seconds, 2),
        "skipped": len(result.skipped),
    }
    log(f"{store.name}: indexed {result.indexed_documents} docs / {result.indexed_chunks} chunks")
    if after_index is not None:
        after_index()
    return indexing, score_modes(store, corpus.queries, chunks)


def score_modes(
    store: KnowledgeStore,
    queries: Sequence[Query],
    chunks: int,
    key: Callable[[str], str] | None = None,
) -> dict[str, Any]:
    """Send every query in every mode the store supports; MRR@10, R@5, R@10 and ranks per
    mode. ``key`` maps a document path and a relevant path to what must match (the page a
    rendering in another format stands for); by default the path itself."""
    same: Callable[[str], str] = key or (lambda path: path)
    modes: dict[str, Any] = {}
    for mode in MODES:
        if mode not in store.supported_modes:
            continue
        ranks: list[int | None] = []
        judged: list[tuple[list[str], tuple[str, ...]]] = []
        started = time.perf_counter()
        for query in queries:
            hits = store.search(
                SCOPE, SearchQuery(query.text, mode=mode, max_results=chunks, min_score=0.0)
            )
            ranking = document_ranking(same(hit.document_path) for hit in hits)
            relevant = tuple(same(path) for path in query.relevant)
            judged.append((ranking, relevant))
            ranks.append(first_relevant_rank(ranking, relevant))
        seconds = time.perf_counter() - started
        scores = evaluate(judged).to_dict()
        log(f"{store.name} {mode.value}: {scores}")
        modes[mode.value] = {
            **scores,
            "seconds": round(seconds, 2),
            # 1-based rank of the relevant page per query (None: not in the ranking).
            "ranks": ranks,
        }
    return modes


def run(
    corpus: Corpus,
    embedder_name: str,
    stores: Sequence[str],
    chunks: int,
    options: dict[str, Any] | None = None,
    language: str = "en",
) -> dict[str, Any]:
    embedder: EmbeddingClient = make_embedder(embedder_name)
    baselines = evaluate_baselines(corpus, embedder, language)
    runs: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="kb-bench-") as workdir,
        node_if("opensearch" in stores) as url,
    ):
        for kind in stores:
            index_name = None
            if kind == "opensearch":
                # Unique: two runs on one node (started in the same second) never share an index.
                index_name = unique_index_name(f"bench-quality-{embedder_name}")
            store_options = options
            if kind == "opensearch":
                # Searched right after indexing: every chunk must be searchable by then (on
                # a loaded node the 1 s refresh interval stretched to seconds, and the
                # first queries found an index without its chunks).
                store_options = {"wait_for_refresh": True, **(options or {})}
            store = open_store(
                kind,
                embedder,
                workdir=Path(workdir),
                node_url=url,
                index_name=index_name,
                options=store_options,
            )
            try:
                refresh = None
                if url is not None and index_name is not None:
                    refresh = functools.partial(refresh_index, url, index_name)
                indexing, modes = evaluate_store(store, corpus, chunks, refresh)
            finally:
                store.close()
                if url is not None and index_name is not None:
                    delete_index(url, index_name)
            runs.append({"store": kind, "indexing": indexing, "modes": modes})
    payload: dict[str, Any] = {
        "corpus": corpus.describe(),
        "embedder": {"name": embedder.name, "dimensions": embedder.dimensions},
        "chunks_per_search": chunks,
        "chunker": "MarkdownSectionChunker(chunk_size=500, overlap=50) (the default)",
        "language": language,
        "store_options": options or {},
        "baselines": baselines,
        "runs": runs,
    }
    if isinstance(embedder, CachingEmbedder):
        payload["embedding_cache"] = {"hits": embedder.hits, "misses": embedder.misses}
        embedder.close()
    return payload


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--corpus",
        choices=(
            "manpages",
            "faq-en",
            "faq-ko",
            "gimp-help-ko",
            "gnome-help-ko",
            "gnome-apps-help-ko",
        ),
        default="manpages",
        help="man pages (--limit applies), the Debian FAQ questions in English / Korean, or "
        "the Korean GIMP, GNOME or GNOME applications' help pages (titles as queries)",
    )
    parser.add_argument("--limit", type=int, default=300, help="pages (0 = all); default 300")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a store constructor option (experiments; the label names the result file)",
    )
    parser.add_argument("--label", default="", help="suffix of the result file name")
    parser.add_argument("--embedder", choices=EMBEDDERS, default="hashing")
    parser.add_argument(
        "--stores", default=",".join(STORES), help="comma-separated: embedded,opensearch"
    )
    parser.add_argument("--chunks", type=int, default=DEFAULT_CHUNKS, help="chunks per search")


def main(args: argparse.Namespace) -> None:
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    for kind in stores:
        if kind not in STORES:
            raise SystemExit(f"unknown store {kind!r}: one of {', '.join(STORES)}")
    options: dict[str, Any] = {}
    for item in args.option:
        name, _, value = item.partition("=")
        try:
            options[name] = json.loads(value)
        except json.JSONDecodeError:
            options[name] = value
    language = "ko" if args.corpus.endswith("-ko") else "en"
    corpus: Corpus
    if args.corpus == "manpages":
        corpus = load_corpus(args.limit or None)
    elif args.corpus == "gimp-help-ko":
        corpus = load_gimp_help()
    elif args.corpus == "gnome-help-ko":
        corpus = load_gnome_help()
    elif args.corpus == "gnome-apps-help-ko":
        corpus = load_gnome_apps_help()
    else:
        corpus = load_faq(language)
    log(f"corpus {corpus.name}: {corpus.documents} documents, {len(corpus.queries)} queries")
    payload = run(corpus, args.embedder, stores, args.chunks, options, language)
    label = f"-{args.label}" if args.label else ""
    write_result(f"quality-{corpus.name}-{args.embedder}{label}", payload)
