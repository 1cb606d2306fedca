"""Coverage and calibration variants of the absolute relevance, measured on the records.

Reads the raw records of ``python -m bench relevance`` (every abstention set, the
``--embedders``, the embedded store), changes each result's relevance features as a
variant would have made them, refits the calibration on the fit sets as ``bench
relevance-fit`` does (a class-balanced logistic regression per embedder family and mode,
keyword mode pooled; each intercept moved so that the floor keeping 97% of the found
answers scores 0.5) and summarizes every row (set, embedder, mode) at the default floor
as ``bench relevance`` does. The ranking is the recorded one, so MRR@10 cannot move: only
the scale and the floor do. Nothing is searched again, and the product is not changed.

The variants (``VARIANTS``):

- ``recorded``: the features as recorded, refitted (the shipped calibration: a check that
  the refit here is ``relevance-fit``'s);
- ``absent-<share>``: a query term the scope never uses weighs ``<share>`` of its weight
  in coverage (such a term is matched by nothing, so only coverage's denominator moves,
  which the records give exactly);
- ``compound``: a Korean compound and the parts MeCab-ko also emits for it ("편집기" with
  "편집" and "기", adjacent in the query's terms) count as one query position weighing
  the most of them, credited whole when a chunk holds the compound and in proportion to
  its parts' weight otherwise. The terms a result holds are recovered as the subset of the
  query's scope-known terms whose weights sum to its coverage (every result's was found);
- ``short-ko``: Korean terms of one syllable ("하", "보", "기", "도": verb stems, suffixes
  and counters MeCab-ko keeps as content morphemes) left out of coverage, held or not
  (the held terms recovered as for ``compound``);
- ``length``: ``log(1 + the query's terms)`` as one more calibration feature in every
  mode (at the same coverage, a longer query's evidence is the less likely by chance);
- ``script``: whether the query's terms are in a CJK script, as one more calibration
  feature (the product's ``relevance.query_script``, shipped: the two families of
  analysis make coverage differently, morphemes with compound parts or bigrams against
  stems); ``recorded`` is then the calibration without it.

``python -m bench relevance-variants`` writes ``bench/results/relevance-variants.json``:
per variant the calibration and every row's AUROC of the best score against the written
unanswerable questions, the share of those answered with nothing, the share of found
answers lost at the floor and MRR@10, with the fit sets and the report sets named.
"""

from __future__ import annotations

import argparse
import itertools
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench.common.environment import log, write_result
from bench.corpora.unanswerable import FIT_SETS, REPORT_SETS
from bench.runs.relevance import (
    DEFAULT_EMBEDDERS,
    TOP,
    floor_for_keep,
    read_raw,
    result_name,
    summarize_mode,
)
from bench.runs.relevance_fit import ANCHOR, fit_logistic, pooled_rows
from knowledge.core.model import DEFAULT_MIN_SCORE
from knowledge.ranking.relevance import Script, idf, query_script
from knowledge.ranking.vector_side import covers

__all__ = ["VARIANTS", "add_arguments", "main"]

Payload = Mapping[str, Any]
Record = Mapping[str, Any]
MODES = ("keyword", "vector", "hybrid")
TARGET = 0.97
_WEIGHT_DIGITS = 2e-3
"""How far apart two sums of recorded (rounded) term weights may be and still be equal."""


def _typed(record: Record) -> tuple[dict[str, float], float]:
    """The query's typed term weights and the weight of a term the scope never uses."""
    terms = (record.get("search_relevance") or {}).get("terms") or {}
    typed = {str(t): float(w) for t, w in (terms.get("typed") or {}).items()}
    return typed, idf(0, int(terms.get("chunks") or 0))


def _recoverage(payload: Payload, coverage: Callable[[Record, float], float | None]) -> Payload:
    """``payload`` with each result's coverage replaced by ``coverage(record, recorded)``
    (``None``: unchanged)."""
    modes: dict[str, Any] = {}
    for mode, body in payload["modes"].items():
        records = []
        for record in body["records"]:
            results = []
            for result in record["results"]:
                relevance = dict(result.get("relevance") or {})
                recorded = relevance.get("coverage")
                changed = None if recorded is None else coverage(record, float(recorded))
                if changed is not None:
                    relevance["coverage"] = min(1.0, changed)
                results.append({**result, "relevance": relevance})
            records.append({**record, "results": results})
        modes[mode] = {**body, "records": records}
    return {**payload, "modes": modes}


