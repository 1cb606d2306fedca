"""Hybrid fusion ablation: which normalisation, weights and depth, per embedder.

For each query the production store (embedded, default settings, ``relevance_floor=0``)
is asked for its keyword and its vector ranking (``store.search`` in keyword and in vector
mode, ``HYBRID_CANDIDATES`` chunks each, no per-document cap). Those two candidate lists
are then fused here in several ways, to choose the product's defaults:

- ``minmax``: each side min-max normalised (the product's ``fusion.fuse_weighted``);
- ``zscore``: each side standardised (mean 0, sd 1); a missing side counts as its minimum;
- ``dbsf``: distribution-based, each side scaled from mean - 3 sd to mean + 3 sd, clamped;
- ``rrf``: weighted reciprocal rank fusion, k = 60;

with keyword weights 0.3 / 0.5 / 0.7 (vector = 1 - keyword) and 20 / 40 / 100
candidates per side. MRR@10 at document level, as everywhere. This is an ablation
computed from the production rankings, not a production figure: the production hybrid
rows are those of ``bench quality``. Writes ``bench/results/fusion-sweep-<embedder>.json``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.environment import log, write_result
from bench.faq import load_faq
from bench.manpages import Corpus, load_corpus
from bench.metrics import document_ranking, evaluate, percentile
from bench.stores import EMBEDDERS, SCOPE, make_embedder, open_store
from knowledge import fusion
from knowledge.model import IndexOptions, SearchQuery
from knowledge.sources.local import LocalDirectorySource

__all__ = ["add_arguments", "main"]

Side = list[tuple[str, int, float]]
METHODS = ("minmax", "zscore", "dbsf", "rrf")
WEIGHTS = (0.3, 0.5, 0.7)
# The product's hybrid depth (getattr: `python -m bench` also runs older product code).
HYBRID_CANDIDATES: int = getattr(fusion, "HYBRID_CANDIDATES", 100)
DEPTHS = (20, 40, HYBRID_CANDIDATES)


def _minmax(side: Side) -> dict[tuple[str, int], float]:
    values = [s for *_, s in side]
    high, low = max(values), min(values)
    return {(p, c): 1.0 if high - low <= 1e-12 else (s - low) / (high - low) for p, c, s in side}


def _zscore(side: Side) -> dict[tuple[str, int], float]:
    values = [s for *_, s in side]
    mean, sd = statistics.fmean(values), statistics.pstdev(values) or 1.0
    return {(p, c): (s - mean) / sd for p, c, s in side}


def _dbsf(side: Side) -> dict[tuple[str, int], float]:
    values = [s for *_, s in side]
    mean, sd = statistics.fmean(values), statistics.pstdev(values)
    low, high = mean - 3 * sd, mean + 3 * sd
    if high - low <= 1e-12:
        return {(p, c): 1.0 for p, c, _ in side}
    return {(p, c): min(1.0, max(0.0, (s - low) / (high - low))) for p, c, s in side}


NORMALISE: dict[str, Callable[[Side], dict[tuple[str, int], float]]] = {
    "minmax": _minmax,
    "zscore": _zscore,
    "dbsf": _dbsf,
}


def fuse(keyword: Side, vector: Side, method: str, weight: float) -> list[str]:
    """The document ranking of one fusion variant (module docstring)."""
    scores: dict[tuple[str, int], float] = {}
    if method == "rrf":
        for side, w in ((keyword, weight), (vector, 1.0 - weight)):
            for rank, (p, c, _) in enumerate(side, start=1):
                scores[(p, c)] = scores.get((p, c), 0.0) + w / (60 + rank)
    else:
        a = NORMALISE[method](keyword) if keyword else {}
        b = NORMALISE[method](vector) if vector else {}
        floor_a = min(a.values(), default=0.0) if method == "zscore" else 0.0
        floor_b = min(b.values(), default=0.0) if method == "zscore" else 0.0
        for key in {*a, *b}:
            scores[key] = weight * a.get(key, floor_a) + (1.0 - weight) * b.get(key, floor_b)
    ranked = sorted(scores, key=lambda key: (-scores[key], key))
    return document_ranking(p for p, _ in ranked)


def _candidates(corpus: Corpus, embedder_name: str) -> list[tuple[tuple[str, ...], Side, Side]]:
    embedder = make_embedder(embedder_name)
    with tempfile.TemporaryDirectory(prefix="kb-sweep-") as workdir:
        store = open_store(
            "embedded", embedder, workdir=Path(workdir), options={"relevance_floor": 0.0}
        )
        try:
            store.reindex(
                SCOPE, LocalDirectorySource(corpus.docs_dir), IndexOptions(max_documents=100_000)
            )
            data = []
            for query in corpus.queries:
                sides = []
                for mode in ("keyword", "vector"):
                    hits = store.search(
                        SCOPE,
                        SearchQuery(
                            query.text,
                            mode=mode,
                            max_results=HYBRID_CANDIDATES,
                            max_chunks_per_document=HYBRID_CANDIDATES,
                        ),
                    )
                    sides.append([(h.document_path, h.chunk_index, h.score) for h in hits])
                data.append((query.relevant, sides[0], sides[1]))
        finally:
            store.close()
    return data


def run(corpora: Sequence[Corpus], embedder_name: str) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for corpus in corpora:
        data = _candidates(corpus, embedder_name)

        def mrr(rank: Callable[[Side, Side], list[str]], data: Any = data) -> float:
            return round(evaluate([(rank(k, v), rel) for rel, k, v in data]).mrr_at_10, 4)

        relevant_best = [
            max(s for p, _, s in v if p in rel)
            for rel, _, v in data
            if any(p in rel for p, _, _ in v)
        ]
        floor_with: dict[str, Any] = {}
        for floor in (0.0, *sorted({round(percentile(relevant_best, q), 3) for q in (1, 2, 5)})):
            # Vector-mode MRR@10 and the share of queries left with no result at this floor.
            kept = [(rel, [x for x in v if x[2] >= floor]) for rel, _, v in data]
            floor_with[f"{floor:.3f}"] = {
                "vector_mrr_at_10": round(
                    evaluate(
                        [(document_ranking(p for p, _, _ in v), rel) for rel, v in kept]
                    ).mrr_at_10,
                    4,
                ),
                "queries_without_results": sum(1 for _, v in kept if not v),
            }
        entry: dict[str, Any] = {
            "relevant_best_unit": {
                f"p{q}": round(percentile(relevant_best, q), 4) for q in (1, 2, 5, 50)
            },
            "floors": floor_with,
            "keyword": mrr(lambda k, v: document_ranking(p for p, _, _ in k)),
            "vector": mrr(lambda k, v: document_ranking(p for p, _, _ in v)),
            "variants": [],
        }
        for depth in DEPTHS:
            for method in METHODS:
                for weight in WEIGHTS:
                    score = mrr(lambda k, v, m=method, w=weight, d=depth: fuse(k[:d], v[:d], m, w))
                    entry["variants"].append(
                        {
                            "depth": depth,
                            "method": method,
                            "keyword_weight": weight,
                            "mrr_at_10": score,
                        }
                    )
        log(f"{corpus.name} {embedder_name}: keyword {entry['keyword']}, vector {entry['vector']}")
        results[corpus.name] = entry
    return {"embedder": embedder_name, "corpora": results}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--embedder", choices=EMBEDDERS, default="hashing")
    parser.add_argument(
        "--corpora",
        default="faq-en,faq-ko,manpages",
        help="comma-separated: faq-en,faq-ko,manpages",
    )
    parser.add_argument("--limit", type=int, default=300, help="man pages (0 = all)")


def main(args: argparse.Namespace) -> None:
    corpora = []
    for name in [c.strip() for c in args.corpora.split(",") if c.strip()]:
        corpora.append(
            load_corpus(args.limit or None) if name == "manpages" else load_faq(name[-2:])
        )
    write_result(f"fusion-sweep-{args.embedder}", run(corpora, args.embedder))
