"""Embedded store: search p50 with origin/lesson weights and explain vs inert.

What origin weights, lesson cards and ``explain`` cost a search, embedded store.

The man-pages corpus (``--limit`` pages, hashing embedder) is indexed into one embedded
store; then, per mode, every query is searched in four variants, taking turns in one run
(so all see the same machine):

- ``inert``: weights that change nothing and read nothing (the baseline: neutral origins,
  lessons weighted 1.0, no extras: ``RankWeights.inert``);
- ``default``: what a search gets unless told (``NEUTRAL``: lessons at 1.4 and up to 2
  extras, so each candidate's origin and kind are read, one SQL query of two JSON keys);
- ``weighted``: ``shared`` 0.5, ``manual`` 1.5 (the same read, plus the weighing);
- ``explain``: ``default`` inside ``explain.explaining()`` (the trace recorded).

Writes ``bench/results/ranking-cost.json``: p50 per variant and mode and its ratio to
``inert``; the MRR@10 of ``default`` and ``inert`` (the same, when no document is a lesson).
Run: ``.venv/bin/python -m bench ranking-cost --limit 300``.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common.environment import log, write_result
from bench.common.metrics import document_ranking, evaluate, summarize
from bench.common.stores import SCOPE, make_embedder
from bench.corpora.manpages import load_corpus
from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.sources.folders import LocalDirectorySource
from knowledge.ranking import explain
from knowledge.ranking.origin_weights import NEUTRAL, RankWeights
from knowledge.stores.embedded import EmbeddedKnowledgeStore

__all__ = ["add_arguments", "main"]

VARIANTS: dict[str, tuple[RankWeights, bool]] = {
    "inert": (RankWeights(lesson=1.0, extra_lessons=0), False),
    "default": (NEUTRAL, False),
    "weighted": (RankWeights({"shared": 0.5, "manual": 1.5}), False),
    "explain": (NEUTRAL, True),
}
MODES = (SearchMode.KEYWORD, SearchMode.HYBRID)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=300, help="pages (0 = all); default 300")
    parser.add_argument("--max-results", type=int, default=10)


def main(args: argparse.Namespace) -> None:
    corpus = load_corpus(args.limit or None)
    log(f"corpus {corpus.name}: {corpus.documents} documents, {len(corpus.queries)} queries")
    with tempfile.TemporaryDirectory() as tmp:
        store = EmbeddedKnowledgeStore(Path(tmp) / "kb.db", embedder=make_embedder("hashing"))
        try:
            index_source(store, SCOPE, LocalDirectorySource(corpus.docs_dir), IndexOptions())
            payload: dict[str, Any] = {"corpus": corpus.name, "modes": {}}
            for mode in MODES:
                payload["modes"][mode.value] = _measure(store, corpus, mode, args.max_results)
                log(f"{mode.value}: {payload['modes'][mode.value]['ratio_p50']}")
        finally:
            store.close()
    write_result("ranking-cost", payload)


def _measure(
    store: EmbeddedKnowledgeStore, corpus: Any, mode: SearchMode, max_results: int
) -> dict[str, Any]:
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    rankings: dict[str, list[list[str]]] = {name: [] for name in VARIANTS}
    for turn, item in enumerate(corpus.queries):
        names = list(VARIANTS)
        shift = turn % len(names)  # each variant first in turn
        for name in names[shift:] + names[:shift]:
            weights, traced = VARIANTS[name]
            query = SearchQuery(item.text, mode=mode, max_results=max_results, weights=weights)
            recording = explain.explaining() if traced else contextlib.nullcontext()
            with recording:
                started = time.perf_counter()
                results = store.search(SCOPE, query)
                times[name].append((time.perf_counter() - started) * 1000.0)
            rankings[name].append(document_ranking(r.document_path for r in results))
    p50 = {name: summarize(values)["p50"] for name, values in times.items()}
    return {
        "p50_ms": p50,
        "ratio_p50": {name: round(p50[name] / p50["inert"], 3) for name in p50},
        "mrr_at_10": {
            name: round(
                evaluate(
                    (ranking, q.relevant)
                    for ranking, q in zip(rankings[name], corpus.queries, strict=True)
                ).mrr_at_10,
                4,
            )
            for name in ("inert", "default")
        },
    }
