"""``bench/REPORT.md``'s indexing throughput and search latency sections (on the node); the
cold start and memory sections are ``bench.report.footprint``'s."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.common.environment import read_result
from bench.report.helpers import (
    MODES,
    _load_note,
    _met,
    _provenance,
    _pyplot,
    _save,
)
from bench.report.layout import Report
from bench.report.layout import table as _table

__all__ = [
    "indexing_section",
    "latency_section",
]


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
        "`bench/common/recording_client.py` passes every request through and times it): "
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
