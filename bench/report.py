"""``bench/REPORT.md`` and its plots, from ``bench/results/*.json``.

Every table says which result file it comes from and the exact command that produced
that file. A benchmark that has not been run is listed as missing, not left out quietly.
Plots are PNGs next to the results (matplotlib, Agg backend).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bench.environment import RESULTS_DIR, log, read_result, source_digest
from bench.report_layout import HISTORY, STALE, Report, history_text
from bench.report_layout import REPORT as REPORT_PATH
from bench.report_layout import header as _header
from bench.report_layout import table as _table

__all__ = ["Report", "add_arguments", "main"]

REPORT = REPORT_PATH
MODES = ("keyword", "vector", "hybrid")
STORE_LABEL = {"embedded": "embedded (SQLite)", "opensearch": "OpenSearch node"}
EMBEDDER_LABEL = {"hashing": "hashing", "minilm": "all-MiniLM-L6-v2"}
QUALITY_FILES = (
    ("manpages-300", "hashing"),
    ("manpages-300", "minilm"),
    ("manpages-all", "hashing"),
    ("manpages-all", "minilm"),
)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _provenance(result: dict[str, Any], name: str) -> str:
    stale = (
        f" {STALE} (its digest differs from the current source's)." if not _current(result) else ""
    )
    return (
        f"Source: `bench/results/{name}.json`, made by `{result['command']}` "
        f"(commit {result.get('git_commit')}, product source digest "
        f"{result.get('source_digest', '?')}, {result['finished_at']}).{stale}"
    )


def _current(result: dict[str, Any]) -> bool:
    """Whether ``result`` was made by the product code as it is now."""
    return bool(result.get("source_digest") == source_digest())


LATENCY_PAIRS = ("store", "store_took", "store_overhead")
"""The ``bench.latency`` figures a before/after table shows, before and after each."""


P50_BEFORE_AFTER_COLUMNS = [
    "mode",
    *(f"{label} {when}" for label in ("store", "took", "overhead") for when in ("before", "after")),
]
"""The header of ``p50_before_after``'s rows."""


def p50_before_after(before: dict[str, Any], after: dict[str, Any], digits: int) -> list[list[str]]:
    """A row per mode of two ``bench.latency`` results: the mode, then the p50 of each of
    ``LATENCY_PAIRS`` before and after (ms, ``digits`` decimals)."""
    rows = []
    for mode in MODES:
        row = [mode]
        for key in LATENCY_PAIRS:
            for result in (before, after):
                row.append(f"{result['modes'][mode][key]['p50']:.{digits}f}")
        rows.append(row)
    return rows


def _met(ok: bool) -> str:
    return "met" if ok else "**missed**"


def _save(fig: Any, name: str) -> str:
    path = RESULTS_DIR / name
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return f"![{name}](results/{name})"


# --- quality ---------------------------------------------------------------------------------


def _quality_runs() -> list[tuple[str, str, dict[str, Any]]]:
    found = []
    for corpus, embedder in QUALITY_FILES:
        result = read_result(f"quality-{corpus}-{embedder}")
        if result is not None:
            found.append((corpus, embedder, result))
    return found


def _hybrid_vs_best(modes: dict[str, Any]) -> tuple[float, str, float]:
    best_single = max(("keyword", "vector"), key=lambda m: modes[m]["mrr_at_10"])
    return modes["hybrid"]["mrr_at_10"], best_single, modes[best_single]["mrr_at_10"]


def _wins_losses(modes: dict[str, Any], other: str) -> tuple[int, int]:
    """Queries where hybrid ranks the relevant page better / worse than ``other``."""

    def rank(r: int | None) -> int:
        return r if r is not None else 10**6

    hybrid, single = modes["hybrid"]["ranks"], modes[other]["ranks"]
    better = sum(1 for h, s in zip(hybrid, single, strict=True) if rank(h) < rank(s))
    worse = sum(1 for h, s in zip(hybrid, single, strict=True) if rank(h) > rank(s))
    return better, worse


