"""The page-level keyword signal's weight on every set, both stores.

The page-level keyword signal's weight (``knowledge.ranking.page_signal``), on every set.

Each corpus (four Korean help-page sets, the Debian FAQ ko and en questions, 300 man
pages; never libreoffice-help-ko, the held-out set) is indexed once per store (the
embedded store, a fresh index on the node; hashing embedder), then every query is sent
in keyword and hybrid mode through ``store.search`` by stores opened on that same file
or index with each ``page_weight`` of ``--weights`` (0 is the product without the
signal: a chunk's score alone, the ranking before it). Plain FTS5 baselines over whole
pages (unicode61 words; the product's ``keyword_terms``) are computed in the same run.
MRR@10 over the documents ranked by their best chunk, 50 chunks per search, as
``bench quality`` scores them.

    python -m bench page-signal [--corpora C,...] [--weights 0,0.5,...] [--stores S,...]
        [--label L]

Writes ``bench/results/page-signal[-L].json``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from bench.common.baselines import Fts5Baseline
from bench.common.environment import log, node_if, write_result
from bench.common.metrics import document_ranking, evaluate
from bench.common.stores import SCOPE, delete_index, make_embedder, refresh_index, unique_index_name
from bench.corpora.manpages import Corpus
from bench.runs.korean_ablation import CORPORA
from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.embedding.base import EmbeddingClient
from knowledge.ingest.pipeline import reindex_source
from knowledge.ingest.sources.folders import LocalDirectorySource
from knowledge.ranking.analysis import ANALYSIS, keyword_terms
from knowledge.ranking.page_signal import PAGE_WEIGHT
from knowledge.stores.protocol import KnowledgeStore

__all__ = ["add_arguments", "main"]

MODES = (SearchMode.KEYWORD, SearchMode.HYBRID)
CHUNKS = 50


def _score(store: KnowledgeStore, corpus: Corpus, mode: SearchMode) -> float:
    judged = []
    for query in corpus.queries:
        hits = store.search(
            SCOPE, SearchQuery(query.text, mode=mode, max_results=CHUNKS, min_score=0.0)
        )
        judged.append((document_ranking(hit.document_path for hit in hits), query.relevant))
    return round(float(evaluate(judged).to_dict()["mrr_at_10"]), 4)


def _open(
    kind: str, embedder: EmbeddingClient, where: str, weight: float, url: str | None
) -> KnowledgeStore:
    if kind == "embedded":
        from knowledge.stores.embedded import EmbeddedKnowledgeStore

        return EmbeddedKnowledgeStore(where, embedder=embedder, page_weight=weight)
    from knowledge.stores.opensearch import OpenSearchConfig, OpenSearchKnowledgeStore

    assert url is not None
    config = OpenSearchConfig(url=url, index_name=where, page_weight=weight)
    return OpenSearchKnowledgeStore(config, embedder=embedder)


def _measure(
    kind: str, corpus: Corpus, weights: list[float], workdir: Path, url: str | None
) -> dict[str, Any]:
    embedder = make_embedder("hashing")
    where = (
        str(workdir / f"{corpus.name}.db")
        if kind == "embedded"
        else unique_index_name("bench-page-signal")
    )
    writer = _open(kind, embedder, where, PAGE_WEIGHT, url)
    try:
        result = reindex_source(
            writer,
            SCOPE,
            LocalDirectorySource(corpus.docs_dir),
            IndexOptions(max_documents=100_000),
        )
        if result.errors:
            raise SystemExit(f"indexing failed: {result.errors[:3]}")
        if url is not None and kind == "opensearch":
            refresh_index(url, where)
        scores: dict[str, dict[str, float]] = {}
        for weight in weights:
            store = _open(kind, embedder, where, weight, url)
            try:
                scores[str(weight)] = {mode.value: _score(store, corpus, mode) for mode in MODES}
            finally:
                store.close()
            log(f"{kind} {corpus.name} page_weight {weight}: {scores[str(weight)]}")
    finally:
        writer.close()
        if kind == "opensearch" and url is not None:
            delete_index(url, where)
    return {"chunks": result.indexed_chunks, "documents": result.indexed_documents, **scores}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpora", default=",".join(CORPORA))
    parser.add_argument("--weights", default="0,0.25,0.5,0.75,1.0")
    parser.add_argument("--stores", default="embedded,opensearch")
    parser.add_argument("--label", default="")


def main(args: argparse.Namespace) -> None:
    corpora = {name: CORPORA[name]() for name in args.corpora.split(",")}
    weights = [float(w) for w in args.weights.split(",")]
    stores = args.stores.split(",")
    results: dict[str, Any] = {
        "analysis": ANALYSIS,
        "default_page_weight": PAGE_WEIGHT,
        "weights": weights,
        "chunks_per_search": CHUNKS,
        "baselines": {},
        "stores": {kind: {} for kind in stores},
    }
    for name, corpus in corpora.items():
        found = results["baselines"][name] = {"queries": len(corpus.queries)}
        for label, analyse in (("fts5_unicode61", None), ("fts5_morphemes", keyword_terms)):
            baseline = Fts5Baseline(corpus.docs_dir, "unicode61", analyse)
            judged = [(baseline.ranking(q.text, 10), q.relevant) for q in corpus.queries]
            found[label] = round(float(evaluate(judged).to_dict()["mrr_at_10"]), 4)
        log(f"{name} ({len(corpus.queries)} queries): {found}")
    with (
        tempfile.TemporaryDirectory(prefix="kb-page-signal-") as workdir,
        node_if("opensearch" in stores) as url,
    ):
        for kind in stores:
            for name, corpus in corpora.items():
                results["stores"][kind][name] = _measure(kind, corpus, weights, Path(workdir), url)
    label = f"-{args.label}" if args.label else ""
    write_result(f"page-signal{label}", results)
