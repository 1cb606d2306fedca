"""``bench/REPORT.md`` section 9.2: vector recall@10 by scope size in one big shared index,
``ef_search`` by the scope's size, and a scope in an index of its own
(``bench/scope_recall.py``)."""

from __future__ import annotations

from typing import Any

from bench.environment import read_result
from bench.report import Report, _met, _provenance, _table
from knowledge.stores.opensearch.scope_size import (
    CHUNKS_PER_EF,
    LARGE_SCOPE_CHUNKS,
    MAX_EF_SEARCH,
)

__all__ = ["scope_recall_section"]

NAME = "scope-recall"
TITLE = "## 9.2 Recall by scope size: `ef_search` by the scope's size, an index of its own"
TARGET = 0.95
BIG = 50_000  # the scope


def _load(result: dict[str, Any]) -> str:
    machine = result.get("machine", {})
    load = machine.get("load_average")
    if not load:
        return "not recorded"
    return f"{load[0]:.1f} (1 min), {load[1]:.1f} (5 min) on {machine.get('cpus', '?')} CPUs"


def _label(layout: str) -> str:
    return "shared" if layout == "shared" else "own index"


def _sweep(result: dict[str, Any]) -> str:
    variants = [v for v in result["variants"] if v != "auto"]
    rows = []
    for scope in result["scopes"]:
        row: list[object] = [_label(scope["layout"]), f"{scope['chunks']:,}"]
        for variant in variants:
            r = scope["variants"][variant]
            row.append(f"{r['recall_at_10']:.3f} / {r['knn_ms']['p50']:.0f}")
        row.append(f"{scope['exact_ms']['p50']:.0f}")
        rows.append(row)
    header = ["index", "scope chunks", *[f"ef {v}" for v in variants], "exact ms"]
    return _table(header, rows)


def _rule(result: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    rows = []
    for scope in result["scopes"]:
        auto, base = scope["variants"]["auto"], scope["variants"]["200"]
        rows.append(
            [
                _label(scope["layout"]),
                f"{scope['chunks']:,}",
                auto["ef_search"],
                f"{base['recall_at_10']:.3f} ({base['min_recall']:.1f})",
                f"{auto['recall_at_10']:.3f} ({auto['min_recall']:.1f})",
                f"{base['knn_ms']['p50']:.0f} / {base['knn_ms']['p95']:.0f}",
                f"{auto['knn_ms']['p50']:.0f} / {auto['knn_ms']['p95']:.0f}",
                f"{auto['knn_ms']['p50'] / base['knn_ms']['p50']:.2f}x",
            ]
        )
    header = ["index", "scope chunks", "ef sent", "recall ef 200 (min)", "recall rule (min)"]
    header += ["p50 / p95 ms ef 200", "p50 / p95 ms rule", "p50 rule / ef 200"]
    return _table(header, rows), result["scopes"]


def scope_recall_section(report: Report) -> None:
    result = read_result(NAME)
    if result is None:
        report.add(f"{TITLE}\n\nMissing: run `nice -n 10 python -m bench scope-recall`.")
        return
    rule_table, scopes = _rule(result)
    shared = [s for s in scopes if s["layout"] == "shared"]
    big = max(shared, key=lambda s: s["chunks"])
    auto, base = big["variants"]["auto"], big["variants"]["200"]
    ratio = auto["knn_ms"]["p50"] / base["knn_ms"]["p50"]
    smallest = min(shared, key=lambda s: s["chunks"])
    small_ok = smallest["variants"]["auto"]["recall_at_10"] >= 1.0 - 1e-9
    worst = min(scopes, key=lambda s: s["variants"]["auto"]["recall_at_10"])
    worst_recall = worst["variants"]["auto"]["recall_at_10"]
    every_size = worst_recall >= TARGET
    ok = auto["recall_at_10"] >= TARGET and ratio <= 2.0 and small_ok and every_size
    total = result["indexing"]["chunks"]
    report.headlines.append(
        (
            f"vector recall@10, a {big['chunks']:,}-chunk scope in a {total:,}-chunk shared "
            "index, ef_search by scope size (every size 1k-50k; small scopes)",
            ">= 0.95 at p50 <= 2x ef 200's; small scopes unchanged (1.00)",
            f"{auto['recall_at_10']:.3f} (ef 200: {base['recall_at_10']:.3f}); p50 "
            f"{ratio:.2f}x; lowest of every size and layout {worst_recall:.3f}; "
            f"{smallest['chunks']:,} chunks {smallest['variants']['auto']['recall_at_10']:.3f}",
            _met(ok),
        )
    )
    indexing = result["indexing"]
    report.add(
        f"""{TITLE}

The issue's shape at full size: **one shared index of {total:,} chunks** on the real
node, written by the product (`OpenSearchKnowledgeStore.index`, hashing embedder,
256 dimensions, HNSW m {result["hnsw"]["m"]} / ef_construction
{result["hnsw"]["ef_construction"]}, the synthetic corpus of section 9), holding probed
scopes of 1,000 to {big["chunks"]:,} chunks among {result["fillers"]:,} log-normal filler
scopes; the probed scopes grew in five steps between the fillers', nothing force-merged
({indexing["segments"]} segments at the end; {indexing["chunks_per_s"]:.0f} chunks/s on
this loaded machine). Then some probed scopes were copied (`_reindex`, same mapping)
into an index of their own: what `IndexPerAgent=true` gives an agent with one context
("own index": the scope is the whole index). For every scope {result["queries"]}
queries; each cell is vector recall@10 of the product's knn request (filters inside
the knn clause, `k` 40 as the store asks for 10 results) against exact scoring of the
same scope (`script_score` with `knn_score`, every chunk of it) / the request's p50 in
ms, client side. The variants of one query ran one after another in a rotating order,
so the same noise falls on all of them (load average at the end: {_load(result)}):
read ratios within a row, not absolute times.

{_sweep(result)}

**The product's rule** (`knowledge.stores.opensearch.scope_size`): `ef_search` =
max(`EfSearch`, chunks / {CHUNKS_PER_EF:g}) for a scope of more than
{LARGE_SCOPE_CHUNKS:,} chunks (at most {MAX_EF_SEARCH:,}), the scope's chunk count read
from the index once per scope (kept five minutes); `EfSearch` (200) below. Same run,
same queries; recall mean (minimum over the queries):

{rule_table}

The {big["chunks"]:,}-chunk scope: recall@10 **{auto["recall_at_10"]:.3f}** with the rule
(ef {auto["ef_search"]}) against {base["recall_at_10"]:.3f} at today's fixed 200, p50
{auto["knn_ms"]["p50"]:.0f} ms against {base["knn_ms"]["p50"]:.0f} ms (**{ratio:.2f}x**;
target <= 2x: {_met(ratio <= 2.0)}). Lowest recall over every size and layout with the
rule: {worst_recall:.3f} ({_label(worst["layout"])}, {worst["chunks"]:,} chunks).
Exact scoring of the {big["chunks"]:,}-chunk scope took {big["exact_ms"]["p50"]:.0f} ms
p50 ({big["exact_ms"]["p50"] / base["knn_ms"]["p50"]:.1f}x ef 200's).

{_provenance(result, NAME)}"""
    )