def quality_section(report: Report) -> None:
    runs = _quality_runs()
    parts = ["## 1. Retrieval quality (man-pages known-item benchmark)"]
    if not runs:
        parts.append("Not run yet: `make bench-quality`.")
        report.add("\n\n".join(parts))
        return
    parts.append(
        "Corpus: the Linux man pages (sections 2, 3, 5, 7) as Markdown, built by "
        "the man-pages builder (`build_manpages.py`, located by `bench/manpages.py`); "
        "each query is a page's NAME line, removed "
        "from the page; the page is the one relevant document. Indexed with `reindex_source` "
        "and searched with `store.search(scope, SearchQuery(text, mode, max_results=N))`: "
        "the production path, no scoring code of the benchmark's own. The N chunks returned "
        "are ranked as distinct documents (best chunk first) and scored at document level. "
        "Default chunker (500 characters, 50 overlap) and the store defaults: keyword terms "
        "with English Snowball stems and stop words, hybrid min-max per side with the "
        "embedder's weights (hashing 0.7 keyword / 0.3 vector, MiniLM 0.3 / 0.7), each "
        "scaled per query by its side's confidence (`fusion.side_confidence`), over 100 "
        "candidates per side, the embedder's relevance floor, at most 3 chunks per "
        "document. Reference from the man-pages builder's README: plain "
        "SQLite FTS5 BM25 over ~1000-character sections, 300-page sample: MRR@10 0.828, "
        "R@5 0.934, R@10 0.961."
    )
    for corpus, embedder, result in runs:
        c = result["corpus"]
        rows = []
        for run in result["runs"]:
            for mode in MODES:
                if mode in run["modes"]:
                    m = run["modes"][mode]
                    rows.append(
                        [
                            STORE_LABEL[run["store"]],
                            mode,
                            m["mrr_at_10"],
                            m["recall_at_5"],
                            m["recall_at_10"],
                        ]
                    )
        chunks = result["runs"][0]["indexing"]["chunks"]
        parts.append(
            f"### {EMBEDDER_LABEL[embedder]} embeddings, {c['documents']} pages "
            f"({c['queries']} queries, {chunks} chunks, "
            f"{c['total_bytes'] / 1e6:.1f} MB; {result['chunks_per_search']} chunks per search)"
        )
        parts.append(_table(["store", "mode", "MRR@10", "Recall@5", "Recall@10"], rows))
        notes = []
        for run in result["runs"]:
            modes = run["modes"]
            if "hybrid" not in modes:
                continue
            hybrid, best, best_mrr = _hybrid_vs_best(modes)
            better, worse = _wins_losses(modes, best)
            notes.append(
                f"- {STORE_LABEL[run['store']]}: hybrid {hybrid:.3f} vs the best single mode "
                f"({best}) {best_mrr:.3f} ({hybrid - best_mrr:+.3f}); hybrid ranks the "
                f"relevant page higher than {best} for {better} queries and lower for {worse}."
            )
            if embedder == "minilm" and corpus == "manpages-300":
                report.headlines.append(
                    (
                        f"Hybrid MRR@10 > best single mode, MiniLM, {STORE_LABEL[run['store']]}",
                        "hybrid > max(keyword, vector)",
                        f"{hybrid:.3f} vs {best} {best_mrr:.3f}"
                        + ("" if _current(result) else " (earlier code, not re-run)"),
                        _met(hybrid > best_mrr),
                    )
                )
        parts.append("\n".join(notes))
        parts.append(_provenance(result, f"quality-{corpus}-{embedder}"))
    parts.append(QUALITY_NOTES(runs))
    parts.append(_quality_plot(runs))
    report.add("\n\n".join(parts))


def _quality_notes(runs: list[tuple[str, str, dict[str, Any]]]) -> str:
    lines = ["Reading the tables:"]
    for corpus, embedder, result in runs:
        by_store = {run["store"]: run["modes"] for run in result["runs"]}
        if {"embedded", "opensearch"} <= by_store.keys():
            e, o = by_store["embedded"], by_store["opensearch"]
            lines.append(
                f"- {EMBEDDER_LABEL[embedder]}, {corpus}: vector MRR@10 embedded "
                f"{e['vector']['mrr_at_10']:.3f} vs OpenSearch {o['vector']['mrr_at_10']:.3f}, "
                f"keyword {e['keyword']['mrr_at_10']:.3f} vs {o['keyword']['mrr_at_10']:.3f}."
            )
    lines.append(
        "- The embedded store's vector search is exact (brute force over the scope); "
        "OpenSearch's is the lucene engine's HNSW, approximate. The gap between the two "
        "vector rows is largest with the hashing embedder, whose vectors are less separated "
        "(many near ties), and about nil with MiniLM. HNSW graphs also depend on how the "
        "writes were split into segments (bulk sizes, refresh and merge timing), so "
        "OpenSearch's vector and hybrid rows vary between runs by up to a few hundredths "
        "(seen in this work: hashing, 300 pages, hybrid 0.727 in one run and 0.705 in "
        "another); the embedded store's rows repeat to the last digit. The keyword rows "
        "differ a little "
        "because BM25 differs: SQLite FTS5 over `knowledge.ranking.analysis.keyword_terms` vs "
        "OpenSearch's `knowledge_english` analyzer (the same terms for English, tested "
        "term for term on the node) plus a CJK-bigram sub-field, with their own BM25 "
        "statistics and parameters."
    )
    lines.append(
        "- The hashing embedder is a keyword-like offline fallback (feature hashing of terms "
        "and trigrams), not a semantic model: its vector mode is below keyword mode, so its "
        "hybrid default puts 0.7 of the weight on the keyword side (with 0.7 on the vector "
        "side, as before this round, hybrid landed between the two). With MiniLM the "
        "vector side is the strong one and the weights are 0.3 / 0.7."
    )
    lines.append(
        "- The FTS5 reference of the man-pages builder's README (0.828) indexes ~1000-character "
        "heading sections of its own sample; the baseline row of section 1b's kind, plain "
        "FTS5 `porter` over whole pages, is computed in the same run on the same pages "
        "(`bench/baselines.py`) and is the fairer comparison."
    )
    return "\n".join(lines)


QUALITY_NOTES: Callable[[list[tuple[str, str, dict[str, Any]]]], str] = _quality_notes


def _quality_plot(runs: list[tuple[str, str, dict[str, Any]]]) -> str:
    plt = _pyplot()
    groups = []
    for corpus, embedder, result in runs:
        for run in result["runs"]:
            label = f"{run['store']}\n{EMBEDDER_LABEL[embedder]}\n{corpus.split('-')[1]} pages"
            groups.append((label, run["modes"]))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(groups)), 4.2))
    width = 0.26
    for i, mode in enumerate(MODES):
        xs = [g + (i - 1) * width for g in range(len(groups))]
        ys = [modes.get(mode, {}).get("mrr_at_10", 0.0) for _, modes in groups]
        bars = ax.bar(xs, ys, width, label=mode)
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.axhline(0.828, color="grey", linestyle="--", linewidth=1, label="FTS5 reference (0.828)")
    ax.set_xticks(range(len(groups)), [g[0] for g in groups], fontsize=8)
    ax.set_ylabel("MRR@10 (document level)")
    ax.set_ylim(0, 1.18)
    ax.legend(ncol=4, fontsize=8, loc="upper left")
    ax.set_title("Retrieval quality per store, embedder and mode")
    return _save(fig, "quality.png")


