"""What a file's bytes are, whatever its name says: for a reason a user can act on.

A PDF saved as ``report.docx``, a Word file uploaded as ``notes.txt`` or a screenshot
named ``page.pdf`` fails in the extractor its extension picks; ``misnamed`` then says
what the content is and which name would work (``wrong file type: the content is a PDF
document, not .docx; rename it to .pdf``) instead of the parser's complaint. Only the
signatures below are recognised; anything else keeps the extractor's own reason.
"""

from __future__ import annotations

import io
import zipfile

from knowledge.core.errors import ExtractionError

__all__ = ["REASON_WRONG_TYPE", "content_kind", "misnamed"]

REASON_WRONG_TYPE = "wrong file type"

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_OFFICE_PARTS = (
    ("word/document.xml", "a Word document", ".docx"),
    ("ppt/presentation.xml", "a PowerPoint presentation", ".pptx"),
    ("xl/workbook.xml", "an Excel workbook", ".xlsx"),
)
_OFFICE_ZIPS = frozenset({".docx", ".pptx", ".xlsx"})
_IMAGES = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"II*\x00", "a TIFF image"),
    (b"MM\x00*", "a TIFF image"),
)
_ARCHIVES = (
    (b"\x1f\x8b", "a gzip archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"Rar!\x1a\x07", "a RAR archive"),
)


def content_kind(data: bytes) -> tuple[str, str | None] | None:
    """(what the content is, the extension it should have or None) for a recognised
    signature, else None."""
    head = data[:1024]
    if b"%PDF-" in head:  # the PDF header may follow some junk bytes
        return "a PDF document", ".pdf"
    if data.startswith(_OLE_MAGIC):
        return "a password-protected or legacy (.doc/.xls/.ppt) Office file", None
    if data.startswith(b"PK\x03\x04"):
        return _zip_kind(data)
    for magic, label in (*_IMAGES, *_ARCHIVES):
        if data.startswith(magic):
            return label, None
    start = head.removeprefix(b"\xef\xbb\xbf").lstrip()[:64].lower()
    if start.startswith((b"<!doctype html", b"<html")):
        # A download that saved an error or login page, or a web app's "Excel export".
        return "an HTML page", ".html"
    return None


def misnamed(extension: str, data: bytes) -> ExtractionError | None:
    """The reason for a file whose content is not what ``extension`` says, or None when
    the content is not recognised or agrees with the name."""
    kind = content_kind(data)
    if kind is None:
        return None
    label, proper = kind
    if proper == extension or (data.startswith(_OLE_MAGIC) and extension in _OFFICE_ZIPS):
        return None  # the extractor's own reason says it better (archive: OLE container)
    shown = f"not {extension}" if extension else "and the file has no extension"
    advice = f"; rename it to {proper}" if proper else "; it cannot be indexed"
    return ExtractionError(f"{REASON_WRONG_TYPE}: the content is {label}, {shown}{advice}")


def _zip_kind(data: bytes) -> tuple[str, str | None] | None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError):
        return None  # damaged: the extractor's own reason stands
    for part, label, extension in _OFFICE_PARTS:
        if part in names:
            return label, extension
    return "a zip archive", None
