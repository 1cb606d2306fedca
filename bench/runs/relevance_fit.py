"""Fit the absolute relevance calibration on the fit sets' raw relevance records.

Reads the raw records
``bench/data/relevance/relevance-<set>-<embedder>-<store>[-<label>].json`` (written by
``python -m bench relevance``) of the fit sets only
(``bench.corpora.unanswerable.FIT_SETS``: the report sets stay unseen) and fits, per embedder family
(``knowledge.ranking.fusion.model_family``) and mode, a logistic regression on the
results' relevance features (``explanation["relevance"]``):

- keyword mode: ``p = sigmoid(a + b * coverage + d * cjk)``;
- vector and hybrid: ``p = sigmoid(a + b * coverage + c * vector + d * cjk)``;

``cjk`` is 1 when the query's analysed terms (the record's ``search_relevance.terms``) are
in a CJK script (``knowledge.ranking.relevance.query_script``), else 0.

Positives: for every answerable question, the best (first-ranked) result of each of its
relevant documents within the top 10. Negatives: the top 5 results of every unanswerable
question of the ``--negatives`` kinds (``NEGATIVE_KINDS``). The classes are weighted to
equal total weight; a small L2 penalty (``--l2``, not on the intercept) keeps the fit
finite when they separate; Newton's method (IRLS) in numpy. A result without the features (vector
``None`` in a vector or hybrid search) is left out of the fit, as the product scores it
with the keyword coefficients; so is every result of a vector or hybrid search of a query
the embedder cannot read (``knowledge.ranking.vector_side``), which the product runs as a
keyword search. A ``default`` entry (every family pooled, coverage and script only,
``c = 0``) is fitted too: the product uses it for an embedder without its own.

Each family's and mode's intercept is then moved (``anchored``) so that its floor keeping
``--target`` of the found answers scores ``ANCHOR``: one default floor means the same in
every mode and embedder. Writes ``{"about", "families": {"<family>": {"keyword": [a, b],
"vector": [a, b, c], "hybrid": [a, b, c]}}}`` to ``--out`` (the product's file by default)
(the product's format, ``CALIBRATION_VERSION``: ``d`` under ``"cjk"``) and prints, on the
fit sets, the floor at which ``--target`` (97%) of the
answerable questions with their relevant document in the top 5 at ``min_score`` 0 keep
it in the top 5 (per family and mode, and over all of them), with the share of
unanswerable questions that floor answers with nothing. When the report sets' records
exist, the same figures are printed for them at the fit floor (held-out questions).

When ``--out`` already held a calibration, every row (set, embedder, store, mode) of the
fit and report sets at the default floor is summarized under it and under the new one
(``row_figures``: AUROC, share of written unanswerable questions answered with nothing,
share of found answers lost, MRR@10, which must not move) and written to
``bench/results/relevance-fit[-<label>].json``. ``--stores embedded,opensearch`` adds the
node's rows (the fit uses the stores' fit-set records it finds: the embedded store's).
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.environment import log, product_package, write_result
from bench.common.stores import EMBEDDERS, STORES
from bench.corpora.unanswerable import FIT_SETS, REPORT_SETS, SETS
from bench.runs.relevance import (
    DEFAULT_EMBEDDERS,
    TOP,
    auroc,
    floor_for_keep,
    read_raw,
    result_name,
    summarize_mode,
)
from knowledge.core.model import DEFAULT_MIN_SCORE, SearchMode
from knowledge.ranking.relevance import (
    CALIBRATION_VERSION,
    Calibration,
    Evidence,
    Script,
    parse_calibrations,
    query_script,
)
from knowledge.ranking.vector_side import covers

__all__ = [
    "DEFAULT_FAMILY",
    "add_arguments",
    "features",
    "fit_logistic",
    "main",
    "pooled_rows",
    "recalibrated",
    "record_script",
    "rescored",
    "row_figures",
    "samples",
]

DEFAULT_OUT = product_package() / "ranking" / "relevance_calibration.json"
"""The calibration file of the product this run measures (``knowledge.ranking.relevance``
reads it)."""
DEFAULT_FAMILY = "default"
NEGATIVE_KINDS = ("off", "domain")
"""The unanswerable questions a fit learns from: written ones (other domains, and the
corpus's domain asking what it does not cover). The held-out-answer kind ("near") is
measured, not fitted: its answer is often in a sibling document still indexed."""
ANCHOR = 0.5
"""The score each family's and mode's floor is moved to (``anchored``), so that one
``DEFAULT_MIN_SCORE`` keeps the same share of answers in every mode and embedder."""
MODES = ("keyword", "vector", "hybrid")
Payload = Mapping[str, Any]
Params = Mapping[str, Sequence[float]]
"""One family's coefficients per mode as fitted: keyword ``[a, b, d]``, vector and hybrid
``[a, b, c, d]`` (module docstring)."""


def record_script(record: Mapping[str, Any]) -> Script:
    """The script of a recorded search's query, as the product computes it: from its
    analysed (typed) terms (``relevance.QueryWeights.script``)."""
    return query_script(record["search_relevance"]["terms"]["typed"])


def features(result: Mapping[str, Any], mode: str, script: Script) -> list[float] | None:
    """``[coverage, cjk]`` (keyword) or ``[coverage, vector, cjk]`` of a result of a query
    in ``script``; ``None`` when a feature is missing."""
    relevance = result.get("relevance") or {}
    coverage = relevance.get("coverage")
    if coverage is None:
        return None
    cjk = 1.0 if script is Script.CJK else 0.0
    if mode == "keyword":
        return [float(coverage), cjk]
    vector = relevance.get("vector")
    if vector is None:
        return None
    return [float(coverage), float(vector), cjk]


def samples(
    payloads: Iterable[Payload], mode: str, negatives: Collection[str] = NEGATIVE_KINDS
) -> tuple[list[list[float]], list[int], int]:
    """``(features, labels, left out)`` of ``mode`` over ``payloads``: the module
    docstring's positives (1) and negatives (0): the top results of the unanswerable
    questions of the ``negatives`` kinds."""
    rows: list[list[float]] = []
    labels: list[int] = []
    missing = 0
    for payload in payloads:
        body = payload["modes"].get(mode)
        if body is None:
            continue
        embedder = payload["embedder"]["name"]
        for question, record in zip(payload["questions"], body["records"], strict=True):
            if mode != "keyword" and not covers(embedder, question["text"]):
                continue  # the product searched it as keyword mode (ranking.vector_side)
            results = list(record["results"])
            chosen: list[tuple[Mapping[str, Any], int]] = []
            if question["kind"] == "answerable":
                for path in question["relevant"]:
                    best = next((r for r in results if r["document_path"] == path), None)
                    if best is not None:
                        chosen.append((best, 1))
            elif question["kind"] in negatives:
                chosen.extend((r, 0) for r in results[:TOP])
            script = record_script(record)
            for result, label in chosen:
                row = features(result, mode, script)
                if row is None:
                    missing += 1
                    continue
                rows.append(row)
                labels.append(label)
    return rows, labels, missing


def fit_logistic(
    rows: Sequence[Sequence[float]], labels: Sequence[int], l2: float = 1e-3, steps: int = 100
) -> list[float]:
    """``[a, b, (c)]`` of ``sigmoid(a + x . w)`` minimising the class-balanced mean log
    loss plus ``l2 / 2 * |w|^2`` (the intercept ``a`` unpenalised), by Newton's method."""
    x = np.asarray(rows, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    positives = float(y.sum())
    negatives = float(len(y) - positives)
    if positives == 0 or negatives == 0:
        raise ValueError("both classes are needed to fit")
    weights = np.where(y == 1, len(y) / (2 * positives), len(y) / (2 * negatives)) / len(y)
    design = np.hstack([np.ones((len(y), 1)), x])
    penalty = np.full(design.shape[1], l2)
    penalty[0] = 0.0
    beta = np.zeros(design.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(design @ beta)))
        gradient = design.T @ (weights * (p - y)) + penalty * beta
        hessian = (design * (weights * p * (1.0 - p))[:, None]).T @ design + np.diag(penalty)
        hessian += 1e-9 * np.eye(design.shape[1])
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if float(np.max(np.abs(step))) < 1e-10:
            break
    return [float(v) for v in beta]


def _sigmoid(value: float) -> float:
    if value >= 0:
        return 1.0 / (1.0 + math.exp(-value))
    z = math.exp(value)
    return z / (1.0 + z)


def complete(params: Params) -> dict[str, list[float]]:
    """``params`` with every mode: a mode it lacks weighs coverage and script only, with
    the keyword coefficients (``[a, b, 0, d]``)."""
    a, b, d = params["keyword"]
    return {
        "keyword": [a, b, d],
        "vector": list(params.get("vector", [a, b, 0.0, d])),
        "hybrid": list(params.get("hybrid", [a, b, 0.0, d])),
    }


def as_calibration(family: str, params: Params) -> Calibration:
    """The product's ``relevance.Calibration`` of fitted ``params``."""
    return Calibration.from_dict(family, file_entry(params))


def file_entry(params: Params) -> dict[str, Any]:
    """``params`` as the calibration file holds a family (``relevance.Calibration``)."""
    full = complete(params)
    return {
        "keyword": full["keyword"][:2],
        "vector": full["vector"][:3],
        "hybrid": full["hybrid"][:3],
        "cjk": {mode: full[mode][-1] for mode in MODES},
    }


def calibrated_score(
    result: Mapping[str, Any], mode: str, scale: Calibration, script: Script
) -> float:
    """The score ``scale`` gives a result of a query in ``script``, computed by the
    product (``relevance.Calibration.score``). A result without features scores 0."""
    relevance = result.get("relevance") or {}
    coverage = relevance.get("coverage")
    if coverage is None:
        return 0.0
    vector = relevance.get("vector")
    evidence = Evidence(float(coverage), None if vector is None else float(vector), script)
    return scale.score(SearchMode(mode), evidence)


def rescored(record: Mapping[str, Any], mode: str, scale: Calibration) -> dict[str, Any]:
    """``record`` (of a ``mode`` search) with each result's ``score`` ``scale``'s (a
    search that returned nothing may record no terms: it has nothing to rescore)."""
    if not record["results"]:
        return {**record, "results": []}
    script = record_script(record)
    results = [{**r, "score": calibrated_score(r, mode, scale, script)} for r in record["results"]]
    return {**record, "results": results}


def recalibrated(
    records: Sequence[Mapping[str, Any]], mode: str, params: Params
) -> list[dict[str, Any]]:
    """``records`` with each result's ``score`` replaced by the calibration's."""
    scale = as_calibration("fit", params)
    return [rescored(record, mode, scale) for record in records]


def row_figures(
    payloads: Sequence[Payload], calibrations: Mapping[str, Calibration] | None
) -> list[dict[str, Any]]:
    """Every row (set, embedder, store, mode) of ``payloads`` at ``DEFAULT_MIN_SCORE``, each
    result scored by its family's calibration in ``calibrations`` (else ``default``'s;
    ``None``: the recorded score): the AUROC of the best score against the written (off
    and domain) unanswerable questions, the share of those answered with nothing
    (``empty``), the share of found answers lost at the floor and MRR@10."""
    rows = []
    for payload in payloads:
        name = payload["set"]["name"]
        for mode in MODES:
            body = payload["modes"].get(mode)
            if body is None:
                continue
            records = body["records"]
            if calibrations is not None:
                family = payload["embedder"]["family"]
                scale = calibrations.get(family) or calibrations[DEFAULT_FAMILY]
                records = [rescored(record, mode, scale) for record in records]
            summary = summarize_mode(payload["questions"], records, DEFAULT_MIN_SCORE)
            rows.append(
                {
                    "set": name,
                    "role": "report" if name in REPORT_SETS else "fit",
                    "embedder": payload["embedder"]["key"],
                    "store": payload["store"],
                    "mode": mode,
                    "auroc": summary["auroc"]["best_score"]["written"],
                    "empty": summary["abstained"]["written"],
                    "lost": summary["lost"],
                    "mrr_at_10": summary["mrr_at_10"],
                }
            )
    return rows


def pooled_rows(rows: Sequence[Mapping[str, Any]], role: str) -> dict[str, Any]:
    """The ``role`` (fit or report) rows of ``row_figures`` in a few numbers; a row is on
    target with at least 80% of the written unanswerable questions answered with nothing
    and at most 5% of the found answers lost."""
    chosen = [r for r in rows if r["role"] == role]
    if not chosen:
        return {"rows": 0}
    return {
        "rows": len(chosen),
        "min_auroc": round(min(r["auroc"] for r in chosen), 4),
        "mean_empty": round(math.fsum(r["empty"] for r in chosen) / len(chosen), 4),
        "mean_lost": round(math.fsum(r["lost"] for r in chosen) / len(chosen), 4),
        "max_lost": round(max(r["lost"] for r in chosen), 4),
        "min_empty": round(min(r["empty"] for r in chosen), 4),
        "rows_on_target": sum(1 for r in chosen if r["empty"] >= 0.8 and r["lost"] <= 0.05),
    }


def _load(
    sets: Sequence[str], embedders: Sequence[str], stores: Sequence[str], label: str
) -> list[Payload]:
    payloads: list[Payload] = []
    for name in sets:
        for embedder in embedders:
            for store in stores:
                payload = read_raw(result_name(name, embedder, store, label))
                if payload is not None:
                    payloads.append(payload)
    return payloads


def _pooled(
    payloads: Sequence[Payload],
    modes: Sequence[str],
    params: Mapping[str, Params] | None,
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """Questions and records of ``modes`` over ``payloads`` (a question once per mode),
    rescored with each payload's family's calibration in ``params`` (``None``: the
    recorded score)."""
    questions: list[Mapping[str, Any]] = []
    records: list[Mapping[str, Any]] = []
    for payload in payloads:
        for mode in modes:
            body = payload["modes"].get(mode)
            if body is None:
                continue
            family = payload["embedder"]["family"]
            for question, record in zip(payload["questions"], body["records"], strict=True):
                rescored = record
                if params is not None:
                    chosen = params.get(family) or params[DEFAULT_FAMILY]
                    (rescored,) = recalibrated([record], mode, chosen)
                questions.append(question)
                records.append(rescored)
    return questions, records


def _figures(
    payloads: Sequence[Payload],
    modes: Sequence[str],
    params: Mapping[str, Params] | None,
    floor: float | None,
    target: float,
) -> dict[str, Any]:
    """The floor for ``target`` (or the given ``floor``) and what it does."""
    questions, records = _pooled(payloads, modes, params)
    if not questions:
        return {}
    found_floor = floor_for_keep(questions, records, target)
    if floor is None:
        floor = 0.0 if found_floor is None else found_floor[0]
    summary = summarize_mode(questions, records, floor)
    return {
        "floor": round(floor, 4),
        "floor_for_target": None if found_floor is None else round(found_floor[0], 4),
        "auroc": summary["auroc"]["score"]["all"],
        "auroc_near": summary["auroc"]["score"]["near"],
        "auroc_off": summary["auroc"]["score"]["off"],
        "abstained": summary["abstained"]["all"],
        "abstained_near": summary["abstained"]["near"],
        "abstained_off": summary["abstained"]["off"],
        "kept_of_found": summary["kept_of_found"],
        "lost": summary["lost"],
    }


def _line(name: str, figures: Mapping[str, Any]) -> str:
    if not figures:
        return f"  {name:<44} (no records)"
    return (
        f"  {name:<44} floor {figures['floor']:.3f}  AUROC {figures['auroc']} "
        f"(near {figures['auroc_near']}, off {figures['auroc_off']})  "
        f"abstain {figures['abstained']} (near {figures['abstained_near']}, "
        f"off {figures['abstained_off']})  kept {figures['kept_of_found']}  "
        f"lost {figures['lost']}"
    )


def _logit(p: float) -> float:
    p = min(1.0 - 1e-9, max(1e-9, p))
    return math.log(p / (1.0 - p))


def anchored(
    params: list[float],
    group: Sequence[Payload],
    mode: str,
    target: float,
    *,
    coverage_only: bool = False,
) -> list[float]:
    """``params`` with the intercept moved so that the floor keeping ``target`` of the
    found answers of ``group`` in ``mode`` scores ``ANCHOR`` (the slopes are the fit's).
    ``params`` are ``[a, b, d]`` in keyword mode or ``coverage_only``, else
    ``[a, b, c, d]``."""
    keyword = [params[0], params[1], params[-1]]
    if mode == "keyword":
        trial: dict[str, Sequence[float]] = {"keyword": keyword}
    elif coverage_only:
        trial = {"keyword": keyword, mode: [params[0], params[1], 0.0, params[-1]]}
    else:
        trial = {"keyword": keyword, mode: params}
    questions: list[Mapping[str, Any]] = []
    records: list[Mapping[str, Any]] = []
    for payload in group:
        body = payload["modes"].get(mode)
        if body is None:
            continue
        embedder = payload["embedder"]["name"]
        for question, record in zip(payload["questions"], body["records"], strict=True):
            if mode == "keyword" or covers(embedder, question["text"]):
                questions.append(question)
                records.extend(recalibrated([record], mode, trial))
    found = floor_for_keep(questions, records, target)
    if found is None or found[0] <= 0.0:
        return params
    shift = _logit(ANCHOR) - _logit(found[0])
    return [params[0] + shift, *params[1:]]


def fit(
    payloads: Sequence[Payload],
    l2: float,
    target: float = 0.97,
    negatives: Collection[str] = NEGATIVE_KINDS,
) -> dict[str, dict[str, list[float]]]:
    """The calibration per family (and ``default``) over the fit ``payloads``, each
    family's and mode's intercept ``anchored`` at its ``target`` floor."""
    by_family: dict[str, list[Payload]] = defaultdict(list)
    for payload in payloads:
        by_family[payload["embedder"]["family"]].append(payload)
    calibration: dict[str, dict[str, list[float]]] = {}
    for family, group in sorted(by_family.items()):
        fitted: dict[str, list[float]] = {}
        for mode in MODES:
            rows, labels, missing = samples(group, mode, negatives)
            if not rows or len(set(labels)) < 2:
                log(f"{family} {mode}: no features to fit ({missing} results without them)")
                continue
            fitted[mode] = anchored(fit_logistic(rows, labels, l2), group, mode, target)
            p = [_sigmoid(fitted[mode][0] + float(np.dot(fitted[mode][1:], r))) for r in rows]
            result_auroc = auroc(
                [v for v, y in zip(p, labels, strict=True) if y == 1],
                [v for v, y in zip(p, labels, strict=True) if y == 0],
            )
            print(
                f"{family:<58} {mode:<8} {_params(fitted[mode])}  "
                f"positives {sum(labels)}, negatives {len(labels) - sum(labels)}, "
                f"left out {missing}; result AUROC {result_auroc:.3f}"
            )
        if fitted:
            calibration[family] = fitted
    pooled: dict[str, list[float]] = {}
    for mode in MODES:
        rows, labels, _ = samples(payloads, mode, negatives)
        if not rows or len(set(labels)) < 2:
            continue
        a, b, d = anchored(
            fit_logistic([[r[0], r[-1]] for r in rows], labels, l2),
            payloads,
            mode,
            target,
            coverage_only=True,
        )
        pooled[mode] = [a, b, d] if mode == "keyword" else [a, b, 0.0, d]
        print(f"{DEFAULT_FAMILY:<58} {mode:<8} {_params(pooled[mode])}  (coverage and script only)")
    if pooled:
        calibration[DEFAULT_FAMILY] = pooled
        # Keyword mode sees no vector: one calibration for every family, fitted pooled.
        for fitted in calibration.values():
            fitted["keyword"] = list(pooled["keyword"])
    return calibration


def _calibration_json(calibration: Mapping[str, Params], about: str) -> str:
    """The calibration as the product reads it (``{"about", "version", "families"}``), one
    line per family and mode (``file_entry``; a family without a mode's fit gets its
    keyword coefficients there)."""
    families = []
    for family, params in calibration.items():
        entry = file_entry(params)
        lines = [
            f"      {json.dumps(mode)}: {json.dumps([round(v, 6) for v in entry[mode]])}"
            for mode in MODES
        ]
        shifts = {mode: round(d, 6) for mode, d in entry["cjk"].items()}
        lines.append(f'      "cjk": {json.dumps(shifts)}')
        families.append(f"    {json.dumps(family)}: {{\n" + ",\n".join(lines) + "\n    }")
    return (
        f'{{\n  "about": {json.dumps(about)},\n  "version": {CALIBRATION_VERSION},\n'
        '  "families": {\n' + ",\n".join(families) + "\n  }\n}\n"
    )


def _compare(
    payloads: Sequence[Payload],
    before: Mapping[str, Calibration],
    after: Mapping[str, Calibration],
    args: argparse.Namespace,
) -> None:
    """Every row at the default floor under the calibration ``--out`` held (``before``)
    and the one just fitted (``after``), printed and written to
    ``bench/results/relevance-fit[-<label>].json``. MRR@10 is the ranking's: it must not
    move."""
    rows = {"before": row_figures(payloads, before), "after": row_figures(payloads, after)}
    print("\nevery row at the default floor, before -> after (report rows first)")
    for old, new in sorted(
        zip(rows["before"], rows["after"], strict=True),
        key=lambda pair: (
            pair[0]["role"] != "report",
            pair[0]["set"],
            pair[0]["embedder"],
            pair[0]["store"],
        ),
    ):
        if old["mrr_at_10"] != new["mrr_at_10"]:
            raise SystemExit(f"MRR@10 moved in {old}: the ranking must not depend on the scale")
        print(
            f"  {old['role']:<7}{old['set']:<20}{old['embedder']:<13}{old['store']:<11}"
            f"{old['mode']:<8}"
            f"AUROC {old['auroc']:.3f} -> {new['auroc']:.3f}  "
            f"empty {old['empty']:.3f} -> {new['empty']:.3f}  "
            f"lost {old['lost']:.3f} -> {new['lost']:.3f}"
        )
    stores = sorted({row["store"] for row in rows["before"]})
    summary = {
        store: {
            role: {
                when: pooled_rows([r for r in figures if r["store"] == store], role)
                for when, figures in rows.items()
            }
            for role in ("fit", "report")
        }
        for store in stores
    }
    for store, roles in summary.items():
        for role, figures in roles.items():
            print(
                f"{store} {role} rows: before {figures['before']}\n"
                f"{'':<10}after  {figures['after']}"
            )
    write_result(
        "relevance-fit" + (f"-{args.label}" if args.label else ""),
        {
            "fit_sets": list(FIT_SETS),
            "report_sets": list(REPORT_SETS),
            "stores": stores,
            "floor": DEFAULT_MIN_SCORE,
            "calibration_before": {f: c.to_dict() for f, c in before.items()},
            "calibration_after": {f: c.to_dict() for f, c in after.items()},
            "summary": summary,
            "rows_before": rows["before"],
            "rows_after": rows["after"],
        },
    )


def _params(values: Sequence[float]) -> str:
    return "[" + ", ".join(f"{v:+.4f}" for v in values) + "]"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--embedders", default=",".join(DEFAULT_EMBEDDERS), help="comma-separated embedders"
    )
    parser.add_argument("--stores", default="embedded", help="comma-separated stores")
    parser.add_argument("--label", default="", help="suffix of the relevance result files")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="calibration JSON")
    parser.add_argument("--l2", type=float, default=1e-3, help="L2 penalty (not on a)")
    parser.add_argument(
        "--negatives",
        default=",".join(NEGATIVE_KINDS),
        help="comma-separated kinds of unanswerable questions to fit on (off, domain, near)",
    )
    parser.add_argument(
        "--target",
        type=float,
        default=0.97,
        help="share of answerable questions (found in the top 5) the floor must keep",
    )