# --- questions (Debian FAQ) ------------------------------------------------------------------

FAQ_FILES = (
    ("faq-en", "hashing"),
    ("faq-en", "minilm"),
    ("faq-ko", "hashing"),
    ("faq-ko", "minilm"),
)
LANGUAGE_LABEL = {"faq-en": "English", "faq-ko": "Korean"}
# Which plain baseline each mode must not fall below.
BASELINE_OF = {"keyword": "fts5", "vector": "cosine"}


def _score_row(label: str, mode: str, m: dict[str, Any]) -> list[object]:
    return [label, mode, m["mrr_at_10"], m["recall_at_5"], m["recall_at_10"]]


def questions_section(report: Report) -> None:
    parts = ["## 1b. Questions in English and Korean (Debian FAQ)"]
    found = [(c, e, r) for c, e in FAQ_FILES if (r := read_result(f"quality-{c}-{e}")) is not None]
    if not found:
        parts.append("Not run yet: `make bench-questions`.")
        report.add("\n\n".join(parts))
        return
    parts.append(
        "Corpus: Debian's `debian-faq` and `debian-faq-ko` packages (installed by "
        "`bench/setup.sh`), built by `bench/faq.py`: every numbered FAQ section whose heading "
        "is a question becomes one document holding its answer *without the question*, and "
        "the question is the query (known-item, one relevant document). Same production "
        "path and document-level scoring as section 1. Next to the product, in the same run "
        "(`bench/baselines.py`): plain SQLite FTS5 BM25 over whole documents (`porter "
        "unicode61` for English, `trigram` for Korean, the query's words OR-ed) and plain "
        "cosine over the default chunks with the same embedder (no floor, no fusion). "
        "Targets (issue 11): hybrid >= the better single mode + 0.03; every mode >= its "
        "plain baseline (keyword vs FTS5, vector vs cosine)."
    )
    for corpus, embedder, result in found:
        c = result["corpus"]
        rows = [
            _score_row(
                f"baseline: FTS5 ({result['baselines']['fts5']['tokenizer']})",
                "-",
                result["baselines"]["fts5"],
            ),
            _score_row("baseline: plain cosine", "-", result["baselines"]["cosine"]),
        ]
        notes = []
        for run in result["runs"]:
            modes = run["modes"]
            for mode in MODES:
                if mode in modes:
                    rows.append(_score_row(STORE_LABEL[run["store"]], mode, modes[mode]))
            if "hybrid" not in modes:
                continue
            hybrid, best, best_mrr = _hybrid_vs_best(modes)
            ok = hybrid >= best_mrr + 0.03
            below = [
                f"{mode} {modes[mode]['mrr_at_10']:.3f} < {base} "
                f"{result['baselines'][base]['mrr_at_10']:.3f}"
                for mode, base in BASELINE_OF.items()
                if modes[mode]["mrr_at_10"] < result["baselines"][base]["mrr_at_10"]
            ]
            notes.append(
                f"- {STORE_LABEL[run['store']]}: hybrid {hybrid:.3f} vs the best single mode "
                f"({best}) {best_mrr:.3f} ({hybrid - best_mrr:+.3f}: target +0.03 "
                f"{_met(ok)}); every mode >= its plain baseline: "
                + (_met(True) if not below else f"{_met(False)} ({'; '.join(below)})")
                + "."
            )
            report.headlines.append(
                (
                    f"Questions, {LANGUAGE_LABEL[corpus]}, {EMBEDDER_LABEL[embedder]}, "
                    f"{STORE_LABEL[run['store']]}: hybrid vs best single mode",
                    ">= best + 0.03",
                    f"{hybrid:.3f} vs {best} {best_mrr:.3f}",
                    _met(ok),
                )
            )
        parts.append(
            f"### {LANGUAGE_LABEL[corpus]}, {EMBEDDER_LABEL[embedder]} embeddings "
            f"({c['documents']} answers, {c['queries']} questions, "
            f"{result['runs'][0]['indexing']['chunks']} chunks)"
        )
        parts.append(_table(["store / baseline", "mode", "MRR@10", "Recall@5", "Recall@10"], rows))
        parts.append("\n".join(notes))
        parts.append(_provenance(result, f"quality-{corpus}-{embedder}"))
    parts.append(_before_after())
    report.add("\n\n".join(parts))


def _before_after() -> str:
    """Keyword/vector/hybrid of the embedded store before this round's ranking work (the
    product code of the commit before it, same harness) and now."""
    rows = []
    for corpus in ("faq-en", "faq-ko", "manpages-300"):
        before = read_result(f"quality-{corpus}-hashing-before")
        after = read_result(f"quality-{corpus}-hashing")
        if before is None or after is None:
            continue
        b = {r["store"]: r["modes"] for r in before["runs"]}.get("embedded")
        a = {r["store"]: r["modes"] for r in after["runs"]}.get("embedded")
        if not a or not b:
            continue
        for mode in MODES:
            rows.append(
                [
                    corpus,
                    mode,
                    f"{b[mode]['mrr_at_10']:.3f}",
                    f"{a[mode]['mrr_at_10']:.3f}",
                    f"{a[mode]['mrr_at_10'] - b[mode]['mrr_at_10']:+.3f}",
                ]
            )
    if not rows:
        return ""
    return (
        "### Before and after (embedded store, hashing embedder, MRR@10)\n\n"
        "Before = the product code of commit 33c1f5b (standard analysis, one weight pair, "
        "no floor, no per-document cap), run with this round's harness from an export of "
        "that commit (`PYTHONPATH=<export>/layers/knowledge:. .venv-bench/bin/python -m bench "
        "quality --corpus C --embedder hashing --stores embedded --label before`); after = "
        "this round's code. Same corpus files, same run day.\n\n"
        + _table(["corpus", "mode", "before", "after", "change"], rows)
    )


