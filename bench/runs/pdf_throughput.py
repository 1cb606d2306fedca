"""PDF pages/s per library; peak memory on a long PDF and a big XLSX.

PDF extraction throughput (pages/s) per library, and peak memory on large documents.

Pages/s: every extractor (``pypdfium2``, ``pypdf``, ``pdftotext``, and ``product`` when the
product under test extracts PDF) reads every real PDF of ``bench.corpora.documents.real_pdfs``,
``--repeat`` rounds, extractors interleaved within a round (the order rotates), in this
process. Both wall time and CPU time (user + system, pdftotext's child processes
included) are measured: on a shared, busy machine wall time mostly measures the other
processes, so pages per CPU-second is the figure compared; pages/s (wall) is kept for
reference. Each is pages of all files / the median round. ``pdftotext`` (poppler, C++,
a process per file) is the baseline every ratio is to.

Peak memory: each measurement in a fresh process (``bench/probes/document.py``) on a
generated PDF of ``--pdf-pages`` pages (man pages typeset by groff) and a generated XLSX
of ``--xlsx-rows`` rows: the libraries alone, and the product's extraction and whole
indexing path when it supports the format.

Documents/s end to end (extraction, chunking, embedding, writing) is measured by the
format-parity benchmark (``bench.runs.formats``), on the same corpus for every format.

Writes ``bench/results/pdf-throughput.json`` (pages/s) and ``document-memory.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common.environment import PROBES_DIR, cpu_seconds, log, write_result
from bench.common.pdf_libraries import extract_pages, page_count, poppler_version, product_supports
from bench.corpora.documents import big_xlsx, long_pdf, real_pdfs

__all__ = ["add_arguments", "main"]

PROBE = PROBES_DIR / "document.py"
BASELINE = "pdftotext"


def _probe(kind: str, path: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kb-probe-") as tmp:
        out = Path(tmp) / "out.json"
        subprocess.run([sys.executable, str(PROBE), kind, str(path), str(out)], check=True)
        result: dict[str, Any] = json.loads(out.read_text("utf-8"))
    log(f"{kind} on {path.name}: {result}")
    return result


def _pages_per_second(extractors: list[str], repeat: int) -> dict[str, Any]:
    files = real_pdfs()
    if not files:
        raise SystemExit("no real PDFs found: run bench/setup.sh")
    pages = {pdf.path: page_count(pdf.path) for pdf in files}
    total_pages = sum(pages.values())
    rounds: dict[str, list[float]] = {name: [] for name in extractors}
    cpu_rounds: dict[str, list[float]] = {name: [] for name in extractors}
    for round_index in range(repeat):
        shift = round_index % len(extractors)
        for name in extractors[shift:] + extractors[:shift]:
            cpu_started = cpu_seconds()
            started = time.perf_counter()
            for pdf in files:
                extract_pages(name, pdf.path)
            rounds[name].append(time.perf_counter() - started)
            cpu_rounds[name].append(cpu_seconds() - cpu_started)
            log(
                f"round {round_index + 1}: {name} {rounds[name][-1]:.2f} s wall, "
                f"{cpu_rounds[name][-1]:.2f} s CPU"
            )
    base = statistics.median(cpu_rounds[BASELINE]) if BASELINE in cpu_rounds else None
    per_extractor: dict[str, Any] = {}
    for name, times in rounds.items():
        median = statistics.median(times)
        cpu = statistics.median(cpu_rounds[name])
        per_extractor[name] = {
            "round_seconds": [round(t, 3) for t in times],
            "round_cpu_seconds": [round(t, 3) for t in cpu_rounds[name]],
            "median_seconds": round(median, 3),
            "median_cpu_seconds": round(cpu, 3),
            "pages_per_second": round(total_pages / median, 1),
            "pages_per_cpu_second": round(total_pages / cpu, 1),
            "cpu_vs_pdftotext": round(cpu / base, 3) if base else None,
        }
    return {
        "pdftotext": poppler_version(),
        "files": [
            {"file": pdf.path.name, "package": pdf.package, "pages": pages[pdf.path]}
            for pdf in files
        ],
        "total_pages": total_pages,
        "total_bytes": sum(pdf.path.stat().st_size for pdf in files),
        "repeat": repeat,
        "extractors": per_extractor,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeat", type=int, default=3, help="rounds over the files")
    parser.add_argument("--pdf-pages", type=int, default=1000, help="pages of the long PDF")
    parser.add_argument("--xlsx-rows", type=int, default=100_000, help="rows of the big sheet")
    parser.add_argument(
        "--skip-memory", action="store_true", help="pages/s only (no large-file probes)"
    )
    parser.add_argument(
        "--skip-throughput", action="store_true", help="large-file probes only (no pages/s)"
    )


def main(args: argparse.Namespace) -> None:
    extractors = ["pdftotext", "pypdfium2", "pypdf"]
    not_measured: dict[str, str] = {}
    pdf_product = product_supports(".pdf")
    xlsx_product = product_supports(".xlsx")
    if pdf_product:
        extractors.append("product")
    else:
        not_measured["product PDF"] = "the product under test does not extract .pdf"
    if not xlsx_product:
        not_measured["product XLSX"] = "the product under test does not extract .xlsx"
    if not args.skip_throughput:
        write_result(
            "pdf-throughput",
            {
                "throughput": _pages_per_second(extractors, args.repeat),
                "not_measured": {k: v for k, v in not_measured.items() if "PDF" in k},
            },
        )
    if args.skip_memory:
        return
    pdf = long_pdf(args.pdf_pages)
    xlsx = big_xlsx(args.xlsx_rows)
    pdf_kinds = ["pdftotext", "pypdfium2", "pypdf"]
    pdf_kinds += ["product", "product-index"] if pdf_product else []
    xlsx_kinds = ["openpyxl-read-only", "openpyxl-full"]
    xlsx_kinds += ["product", "product-index"] if xlsx_product else []
    memory = {
        "pdf": {
            "file": pdf.name,
            "pages": page_count(pdf),
            "bytes": pdf.stat().st_size,
            "probes": [_probe(kind, pdf) for kind in pdf_kinds],
        },
        "xlsx": {
            "file": xlsx.name,
            "rows": args.xlsx_rows,
            "columns": 8,
            "bytes": xlsx.stat().st_size,
            "probes": [_probe(kind, xlsx) for kind in xlsx_kinds],
        },
    }
    write_result("document-memory", {"memory": memory, "not_measured": not_measured})
