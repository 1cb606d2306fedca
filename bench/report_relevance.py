"""``bench/REPORT.md`` section 14: the absolute relevance score and the default floor on
answerable and unanswerable questions (``bench/relevance.py``, ``bench/relevance_fit.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.environment import read_result
from bench.relevance import DEFAULT_EMBEDDERS, result_name
from bench.report_common import Report, _met, _provenance, _table
from bench.unanswerable import FIT_SETS, REPORT_SETS

__all__ = ["relevance_section", "section_text"]

TITLE = "## 14. Knowing when it does not know: absolute scores and the default floor"
MODES = ("keyword", "vector", "hybrid")
AUROC_TARGET = 0.90
ABSTAIN_TARGET = 0.80
LOSS_TARGET = 0.05


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _rows(results: Sequence[tuple[str, str, Mapping[str, Any]]]) -> list[list[object]]:
    rows: list[list[object]] = []
    for set_name, embedder, result in results:
        for mode in MODES:
            summary = result["summary"].get(mode)
            if summary is None:
                continue
            auroc = summary["auroc"]
            abstained = summary["abstained"]
            rows.append(
                [
                    set_name,
                    embedder,
                    mode,
                    _number(auroc["best_score"]["written"]),
                    _number(auroc["score"]["written"]),
                    _number(auroc["bm25"]["written"]),
                    _number(auroc["best_score"]["near"]),
                    _share(abstained["written"]),
                    _share(abstained["near"]),
                    _share(summary["lost"]),
                    _number(summary["mrr_at_10"]),
                ]
            )
    return rows


def _load(sets: Sequence[str]) -> list[tuple[str, str, Mapping[str, Any]]]:
    found = []
    for set_name in sets:
        for embedder in DEFAULT_EMBEDDERS:
            result = read_result(result_name(set_name, embedder, "embedded", ""))
            if result is not None and "summary" in result:
                found.append((set_name, embedder, result))
    return found


def _targets(results: Sequence[tuple[str, str, Mapping[str, Any]]]) -> dict[str, int]:
    counts = {"rows": 0, "auroc": 0, "abstain": 0, "loss": 0}
    for _, _, result in results:
        for mode in MODES:
            summary = result["summary"].get(mode)
            if summary is None:
                continue
            counts["rows"] += 1
            counts["auroc"] += (summary["auroc"]["best_score"]["written"] or 0) >= AUROC_TARGET
            counts["abstain"] += (summary["abstained"]["written"] or 0) >= ABSTAIN_TARGET
            counts["loss"] += (summary["lost"] or 0) <= LOSS_TARGET
    return counts


def _pooled(results: Sequence[tuple[str, str, Mapping[str, Any]]]) -> dict[str, float]:
    """Question-weighted means over every row of ``results``."""
    weights = abstain = lost = 0.0
    unanswerable = 0.0
    for _, _, result in results:
        for mode in MODES:
            summary = result["summary"].get(mode)
            if summary is None:
                continue
            questions = summary["questions"]
            written = questions["off"] + questions["domain"]
            unanswerable += written
            abstain += (summary["abstained"]["written"] or 0) * written
            weights += questions["answerable"]
            lost += (summary["lost"] or 0) * questions["answerable"]
    return {
        "abstain": abstain / unanswerable if unanswerable else 0.0,
        "lost": lost / weights if weights else 0.0,
    }


def _before_after(
    results: Sequence[tuple[str, str, Mapping[str, Any]]],
) -> str:
    """The same questions on the code before the absolute score (``--label before``):
    today's ``score`` AUROC and the ranking's MRR@10, next to this code's."""
    rows: list[list[object]] = []
    worst = 0.0
    compared = 0
    for mode in MODES:
        before_auroc: list[float] = []
        after_auroc: list[float] = []
        for set_name, embedder, result in results:
            before = read_result(result_name(set_name, embedder, "embedded", "before"))
            if before is None or mode not in before.get("summary", {}):
                continue
            now, then = result["summary"][mode], before["summary"][mode]
            before_auroc.append(then["auroc"]["score"]["written"] or 0.0)
            after_auroc.append(now["auroc"]["best_score"]["written"] or 0.0)
            if now["mrr_at_10"] is not None and then["mrr_at_10"] is not None:
                worst = max(worst, abs(now["mrr_at_10"] - then["mrr_at_10"]))
                compared += 1
        if before_auroc:
            rows.append(
                [
                    mode,
                    len(before_auroc),
                    f"{min(before_auroc):.3f}-{max(before_auroc):.3f}",
                    f"{min(after_auroc):.3f}-{max(after_auroc):.3f}",
                ]
            )
    if not rows:
        return "The code before this scale was not run here (`--label before`).\n\n"
    return (
        "**Before and after**, the same questions and runs on the code before the absolute "
        "score (its `score` was the query-relative one; `python -m bench relevance --label "
        "before` on that checkout), AUROC against the written unanswerable questions, "
        "every set and embedder:\n\n"
        + _table(["mode", "runs", "AUROC of `score` before", "AUROC of `score` now"], rows)
        + f"\n\nThe ranking is unchanged: MRR@10 moved by at most {worst:.4f} over "
        f"{compared} set, embedder and mode runs "
        f"({_met(worst <= 0.01)}, target within 0.01).\n\n"
    )