def ranking_latency_section(report: Report) -> None:
    before, after = read_result("latency-h11-before"), read_result("latency-h11-after")
    if before is None or after is None:
        return
    rows = p50_before_after(before, after, 2)
    for row in rows:
        row[-1] = f"**{row[-1]}**"  # the overhead after: the figure of this section
    parts = [
        "## 3b. Search latency before and after this round's ranking work",
        "Same node, same 300 man pages, hashing embedder, `max_results=10`: the product code "
        "of commit 33c1f5b (before: one-mode searches fetch 10, hybrid 40 per side) and this "
        "round's (after: one-mode searches fetch `candidate_count` = 40 for the per-document "
        "cap, hybrid a fixed 100 per side, the floor, the cap). Times in ms, p50; overhead = "
        "the product's wall clock minus OpenSearch's `took`. The before run imported the "
        "product from an export of 33c1f5b (`PYTHONPATH=<export>/layers/knowledge:.`), so "
        "its digest below is the worktree's, not that of the code it ran. Runs one after "
        "the other on a machine loaded by other work (load average 10-20 on 2 cores): the "
        "absolute times are inflated, the before/after ratio is the figure. The larger "
        "candidate lists (more hits to transfer and decode, 200 per hybrid search) cost "
        "most of the added overhead; fetching the candidates without their `content` and "
        "then only the chosen chunks', or a smaller `fusion.HYBRID_CANDIDATES`, are the "
        "levers (the first is done in 3c).",
        _table(
            P50_BEFORE_AFTER_COLUMNS,
            rows,
        ),
        _provenance(before, "latency-h11-before"),
        _provenance(after, "latency-h11-after"),
    ]
    report.add("\n\n".join(parts))


# --- indexing --------------------------------------------------------------------------------


def indexing_section(report: Report) -> None:
    result = read_result("indexing")
    parts = ["## 2. Indexing throughput (hashing embedder)"]
    if result is None:
        parts.append("Not run yet: `make bench-indexing`.")
        report.add("\n\n".join(parts))
        return
    c = result["corpus"]
    med = result["medians"]
    chunks = result["runs"]["pipeline"][0]["chunks"]
    labels = {
        "pipeline": "pipeline only (read, extract, chunk, embed; no store)",
        "embedded": "product -> embedded store (`index_source`)",
        "opensearch": "product -> OpenSearch node (`index_source`)",
        "raw_bulk": "raw `helpers.bulk` of the same pre-made chunks -> node",
    }
    rows = [
        [
            labels[k],
            f"{med[k]['seconds']:.1f}",
            f"{med[k]['documents_per_s']:.0f}",
            f"{med[k]['chunks_per_s']:.0f}",
        ]
        for k in ("pipeline", "embedded", "opensearch", "raw_bulk")
    ]
    ratio = result["opensearch_vs_raw_bulk"]
    parts.append(
        f"Corpus: all {c['documents']} man pages ({c['total_bytes'] / 1e6:.1f} MB, {chunks} "
        f"chunks), hashing embedder (256 dimensions), a fresh SQLite file / a fresh index "
        f"each time; median of {result['repeat']} repetitions (order rotated), after one "
        "unmeasured warm-up of each OpenSearch path. Both OpenSearch rows include creating "
        "the index and the final refresh; the raw bulk sends the same chunk and document "
        "records (same ids, same mapping, same vectors, same bulk chunk size and byte limit) "
        "that the product's pipeline produced, built before its clock starts."
    )
    parts.append(_table(["what", "seconds", "documents/s", "chunks/s"], rows))
    parts.append(
        f"OpenSearch store / raw bulk: **{ratio['ratio_of_medians']:.2f}x** "
        f"(per repetition: {', '.join(f'{r:.2f}' for r in ratio['per_repetition'])}); "
        f"target >= {ratio['target']}x: {_met(ratio['ratio_of_medians'] >= ratio['target'])}."
    )
    report.headlines.append(
        (
            "Indexing into the node vs raw bulk (chunks/s)",
            ">= 0.8x",
            f"{ratio['ratio_of_medians']:.2f}x ({med['opensearch']['chunks_per_s']:.0f} vs "
            f"{med['raw_bulk']['chunks_per_s']:.0f} chunks/s)",
            _met(ratio["ratio_of_medians"] >= ratio["target"]),
        )
    )
    report.headlines.append(
        (
            "Indexing into the embedded store",
            "(no target)",
            f"{med['embedded']['documents_per_s']:.0f} docs/s, "
            f"{med['embedded']['chunks_per_s']:.0f} chunks/s",
            "",
        )
    )
    parts.append(INDEXING_NOTES(result))
    parts.append(_provenance(result, "indexing"))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.2))
    keys = ["pipeline", "embedded", "opensearch", "raw_bulk"]
    values = [med[k]["chunks_per_s"] for k in keys]
    bars = ax.barh(["pipeline only", "embedded store", "OpenSearch store", "raw bulk"], values)
    ax.bar_label(bars, fmt="%.0f", fontsize=8)
    ax.invert_yaxis()
    ax.margins(x=0.12)
    ax.set_xlabel("chunks/s (median)")
    ax.set_title(f"Indexing throughput, {c['documents']} man pages, hashing embedder")
    parts.append(_save(fig, "indexing.png"))
    report.add("\n\n".join(parts))


