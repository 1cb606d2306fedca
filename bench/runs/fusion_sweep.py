"""Hybrid fusion ablation: normalisation, weights, depth per embedder.

Hybrid fusion ablation: which normalisation, weights and depth, per embedder.

For each query the production store (embedded, default settings, ``relevance_floor=0``;
or with ``--store opensearch`` the OpenSearch store, levers only, its floor applied)
is asked for its keyword and its vector ranking (``store.search`` in keyword and in vector
mode, ``HYBRID_CANDIDATES`` chunks each, no per-document cap). Those two candidate lists
are then fused here in several ways, to choose the product's defaults:

- ``minmax``: each side min-max normalised (the product's ``fusion.fuse_weighted``);
- ``zscore``: each side standardised (mean 0, sd 1); a missing side counts as its minimum;
- ``dbsf``: distribution-based, each side scaled from mean - 3 sd to mean + 3 sd, clamped;
- ``rrf``: weighted reciprocal rank fusion, k = 60;

with keyword weights 0.3 / 0.5 / 0.7 (vector = 1 - keyword) and 20 / 40 / 100
candidates per side. MRR@10 at document level, as everywhere.

Levers (``levers``), at the product's depth, weights and relevance floor, each computed
with the product's own ``fusion.fuse_weighted``:

- ``fixed``: fixed weights (``by_confidence=False``, the product's earlier formula);
- ``confidence-N``: each weight scaled by ``fusion.side_confidence(side, rank=N)``,
  N = 5, 10 (the product's ``CONFIDENCE_RANK``), 20;
- ``doc-max-L`` / ``doc-mix-L``: document-level evidence, a chunk's per-side normalised
  score raised to ``max(own, L * best of its document on that side)``, or mixed as
  ``(1 - L) * own + L * best of its document``, then fused with fixed weights; with
  ``+conf`` on top of ``confidence-10``;
- ``weight-W``: fixed keyword weight W (vector 1 - W), for the oracle below.

Single-part levers (``round5_levers``, ``bench/common/fusion_levers.py``): one part of the
product's formula changed at a time (presence credit for a side's candidates, the confidence's
shape, agreement between the sides, document-level confidence, vector depth), each with
its MRR@10 and the number of queries it moves up and down against the product.

And two upper bounds: ``oracle_weight``, each query fused with the fixed weight (0, 0.1,
..., 1) that ranks its relevant document best (no single rule can do better with these
two candidate lists and min-max weighting), and ``best_side``, each query taking the
better of the keyword and the vector ranking. This is an ablation computed from the
production rankings, not a production figure: the production hybrid rows are those of
``bench quality``. Writes ``bench/results/fusion-sweep-<embedder>.json``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.common.environment import log, opensearch_node, write_result
from bench.common.fusion_levers import compare_levers
from bench.common.metrics import document_ranking, evaluate, percentile, reciprocal_rank
from bench.common.stores import (
    EMBEDDERS,
    SCOPE,
    delete_index,
    make_embedder,
    open_store,
    unique_index_name,
)
from bench.corpora.faq import load_faq
from bench.corpora.gimp_help import load_gimp_help
from bench.corpora.manpages import Corpus, load_corpus
from knowledge.core.model import IndexOptions, SearchQuery
from knowledge.ingest.pipeline import reindex_source
from knowledge.ingest.sources.folders import LocalDirectorySource
from knowledge.ranking import fusion

__all__ = ["add_arguments", "main"]

Side = list[tuple[str, int, float]]
METHODS = ("minmax", "zscore", "dbsf", "rrf")
WEIGHTS = (0.3, 0.5, 0.7)
# The product's hybrid depth (getattr: `python -m bench` also runs older product code).
HYBRID_CANDIDATES: int = getattr(fusion, "HYBRID_CANDIDATES", 100)
DEPTHS = (20, 40, HYBRID_CANDIDATES)
ORACLE_WEIGHTS = tuple(i / 10 for i in range(11))
Key = tuple[str, int]


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


def _document_evidence(
    side: dict[Key, float], keys: set[Key], weight: float, how: str
) -> dict[Key, float]:
    """Every key's side score with its document's best on that side (module docstring)."""
    best: dict[str, float] = {}
    for (path, _), score in side.items():
        best[path] = max(best.get(path, 0.0), score)
    out = {}
    for key in keys:
        own, document = side.get(key, 0.0), best.get(key[0], 0.0)
        out[key] = (
            max(own, weight * document)
            if how == "max"
            else ((1.0 - weight) * own + weight * document)
        )
    return out


def _with_document_evidence(
    keyword: Side, vector: Side, weights: tuple[float, float], lift: float, how: str, conf: bool
) -> list[str]:
    """Document-level evidence variant: normalise, lift, fuse (module docstring)."""
    kw = {(p, c): s for p, c, s in keyword}
    vec = {(p, c): s for p, c, s in vector}
    kw_weight, vec_weight = weights
    if conf:
        kw_weight *= fusion.side_confidence(kw)
        vec_weight *= fusion.side_confidence(vec)
    a, b = fusion.min_max(kw), fusion.min_max(vec)
    keys = {*a, *b}
    a = _document_evidence(a, keys, lift, how)
    b = _document_evidence(b, keys, lift, how)
    scores = {key: kw_weight * a[key] + vec_weight * b[key] for key in keys}
    ranked = sorted(scores, key=lambda key: (-scores[key], key))
    return document_ranking(p for p, _ in ranked)


def _product(
    keyword: Side, vector: Side, weights: tuple[float, float], *, conf: bool = True, rank: int = 10
) -> list[str]:
    """The product's fusion (``fusion.fuse_weighted``), optionally at another confidence rank."""
    kw = {(p, c): s for p, c, s in keyword}
    vec = {(p, c): s for p, c, s in vector}
    if conf and rank != fusion.CONFIDENCE_RANK:
        scaled = (
            weights[0] * fusion.side_confidence(kw, rank),
            weights[1] * fusion.side_confidence(vec, rank),
        )
        weights = scaled if sum(scaled) > 0 else weights
        conf = False
    fused = fusion.fuse_weighted(kw, vec, *weights, by_confidence=conf)
    return document_ranking(item.key[0] for item in fused)


