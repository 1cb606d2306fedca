"""One memory measurement in a fresh interpreter: ``python bench/document_probe.py KIND FILE OUT``.

Imports what ``KIND`` needs, reads the peak resident set size (``ru_maxrss``: the
interpreter and the imports), does the work, reads the peak again and writes both to
``OUT`` (JSON), with the peak of child processes (pdftotext runs as one). Kinds:

- ``pypdfium2``, ``pypdf``, ``pdftotext``: extract every page's text of the PDF ``FILE``;
- ``openpyxl-read-only``: stream the rows of the XLSX ``FILE`` (``read_only=True``) and
  render each as ``header: value`` lines, as an extractor would; ``openpyxl-full``: the
  same after loading the whole workbook (the default mode), for contrast;
- ``product``: ``knowledge.extraction.extract_text(FILE)`` of the code under test;
- ``product-index``: index ``FILE``'s folder (only ``FILE`` in it) into a new embedded
  store with the hashing embedder, as ``kb index`` does: the whole product path.

Run by ``bench.document_throughput``.
"""

import json
import resource
import sys
import tempfile
import time
from pathlib import Path


def _peak_mib(who: int = resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024.0  # KiB on Linux


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
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    work: dict[str, object] = {}
    if kind in ("pypdfium2", "pypdf", "pdftotext"):
        import pypdf  # noqa: F401 - both libraries' code is counted in the baseline
        import pypdfium2  # noqa: F401

        from bench.pdf_libraries import extract_pages

        baseline = _peak_mib()
        started = time.perf_counter()
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

        from knowledge.embedding.hashing import HashingEmbedder
        from knowledge.model import IndexOptions
        from knowledge.scope import KnowledgeScope
        from knowledge.sources.local import LocalDirectorySource
        from knowledge.stores.embedded import EmbeddedKnowledgeStore

        with tempfile.TemporaryDirectory(prefix="kb-probe-") as tmp:
            store = EmbeddedKnowledgeStore(Path(tmp) / "probe.db", embedder=HashingEmbedder())
            options = IndexOptions(file_patterns=(f"*{path.suffix}",), max_documents=10)
            baseline = _peak_mib()
            started = time.perf_counter()
            result = store.index(
                KnowledgeScope("bench", "probe"), LocalDirectorySource(path.parent), options
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
                "child_peak_mib": round(_peak_mib(resource.RUSAGE_CHILDREN), 1),
                "seconds": round(seconds, 2),
                **work,
            }
        ),
        encoding="utf-8",
    )


if __name__ == "__main__":
    main()