def _indexing_notes(result: dict[str, Any]) -> str:
    med = result["medians"]
    documents = result["corpus"]["documents"]
    pipeline = med["pipeline"]["seconds"]
    raw = med["raw_bulk"]["seconds"]
    store = med["opensearch"]["seconds"]
    ratio = result["opensearch_vs_raw_bulk"]["ratio_of_medians"]
    target = result["opensearch_vs_raw_bulk"]["target"]
    probe = result["opensearch_requests_per_index_run"]
    requests, seconds = probe["requests"], probe["seconds"]
    request_text = ", ".join(
        f"{name} x{count} ({seconds.get(name, 0.0):.1f} s)" for name, count in requests.items()
    )
    text = [
        f"What the store sent in one more, instrumented run ({probe['run_seconds']:.1f} s; "
        "`bench/client_probe.py` passes every request through and times it): "
        f"{request_text}. The raw bulk sends the same {documents} documents' records in "
        "requests of up to 500 records."
    ]
    if store < pipeline + raw:
        text.append(
            f"The store's {store:.1f} s are less than the pipeline alone ({pipeline:.1f} s) "
            f"plus the raw bulk ({raw:.1f} s): its pipeline (reading, chunking, embedding, "
            "serializing) overlaps its bulk requests, which a sender thread keeps in flight. "
            "The raw baseline starts from pre-made chunks, as the task defines it, so the "
            "ratio still charges the product for whatever of the pipeline does not overlap."
            + (
                " It can exceed 1: `helpers.bulk` serializes a request, sends it and waits, "
                "in turn, while the store serializes the next request during the wait."
                if ratio > 1.0
                else ""
            )
        )
    else:
        text.append(
            f"The store's {store:.1f} s are at least the pipeline alone ({pipeline:.1f} s) "
            f"plus the raw bulk ({raw:.1f} s): the pipeline runs in series with the writes. "
            "The raw baseline starts from pre-made chunks, as the task defines it, so the "
            "ratio charges the product for the whole pipeline: in series, even writes as "
            f"cheap as the raw bulk would give at most {raw / (pipeline + raw):.2f}x."
        )
    if ratio < target and requests.get("delete_by_query", 0) >= documents:
        text.append(
            "Most of the rest is per-document requests: a `_delete_by_query` for the stale "
            "chunks of a previous version is sent for every document, new ones too (the "
            "indexer knows when there is no previous version), and each document's record "
            "is a request of its own."
        )
    before = read_result("indexing-before-text-fastpath")
    if before is not None:
        b = before["medians"]
        text.append(
            f"For comparison, the first run of this benchmark (commit {before['git_commit']}, "
            f"{before['finished_at']}; `bench/results/indexing-before-text-fastpath.json`), "
            "before the tokenizer and hashing-embedder speed-ups (among them the "
            "`knowledge.ranking.analysis.is_cjk` fast path this benchmark led to) and before the "
            "OpenSearch store batched its writes, measured: pipeline "
            f"{b['pipeline']['seconds']:.1f} s, embedded store "
            f"{b['embedded']['chunks_per_s']:.0f} chunks/s, OpenSearch store "
            f"{b['opensearch']['chunks_per_s']:.0f} chunks/s, raw bulk "
            f"{b['raw_bulk']['chunks_per_s']:.0f} chunks/s: "
            f"{before['opensearch_vs_raw_bulk']['ratio_of_medians']:.2f}x. It sent one "
            "`_delete_by_query` and two `_bulk` requests per document, in series with the "
            "pipeline."
        )
    return "\n\n".join(text)


INDEXING_NOTES: Callable[[dict[str, Any]], str] = _indexing_notes


# --- latency ---------------------------------------------------------------------------------


def _load_note(result: Mapping[str, Any]) -> str:
    load = result.get("machine", {}).get("load_average")
    if not load:
        return ""
    return (
        f" Load average when the run ended: {load[0]:g} (1 min), {load[1]:g} (5 min) on "
        f"{result['machine']['cpus']} CPUs."
    )