def section_text(
    fit: Sequence[tuple[str, str, Mapping[str, Any]]],
    report: Sequence[tuple[str, str, Mapping[str, Any]]],
) -> str:
    header = [
        "set",
        "embedder",
        "mode",
        "AUROC best",
        "AUROC top",
        "BM25 raw",
        "AUROC held-out",
        "empty (written)",
        "empty (held-out)",
        "lost",
        "MRR@10",
    ]
    first = (report or fit)[0][2]
    floor = first["summary"][MODES[0]]["floor"]
    text = (
        f"{TITLE}\n\n"
        "Six sets, each a corpus's indexed two thirds (a path hash chooses) with the "
        "questions it answers and questions it does not (`bench/unanswerable.py`): "
        "*written* ones, from other domains (`off`: 80 in English, 80 in Korean, a third "
        "sharing everyday words with software documentation, split in halves between the "
        "fit and the report sets) and from the corpus's own domain asking what it does "
        "not cover (`domain`, about 40 per set, each checked to name a term the corpus "
        "does not hold), and *held-out* ones: the questions whose answer document is in "
        "the third left out (a sibling document often still answers them). Every question "
        "is searched in every mode through `store.search` with `min_score` 0 and "
        "`explain` (embedded store), and the default floor "
        f"({floor}) applied afterwards as the product applies it: nothing when the best "
        "result scores below it, else the whole list. The calibration "
        "(`python -m bench relevance-fit`) was fitted on the **fit sets** "
        f"({', '.join(FIT_SETS)}) and is reported on them and on the **report sets** "
        f"({', '.join(REPORT_SETS)}), never fitted on.\n\n"
        "Columns: AUROC of the best result's absolute `score` (the answer's `evidence`) "
        "and of the top-ranked one's, answerable against written unanswerable questions; "
        "plain BM25's raw top score over whole documents (FTS5, same run) as the "
        "baseline; AUROC against the held-out kind; the share of unanswerable questions "
        "answered with nothing at the default floor; `lost`: answerable questions whose "
        "relevant document was in the top 5 and that the floor answers with nothing (of "
        "all answerable ones); MRR@10 of the ranking (unchanged by the floor, which never "
        "reorders). Targets: AUROC >= 0.90, >= 80% empty, <= 5% lost.\n\n"
    )
    for label, results in (("Fit sets", fit), ("Report sets", report)):
        if not results:
            text += f"{label}: not run.\n\n"
            continue
        counts = _targets(results)
        pooled = _pooled(results)
        text += (
            f"**{label}** (hashing, all-MiniLM-L6-v2, multilingual USE; each row one "
            "run):\n\n" + _table(header, _rows(results)) + "\n\n"
            f"AUROC >= {AUROC_TARGET} in {counts['auroc']} of {counts['rows']} rows "
            f"({_met(counts['auroc'] == counts['rows'])}); >= {ABSTAIN_TARGET:.0%} of the "
            f"written unanswerable questions empty in {counts['abstain']} rows "
            f"(over all rows {pooled['abstain']:.1%}: "
            f"{_met(pooled['abstain'] >= ABSTAIN_TARGET)}); <= {LOSS_TARGET:.0%} lost in "
            f"{counts['loss']} rows (over all rows {pooled['lost']:.1%}: "
            f"{_met(pooled['lost'] <= LOSS_TARGET)}).\n\n"
        )
    text += _before_after([*fit, *report])
    sources = [
        _provenance(dict(result), result_name(name, embedder, "embedded", ""))
        for name, embedder, result in (*fit[:1], *report[:1])
    ]
    text += " ".join(sources) + (
        " (one file per set and embedder, `bench/results/relevance-<set>-<embedder>-embedded"
        ".json`; the raw records are regenerated under bench/data/relevance/.)\n"
    )
    return text


def relevance_section(report: Report) -> None:
    fit, held = _load(FIT_SETS), _load(REPORT_SETS)
    if not fit and not held:
        report.add(f"{TITLE}\n\nMissing: run `python -m bench relevance`.")
        return
    if held:
        pooled = _pooled(held)
        report.headlines.append(
            (
                "unanswerable questions answered with nothing at the default floor "
                "(report sets, every embedder and mode)",
                f">= {ABSTAIN_TARGET:.0%}, <= {LOSS_TARGET:.0%} of answers lost",
                f"{pooled['abstain']:.1%} empty, {pooled['lost']:.1%} lost",
                _met(pooled["abstain"] >= ABSTAIN_TARGET and pooled["lost"] <= LOSS_TARGET),
            )
        )
    report.add(section_text(fit, held))
