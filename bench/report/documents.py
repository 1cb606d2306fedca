"""The report's section on real documents: format parity, PDF fidelity, throughput, memory.

Reads ``formats-<corpus>-<embedder>.json``, ``pdf-fidelity.json`` and
``pdf-throughput.json`` (``make bench-documents``); called by ``bench.report.writer``.
"""

from __future__ import annotations

from typing import Any

from bench.common.environment import RESULTS_DIR, read_result
from bench.report.helpers import Report, _met, _table
from bench.report.helpers import _provenance as _plain_provenance

__all__ = ["documents_section"]

_MODES = ("keyword", "vector", "hybrid")
_OWN_PACKAGE = "layers/knowledge/knowledge"


def _provenance(result: dict[str, Any], name: str) -> str:
    text = _plain_provenance(result, name)
    package = result.get("product_package", _OWN_PACKAGE)
    if package != _OWN_PACKAGE:
        text += (
            f" The product code measured was not this checkout's but `{package}` (put first "
            "on `PYTHONPATH`): a branch not merged yet."
        )
    return text


def _format_runs() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(RESULTS_DIR.glob("formats-*.json")):
        name = path.stem
        result = read_result(name)
        if result is not None:
            found.append((name, result))
    return found


def _parity(report: Report, parts: list[str]) -> None:
    runs = _format_runs()
    parts.append("### 6.1 Parity across formats (the man-pages benchmark as PDF, DOCX, HTML)")
    if not runs:
        parts.append("Not run yet: `make bench-documents`.")
        return
    parts.append(
        "The benchmark pages are rendered from the same man sources (NAME section removed, "
        "as in the Markdown corpus) to PDF by groff's PDF device and to DOCX and HTML by "
        "pandoc's man reader (`bench/corpora/documents.py`). Each rendering is indexed into a "
        "fresh embedded store with the product's `reindex_source` and every query is run in every "
        "mode; a hit counts for its page in any format. `product` = the product's own "
        "extractor; `pypdfium2`/`pypdf`/`pdftotext` = that library's text of each PDF "
        "indexed by the product as a text document (library level, to compare the "
        "candidates). Target: MRR@10 within 0.03 of the Markdown corpus, same embedder. "
        "Docs per CPU-s is the indexing rate end to end (extraction, chunking, embedding, "
        "writing) per CPU-second of the benchmark process (wall time on this shared "
        "machine mostly measures the neighbours; it is in the JSON)."
    )
    for name, result in runs:
        embedder = result["embedder"]["name"]
        rows = []
        worst: dict[str, float] = {}
        for run in result["runs"]:
            label = f"{run['format']} / {run['extractor']}"
            cells: list[object] = [label, run["indexing"]["documents"]]
            for mode in _MODES:
                scores = run["modes"].get(mode)
                if scores is None:
                    cells.append("-")
                    continue
                delta = run["mrr_delta"][mode]
                cells.append(
                    f"{scores['mrr_at_10']:.3f}"
                    + ("" if run["format"] == "markdown" else f" ({delta:+.3f})")
                )
            per_cpu = run["indexing"].get("documents_per_cpu_second")
            cells += [
                f"{per_cpu:.1f}" if per_cpu else "-",
                f"{run['indexing']['rate_vs_markdown']:.2f}x",
                "baseline" if run["format"] == "markdown" else _met(run["within_target"]),
            ]
            rows.append(cells)
            if run["format"] != "markdown":
                key = f"{run['format']}/{run['extractor']}"
                worst[key] = max(abs(d) for d in run["mrr_delta"].values())
        corpus = result["corpus"]
        parts.append(
            f"**{corpus['name']}, {embedder}** ({corpus['documents']} pages, "
            f"{corpus['queries']} queries):"
        )
        parts.append(
            _table(
                [
                    "format / extractor",
                    "docs",
                    "keyword MRR@10 (vs md)",
                    "vector MRR@10 (vs md)",
                    "hybrid MRR@10 (vs md)",
                    "docs per CPU-s",
                    "rate vs md",
                    "within 0.03",
                ],
                rows,
            )
        )
        cache = result.get("embedding_cache")
        if cache and cache.get("hits"):
            parts.append(
                f"The embedding cache served {cache['hits']} of "
                f"{cache['hits'] + cache['misses']} vectors in this run (some texts were "
                "embedded by an earlier run), so its docs per CPU-s are not comparable "
                "between formats; the hashing run's are."
            )
        failures = {
            fmt: len(r["failures"]) for fmt, r in result["renderings"].items() if r["failures"]
        }
        if failures:
            parts.append(f"Pages that failed to render (count as misses): {failures}.")
        for item in result.get("not_measured", []):
            parts.append(
                f"Not measured: {item['format']} through the product ({item['reason']} in the "
                "code measured)."
            )
        parts.append(_provenance(result, name))
        for key, delta in sorted(worst.items()):
            report.headlines.append(
                (
                    f"Format parity {key} ({embedder}, {corpus['name']})",
                    "MRR@10 within 0.03 of Markdown",
                    f"largest MRR@10 change over modes {delta:.3f}",
                    _met(delta <= result["target_delta"]),
                )
            )


