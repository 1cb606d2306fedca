"""One memory measurement in a fresh interpreter: ``python bench/probes/document.py KIND FILE OUT``.

Imports what ``KIND`` needs, reads the peak resident set size (``VmHWM``: the
interpreter and the imports), does the work, reads the peak again and writes both to
``OUT`` (JSON), with pdftotext's own peak (it runs as a child process). Kinds:

- ``pypdfium2``, ``pypdf``, ``pdftotext``: extract every page's text of the PDF ``FILE``;
- ``openpyxl-read-only``: stream the rows of the XLSX ``FILE`` (``read_only=True``) and
  render each as ``header: value`` lines, as an extractor would; ``openpyxl-full``: the
  same after loading the whole workbook (the default mode), for contrast;
- ``product``: ``knowledge.extraction.extract_text(FILE)`` of the code under test;
- ``product-index``: index ``FILE``'s folder (only ``FILE`` in it) into a new embedded
  store with the hashing embedder, as ``kb index`` does: the whole product path.

Run by ``bench.runs.pdf_throughput``.
"""

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from knowledge.ingest.pipeline import index_source


def _status_kib(field: str, pid: str = "self") -> float | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def _peak_mib() -> float:
    """Peak RSS of this process so far: ``VmHWM``, which starts anew at ``exec``.
    (``ru_maxrss`` does not: it keeps the high-water mark of the process that forked it,
    so a probe started by a big benchmark process would report that process's size.)"""
    kib = _status_kib("VmHWM")
    if kib is None:  # not Linux
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return kib / 1024.0


def _pdftotext_peak_mib(path: Path) -> tuple[list[str], float]:
    """pdftotext's pages and its peak RSS, read from its ``VmHWM`` every 20 ms while it runs
    (a lower bound within the last 20 ms; its pages stream out through the pipe)."""
    process = subprocess.Popen(
        ["pdftotext", "-q", "-enc", "UTF-8", str(path), "-"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    peak = 0.0
    chunks: list[bytes] = []
    stdout = process.stdout
    assert stdout is not None
    os.set_blocking(stdout.fileno(), False)
    while True:
        kib = _status_kib("VmHWM", str(process.pid))
        if kib is not None:
            peak = max(peak, kib / 1024.0)
        data = stdout.read()
        if data:
            chunks.append(data)
        if process.poll() is not None:
            rest = stdout.read()
            if rest:
                chunks.append(rest)
            break
        time.sleep(0.02)
    if process.returncode != 0:
        raise SystemExit(f"pdftotext failed with exit {process.returncode}")
    pages = b"".join(chunks).decode("utf-8", "replace").split("\f")
    return (pages[:-1] if pages and pages[-1] == "" else pages), peak


def _xlsx_rows(path: Path, read_only: bool) -> tuple[int, int]:
    from openpyxl import load_workbook

    book = load_workbook(path, read_only=read_only, data_only=True)
    rows = 0
    characters = 0
    try:
        for sheet in book.worksheets:
            header: list[str] = []
            for values in sheet.iter_rows(values_only=True):
                if not header:
                    header = [str(v) for v in values]
                    continue
                line = "; ".join(
                    f"{name}: {value}"
                    for name, value in zip(header, values, strict=False)
                    if value is not None
                )
                characters += len(line) + 1
                rows += 1
    finally:
        if read_only:
            book.close()
    return rows, characters


def main() -> None:
    kind, path, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    work: dict[str, object] = {}
    child_peak = 0.0
    if kind in ("pypdfium2", "pypdf", "pdftotext"):
        import pypdf  # noqa: F401 - both libraries' code is counted in the baseline
        import pypdfium2  # noqa: F401

        from bench.common.pdf_libraries import extract_pages

        baseline = _peak_mib()
        started = time.perf_counter()
        if kind == "pdftotext":
            pages, child_peak = _pdftotext_peak_mib(path)
        else:
            pages = extract_pages(kind, path)
        work = {"pages": len(pages), "characters": sum(len(p) for p in pages)}
    elif kind in ("openpyxl-read-only", "openpyxl-full"):
        import openpyxl  # noqa: F401 - counted in the baseline

        baseline = _peak_mib()
        started = time.perf_counter()
        rows, characters = _xlsx_rows(path, read_only=kind == "openpyxl-read-only")
        work = {"rows": rows, "characters": characters}
    elif kind == "product":
        from knowledge.extraction import extract_text

        baseline = _peak_mib()
        started = time.perf_counter()
        text = extract_text(path.name, path.read_bytes()).text
        work = {"characters": len(text)}
    elif kind == "product-index":
        import numpy  # noqa: F401 - the store loads it on the first vector write

        from knowledge.core.model import IndexOptions
        from knowledge.core.scope import KnowledgeScope
        from knowledge.embedding.hashing import HashingEmbedder
        from knowledge.ingest.sources.folders import LocalDirectorySource
        from knowledge.stores.embedded import EmbeddedKnowledgeStore

        with tempfile.TemporaryDirectory(prefix="kb-probe-") as tmp:
            store = EmbeddedKnowledgeStore(Path(tmp) / "probe.db", embedder=HashingEmbedder())
            options = IndexOptions(file_patterns=(f"*{path.suffix}",), max_documents=10)
            baseline = _peak_mib()
            started = time.perf_counter()
            result = index_source(
                store, KnowledgeScope("bench", "probe"), LocalDirectorySource(path.parent), options
            )
            store.close()
        if result.errors or result.skipped or result.indexed_documents != 1:
            raise SystemExit(f"not indexed: {result.errors} {result.skipped}")
        work = {"chunks": result.indexed_chunks}
    else:
        raise SystemExit(f"unknown kind {kind!r}")
    seconds = time.perf_counter() - started
    peak = _peak_mib()
    out.write_text(
        json.dumps(
            {
                "kind": kind,
                "baseline_peak_mib": round(baseline, 1),
                "peak_mib": round(peak, 1),
                "growth_mib": round(peak - baseline, 1),
                "child_peak_mib": round(child_peak, 1),
                "seconds": round(seconds, 2),
                **work,
            }
        ),
        encoding="utf-8",
    )


if __name__ == "__main__":
    main()
