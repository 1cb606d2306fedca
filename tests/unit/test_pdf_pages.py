"""PDF pages as scanners and office suites write them (knowledge.extraction.pdf).

A page turned by ``/Rotate`` (landscape pages, sideways scans) reads in its written
order, not last line first; a PDF whose text layer covers only some pages (typed pages
with scanned signatures or exhibits) is indexed and says which pages were left out.
"""

from __future__ import annotations

import io

import document_files as files
import pypdfium2 as pdfium
import pytest
from fpdf import FPDF
from PIL import Image

from knowledge.extraction import extract_document, extract_text

LINES = [f"Step {n}: check the replica lag before continuing." for n in range(1, 9)]


def turned(data: bytes, degrees: int) -> bytes:
    document = pdfium.PdfDocument(data)
    try:
        for page in document:
            page.set_rotation(degrees)
        buffer = io.BytesIO()
        document.save(buffer)
    finally:
        document.close()
    return buffer.getvalue()


@pytest.mark.parametrize("degrees", [90, 180, 270])
def test_a_turned_page_reads_in_its_written_order(degrees: int) -> None:
    data = turned(files.pdf(["\n".join(LINES)]), degrees)
    assert extract_text("landscape.pdf", data).text.splitlines() == LINES


def test_pages_without_a_text_layer_are_named_in_a_warning() -> None:
    picture = io.BytesIO()
    Image.new("L", (120, 60), 200).save(picture, "PNG")
    document = FPDF()
    document.set_font("helvetica", size=11)
    for page in range(1, 5):
        document.add_page()
        if page in (2, 4):  # scanned exhibits
            document.image(io.BytesIO(picture.getvalue()), x=10, y=10, w=180)
        else:
            document.multi_cell(0, 6, f"Typed page {page}.")
    extracted = extract_document("contract.pdf", bytes(document.output()))
    blocks = list(extracted.blocks or ())
    assert [block.position for block in blocks] == [1, 3]
    (warning,) = extracted.warnings
    assert warning.startswith("2 of 4 pages have no text layer")
    assert warning.endswith("page 2, 4")