def _fidelity(report: Report, parts: list[str]) -> None:
    result = read_result("pdf-fidelity")
    parts.append("### 6.2 PDF extraction fidelity (token F1 against poppler's pdftotext)")
    if result is None:
        parts.append("Not run yet: `make bench-documents`.")
        return
    candidates = list(result["summary"])
    parts.append(
        "Real PDFs shipped by Debian packages (manuals typeset by pdfTeX, groff and DocBook "
        "tool chains). Each candidate's whole-document text is compared with `pdftotext`'s "
        "(`bench.common.metrics.token_f1`: multiset of NFKC-normalised, case-folded word tokens; "
        "order-insensitive). Target F1 >= 0.95."
    )
    rows = []
    for row in result["files"]:
        rows.append(
            [f"{row['file'].split('--', 1)[-1]} ({row['package']})", row["pages"]]
            + [row["scores"][c]["f1"] for c in candidates]
        )
    rows.append(
        ["**macro mean**", sum(r["pages"] for r in result["files"])]
        + [result["summary"][c]["macro_f1"] for c in candidates]
    )
    rows.append(
        ["**micro (pooled tokens)**", ""]
        + [result["summary"][c]["micro"]["f1"] for c in candidates]
    )
    parts.append(_table(["file (Debian package)", "pages", *candidates], rows, "{:.4f}"))
    for name, reason in result.get("not_measured", {}).items():
        parts.append(f"Not measured: {name} ({reason}).")
    parts.append(_provenance(result, "pdf-fidelity"))
    for candidate in candidates:
        s = result["summary"][candidate]
        report.headlines.append(
            (
                f"PDF token F1 vs pdftotext: {candidate}",
                ">= 0.95",
                f"macro {s['macro_f1']:.3f}, min {s['min_f1']:.3f} "
                f"({s['files_at_target']}/{len(result['files'])} files)",
                _met(s["meets_target"]),
            )
        )


