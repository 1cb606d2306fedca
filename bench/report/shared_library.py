"""``bench/REPORT.md`` section 11: a granted agent's search with its shared libraries, one
store query vs one search per scope (``bench/runs/shared_library.py``)."""

from __future__ import annotations

from typing import Any

from bench.common.environment import read_result
from bench.report.helpers import Report, _provenance, _table

__all__ = ["section_text", "shared_section"]

NAME = "shared-library"
TITLE = "## 11. Shared library: one store query vs one search per scope"


def section_text(result: dict[str, Any]) -> str:
    corpus = result["corpus"]
    header = ["store", "mode", "one query p50 ms", "p95", "N searches p50 ms", "p95", "ratio"]
    rows = []
    for store, modes in result["stores"].items():
        for mode, run in modes.items():
            one, many = run["one-query"], run["n-search"]
            rows.append(
                [
                    store,
                    mode,
                    f"{one['p50']:.2f}",
                    f"{one['p95']:.2f}",
                    f"{many['p50']:.2f}",
                    f"{many['p95']:.2f}",
                    f"{run['p50_ratio_one_over_n']:.2f}x",
                ]
            )
    scopes = corpus["libraries"] + 1
    return (
        f"{TITLE}\n\n"
        f"An agent's scope of {corpus['own_documents']} documents and "
        f"{corpus['libraries']} granted libraries of {corpus['documents_per_library']} each "
        "(seeded random words), searched with the libraries included, "
        f"{corpus['max_results']} results, {corpus['iterations']} queries per mode. "
        "`one query` is the product (`knowledge.core.scope_set`: one filter over the scope set); "
        f"`N searches` is round 9's way, rebuilt in the bench: {scopes} searches "
        "(the agent's, then each library's) merged by score. The two take turns on every "
        "query (the first alternating), so both see the same machine; ratio = one query's "
        "p50 / N searches' p50 (below 1: faster).\n\n"
        + _table(header, rows)
        + "\n\nThe one query also ranks better by construction (one normalisation over every "
        "scope; N searches gave each scope its own 1.0), which no latency figure shows. "
        "The machine was shared with other work while this ran: read the ratios, not the "
        "absolute times.\n\n" + _layout_text(result) + _provenance(result, NAME)
    )


def _layout_text(result: dict[str, Any]) -> str:
    layouts = result.get("layout") or {}
    if not layouts:
        return ""
    corpus = result["corpus"]
    header = ["store", "mode", "per library p50 ms", "p95", "one library p50 ms", "p95", "ratio"]
    rows = []
    for store, modes in layouts.items():
        for mode, run in modes.items():
            apart, together = run["per-library"], run["one-library"]
            rows.append(
                [
                    store,
                    mode,
                    f"{apart['p50']:.2f}",
                    f"{apart['p95']:.2f}",
                    f"{together['p50']:.2f}",
                    f"{together['p95']:.2f}",
                    f"{run['p50_ratio_per-library_over_one-library']:.2f}x",
                ]
            )
    return (
        "**Layout: a table / index per library.** Where a store keeps statistics apart "
        '(embedded `isolation="agent"`, OpenSearch with an index per agent) each library '
        "is a table / index of its own, so that a library an agent is not granted changes "
        "nothing it can measure; the one query then reads "
        f"{corpus['libraries'] + 1} of them instead of 2 (the agent's and `_shared`'s one, "
        "before). `per library` is the product's query over the "
        f"{corpus['libraries']} libraries; `one library` the same query over one library "
        f"holding all their {corpus['libraries'] * corpus['documents_per_library']} documents "
        "(the old layout's shape), in turns on the same store; ratio = per library / one "
        "library. The baseline also names one library scope instead of "
        f"{corpus['libraries']}: the embedded store's vector mode reads no keyword table, so "
        "its ratio is that difference alone, not the layout's; the keyword and hybrid ratios "
        "bound the layout's cost from above. On OpenSearch the one request names "
        f"{corpus['libraries'] + 1} indexes instead of 2.\n\n" + _table(header, rows) + "\n\n"
    )


def shared_section(report: Report) -> None:
    result = read_result(NAME)
    if result is None:
        report.add(f"{TITLE}\n\nMissing: run `nice -n 10 python -m bench shared-library`.")
        return
    report.add(section_text(result))
