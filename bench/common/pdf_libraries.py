"""The PDF text extractors compared, each ``path -> list of page texts``, plus the product's.

- ``pypdfium2``: PDFium (Chrome's PDF engine) through its Python binding;
  ``PdfTextPage.get_text_range()`` per page (PDFium's own reading order and line breaks).
- ``pypdf``: pure Python; ``PageObject.extract_text()`` (its default, non-layout mode).
- ``pdftotext``: poppler's command-line tool (``pdftotext -enc UTF-8 FILE -``, reading
  order, no ``-layout``), pages split at its form feeds. The reference for fidelity.
  GPL: measured as the baseline, not a candidate for the Apache-2.0 product.
- ``product``: ``knowledge.extraction.extract_text`` of the code under test, when it knows
  ``.pdf`` (``product_supports``); one "page" of its whole text, since only the text
  matters here.

``LibrarySource`` feeds a library's text to the product's indexing path: it lists the PDFs
of a folder and presents each as a ``.txt`` document whose ``read()`` runs the library, so
chunking, embedding and writing are the product's own and the extraction time counts.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from knowledge.core.model import IndexOptions
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.ingest.sources.folders import LocalDirectorySource

__all__ = [
    "LIBRARIES",
    "LibrarySource",
    "extract_pages",
    "page_count",
    "poppler_version",
    "product_supports",
]


def _pypdfium2(path: Path) -> list[str]:
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(path)
    try:
        pages: list[str] = []
        for index in range(len(document)):
            page = document[index]
            textpage = page.get_textpage()
            pages.append(textpage.get_text_range())
            textpage.close()
            page.close()
        return pages
    finally:
        document.close()


def _pypdf(path: Path) -> list[str]:
    from pypdf import PdfReader

    reader = PdfReader(path)
    return [page.extract_text() for page in reader.pages]


def _pdftotext(path: Path) -> list[str]:
    done = subprocess.run(
        ["pdftotext", "-q", "-enc", "UTF-8", str(path), "-"],
        capture_output=True,
        timeout=600,
        check=True,
    )
    pages = done.stdout.decode("utf-8", "replace").split("\f")
    # pdftotext ends every page with a form feed: the last piece is empty.
    return pages[:-1] if pages and pages[-1] == "" else pages


def poppler_version() -> str:
    """``pdftotext version 22.12.0`` (it prints its version on stderr)."""
    try:
        done = subprocess.run(["pdftotext", "-v"], capture_output=True, timeout=30, check=False)
    except OSError:
        return "pdftotext missing"
    lines = (done.stderr or done.stdout).decode("utf-8", "replace").splitlines()
    return lines[0].strip() if lines else "pdftotext"


def product_supports(extension: str) -> bool:
    """True if the product under test extracts ``extension`` (``.pdf``, ``.docx``, ...)."""
    from knowledge.extraction import is_supported

    return is_supported(f"probe{extension}")


def _product(path: Path) -> list[str]:
    from knowledge.extraction import extract_text

    return [extract_text(path.name, path.read_bytes()).text]


LIBRARIES: dict[str, Callable[[Path], list[str]]] = {
    "pypdfium2": _pypdfium2,
    "pypdf": _pypdf,
    "pdftotext": _pdftotext,
    "product": _product,
}


def extract_pages(library: str, path: Path) -> list[str]:
    """The page texts of ``path`` by ``library`` (a key of ``LIBRARIES``)."""
    try:
        extractor = LIBRARIES[library]
    except KeyError:
        raise SystemExit(f"unknown extractor {library!r}: one of {', '.join(LIBRARIES)}") from None
    return extractor(path)


def page_count(path: Path) -> int:
    """Pages of ``path`` (PDFium)."""
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(path)
    try:
        return len(document)
    finally:
        document.close()


class LibrarySource:
    """A ``DocumentSource``: the PDFs under ``root``, each as ``<page>.txt`` holding the text
    ``library`` extracts (pages joined by blank lines)."""

    def __init__(self, root: Path, library: str) -> None:
        if library not in LIBRARIES or library == "product":
            raise SystemExit(f"no library extractor {library!r}")
        self._inner = LocalDirectorySource(root)
        self._root = root
        self.library = library

    def documents(self, scope: KnowledgeScope, options: IndexOptions) -> Iterator[SourceDocument]:
        pdfs = replace(options, file_patterns=("*.pdf",))
        for document in self._inner.documents(scope, pdfs):
            path = self._root / document.path

            def read(path: Path = path) -> bytes:
                return "\n\n".join(extract_pages(self.library, path)).encode("utf-8")

            yield replace(document, path=document.path.removesuffix(".pdf") + ".txt", read=read)