def absent_share(share: float) -> Callable[[Payload], Payload]:
    """The ``absent-<share>`` variant (module docstring)."""

    def coverage(record: Record, recorded: float) -> float | None:
        typed, absent = _typed(record)
        total = math.fsum(typed.values())
        lighter = math.fsum(w * (share if abs(w - absent) < 1e-3 else 1.0) for w in typed.values())
        return None if lighter <= 0 else recorded * total / lighter

    return lambda payload: _recoverage(payload, coverage)


def _compounds(terms: Sequence[str]) -> list[tuple[int, list[int]]]:
    """``(compound, parts)`` indexes: a term that is the concatenation of the two or more
    terms right before it."""
    found = []
    for i, term in enumerate(terms):
        for j in range(i - 2, -1, -1):
            if "".join(terms[j:i]) == term:
                found.append((i, list(range(j, i))))
                break
    return found


def _held(weights: Sequence[float], known: Sequence[int], matched: float) -> set[int] | None:
    """The smallest subset of ``known`` whose weights sum to ``matched`` (``None``: none
    does, or too many terms to try)."""
    if len(known) > 18:
        return None
    for size in range(len(known) + 1):
        for subset in itertools.combinations(known, size):
            if abs(math.fsum(weights[i] for i in subset) - matched) < _WEIGHT_DIGITS * (size + 1):
                return set(subset)
    return None


def _compound_coverage(record: Record, recorded: float) -> float | None:
    typed, absent = _typed(record)
    names = list(typed)
    weights = [typed[t] for t in names]
    groups = _compounds(names)
    if not groups:
        return None
    known = [i for i, w in enumerate(weights) if abs(w - absent) >= 1e-3]
    held = _held(weights, known, recorded * math.fsum(weights))
    if held is None:
        return None
    grouped = {k for c, parts in groups for k in (c, *parts)}
    singles = [i for i in range(len(weights)) if i not in grouped]
    total = math.fsum(weights[i] for i in singles)
    credit = math.fsum(weights[i] for i in singles if i in held)
    for compound, parts in groups:
        weight = max(weights[k] for k in (compound, *parts))
        total += weight
        if compound in held:
            credit += weight
        else:
            part_weight = math.fsum(weights[k] for k in parts)
            credit += weight * math.fsum(weights[k] for k in parts if k in held) / part_weight
    return credit / total if total > 0 else None


def _is_short_korean(term: str) -> bool:
    return len(term) == 1 and "\uac00" <= term <= "\ud7a3"


def _short_korean_coverage(record: Record, recorded: float) -> float | None:
    typed, absent = _typed(record)
    names = list(typed)
    weights = [typed[t] for t in names]
    short = {i for i, t in enumerate(names) if _is_short_korean(t)}
    if not short or len(short) == len(names):
        return None
    known = [i for i, w in enumerate(weights) if abs(w - absent) >= 1e-3]
    held = _held(weights, known, recorded * math.fsum(weights))
    if held is None:
        return None
    kept = [i for i in range(len(weights)) if i not in short]
    total = math.fsum(weights[i] for i in kept)
    return math.fsum(weights[i] for i in kept if i in held) / total if total > 0 else None


def _no_length(record: Record) -> list[float]:
    return []


def _length(record: Record) -> list[float]:
    typed, _ = _typed(record)
    return [math.log1p(len(typed))]


def _cjk(record: Record) -> list[float]:
    typed, _ = _typed(record)
    return [1.0 if query_script(typed) is Script.CJK else 0.0]