def latency_section(report: Report) -> None:
    result = read_result("latency")
    parts = ["## 3. Search latency on the real node (hashing embedder)"]
    if result is None:
        parts.append("Not run yet: `make bench-latency`.")
        report.add("\n\n".join(parts))
        return
    c = result["corpus"]
    parts.append(
        f"Index: all {c['documents']} man pages ({result['indexed']['chunks']} chunks). Per "
        f"mode, {result['warmup']} warm-up searches, then {result['iterations']} measured "
        f"iterations over the {c['queries']} man-page queries, `max_results="
        f"{result['max_results']}`. Each iteration times the product "
        "(`OpenSearchKnowledgeStore.search`) and the request sent with the bare "
        "opensearch-py client, in alternating order, and reads OpenSearch's own `took` "
        "(whole milliseconds, rounded down) of each answer. Overhead = wall-clock minus "
        "`took`, per search. Keyword and vector: one `_search`, the same body both ways. "
        f"Hybrid: the product fetches {result['hybrid_candidates_per_side']} candidates "
        "per side in one `_msearch` (ids and scores only: the chunk ids say document, "
        "generation and chunk), then reads the page's chunks with a "
        "second `_search` (its overhead counts both round trips and both `took`s); the "
        "bare client sends the one-request form (both sides with their stored text). "
        "Times in ms." + _load_note(result)
    )
    rows = []
    for mode in MODES:
        m = result["modes"][mode]
        embed = m["query_embedding"]
        rows.append(
            [
                mode,
                m["store"]["p50"],
                m["store"]["p95"],
                m["store_took"]["p50"],
                m["store_took"]["p95"],
                f"**{m['store_overhead']['p50']:.2f}**",
                m["store_overhead"]["p95"],
                m["raw"]["p50"],
                m["raw_overhead"]["p50"],
                m["store_own_work"]["p50"] if "store_own_work" in m else "-",
                "-" if embed is None else embed["p50"],
            ]
        )
    parts.append(
        _table(
            [
                "mode",
                "store p50",
                "store p95",
                "took p50",
                "took p95",
                "overhead p50",
                "overhead p95",
                "raw client p50",
                "raw overhead p50",
                "own work p50",
                "query embedding p50",
            ],
            rows,
            float_format="{:.2f}",
        )
    )
    target = result["target_overhead_p50_ms"]
    worst = max(MODES, key=lambda m: result["modes"][m]["store_overhead"]["p50"])
    hybrid = result["modes"]["hybrid"]
    worst_value = result["modes"][worst]["store_overhead"]["p50"]
    parts.append(
        f"Target: overhead p50 <= {target:g} ms in every mode: "
        f"{_met(worst_value <= target)} (largest: {worst}, {worst_value:.2f} ms). The "
        '"raw overhead" column is what the HTTP round trip and opensearch-py alone cost '
        "over `took` for the same body; the difference to the store's overhead is the "
        "product's own work (for vector and hybrid, including the query embedding); "
        "\"own work\" is the product's wall time outside the client's calls (request "
        "building, parsing the hits, fusion, the cap). "
        "Hybrid's overhead counts a second round trip and two `took`s rounded down; its "
        "wall time against the one-request form sent bare, same run: "
        f"{hybrid['store']['p50'] / hybrid['raw']['p50']:.2f}x at p50."
    )
    report.headlines.append(
        (
            "Search overhead over OpenSearch `took`, p50",
            f"<= {target:g} ms",
            ", ".join(f"{m} {result['modes'][m]['store_overhead']['p50']:.1f} ms" for m in MODES),
            _met(worst_value <= target),
        )
    )
    parts.append(_provenance(result, "latency"))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    width = 0.27
    series = [
        ("store", "product (store.search)"),
        ("raw", "bare client"),
        ("store_took", "OpenSearch took"),
    ]
    for i, (key, label) in enumerate(series):
        xs = [x + (i - 1) * width for x in range(len(MODES))]
        p50 = [result["modes"][m][key]["p50"] for m in MODES]
        p95 = [result["modes"][m][key]["p95"] for m in MODES]
        bars = ax.bar(xs, p50, width, label=f"{label} p50")
        ax.scatter(xs, p95, marker="_", s=200, color=bars.patches[0].get_facecolor())
        ax.bar_label(bars, fmt="%.1f", fontsize=7)
    ax.set_xticks(range(len(MODES)), MODES)
    ax.set_ylabel("ms (bar p50, tick p95)")
    ax.legend(fontsize=8)
    ax.set_title("Search latency per mode on the real node")
    parts.append(_save(fig, "latency.png"))
    report.add("\n\n".join(parts))


# --- cold start ------------------------------------------------------------------------------