def _throughput(report: Report, parts: list[str]) -> None:
    result = read_result("pdf-throughput")
    parts.append("### 6.3 PDF extraction throughput")
    if result is None:
        parts.append("Not run yet: `make bench-documents`.")
        return
    t = result["throughput"]
    parts.append(
        f"Pages per CPU-second over the same {len(t['files'])} real PDFs as in 6.2 "
        f"({t['total_pages']} pages, {t['total_bytes'] / 1e6:.1f} MB), {t['repeat']} "
        f"round{'s' if t['repeat'] != 1 else ''} with the extractors "
        "interleaved in one process (median round). CPU time counts user + system time, "
        "pdftotext's child processes included (one per file); it is the figure compared, "
        "since wall time on this shared machine mostly measures the other processes."
    )
    rows = [
        [
            name,
            e["pages_per_cpu_second"],
            f"{e['cpu_vs_pdftotext']:.2f}x" if e.get("cpu_vs_pdftotext") else "-",
            e["median_cpu_seconds"],
            e["pages_per_second"],
        ]
        for name, e in sorted(
            t["extractors"].items(), key=lambda item: -item[1]["pages_per_cpu_second"]
        )
    ]
    parts.append(
        _table(
            [
                "extractor",
                "pages per CPU-second",
                "CPU time vs pdftotext",
                "median CPU s",
                "pages/s (wall, shared machine)",
            ],
            rows,
            "{:.1f}",
        )
    )
    for name, reason in result.get("not_measured", {}).items():
        parts.append(f"Not measured: {name} ({reason}).")
    parts.append(_provenance(result, "pdf-throughput"))
    e = t["extractors"]
    if "pypdfium2" in e and "pypdf" in e:
        report.headlines.append(
            (
                "PDF pages per CPU-second: pypdfium2 / pypdf / pdftotext",
                "measured against pdftotext",
                f"{e['pypdfium2']['pages_per_cpu_second']:.0f} / "
                f"{e['pypdf']['pages_per_cpu_second']:.0f} / "
                f"{e['pdftotext']['pages_per_cpu_second']:.0f}",
                "-",
            )
        )


def _memory(report: Report, parts: list[str]) -> None:
    result = read_result("document-memory")
    parts.append("### 6.4 Peak memory on a long PDF and a big XLSX")
    if result is None:
        parts.append("Not run yet: `make bench-documents`.")
        return
    memory = result["memory"]
    if memory is not None:
        parts.append(
            "Each measurement in a fresh process (`bench/probes/document.py`): its RSS "
            "high-water mark (`VmHWM`) after the imports and after the work; pdftotext's own "
            "peak is sampled from its `VmHWM` every 20 ms (child peak). `product` = "
            "`extract_text` (the whole text, as one string); `product-index` = the file "
            "indexed as `kb index` does (embedded store, hashing embedder). The XLSX row "
            "`openpyxl-full` (the default, non-streaming mode) shows what streaming saves."
        )
        rows = []
        for fmt in ("pdf", "xlsx"):
            info = memory[fmt]
            what = (
                f"{info['pages']}-page PDF ({info['bytes'] / 1e6:.1f} MB)"
                if fmt == "pdf"
                else f"{info['rows']}-row XLSX ({info['bytes'] / 1e6:.1f} MB)"
            )
            for probe in info["probes"]:
                rows.append(
                    [
                        what,
                        probe["kind"],
                        probe["seconds"],
                        probe["baseline_peak_mib"],
                        probe["peak_mib"],
                        probe["growth_mib"],
                        probe["child_peak_mib"] if probe["kind"] == "pdftotext" else "-",
                    ]
                )
        parts.append(
            _table(
                [
                    "file",
                    "extractor",
                    "seconds",
                    "RSS after imports (MiB)",
                    "peak RSS (MiB)",
                    "growth (MiB)",
                    "child peak (MiB)",
                ],
                rows,
                "{:.1f}",
            )
        )
    for name, reason in result.get("not_measured", {}).items():
        parts.append(f"Not measured: {name} ({reason}).")
    parts.append(_provenance(result, "document-memory"))
    for fmt, label in (("pdf", "1,000-page PDF"), ("xlsx", "100k-row XLSX")):
        probes = {p["kind"]: p for p in memory[fmt]["probes"]}
        shown = [k for k in ("product-index", "product") if k in probes]
        if not shown:
            continue
        report.headlines.append(
            (
                f"Peak RSS, {label} ({memory[fmt]['file']})",
                "bounded (streamed)",
                "; ".join(
                    f"{k}: {probes[k]['peak_mib']:.0f} MiB (+{probes[k]['growth_mib']:.0f})"
                    for k in shown
                ),
                "-",
            )
        )


def documents_section(report: Report) -> None:
    parts = ["## 6. Real documents: format parity, PDF fidelity, throughput"]
    _parity(report, parts)
    _fidelity(report, parts)
    _throughput(report, parts)
    _memory(report, parts)
    report.add("\n\n".join(parts))
