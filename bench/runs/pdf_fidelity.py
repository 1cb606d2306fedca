"""Token F1 of PDF text (pypdfium2, pypdf, product) against pdftotext.

Extraction fidelity: token F1 of each PDF extractor's text against poppler's pdftotext.

On the real PDFs that Debian packages ship (``bench.corpora.documents.REAL_PDFS``), each candidate
(``pypdfium2``, ``pypdf``, and ``product`` when the product under test extracts PDF)
extracts the whole document; ``bench.common.metrics.token_f1`` compares it with
``pdftotext``'s text of the same file (bag of NFKC-normalised, case-folded word tokens).
Reported per file and as a macro average (mean over files) and a micro average (token
counts pooled over all files). Target: F1 >= 0.95.

Writes ``bench/results/pdf-fidelity.json``.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from bench.common.environment import log, write_result
from bench.common.metrics import TokenScores, pooled_token_scores, token_f1
from bench.common.pdf_libraries import extract_pages, page_count, poppler_version, product_supports
from bench.corpora.documents import real_pdfs

__all__ = ["TARGET_F1", "add_arguments", "main"]

TARGET_F1 = 0.95
REFERENCE = "pdftotext"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--candidates",
        default="pypdfium2,pypdf,product",
        help="comma-separated extractors compared with pdftotext (product: if it knows .pdf)",
    )


def main(args: argparse.Namespace) -> None:
    candidates = [c.strip() for c in args.candidates.split(",") if c.strip()]
    skipped: dict[str, str] = {}
    if "product" in candidates and not product_supports(".pdf"):
        candidates.remove("product")
        skipped["product"] = "the product under test does not extract .pdf (no PDF extractor)"
    files = real_pdfs()
    if not files:
        raise SystemExit("no real PDFs found: run bench/setup.sh")
    rows: list[dict[str, Any]] = []
    scored: dict[str, list[TokenScores]] = {c: [] for c in candidates}
    for pdf in files:
        reference = "\n".join(extract_pages(REFERENCE, pdf.path))
        row: dict[str, Any] = {
            "file": pdf.path.name,
            "package": pdf.package,
            "origin": pdf.origin,
            "pages": page_count(pdf.path),
            "bytes": pdf.path.stat().st_size,
            "scores": {},
        }
        for candidate in candidates:
            text = "\n".join(extract_pages(candidate, pdf.path))
            scores = token_f1(text, reference)
            scored[candidate].append(scores)
            row["scores"][candidate] = scores.to_dict()
        log(f"{pdf.path.name}: " + ", ".join(f"{c} {s['f1']}" for c, s in row["scores"].items()))
        rows.append(row)
    summary: dict[str, Any] = {}
    for candidate in candidates:
        per_file = [r["scores"][candidate] for r in rows]
        f1s = [s["f1"] for s in per_file]
        summary[candidate] = {
            "macro_f1": round(math.fsum(f1s) / len(f1s), 4),
            "min_f1": min(f1s),
            "files_at_target": sum(1 for f in f1s if f >= TARGET_F1),
            "micro": pooled_token_scores(scored[candidate]).to_dict(),
            "meets_target": min(f1s) >= TARGET_F1,
        }
        log(f"{candidate}: {summary[candidate]}")
    write_result(
        "pdf-fidelity",
        {
            "reference": f"pdftotext -enc UTF-8 FILE - ({poppler_version()})",
            "metric": "bench.common.metrics.token_f1: bag of NFKC + casefold \\w+ tokens, "
            "whole document",
            "target_f1": TARGET_F1,
            "files": rows,
            "summary": summary,
            "not_measured": skipped,
        },
    )