def coldstart_section(report: Report) -> None:
    result = read_result("coldstart")
    parts = ["## 4. Cold start of the Lambda handlers (as Lambda runs them)"]
    if result is None or "variants" not in result:
        parts.append("Not run yet on this code: `make bench-coldstart`.")
        report.add("\n\n".join(parts))
        return
    v = result["variants"]
    parts.append(
        "The layer and both functions as `sam build` makes them (`layers/knowledge/Makefile`, "
        "`functions/*/Makefile`: the locked requirements, for this machine's platform instead "
        f"of arm64), on Python {result['python_version']}. Each run is a new "
        "`python3.12 -S -s` process with `PYTHONDONTWRITEBYTECODE=1` and only the function "
        "folder and the layer on `sys.path`: Lambda's code and layer folders are read-only, "
        "so nothing compiled is ever kept (checked after the runs: the `source` copy holds "
        "no `.pyc`). **source** = a build without bytecode (every module compiled at every "
        "cold start: what the product shipped before); **bytecode** = the shipped "
        "`unchecked-hash` pycs. "
        f"{result['runs']} measured runs per row, round-robin, after {result['warmup']} "
        "unmeasured. `+ first request`: then one request through `lambda_handler`: a keyword "
        "search against the real node (search, naive), an SQS batch with one S3 delete "
        "notification (indexer: S3 on loopback says the object is gone, the delete goes to "
        "the node). `naive` is `bench/naive_handler.py` (boto3, openai, opensearch-py and "
        "Powertools at the top, then the same search function), built the same way. "
        "Times in ms, median (p95)."
    )
    labels = {
        "search": "search handler (keyword mode)",
        "indexer": "indexer handler",
        "naive": "naive handler",
        "search+invoke": "search handler + first request",
        "indexer+invoke": "indexer handler + first request",
        "naive+invoke": "naive handler + first request",
    }
    rows = []
    for key, label in labels.items():
        cells = [label]
        for variant in ("source", "bytecode"):
            e = v[variant][key]
            first = e.get("import_plus_invoke_ms")
            cells.append(f"{e['import_ms']['p50']:.0f} ({e['import_ms']['p95']:.0f})")
            cells.append("-" if first is None else f"{first['p50']:.0f} ({first['p95']:.0f})")
        e = v["bytecode"][key]
        cells.append(e["modules_imported"])
        cells.append(
            ", ".join(e.get("sdks_loaded_after_invoke", e["sdks_loaded_by_import"])) or "-"
        )
        rows.append(cells)
    parts.append(
        _table(
            [
                "target",
                "source: import",
                "source: import + first request",
                "bytecode: import",
                "bytecode: import + first request",
                "modules",
                "SDKs loaded (after the request, if any)",
            ],
            rows,
        )
    )
    r = result["ratios"]
    limit = result["targets_set"]["search_import_max_ms"]
    minimum = result["targets_set"]["naive_over_search_min"]
    search = v["bytecode"]["search"]["import_ms"]["p50"]
    source = v["source"]["search"]["import_ms"]["p50"]
    ratio = r["bytecode"]["naive_over_search_import"]
    ok = search <= limit and ratio >= minimum
    size = result["layer_bytes"] / 1e6
    pyc = result["layer_bytecode_bytes"] / 1e6
    parts.append(
        f"Search handler import with the shipped bytecode: **{search:.0f} ms** (target <= "
        f"{limit} ms: {_met(search <= limit)}); naive / search, both with bytecode: "
        f"**{ratio:.1f}x** (target >= {minimum:.0f}x: {_met(ratio >= minimum)}); without "
        f"bytecode (the baseline, same run): search {source:.0f} ms, naive / search "
        f"{r['source']['naive_over_search_import']:.1f}x. The bytecode makes each import "
        + ", ".join(f"{k} {x:.1f}x" for k, x in r["source_over_bytecode"].items())
        + " faster. With the first request included, naive / search is "
        f"{r['bytecode']['naive_over_search_first_request']:.1f}x (bytecode). The layer built "
        f"here is {size:.1f} MB unzipped, {pyc:.1f} MB of it bytecode (the arm64 layer of "
        "`sam build`: see docs/deploy.md). The targets are rows of one round-robin run, so "
        "load that stretches every time alike leaves the ratios; the milliseconds grow with "
        f"it.{_load_note(result)}"
    )
    heavy = result["heaviest_imports"]
    heavy_rows = [
        [
            f"{target} ({variant})",
            ", ".join(f"{h['package']} {h['cumulative_ms']:.0f}" for h in heavy[variant][target]),
        ]
        for variant in ("source", "bytecode")
        for target in ("search", "indexer", "naive")
    ]
    parts.append(
        "Packages each handler's import loads, by cumulative import time (one "
        "`python -X importtime` run each, ms):"
    )
    parts.append(_table(["handler", "packages"], heavy_rows))
    report.headlines.append(
        (
            "Search handler import as Lambda runs it (read-only, shipped bytecode), p50",
            f"<= {limit} ms and >= {minimum:.0f}x faster than naive",
            f"{search:.0f} ms (without bytecode {source:.0f} ms); naive "
            f"{v['bytecode']['naive']['import_ms']['p50']:.0f} ms ({ratio:.1f}x)",
            _met(ok),
        )
    )
    parts.append(_provenance(result, "coldstart"))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    keys = list(labels)
    height = 0.38
    for i, variant in enumerate(("source", "bytecode")):
        values = [
            v[variant][k]["import_plus_invoke_ms"]["p50"]
            if "+invoke" in k
            else v[variant][k]["import_ms"]["p50"]
            for k in keys
        ]
        ys = [y + (i - 0.5) * height for y in range(len(keys))]
        bars = ax.barh(ys, values, height, label=variant)
        ax.bar_label(bars, fmt="%.0f", fontsize=7)
    ax.set_yticks(range(len(keys)), [labels[k] for k in keys])
    ax.axvline(limit, color="grey", linestyle="--", linewidth=1, label=f"target: {limit} ms")
    ax.legend(fontsize=8, loc="lower right")
    ax.margins(x=0.12)
    ax.invert_yaxis()
    ax.set_xlabel("ms, median (import; or import + first request)")
    ax.set_title("Lambda handler cold start, read-only, python3.12")
    parts.append(_save(fig, "coldstart.png"))
    report.add("\n\n".join(parts))


# --- memory ----------------------------------------------------------------------------------


def memory_section(report: Report) -> None:
    result = read_result("memory")
    parts = ["## 5. Memory while indexing one large file (embedded store, hashing embedder)"]
    if result is None:
        parts.append("Not run yet: `make bench-memory`.")
        report.add("\n\n".join(parts))
        return
    parts.append(
        "Each row indexes a generated Markdown corpus (`bench.memory.generate_markdown`, "
        "seeded) in a new process with `index_source` and reads the peak resident set size "
        "(`ru_maxrss`) before indexing (interpreter, imports, numpy, an empty store) and "
        "after. Growth = peak after minus peak before."
    )
    rows = []
    for r in result["single_file"]:
        rows.append(
            [
                "1 file",
                r["file_mb"],
                r["chunks"],
                r["seconds"],
                r["baseline_peak_mib"],
                r["peak_mib"],
                r["growth_mib"],
                f"{r['growth_per_file_mb']:.2f}",
            ]
        )
    s = result["split_corpus"]
    rows.append(
        [
            f"{s['files']} files of {s['file_mb']} MB",
            s["total_mb"],
            s["chunks"],
            s["seconds"],
            s["baseline_peak_mib"],
            s["peak_mib"],
            s["growth_mib"],
            f"{s['growth_mib'] * 2**20 / (s['total_mb'] * 1e6):.2f}",
        ]
    )
    parts.append(
        _table(
            [
                "corpus",
                "MB",
                "chunks",
                "seconds",
                "RSS before (MiB)",
                "peak RSS (MiB)",
                "growth (MiB)",
                "growth / corpus bytes",
            ],
            rows,
            float_format="{:.1f}",
        )
    )
    largest = result["largest_file"]
    parts.append(MEMORY_NOTES(result))
    report.headlines.append(
        (
            f"Peak RSS indexing one {largest['file_mb']:.0f} MB Markdown file",
            "bounded (streaming)",
            f"{largest['peak_mib']:.0f} MiB peak, +{largest['growth_mib']:.0f} MiB "
            f"({largest['growth_over_file_size']:.1f}x the file); 100 files of 0.5 MB: "
            f"+{s['growth_mib']:.0f} MiB",
            MEMORY_VERDICT(result),
        )
    )
    parts.append(_provenance(result, "memory"))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.4))
    xs = [r["file_mb"] for r in result["single_file"]]
    ax.plot(
        xs, [r["growth_mib"] for r in result["single_file"]], marker="o", label="one file of x MB"
    )
    ax.scatter(
        [s["total_mb"]],
        [s["growth_mib"]],
        marker="s",
        color="C1",
        zorder=3,
        label=f"{s['files']} files, x MB in all",
    )
    ax.plot(
        [0, max(xs)],
        [0, max(xs) * 1e6 / 2**20],
        linestyle="--",
        color="grey",
        linewidth=1,
        label="1x the bytes indexed",
    )
    ax.set_xlabel("MB of Markdown indexed")
    ax.set_ylabel("RSS growth while indexing (MiB)")
    ax.legend(fontsize=8)
    ax.set_title("Indexing memory (embedded store, hashing embedder)")
    parts.append(_save(fig, "memory.png"))
    report.add("\n\n".join(parts))


