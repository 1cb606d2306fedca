"""``bench/REPORT.md``'s "Knowing when it does not know" section: the absolute relevance
score and the default floor on answerable and unanswerable questions
(``bench/runs/relevance.py``, ``bench/runs/relevance_fit.py``), on the embedded store and,
for the report sets with the hashing embedder, on the OpenSearch node, with what the
relevance inputs cost a search on the node (``bench/runs/latency_ab.py``, ``NODE_COST``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.common.environment import read_result
from bench.corpora.unanswerable import FIT_SETS, REPORT_SETS
from bench.report.helpers import Report, _met, _provenance, _table
from bench.runs.relevance import DEFAULT_EMBEDDERS, result_name
from knowledge.ranking.vector_side import covers

__all__ = ["relevance_section", "section_text"]

TITLE = "## 14. Knowing when it does not know: absolute scores and the default floor"
MODES = ("keyword", "vector", "hybrid")
AUROC_TARGET = 0.90
ABSTAIN_TARGET = 0.80
LOSS_TARGET = 0.05
NODE_EMBEDDER = "hashing"
"""The embedder of the node's rows (the one the node's latency figures use)."""
NODE_COST = "latency-ab-relevance-node"
"""The ``bench latency_ab`` result comparing the node's search with and without the
relevance inputs (``--before``: the code before the absolute score, ``--shared-index``)."""
SAMPLE_QUERY = {"ko": "설치", "en": "install"}
"""A word of each set language, to ask whether an embedder reads the set's questions."""


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
    dropped: list[tuple[str, str, float, float]] = []
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
            if now["mrr_at_10"] is None or then["mrr_at_10"] is None:
                continue
            if mode != "keyword" and not _reads(result):
                dropped.append((set_name, mode, then["mrr_at_10"], now["mrr_at_10"]))
                continue
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
        f"({_met(worst <= 0.01)}, target within 0.01)" + _dropped_text(dropped) + ".\n\n"
    )


def _reads(result: Mapping[str, Any]) -> bool:
    """Whether the run's embedder reads its set's language (``ranking.vector_side``)."""
    language = str(result["set"].get("language", "en"))
    return covers(result["embedder"]["name"], SAMPLE_QUERY.get(language, "install"))


def _dropped_text(dropped: Sequence[tuple[str, str, float, float]]) -> str:
    if not dropped:
        return ""
    moves = "; ".join(f"{name} {mode} {then:.3f} -> {now:.3f}" for name, mode, then, now in dropped)
    return (
        f", but for the {len(dropped)} vector and hybrid runs of all-MiniLM-L6-v2 on the "
        "Korean sets, which an English-only model cannot read: the product answers them "
        "from the keyword side now (`knowledge.ranking.vector_side`; the search answer "
        "and the trace say `vector_side`), so they rank as keyword mode does, MRR@10 "
        f"{moves}"
    )


def _node_rows(
    sets: Sequence[str],
) -> tuple[list[list[object]], list[Mapping[str, Any]], float]:
    """The sets' ``NODE_EMBEDDER`` rows on the embedded store and the node, side by side
    per mode, the node's results, and the largest MRR@10 difference of a row pair."""
    rows: list[list[object]] = []
    found: list[Mapping[str, Any]] = []
    mrr: list[float] = []
    gap = 0.0
    for set_name in sets:
        node = read_result(result_name(set_name, NODE_EMBEDDER, "opensearch", ""))
        if node is None or "summary" not in node:
            continue
        found.append(node)
        embedded = read_result(result_name(set_name, NODE_EMBEDDER, "embedded", ""))
        for mode in MODES:
            for store, result in (("embedded", embedded), ("node", node)):
                summary = None if result is None else result["summary"].get(mode)
                if summary is None:
                    continue
                mrr.append(summary["mrr_at_10"] or 0.0)
                auroc, abstained = summary["auroc"], summary["abstained"]
                rows.append(
                    [
                        set_name,
                        mode,
                        store,
                        _number(auroc["best_score"]["written"]),
                        _number(auroc["score"]["written"]),
                        _number(auroc["best_score"]["near"]),
                        _share(abstained["written"]),
                        _share(abstained["near"]),
                        _share(summary["lost"]),
                        _number(summary["mrr_at_10"]),
                    ]
                )
            if len(mrr) == 2:
                gap = max(gap, abs(mrr[0] - mrr[1]))
            mrr.clear()
    return rows, found, gap