Variant = tuple[Callable[[Payload], Payload], Callable[[Record], list[float]]]
VARIANTS: dict[str, Variant] = {
    "recorded": (lambda p: p, _no_length),
    "absent-0.75": (absent_share(0.75), _no_length),
    "absent-0.5": (absent_share(0.5), _no_length),
    "compound": (lambda p: _recoverage(p, _compound_coverage), _no_length),
    "short-ko": (lambda p: _recoverage(p, _short_korean_coverage), _no_length),
    "length": (lambda p: p, _length),
    "compound+length": (lambda p: _recoverage(p, _compound_coverage), _length),
    "script": (lambda p: p, _cjk),
}


def _row(result: Mapping[str, Any], mode: str, extra: Sequence[float]) -> list[float] | None:
    relevance = result.get("relevance") or {}
    coverage = relevance.get("coverage")
    if coverage is None:
        return None
    if mode == "keyword":
        return [float(coverage), *extra]
    vector = relevance.get("vector")
    return None if vector is None else [float(coverage), float(vector), *extra]


def _sigmoid(value: float) -> float:
    if value >= 0:
        return 1.0 / (1.0 + math.exp(-value))
    z = math.exp(value)
    return z / (1.0 + z)


def _logit(p: float) -> float:
    p = min(1.0 - 1e-9, max(1e-9, p))
    return math.log(p / (1.0 - p))


class _Scale:
    """One family's fitted coefficients per mode, scoring results as the product would
    (a result without vector evidence, or a query the embedder cannot read: keyword)."""

    def __init__(
        self, params: Mapping[str, Sequence[float]], extra: Callable[[Record], list[float]]
    ):
        self.params = params
        self.extra = extra

    def rescored(self, payload: Payload, mode: str) -> list[dict[str, Any]]:
        embedder = payload["embedder"]["name"]
        out = []
        for question, record in zip(
            payload["questions"], payload["modes"][mode]["records"], strict=True
        ):
            extra = self.extra(record)
            keyword_only = mode == "keyword" or not covers(embedder, question["text"])
            results = []
            for result in record["results"]:
                used = "keyword" if keyword_only else mode
                row = _row(result, used, extra)
                if row is None and used != "keyword":
                    used, row = "keyword", _row(result, "keyword", extra)
                beta = self.params.get(used)
                score = (
                    0.0
                    if row is None or beta is None
                    else _sigmoid(
                        beta[0] + math.fsum(b * x for b, x in zip(beta[1:], row, strict=True))
                    )
                )
                results.append({**result, "score": score})
            out.append({**record, "results": results})
        return out


def _samples(
    group: Sequence[Payload], mode: str, extra: Callable[[Record], list[float]]
) -> tuple[list[list[float]], list[int]]:
    """``relevance_fit.samples`` with the variant's extra features."""
    rows: list[list[float]] = []
    labels: list[int] = []
    for payload in group:
        body = payload["modes"].get(mode)
        if body is None:
            continue
        embedder = payload["embedder"]["name"]
        for question, record in zip(payload["questions"], body["records"], strict=True):
            if mode != "keyword" and not covers(embedder, question["text"]):
                continue
            results = list(record["results"])
            chosen: list[tuple[Mapping[str, Any], int]] = []
            if question["kind"] == "answerable":
                for path in question["relevant"]:
                    best = next((r for r in results if r["document_path"] == path), None)
                    if best is not None:
                        chosen.append((best, 1))
            elif question["kind"] in ("off", "domain"):
                chosen.extend((r, 0) for r in results[:TOP])
            for result, label in chosen:
                row = _row(result, mode, extra(record))
                if row is not None:
                    rows.append(row)
                    labels.append(label)
    return rows, labels


def _anchored(beta: list[float], group: Sequence[Payload], mode: str, scale: _Scale) -> list[float]:
    """``beta`` with the intercept moved so that ``group``'s 97%-keep floor scores 0.5."""
    trial = _Scale({**scale.params, mode: beta}, scale.extra)
    questions: list[Mapping[str, Any]] = []
    records: list[Mapping[str, Any]] = []
    for payload in group:
        if mode not in payload["modes"]:
            continue
        embedder = payload["embedder"]["name"]
        for question, record in zip(
            payload["questions"], trial.rescored(payload, mode), strict=True
        ):
            if mode == "keyword" or covers(embedder, question["text"]):
                questions.append(question)
                records.append(record)
    found = floor_for_keep(questions, records, TARGET)
    if found is None or found[0] <= 0.0:
        return beta
    return [beta[0] + _logit(ANCHOR) - _logit(found[0]), *beta[1:]]


