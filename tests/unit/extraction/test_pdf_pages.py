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


def form_pdf(label: str, fields: dict[str, str]) -> bytes:
    """One page with ``label`` as page text and a filled text field per ``fields`` item,
    written by hand (neither fpdf2 nor pypdfium2 writes AcroForm fields)."""
    widgets = list(fields.items())
    first_widget = 6
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields ["
        + b" ".join(b"%d 0 R" % (first_widget + 2 * n) for n in range(len(widgets)))
        + b"] /DA (/Helv 12 Tf 0 g) /DR << /Font << /Helv 5 0 R >> >> >> >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> /Annots ["
        + b" ".join(b"%d 0 R" % (first_widget + 2 * n) for n in range(len(widgets)))
        + b"] >>",
    ]
    content = b"BT /F1 12 Tf 72 720 Td (%s) Tj ET" % label.encode("latin-1")
    objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content))
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for n, (name, value) in enumerate(widgets):
        y = 700 - 30 * n
        appearance = b"/Tx BMC BT /Helv 12 Tf 2 4 Td (%s) Tj ET EMC" % value.encode("latin-1")
        objects.append(
            b"<< /Type /Annot /Subtype /Widget /FT /Tx /T (%s) /V (%s) /Rect [200 %d 400 %d] "
            b"/P 3 0 R /F 4 /DA (/Helv 12 Tf 0 g) /AP << /N %d 0 R >> >>"
            % (name.encode(), value.encode("latin-1"), y, y + 20, first_widget + 2 * n + 1)
        )
        objects.append(
            b"<< /Type /XObject /Subtype /Form /BBox [0 0 200 20] /Resources << /Font "
            b"<< /Helv 5 0 R >> >> /Length %d >>\nstream\n%s\nendstream"
            % (len(appearance), appearance)
        )
    out = b"%PDF-1.7\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return out


def test_filled_form_fields_are_read_with_their_page() -> None:
    data = form_pdf("Access request", {"applicant.name[0]": "Jane Walrus", "team": "SRE"})
    (block,) = list(extract_document("request.pdf", data).blocks or ())
    assert block.text.splitlines() == ["Access request", "name: Jane Walrus", "team: SRE"]
    assert block.position == 1


def test_a_form_without_page_text_but_with_answers_is_not_a_scan() -> None:
    data = form_pdf("", {"reason": "Quarterly failover drill"})
    assert extract_text("answers.pdf", data).text == "reason: Quarterly failover drill"
