"""Korean sets: which part of the product's ranking costs it vs plain BM25.

Which part of the product's keyword ranking costs it against plain BM25 over the same
terms, on the Korean sets (a probe; the product is unchanged by it).

Plain FTS5 over ``keyword_terms`` ("FTS5 morphemes", ``bench/common/baselines.py``) ranks whole
pages by one BM25; the product ranks 500-character chunks of a page's sections, each
with its title and heading terms, and a page by its best chunk. Each row changes one of
those through public options (the pipeline's chunker, the store's ``headings_weight``)
and sends every query in keyword mode through ``store.search``, as ``bench quality``
does; the plain baselines are computed in the same run. English sets are measured too,
as a check that a change would not cost them.

The last rows are a probe of a signal the product does not have (benchmark code, not the
product's ranking): a page's own BM25 over ``keyword_terms`` of the whole page (the
"FTS5 morphemes" baseline's score, divided by the query's best) added, times ``alpha``,
to the score of the page's best chunk in the product's ranking (already divided by its
best: ``fusion.keyword_only``); pages ranked by the sum.

    python -m bench korean-ablation [--corpora gimp-help-ko,...] [--label L]

Writes ``bench/results/korean-ablation[-L].json``.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common.baselines import Fts5Baseline
from bench.common.environment import log, write_result
from bench.common.metrics import document_ranking, evaluate
from bench.common.stores import SCOPE, make_embedder
from bench.corpora.faq import load_faq
from bench.corpora.gimp_help import load_gimp_help
from bench.corpora.gnome_apps_help import load_gnome_apps_help
from bench.corpora.gnome_help import load_gnome_help
from bench.corpora.manpages import Corpus, load_corpus
from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.ingest.chunking import MarkdownSectionChunker
from knowledge.ingest.pipeline import Indexer
from knowledge.ingest.sources.folders import LocalDirectorySource
from knowledge.ranking.analysis import keyword_terms
from knowledge.stores.embedded import EmbeddedKnowledgeStore

__all__ = ["add_arguments", "main"]

CORPORA: dict[str, Callable[[], Corpus]] = {
    "gimp-help-ko": load_gimp_help,
    "gnome-help-ko": load_gnome_help,
    "gnome-apps-help-ko": load_gnome_apps_help,
    "faq-ko": lambda: load_faq("ko"),
    "faq-en": lambda: load_faq("en"),
    "manpages-300": lambda: load_corpus(300),
}

CONFIGS: dict[str, dict[str, Any]] = {
    # name: chunk size, overlap, headings weight (the product's defaults: 500, 50, 1.0)
    "product (500-character chunks, headings 1.0)": {},
    "headings left out (weight 0)": {"headings_weight": 0.0},
    "1,000-character chunks": {"chunk_size": 1000, "overlap": 100},
    "4,000-character chunks": {"chunk_size": 4000, "overlap": 100},
}


ALPHAS = (0.25, 0.5, 1.0)
"""The document-level BM25's weights in the probe rows (module docstring)."""


def _with_pages(
    corpus: Corpus, hits: list[list[tuple[str, float]]], alpha: float, pages: Any
) -> float:
    judged = []
    for query, found in zip(corpus.queries, hits, strict=True):
        best: dict[str, float] = {}
        for path, score in found:
            best.setdefault(path, score)
        page = pages.scores(query.text)
        top = max(page.values(), default=0.0) or 1.0
        total = {p: best.get(p, 0.0) + alpha * page.get(p, 0.0) / top for p in {*best, *page}}
        ranking = sorted(total, key=lambda p: (-total[p], p))[:10]
        judged.append((ranking, query.relevant))
    return round(float(evaluate(judged).to_dict()["mrr_at_10"]), 4)


def _keyword(
    corpus: Corpus, workdir: Path, config: dict[str, Any]
) -> tuple[float, list[list[tuple[str, float]]]]:
    chunker = MarkdownSectionChunker(config.get("chunk_size", 500), config.get("overlap", 50))
    embedder = make_embedder("hashing")
    store = EmbeddedKnowledgeStore(
        workdir / f"{len(list(workdir.iterdir()))}.db",
        embedder=embedder,
        headings_weight=config.get("headings_weight", 1.0),
    )
    try:
        result = Indexer(chunker, embedder).reindex(
            store,
            SCOPE,
            LocalDirectorySource(corpus.docs_dir),
            IndexOptions(max_documents=100_000),
        )
        if result.errors:
            raise SystemExit(f"indexing failed: {result.errors[:3]}")
        judged, found = [], []
        for query in corpus.queries:
            hits = store.search(
                SCOPE,
                SearchQuery(query.text, mode=SearchMode.KEYWORD, max_results=50, min_score=0.0),
            )
            judged.append((document_ranking(hit.document_path for hit in hits), query.relevant))
            found.append([(hit.document_path, hit.rank_score) for hit in hits])
    finally:
        store.close()
    return round(float(evaluate(judged).to_dict()["mrr_at_10"]), 4), found


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpora", default=",".join(CORPORA))
    parser.add_argument("--label", default="")


def main(args: argparse.Namespace) -> None:
    corpora = {name: CORPORA[name]() for name in args.corpora.split(",")}
    results: dict[str, Any] = {"baselines": {}, "configs": {}}
    for name, corpus in corpora.items():
        found = results["baselines"][name] = {}
        for label, analyse in (("fts5_unicode61", None), ("fts5_morphemes", keyword_terms)):
            baseline = Fts5Baseline(corpus.docs_dir, "unicode61", analyse)
            judged = [(baseline.ranking(q.text, 10), q.relevant) for q in corpus.queries]
            found[label] = round(float(evaluate(judged).to_dict()["mrr_at_10"]), 4)
        log(f"{name} ({len(corpus.queries)} queries): {found}")
    product_hits: dict[str, list[list[tuple[str, float]]]] = {}
    with tempfile.TemporaryDirectory(prefix="kb-ablation-") as workdir:
        for config_name, config in CONFIGS.items():
            scores = results["configs"][config_name] = {}
            for name, corpus in corpora.items():
                scores[name], hits = _keyword(corpus, Path(workdir), config)
                if not config:
                    product_hits[name] = hits
                log(f"{config_name} {name}: keyword MRR@10 {scores[name]:.3f}")
    for alpha in ALPHAS:
        row = f"probe: product + {alpha} x the page's own BM25 (not in the product)"
        scores = results["configs"][row] = {}
        for name, corpus in corpora.items():
            pages = Fts5Baseline(corpus.docs_dir, "unicode61", keyword_terms)
            scores[name] = _with_pages(corpus, product_hits[name], alpha, pages)
            log(f"{row} {name}: {scores[name]:.3f}")
    label = f"-{args.label}" if args.label else ""
    write_result(f"korean-ablation{label}", results)