def fitted(
    payloads: Sequence[Payload], extra: Callable[[Record], list[float]]
) -> dict[str, _Scale]:
    """Each family's calibration fitted on the fit sets' ``payloads`` (module docstring)."""
    rows, labels = _samples(payloads, "keyword", extra)
    keyword = _anchored(fit_logistic(rows, labels), payloads, "keyword", _Scale({}, extra))
    by_family: dict[str, list[Payload]] = defaultdict(list)
    for payload in payloads:
        by_family[payload["embedder"]["family"]].append(payload)
    scales: dict[str, _Scale] = {}
    for family, group in by_family.items():
        scale = _Scale({"keyword": keyword}, extra)
        for mode in ("vector", "hybrid"):
            rows, labels = _samples(group, mode, extra)
            if rows and len(set(labels)) == 2:
                beta = _anchored(fit_logistic(rows, labels), group, mode, scale)
                scale = _Scale({**scale.params, mode: beta}, extra)
        scales[family] = scale
    return scales


def measured(
    payloads: Mapping[tuple[str, str], Payload], variant: Variant
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The variant's calibration and every row's figures at the default floor."""
    change, extra = variant
    changed = {key: change(payload) for key, payload in payloads.items()}
    fit_payloads = [p for (name, _), p in changed.items() if name in FIT_SETS]
    scales = fitted(fit_payloads, extra)
    rows = []
    for (name, embedder), payload in sorted(changed.items()):
        scale = scales[payload["embedder"]["family"]]
        for mode in MODES:
            if mode not in payload["modes"]:
                continue
            summary = summarize_mode(
                payload["questions"], scale.rescored(payload, mode), DEFAULT_MIN_SCORE
            )
            rows.append(
                {
                    "set": name,
                    "role": "fit" if name in FIT_SETS else "report",
                    "embedder": embedder,
                    "mode": mode,
                    "auroc": summary["auroc"]["best_score"]["written"],
                    "empty": summary["abstained"]["written"],
                    "lost": summary["lost"],
                    "mrr_at_10": summary["mrr_at_10"],
                }
            )
    calibration = {
        family: {mode: [round(v, 6) for v in beta] for mode, beta in scale.params.items()}
        for family, scale in sorted(scales.items())
    }
    return calibration, rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--embedders", default=",".join(DEFAULT_EMBEDDERS), help="comma-separated embedders"
    )
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help="comma-separated variants to measure"
    )


def main(args: argparse.Namespace) -> None:
    embedders = [e for e in args.embedders.split(",") if e]
    payloads: dict[tuple[str, str], Payload] = {}
    for name in (*FIT_SETS, *REPORT_SETS):
        for embedder in embedders:
            payload = read_raw(result_name(name, embedder, "embedded", ""))
            if payload is None:
                raise SystemExit(
                    f"no relevance records of {name} with {embedder}: run "
                    "`python -m bench relevance` first"
                )
            payloads[(name, embedder)] = payload
    variants: dict[str, Any] = {}
    for name in (v for v in args.variants.split(",") if v):
        if name not in VARIANTS:
            raise SystemExit(f"unknown variant {name!r}: one of {', '.join(VARIANTS)}")
        calibration, rows = measured(payloads, VARIANTS[name])
        fit, report = pooled_rows(rows, "fit"), pooled_rows(rows, "report")
        log(f"{name}: fit {fit}; report {report}")
        variants[name] = {"calibration": calibration, "fit": fit, "report": report, "rows": rows}
    write_result(
        "relevance-variants",
        {
            "fit_sets": list(FIT_SETS),
            "report_sets": list(REPORT_SETS),
            "embedders": embedders,
            "store": "embedded",
            "floor": DEFAULT_MIN_SCORE,
            "target_keep": TARGET,
            "variants": variants,
        },
    )