def _memory_notes(result: dict[str, Any]) -> str:
    single = result["single_file"]
    s = result["split_corpus"]
    largest = result["largest_file"]
    ratios = ", ".join(f"{r['growth_per_file_mb']:.1f}x" for r in single)
    return (
        f"One {largest['file_mb']:.0f} MB file raises the peak by {largest['growth_mib']:.0f} "
        f"MiB ({largest['growth_over_file_size']:.1f}x its size), and the growth is "
        f"proportional to the file ({ratios} of the size at each size): a document is read "
        "whole (bytes), decoded whole (text), "
        "and only then chunked and embedded as a stream, batch by batch, so the chunks and "
        f"vectors never pile up. The same {s['total_mb']:.0f} MB as {s['files']} files raises "
        f"the peak by only {s['growth_mib']:.0f} MiB: memory grows with the largest document, "
        "not with the corpus. `IndexOptions.max_document_bytes` (64 MiB by default) caps the "
        "largest document, and so the peak."
    )


def _memory_verdict(result: dict[str, Any]) -> str:
    s = result["split_corpus"]
    largest = result["largest_file"]
    # Bounded by the corpus if splitting the same bytes into files keeps growth small.
    return "met (per document)" if s["growth_mib"] < 0.25 * largest["growth_mib"] else "**missed**"


MEMORY_NOTES: Callable[[dict[str, Any]], str] = _memory_notes
MEMORY_VERDICT: Callable[[dict[str, Any]], str] = _memory_verdict


# --- the report ------------------------------------------------------------------------------


def _superseded_sections(report: Report) -> None:
    """The sections a later run, or the decision they informed, superseded: ablations and
    probes behind today's defaults, and past rounds' before/after runs. They go to
    ``bench/results/history.md`` (``Report.superseded``)."""
    from bench.report_headings import headings_section  # they import this module's helpers
    from bench.report_korean import korean_section
    from bench.report_korean_help import korean_help_section
    from bench.report_korean_v5 import korean_v5_section
    from bench.report_ranking import (
        context_section,
        fusion_section,
        hashing_variants_section,
        hybrid_fetch_section,
        hybrid_ids_section,
        hybrid_page_section,
        hybrid_python_section,
        keyword_probe_section,
    )

    fusion_section(report)  # 1c: the fusion defaults (docs/ranking.md)
    context_section(report)  # 1d: title and headings embedded in front
    keyword_probe_section(report)  # 1e: BM25 parameters
    korean_section(report)  # 1f: bigrams vs morphemes (docs/korean.md)
    headings_section(report)  # 1g: headings on the keyword side
    hashing_variants_section(report)  # 1h: a probe
    korean_v5_section(report)  # 1i: superseded by 1k
    korean_help_section(report)  # 1j: superseded by 1k
    ranking_latency_section(report)  # 3b-3g: issue 11's rounds; section 3 is today's
    hybrid_fetch_section(report)
    hybrid_ids_section(report)
    hybrid_python_section(report)
    hybrid_page_section(report)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", type=Path, default=REPORT)
    parser.add_argument(
        "--history", type=Path, default=HISTORY, help="where the superseded sections go"
    )


def main(args: argparse.Namespace) -> None:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    report = Report(args.output, args.history)
    with report.superseded():
        _superseded_sections(report)
    args.history.write_text(history_text(report), encoding="utf-8")
    log(f"wrote {args.history}")
    # The current sections, in the report's order. A new benchmark's section goes last;
    # when it replaces an older one, move that one's call to _superseded_sections.
    quality_section(report)
    questions_section(report)
    from bench.report_korean_sets import korean_sets_section  # it imports this module's helpers

    korean_sets_section(report)
    indexing_section(report)
    latency_section(report)
    from bench.report_ranking import rerank_section  # likewise

    rerank_section(report)
    coldstart_section(report)
    memory_section(report)
    from bench.report_documents import documents_section  # likewise

    documents_section(report)
    from bench.report_embedding import embedding_pool_section  # likewise

    embedding_pool_section(report)
    from bench.report_perf import quota_section  # likewise

    quota_section(report)

    from bench.report_mutation import mutation_section

    mutation_section(report)
    from bench.report_scale import scale_section

    scale_section(report)
    from bench.report_scope_recall import scope_recall_section

    scope_recall_section(report)
    from bench.report_repos import repos_section

    repos_section(report)
    from bench.report_shared import shared_section

    shared_section(report)
    from bench.report_controls import controls_section

    controls_section(report)
    from bench.report_repos import incremental_section  # round 11: appended at the end

    incremental_section(report)
    from bench.report_synonyms import synonyms_section

    synonyms_section(report)
    from bench.report_named_clauses import named_clauses_section

    named_clauses_section(report)
    from bench.report_page_signal import page_signal_section

    page_signal_section(report)
    text = _header(report) + "\n" + "\n".join(report.sections)
    args.output.write_text(text, encoding="utf-8")
    log(f"wrote {args.output}")
