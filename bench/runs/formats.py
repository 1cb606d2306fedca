"""Format parity: the man-pages benchmark as PDF, DOCX and HTML vs Markdown.

Parity across formats: the man-pages benchmark as Markdown, PDF, DOCX and HTML.

The corpus (``bench.corpora.manpages``) is rendered from the same man sources to PDF (groff),
DOCX and HTML (pandoc) by ``bench.corpora.documents.load_rendering``. Each format is indexed
into a fresh store with the product's ``reindex_source`` and every query is sent in every
mode with ``bench.runs.quality.score_modes``; a hit counts for its page whatever the format
(``bench.corpora.documents.document_key``). Two kinds of run per format:

- ``product``: the files themselves through the product's own extraction
  (``LocalDirectorySource``, ``IndexOptions(file_patterns=("*.<fmt>",))``), measured only
  when the product under test extracts that format (else listed as not measured);
- for PDF also one run per library (``pypdfium2``, ``pypdf``, ``pdftotext``) through
  ``bench.common.pdf_libraries.LibrarySource``: the library's text of each PDF indexed by the
  product as a ``.txt`` document, to compare libraries before, and next to, the product.

Target: MRR@10 of each format within 0.03 of the Markdown corpus, same embedder and store.
The indexing of each run gives documents per CPU-second end to end (extraction, chunking,
embedding, writing; CPU time, since wall time on a shared machine measures the neighbours;
wall-clock documents/s is kept too), against the Markdown corpus in the same run.

Writes ``bench/results/formats-<corpus>-<embedder>.json``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common.embedding_cache import CachingEmbedder
from bench.common.environment import cpu_seconds, log, write_result
from bench.common.pdf_libraries import LibrarySource, product_supports
from bench.common.stores import EMBEDDERS, SCOPE, make_embedder, open_store
from bench.corpora.documents import FORMATS, document_key, load_rendering
from bench.corpora.manpages import load_corpus
from bench.runs.quality import DEFAULT_CHUNKS, score_modes
from knowledge.core.model import IndexOptions
from knowledge.core.source import DocumentSource
from knowledge.ingest.pipeline import reindex_source
from knowledge.ingest.sources.folders import LocalDirectorySource

__all__ = ["TARGET_DELTA", "add_arguments", "main"]

TARGET_DELTA = 0.03
PDF_LIBRARIES = ("pypdfium2", "pypdf", "pdftotext")


def _run(
    label: str,
    source: DocumentSource,
    options: IndexOptions,
    queries: Any,
    embedder: Any,
    workdir: Path,
    chunks: int,
) -> dict[str, Any]:
    store = open_store("embedded", embedder, workdir=workdir)
    try:
        cpu_started = cpu_seconds()
        started = time.perf_counter()
        result = reindex_source(store, SCOPE, source, options)
        seconds = time.perf_counter() - started
        cpu = cpu_seconds() - cpu_started
        log(
            f"{label}: {result.indexed_documents} docs / {result.indexed_chunks} chunks in "
            f"{seconds:.1f} s ({cpu:.1f} s CPU), {len(result.errors)} errors, "
            f"{len(result.skipped)} skipped"
        )
        modes = score_modes(store, queries, chunks, key=document_key)
    finally:
        store.close()
    return {
        "indexing": {
            "documents": result.indexed_documents,
            "chunks": result.indexed_chunks,
            "seconds": round(seconds, 2),
            "cpu_seconds": round(cpu, 2),
            "documents_per_second": round(result.indexed_documents / seconds, 2)
            if seconds
            else None,
            "documents_per_cpu_second": round(result.indexed_documents / cpu, 2) if cpu else None,
            "errors": [p.to_dict() for p in result.errors][:20],
            "error_count": len(result.errors),
            "skipped": len(result.skipped),
        },
        "modes": modes,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=300, help="pages (0 = all); default 300")
    parser.add_argument("--embedder", choices=EMBEDDERS, default="hashing")
    parser.add_argument("--formats", default=",".join(FORMATS), help="of: pdf,docx,html")
    parser.add_argument(
        "--pdf-libraries",
        default=",".join(PDF_LIBRARIES),
        help="library-level PDF runs (comma-separated; empty for none)",
    )
    parser.add_argument("--chunks", type=int, default=DEFAULT_CHUNKS, help="chunks per search")


def main(args: argparse.Namespace) -> None:
    corpus = load_corpus(args.limit or None)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    libraries = [lib.strip() for lib in args.pdf_libraries.split(",") if lib.strip()]
    for fmt in formats:
        if fmt not in FORMATS:
            raise SystemExit(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
    renderings = {fmt: load_rendering(corpus, fmt) for fmt in formats}
    embedder = make_embedder(args.embedder)
    big = IndexOptions(max_documents=100_000)
    runs: list[dict[str, Any]] = []
    not_measured: list[dict[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="kb-bench-formats-") as tmp:
        workdir = Path(tmp)
        baseline = _run(
            "markdown",
            LocalDirectorySource(corpus.docs_dir),
            big,
            corpus.queries,
            embedder,
            workdir,
            args.chunks,
        )
        runs.append({"format": "markdown", "extractor": "product", **baseline})
        for fmt in formats:
            rendering = renderings[fmt]
            if product_supports(f".{fmt}"):
                options = IndexOptions(file_patterns=(f"*.{fmt}",), max_documents=100_000)
                source = LocalDirectorySource(rendering.docs_dir)
                run = _run(
                    f"{fmt}/product",
                    source,
                    options,
                    corpus.queries,
                    embedder,
                    workdir,
                    args.chunks,
                )
                runs.append({"format": fmt, "extractor": "product", **run})
            else:
                not_measured.append(
                    {"format": fmt, "extractor": "product", "reason": f"no .{fmt} extractor"}
                )
            if fmt != "pdf":
                continue
            for library in libraries:
                run = _run(
                    f"pdf/{library}",
                    LibrarySource(rendering.docs_dir, library),
                    big,
                    corpus.queries,
                    embedder,
                    workdir,
                    args.chunks,
                )
                runs.append({"format": "pdf", "extractor": library, **run})
    base_modes = baseline["modes"]
    base_rate = baseline["indexing"]["documents_per_cpu_second"]
    for run in runs:
        run["mrr_delta"] = {
            mode: round(scores["mrr_at_10"] - base_modes[mode]["mrr_at_10"], 4)
            for mode, scores in run["modes"].items()
        }
        run["within_target"] = all(abs(d) <= TARGET_DELTA for d in run["mrr_delta"].values())
        rate = run["indexing"]["documents_per_cpu_second"]
        run["indexing"]["rate_vs_markdown"] = round(rate / base_rate, 3) if rate else None
        log(f"{run['format']}/{run['extractor']}: delta {run['mrr_delta']}")
    payload: dict[str, Any] = {
        "corpus": corpus.describe(),
        "renderings": {fmt: r.describe() for fmt, r in renderings.items()},
        "embedder": {"name": embedder.name, "dimensions": embedder.dimensions},
        "store": "embedded (SQLite), default chunker",
        "chunks_per_search": args.chunks,
        "target_delta": TARGET_DELTA,
        "runs": runs,
        "not_measured": not_measured,
    }
    if isinstance(embedder, CachingEmbedder):
        payload["embedding_cache"] = {"hits": embedder.hits, "misses": embedder.misses}
        embedder.close()
    write_result(f"formats-{corpus.name}-{args.embedder}", payload)
