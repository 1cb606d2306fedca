"""Real document files made in the tests, with the libraries people make them with.

PDFs come from fpdf2 (text, encrypted, image-only) or are written byte by byte
(``raw_pdf``: thousands of pages, deep nesting); Word, PowerPoint and Excel files from
python-docx, python-pptx and openpyxl; zip bombs from ``zipfile``. Every function
returns the file's bytes.
"""

from __future__ import annotations

import io
import struct
import zipfile
from collections.abc import Iterable, Sequence
from typing import Any


def pdf(pages: Sequence[str], *, password: str | None = None, title: str | None = None) -> bytes:
    from fpdf import FPDF

    document = FPDF()
    if title:
        document.set_title(title)
    if password is not None:
        document.set_encryption(owner_password="owner", user_password=password)
    document.set_font("helvetica", size=11)
    for text in pages:
        document.add_page()
        document.multi_cell(0, 6, text)
    return bytes(document.output())


def scanned_pdf(pages: int = 2) -> bytes:
    """Pages that hold only an image, as a scanner makes them: no text layer."""
    from fpdf import FPDF
    from PIL import Image

    picture = io.BytesIO()
    Image.new("L", (120, 60), 200).save(picture, "PNG")
    document = FPDF()
    for _ in range(pages):
        document.add_page()
        document.image(io.BytesIO(picture.getvalue()), x=10, y=10, w=180)
    return bytes(document.output())


def raw_pdf(pages: int, *, text: str = "Hello page", nesting: int = 0) -> bytes:
    """A PDF written by hand: ``pages`` pages sharing one content stream, each page
    dictionary carrying an array nested ``nesting`` levels deep."""
    content = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",  # the page tree, once the kids are known
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
    ]
    deep = b"[" * nesting + b"]" * nesting
    kids = []
    for _ in range(pages):
        kids.append(f"{len(objects) + 1} 0 R")
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R /Deep " + deep + b" >>"
        )
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {pages} >>".encode()
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
    ).encode()
    return bytes(out)


def docx(items: Iterable[tuple[str, Any]], *, title: str | None = None) -> bytes:
    """``items``: ("h1".."h3", text), ("p", text), ("bullet", text), ("number", text),
    ("table", rows)."""
    import docx as python_docx

    document = python_docx.Document()
    if title:
        document.core_properties.title = title
    for kind, value in items:
        if kind.startswith("h"):
            document.add_heading(value, level=int(kind[1:]))
        elif kind == "p":
            document.add_paragraph(value)
        elif kind == "bullet":
            document.add_paragraph(value, style="List Bullet")
        elif kind == "number":
            document.add_paragraph(value, style="List Number")
        elif kind == "table":
            table = document.add_table(rows=len(value), cols=len(value[0]))
            for r, row in enumerate(value):
                for c, cell in enumerate(row):
                    table.cell(r, c).text = cell
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def pptx(slides: Iterable[tuple[str, Sequence[str], str]]) -> bytes:
    """``slides``: (title, body lines, notes)."""
    import pptx as python_pptx

    presentation = python_pptx.Presentation()
    layout = presentation.slide_layouts[1]  # title and content
    for title, lines, notes in slides:
        slide = presentation.slides.add_slide(layout)
        slide.shapes.title.text = title
        body = slide.placeholders[1].text_frame
        body.text = lines[0] if lines else ""
        for line in lines[1:]:
            body.add_paragraph().text = line
        if notes:
            slide.notes_slide.notes_text_frame.text = notes
    buffer = io.BytesIO()
    presentation.save(buffer)
    return buffer.getvalue()


def xlsx(sheets: dict[str, Iterable[Sequence[Any]]]) -> bytes:
    """Written in openpyxl's write-only mode, so that big sheets are cheap to make."""
    import openpyxl

    workbook = openpyxl.Workbook(write_only=True)
    for name, rows in sheets.items():
        sheet = workbook.create_sheet(name)
        for row in rows:
            sheet.append(list(row))
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def zip_bomb(member: str, unpacked_mib: int, *, declared_bytes: int | None = None) -> bytes:
    """A zip whose ``member`` inflates to ``unpacked_mib`` MiB of spaces. With
    ``declared_bytes`` the headers lie about the uncompressed size."""
    buffer = io.BytesIO()
    step = b" " * (1024 * 1024)
    # Level 1 is fast and still expands about 230 times: a bomb by the extractor's measure.
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open(member, "w", force_zip64=False) as stream:
            for _ in range(unpacked_mib):
                stream.write(step)
    data = buffer.getvalue()
    if declared_bytes is None:
        return data
    return _lie_about_sizes(data, member.encode(), declared_bytes)


def _lie_about_sizes(data: bytes, name: bytes, size: int) -> bytes:
    out = bytearray(data)
    local = out.find(b"PK\x03\x04" + out[4:4])  # first local header
    while local != -1:
        name_length = struct.unpack_from("<H", out, local + 26)[0]
        if out[local + 30 : local + 30 + name_length] == name:
            struct.pack_into("<I", out, local + 22, size)
        local = out.find(b"PK\x03\x04", local + 4)
    central = out.find(b"PK\x01\x02")
    while central != -1:
        name_length = struct.unpack_from("<H", out, central + 28)[0]
        if out[central + 46 : central + 46 + name_length] == name:
            struct.pack_into("<I", out, central + 24, size)
        central = out.find(b"PK\x01\x02", central + 4)
    return bytes(out)


def big_xlsx(rows: Iterable[Sequence[Any]], sheet: str = "Orders") -> bytes:
    """An .xlsx written directly as SpreadsheetML (inline strings), streamed into the zip:
    what openpyxl writes, minus styles, in a fraction of the time for 100k rows."""
    from xml.sax.saxutils import escape

    def column(index: int) -> str:
        name = ""
        index += 1
        while index:
            index, rest = divmod(index - 1, 26)
            name = chr(65 + rest) + name
        return name

    ns = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    parts = {
        "[Content_Types].xml": (
            '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.'
            'openxmlformats.org/package/2006/content-types"><Default Extension="rels" '
            'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/><Override '
            'PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-'
            'officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/'
            'worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-'
            'officedocument.spreadsheetml.worksheet+xml"/></Types>'
        ),
        "_rels/.rels": (
            '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.'
            'openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" '
            f'Type="{rel}/officeDocument" Target="xl/workbook.xml"/></Relationships>'
        ),
        "xl/workbook.xml": (
            f'<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="{ns}" xmlns:r="{rel}">'
            f'<sheets><sheet name="{escape(sheet)}" sheetId="1" r:id="rId1"/></sheets></workbook>'
        ),
        "xl/_rels/workbook.xml.rels": (
            '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.'
            'openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" '
            f'Type="{rel}/worksheet" Target="worksheets/sheet1.xml"/></Relationships>'
        ),
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for name, text in parts.items():
            archive.writestr(name, text)
        with archive.open("xl/worksheets/sheet1.xml", "w") as stream:
            head = f'<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="{ns}">'
            stream.write(f"{head}<sheetData>".encode())
            for r, row in enumerate(rows, start=1):
                cells = []
                for c, value in enumerate(row):
                    ref = f"{column(c)}{r}"
                    if isinstance(value, int | float):
                        cells.append(f'<c r="{ref}"><v>{value}</v></c>')
                    else:
                        cells.append(
                            f'<c r="{ref}" t="inlineStr"><is><t>{escape(str(value))}</t></is></c>'
                        )
                stream.write(f'<row r="{r}">{"".join(cells)}</row>'.encode())
            stream.write(b"</sheetData></worksheet>")
    return buffer.getvalue()