def main(args: argparse.Namespace) -> None:
    embedders = [e for e in args.embedders.split(",") if e]
    stores = [s for s in args.stores.split(",") if s]
    for name in embedders:
        if name not in EMBEDDERS:
            raise SystemExit(f"unknown embedder {name!r}: one of {', '.join(EMBEDDERS)}")
    for name in stores:
        if name not in STORES:
            raise SystemExit(f"unknown store {name!r}: one of {', '.join(STORES)}")
    assert set(FIT_SETS).isdisjoint(REPORT_SETS)
    assert set(FIT_SETS) | set(REPORT_SETS) <= set(SETS)
    fit_payloads = _load(FIT_SETS, embedders, stores, args.label)
    report_payloads = _load(REPORT_SETS, embedders, stores, args.label)
    if not fit_payloads:
        raise SystemExit(
            "no relevance records of the fit sets: run `python -m bench relevance` first"
        )
    log(f"fitting on {len(fit_payloads)} result files of {', '.join(FIT_SETS)}")
    negatives = [k for k in args.negatives.split(",") if k]
    calibration = fit(fit_payloads, args.l2, args.target, negatives)
    if not calibration:
        raise SystemExit(
            "no result carries explanation['relevance'] features: the product has not "
            "landed them, or the records predate it"
        )
    previous = (
        parse_calibrations(args.out.read_text(encoding="utf-8")) if args.out.is_file() else None
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    about = (
        "Absolute relevance calibration (knowledge.ranking.relevance), written by "
        f"`python -m bench relevance-fit` on the sets {', '.join(FIT_SETS)} "
        f"({', '.join(embedders)}; negatives: {', '.join(negatives)}): per embedder family, "
        "sigmoid(a + b*coverage + d*cjk) in keyword mode, sigmoid(a + b*coverage + c*vector "
        "+ d*cjk) in vector and hybrid (cjk: 1 when the query's terms are in a CJK script, "
        'the d of each mode under "cjk"); each intercept moved so that the floor keeping '
        f"{args.target:.0%} of the found answers scores {ANCHOR}."
    )
    text = _calibration_json(calibration, about)
    args.out.write_text(text, encoding="utf-8")
    log(f"wrote {args.out}")
    if previous is not None:
        _compare(fit_payloads + report_payloads, previous, parse_calibrations(text), args)

    by_family: dict[str, list[Payload]] = defaultdict(list)
    for payload in fit_payloads:
        by_family[payload["embedder"]["family"]].append(payload)
    target = args.target
    for label, params in (("recorded score", None), ("fitted calibration", calibration)):
        print(f"\nfit sets, {label}: floor keeping {target:.0%} of the found answers in the top 5")
        floors: dict[str, float] = {}
        for mode in MODES:
            for family, group in sorted(by_family.items()):
                print(_line(f"{family} {mode}", _figures(group, [mode], params, None, target)))
            overall = _figures(fit_payloads, [mode], params, None, target)
            print(_line(f"(all families) {mode}", overall))
            if overall:
                floors[mode] = overall["floor"]
        overall = _figures(fit_payloads, MODES, params, None, target)
        print(_line("(all families, all modes: one floor)", overall))
        if overall:
            floors["all"] = overall["floor"]
        if report_payloads:
            print(f"report sets, {label}, at the fit floors (held-out questions):")
            for mode in MODES:
                figures = _figures(report_payloads, [mode], params, floors.get(mode), target)
                print(_line(f"(all families) {mode}", figures))
            figures = _figures(report_payloads, MODES, params, floors.get("all"), target)
            print(_line("(all families, all modes: one floor)", figures))
