"""``bench/REPORT.md`` sections 4 and 5: cold start of the Lambda handlers, and memory while
indexing one large file."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.common.environment import read_result
from bench.report.helpers import (
    _load_note,
    _met,
    _provenance,
    _pyplot,
    _save,
)
from bench.report.layout import Report
from bench.report.layout import table as _table

__all__ = ["coldstart_section", "memory_section"]


# --- cold start ------------------------------------------------------------------------------


# How the section names each handler the result measures; a handler not named here shows
# under its own name, so a new coldstart target needs no change here.
HANDLER_NAMES = {
    "search": "search handler (keyword mode)",
    "indexer": "indexer handler",
    "dispatcher": "dispatcher handler",
    "mcp": "MCP handler (keyword mode)",
    "naive": "naive handler",
}


def _handler_name(key: str) -> str:
    target, _, invoke = key.partition("+")
    name = HANDLER_NAMES.get(target, f"{target} handler")
    return f"{name} + first request" if invoke else name


def _cold_ms(entry: dict[str, Any]) -> float:
    """The row's cold start: the import, and the first request when the row makes one."""
    return float(entry.get("import_plus_invoke_ms", entry["import_ms"])["p50"])


def _over_naive(rows: dict[str, Any], key: str) -> float:
    """The row's cold start over the naive handler's in the same copy and run (import to
    import, import + first request to import + first request)."""
    naive = rows["naive+invoke" if "+" in key else "naive"]
    return _cold_ms(rows[key]) / _cold_ms(naive)


def coldstart_section(report: Report) -> None:
    result = read_result("coldstart")
    parts = ["## 4. Cold start of the Lambda handlers (as Lambda runs them)"]
    if result is None or "variants" not in result:
        parts.append("Not run yet on this code: `make bench-coldstart`.")
        report.add("\n\n".join(parts))
        return
    v = result["variants"]
    keys = list(v["bytecode"])  # every row the run measured, in its order
    handlers = [k for k in keys if "+" not in k and k != "naive"]
    parts.append(
        "The layers and the functions as `sam build` makes them (`layers/knowledge/Makefile`, "
        "`functions/*/Makefile`: the locked requirements, for this machine's platform instead "
        f"of arm64), on Python {result['python_version']}. Each run is a new "
        "`python3.12 -S -s` process with `PYTHONDONTWRITEBYTECODE=1` and only the function "
        "folder and its layer on `sys.path`: Lambda's code and layer folders are read-only, "
        "so nothing compiled is ever kept (checked after the runs: the `source` copy holds "
        "no `.pyc`). **source** = a build without bytecode (every module compiled at every "
        "cold start); **bytecode** = the shipped `unchecked-hash` pycs. "
        f"{result['runs']} measured runs per row, round-robin, after {result['warmup']} "
        "unmeasured. `+ first request`: then one request through `lambda_handler`: a keyword "
        "search against the real node (search, naive), the same search as one MCP "
        "`tools/call` (MCP, on its own layer with the MCP SDK), an SQS batch with one S3 "
        "delete notification (indexer: S3 on loopback says the object is gone, the delete "
        "goes to the node). The dispatcher is measured on import only: its first request "
        "needs SQS. `naive` is `bench/probes/naive_handler.py` (boto3, openai, opensearch-py and "
        "Powertools at the top, then the same search function), built the same way. "
        "Times in ms, median (p95); `x naive` = the row's median over the naive handler's "
        "(import to import, import + first request to import + first request), same copy "
        "and run."
    )
    rows = []
    for key in keys:
        cells = [_handler_name(key)]
        for variant in ("source", "bytecode"):
            e = v[variant][key]
            first = e.get("import_plus_invoke_ms")
            cells.append(f"{e['import_ms']['p50']:.0f} ({e['import_ms']['p95']:.0f})")
            cells.append("-" if first is None else f"{first['p50']:.0f} ({first['p95']:.0f})")
            naive_row = key.split("+")[0] == "naive"
            cells.append("-" if naive_row else f"{_over_naive(v[variant], key):.2f}x")
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
                "source: x naive",
                "bytecode: import",
                "bytecode: import + first request",
                "bytecode: x naive",
                "modules",
                "SDKs loaded (after the request, if any)",
            ],
            rows,
        )
    )
    r = result["ratios"]
    targets = result["targets_set"]
    limit = targets["search_import_max_ms"]
    minimum = targets["naive_over_search_min"]
    share = targets["handler_over_naive_max"]
    search = v["bytecode"]["search"]["import_ms"]["p50"]
    source = v["source"]["search"]["import_ms"]["p50"]
    naive = v["bytecode"]["naive"]["import_ms"]["p50"]
    ratio = r["bytecode"]["naive_over_search_import"]
    ok = search <= limit and ratio >= minimum
    size = result["layer_bytes"] / 1e6
    pyc = result["layer_bytecode_bytes"] / 1e6
    shares = {k: _over_naive(v["bytecode"], k) for k in handlers}
    parts.append(
        f"Search handler import with the shipped bytecode: **{search:.0f} ms** (target <= "
        f"{limit} ms: {_met(search <= limit)}); naive / search, both with bytecode: "
        f"**{ratio:.1f}x** (target >= {minimum:.0f}x: {_met(ratio >= minimum)}); without "
        f"bytecode (the baseline, same run): search {source:.0f} ms, naive / search "
        f"{r['source']['naive_over_search_import']:.1f}x. Each handler's import over the "
        f"naive handler's, with bytecode (target <= {share:g}x): "
        + ", ".join(f"{k} {x:.2f}x ({_met(x <= share)})" for k, x in shares.items())
        + ". The bytecode makes each import "
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
            ", ".join(f"{h['package']} {h['cumulative_ms']:.0f}" for h in packages),
        ]
        for variant in ("source", "bytecode")
        for target, packages in heavy[variant].items()
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
            f"{naive:.0f} ms ({ratio:.1f}x)",
            _met(ok),
        )
    )
    for key in handlers:
        ms = v["bytecode"][key]["import_ms"]["p50"]
        report.headlines.append(
            (
                f"Cold start, {_handler_name(key)} / naive handler (import, read-only, "
                "shipped bytecode, p50, same run)",
                f"<= {share:g}x naive",
                f"{shares[key]:.2f}x ({ms:.0f} vs {naive:.0f} ms)",
                _met(shares[key] <= share),
            )
        )
    parts.append(_provenance(result, "coldstart"))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 0.8 + 0.45 * len(keys)))
    height = 0.38
    for i, variant in enumerate(("source", "bytecode")):
        values = [_cold_ms(v[variant][k]) for k in keys]
        ys = [y + (i - 0.5) * height for y in range(len(keys))]
        bars = ax.barh(ys, values, height, label=variant)
        ax.bar_label(bars, fmt="%.0f", fontsize=7)
    ax.set_yticks(range(len(keys)), [_handler_name(k) for k in keys])
    ax.axvline(limit, color="grey", linestyle="--", linewidth=1, label=f"target: {limit} ms")
    ax.legend(fontsize=8, loc="upper right")  # beside the short import-only rows
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
        "Each row indexes a generated Markdown corpus (`bench.runs.memory.generate_markdown`, "
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