Query = tuple[tuple[str, ...], Side, Side]


def _levers(data: list[Query], texts: list[str], embedder_name: str) -> dict[str, Any]:
    """The levers and upper bounds of the module docstring, at the product's defaults."""
    floor = fusion.relevance_floor(embedder_name)
    floored = [(rel, k, [x for x in v if x[2] >= floor]) for rel, k, v in data]
    weights = [fusion.hybrid_weights(embedder_name)] * len(texts)

    def mrr(rank: Callable[[Side, Side, tuple[float, float]], list[str]]) -> float:
        judged = [(rank(k, v, w), rel) for (rel, k, v), w in zip(floored, weights, strict=True)]
        return round(evaluate(judged).mrr_at_10, 4)

    levers: dict[str, float] = {"fixed": mrr(lambda k, v, w: _product(k, v, w, conf=False))}
    for rank in (5, 10, 20):
        levers[f"confidence-{rank}"] = mrr(lambda k, v, w, r=rank: _product(k, v, w, rank=r))
    for how, lift, conf in (
        ("max", 0.5, False),
        ("max", 1.0, False),
        ("mix", 0.5, False),
        ("max", 0.5, True),
    ):
        name = f"doc-{how}-{lift}" + ("+conf" if conf else "")
        levers[name] = mrr(
            lambda k, v, w, h=how, x=lift, c=conf: _with_document_evidence(k, v, w, x, h, c)
        )
    per_weight = {
        weight: [
            reciprocal_rank(_product(k, v, (weight, 1.0 - weight), conf=False), rel)
            for rel, k, v in floored
        ]
        for weight in ORACLE_WEIGHTS
    }
    for weight, ranks in per_weight.items():
        levers[f"weight-{weight:.1f}"] = round(statistics.fmean(ranks), 4)
    oracle = statistics.fmean(
        max(ranks[i] for ranks in per_weight.values()) for i in range(len(floored))
    )
    best_side = statistics.fmean(
        max(
            reciprocal_rank(document_ranking(p for p, _, _ in k), rel),
            reciprocal_rank(document_ranking(p for p, _, _ in v), rel),
        )
        for rel, k, v in floored
    )
    round5 = compare_levers(
        [
            (rel, {(p, c): s for p, c, s in k}, {(p, c): s for p, c, s in v}, w)
            for (rel, k, v), w in zip(floored, weights, strict=True)
        ]
    )
    return {
        "floor": floor,
        "levers": levers,
        "round5_levers": round5,
        "oracle_weight": round(oracle, 4),
        "best_side": round(best_side, 4),
        "relevant_in_candidates": round(
            statistics.fmean(
                1.0 if any(p in rel for p, _, _ in (*k, *v)) else 0.0 for rel, k, v in floored
            ),
            4,
        ),
    }