def _node_cost() -> str:
    """What the relevance inputs cost a search on the node (``NODE_COST``)."""
    cost = read_result(NODE_COST)
    if cost is None:
        return (
            "The node's cost of the relevance inputs was not measured here "
            f"(`python -m bench latency_ab ... --label {NODE_COST.removeprefix('latency-ab-')}`)."
            "\n\n"
        )
    rows: list[list[object]] = []
    for mode in MODES:
        figures = cost["modes"].get(mode)
        if figures is None:
            continue
        without, with_them = figures["before"], figures["after"]

        def pair(key: str, w: Mapping[str, Any] = without, a: Mapping[str, Any] = with_them) -> str:
            return f"{w[key]['p50']:.1f} / {a[key]['p50']:.1f}"

        rows.append(
            [
                mode,
                pair("store"),
                f"{figures['wall_ratio_p50']:.2f}x",
                pair("store_took"),
                pair("store_overhead"),
                f"{with_them['store_overhead']['p50'] - without['store_overhead']['p50']:+.1f}",
            ]
        )
    indexed = cost["indexed"]["after"]
    load = cost["machine"].get("load_average") or []
    shared = " (one index both searched)" if cost.get("shared_index") else ""
    return (
        "**What the relevance inputs cost on the node** (the scope's term statistics in the "
        "candidates' `_msearch`, the score-0 named term clauses that say which query terms "
        "a hit holds, the judging in Python): the product's search against the code before "
        f"the absolute score, interleaved on one node{shared}, "
        f"{indexed['documents']} man pages, {indexed['chunks']:,} chunks, hashing embedder, "
        f"{cost['iterations']} searches per mode and version, load average "
        f"{', '.join(f'{v:.1f}' for v in load)} (2 cores, shared); ms, p50, without / with "
        "them; `wall - took`: each search's wall time less the node's own `took` of its "
        "requests (an `_msearch` answer trimmed to its searches counts its longest "
        "search's `took`):\n\n"
        + _table(["mode", "wall", "wall ratio", "took", "wall - took", "wall - took added"], rows)
        + "\n\nThe code before the absolute score (`--before`: `git archive 9aff3a7^ "
        "layers/knowledge`, the parent of the commit that added it) differs from this one "
        "on the node's search path by the relevance inputs and by answering every search "
        "(this one answers a search whose best result is below the default floor with "
        "nothing, which spares hybrid its second request). "
        + _provenance(dict(cost), NODE_COST)
        + "\n\n"
    )


def _node_text(sets: Sequence[str]) -> str:
    rows, found, gap = _node_rows(sets)
    if not found:
        return (
            "The node's rows were not run here (`python -m bench relevance --stores "
            f"opensearch --embedders {NODE_EMBEDDER}`).\n\n" + _node_cost()
        )
    header = [
        "set",
        "mode",
        "store",
        "AUROC best",
        "AUROC top",
        "AUROC held-out",
        "empty (written)",
        "empty (held-out)",
        "lost",
        "MRR@10",
    ]
    counts = {"rows": 0, "auroc": 0, "abstain": 0, "loss": 0}
    for result in found:
        for mode in MODES:
            summary = result["summary"].get(mode)
            if summary is None:
                continue
            counts["rows"] += 1
            counts["auroc"] += (summary["auroc"]["best_score"]["written"] or 0) >= AUROC_TARGET
            counts["abstain"] += (summary["abstained"]["written"] or 0) >= ABSTAIN_TARGET
            counts["loss"] += (summary["lost"] or 0) <= LOSS_TARGET
    pooled = _pooled([("", NODE_EMBEDDER, result) for result in found])
    load = found[0]["machine"].get("load_average") or []
    return (
        f"**The node's side**: the report sets on the OpenSearch node ({NODE_EMBEDDER} "
        "embedder, every mode; `python -m bench relevance --stores opensearch`, the same "
        "questions and floor), each next to the embedded store's row:\n\n"
        + _table(header, rows)
        + f"\n\nOn the node: AUROC >= {AUROC_TARGET} in {counts['auroc']} of "
        f"{counts['rows']} rows ({_met(counts['auroc'] == counts['rows'])}); >= "
        f"{ABSTAIN_TARGET:.0%} of the written unanswerable questions empty in "
        f"{counts['abstain']} rows (over all rows {pooled['abstain']:.1%}: "
        f"{_met(pooled['abstain'] >= ABSTAIN_TARGET)}); <= {LOSS_TARGET:.0%} lost in "
        f"{counts['loss']} rows (over all rows {pooled['lost']:.1%}: "
        f"{_met(pooled['lost'] <= LOSS_TARGET)}). The two stores rank by their own "
        "BM25 (FTS5's and Lucene's), so their MRR@10 differ (by at most "
        f"{gap:.3f} here); the absolute scores are the same formula and calibration on "
        "both. Load average at the first node run "
        f"{', '.join(f'{v:.1f}' for v in load)}. "
        + _provenance(
            dict(found[0]), result_name(found[0]["set"]["name"], NODE_EMBEDDER, "opensearch")
        )
        + "\n\n"
        + _node_cost()
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
        f"{len(FIT_SETS) + len(REPORT_SETS)} sets, each a corpus's indexed two thirds "
        "(a path hash chooses) with the "
        "questions it answers and questions it does not (`bench/corpora/unanswerable.py`): "
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
    text += _node_text(REPORT_SETS)
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