def _candidates(
    corpus: Corpus, embedder_name: str, node_url: str | None = None
) -> tuple[list[Query], str]:
    """Every query's (relevant, keyword side, vector side), and the embedder's product name:
    from the embedded store (no floor), or from OpenSearch at ``node_url`` (its vector
    side comes with the embedder's floor applied, the store has no switch for it)."""
    embedder = make_embedder(embedder_name)
    index_name = unique_index_name("bench-sweep")
    with tempfile.TemporaryDirectory(prefix="kb-sweep-") as workdir:
        if node_url is None:
            store = open_store(
                "embedded", embedder, workdir=Path(workdir), options={"relevance_floor": 0.0}
            )
        else:
            store = open_store(
                "opensearch",
                embedder,
                workdir=None,
                node_url=node_url,
                index_name=index_name,
                options={"wait_for_refresh": True},  # searched right after indexing
            )
        try:
            reindex_source(
                store,
                SCOPE,
                LocalDirectorySource(corpus.docs_dir),
                IndexOptions(max_documents=100_000),
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
                            min_score=0.0,
                        ),
                    )
                    sides.append([(h.document_path, h.chunk_index, h.rank_score) for h in hits])
                data.append((query.relevant, sides[0], sides[1]))
        finally:
            store.close()
            if node_url is not None:
                delete_index(node_url, index_name)
    return data, embedder.name


def run(
    corpora: Sequence[Corpus], embedder_name: str, node_url: str | None = None
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for corpus in corpora:
        data, product_name = _candidates(corpus, embedder_name, node_url)
        if node_url is not None:
            # OpenSearch: the levers only (its vector side is floored already).
            results[corpus.name] = {
                "keyword": _side_mrr(data, 1),
                "vector": _side_mrr(data, 2),
                **_levers(data, [query.text for query in corpus.queries], product_name),
            }
            log(f"{corpus.name} {embedder_name} opensearch: {results[corpus.name]['levers']}")
            continue

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
            **_levers(data, [query.text for query in corpus.queries], product_name),
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
    return {
        "embedder": embedder_name,
        "store": "embedded" if node_url is None else "opensearch",
        "corpora": results,
    }


def _side_mrr(data: list[Query], side: int) -> float:
    judged = [(document_ranking(item[0] for item in query[side]), query[0]) for query in data]
    return round(evaluate(judged).mrr_at_10, 4)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--embedder", choices=EMBEDDERS, default="hashing")
    parser.add_argument(
        "--corpora",
        default="faq-en,faq-ko,manpages",
        help="comma-separated: faq-en,faq-ko,manpages,gimp-help-ko",
    )
    parser.add_argument("--limit", type=int, default=300, help="man pages (0 = all)")
    parser.add_argument(
        "--store",
        choices=("embedded", "opensearch"),
        default="embedded",
        help="where the candidate lists come from (opensearch: the levers only)",
    )
    parser.add_argument("--label", default="", help="suffix of the result file name")


def main(args: argparse.Namespace) -> None:
    corpora = []
    for name in [c.strip() for c in args.corpora.split(",") if c.strip()]:
        if name == "manpages":
            corpora.append(load_corpus(args.limit or None))
        elif name == "gimp-help-ko":
            corpora.append(load_gimp_help())
        else:
            corpora.append(load_faq(name[-2:]))
    label = f"-{args.label}" if args.label else ""
    if args.store == "embedded":
        write_result(f"fusion-sweep-{args.embedder}{label}", run(corpora, args.embedder))
        return
    with opensearch_node() as url:
        result = run(corpora, args.embedder, url)
    write_result(f"fusion-sweep-{args.embedder}-opensearch{label}", result)
