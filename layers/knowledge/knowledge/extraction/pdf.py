"""PDF through pypdfium2 (PDFium, the PDF engine of Chromium: fast, fuzzed, Apache-2.0/BSD).

One block per page, in page order, ``position`` = the 1-based page number (a page
turned by ``/Rotate`` is read in its content's own orientation); pages flow into each
other (a chunk that spans pages gets ``page`` and ``page_end``). The document is opened
once, and each page's text is read only when the chunker asks for it, so a
long PDF never has every page's text in memory.

The values filled into a form's text and choice fields follow their page's text
(``name: value``). Pages without text (scanned among typed ones) are left out and named
in a warning.
Refused: a password (``encrypted PDF``), more than ``limits.max_pdf_pages`` pages
(``too large``), no text on any page (``no text layer (scanned image; OCR not
supported)``), data PDFium cannot parse (``corrupt file: ...``). A PDF with an owner
password only (no user password) opens and is indexed: its text is readable.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Iterator
from typing import Any

from knowledge.core.errors import ExtractionError
from knowledge.extraction.base import (
    NO_SECTION,
    REASON_ENCRYPTED_PDF,
    REASON_NO_TEXT_LAYER,
    Block,
    ExtractedDocument,
    ExtractionLimits,
    corrupt,
    too_large,
)

__all__ = ["extract"]

_PASSWORD_ERROR = 4  # FPDF_ERR_PASSWORD
_SHOWN_PAGES = 10
_VALUE_FIELDS = frozenset({4, 5, 6})  # FPDF_FORMFIELD_COMBOBOX, _LISTBOX, _TEXTFIELD
_FIELD_INDEX = re.compile(r"\[\d+\]")


def extract(data: bytes, limits: ExtractionLimits, source_type: str) -> ExtractedDocument:
    import pypdfium2 as pdfium

    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if getattr(exc, "err_code", None) == _PASSWORD_ERROR:
            raise ExtractionError(REASON_ENCRYPTED_PDF) from exc
        raise corrupt(f"not a readable PDF ({_pdfium_reason(exc)})") from exc
    try:
        pages = len(document)
        if pages == 0:
            raise corrupt("the PDF has no pages")
        if pages > limits.max_pdf_pages:
            raise too_large(f"{pages} pages, over the limit of {limits.max_pdf_pages}")
        if pdfium.raw.FPDF_GetFormType(document) != pdfium.raw.FORMTYPE_NONE:
            document.init_forms()  # before any page is loaded, or its fields are not seen
    except BaseException:
        document.close()
        raise
    warnings: list[str] = []
    return ExtractedDocument(
        source_type=source_type,
        content_type="application/pdf",
        blocks=_pages(document, pages, warnings),
        position_key="page",
        title=_title(document),
        warnings=warnings,
    )


def _pages(document: Any, pages: int, warnings: list[str]) -> Iterator[Block]:
    import pypdfium2 as pdfium

    found_text = False
    without_text: list[int] = []
    try:
        for number in range(1, pages + 1):
            try:
                page = document[number - 1]
                try:
                    if page.get_rotation():
                        # /Rotate turns the page for display only; PDFium orders the text
                        # of a turned page by the turned layout (a 90-degree page read its
                        # lines last to first). Read it as its content is written.
                        page.set_rotation(0)
                    textpage = page.get_textpage()
                    try:
                        text = textpage.get_text_range()
                    finally:
                        textpage.close()
                    fields = _form_values(document, page)
                finally:
                    page.close()
            except pdfium.PdfiumError as exc:
                raise corrupt(f"page {number} cannot be read ({_pdfium_reason(exc)})") from exc
            text = _clean(text)
            if fields:
                text = (
                    "\n".join([text.rstrip("\n"), *fields]) if text.strip() else "\n".join(fields)
                )
            if text.strip():
                found_text = True
                yield Block(text, NO_SECTION, number)
            else:
                without_text.append(number)
        if not found_text:
            raise ExtractionError(REASON_NO_TEXT_LAYER)
        if without_text:
            warnings.append(_pages_without_text(without_text, pages))
    finally:
        document.close()


def _form_values(document: Any, page: Any) -> list[str]:
    """The values filled into the page's text and choice fields (a form's answers are
    widget annotations, not page text), each ``name: value``."""
    from pypdfium2 import raw

    form = getattr(document, "formenv", None)
    if form is None:
        return []
    values: list[str] = []
    for index in range(raw.FPDFPage_GetAnnotCount(page)):
        annot = raw.FPDFPage_GetAnnot(page, index)
        try:
            if raw.FPDFAnnot_GetFormFieldType(form, annot) not in _VALUE_FIELDS:
                continue
            value = _wide_string(raw.FPDFAnnot_GetFormFieldValue, form, annot)
            if value.strip():
                name = _wide_string(raw.FPDFAnnot_GetFormFieldName, form, annot)
                label = _FIELD_INDEX.sub("", name.rsplit(".", 1)[-1]).strip()
                line = " ".join(value.split())
                values.append(f"{label}: {line}" if label else line)
        finally:
            raw.FPDFPage_CloseAnnot(annot)
    return values


def _wide_string(read: Any, form: Any, annot: Any) -> str:
    """What a PDFium getter of a UTF-16LE string returns (asked for its size first)."""
    from pypdfium2 import raw

    size = read(form, annot, None, 0)  # bytes, with the terminating NUL
    if size <= 2:
        return ""
    buffer = ctypes.create_string_buffer(size)
    read(form, annot, ctypes.cast(buffer, ctypes.POINTER(raw.FPDF_WCHAR)), size)
    return buffer.raw[: size - 2].decode("utf-16-le", errors="replace")


def _pages_without_text(numbers: list[int], pages: int) -> str:
    shown = ", ".join(str(n) for n in numbers[:_SHOWN_PAGES])
    more = f" and {len(numbers) - _SHOWN_PAGES} more" if len(numbers) > _SHOWN_PAGES else ""
    return (
        f"{len(numbers)} of {pages} pages have no text layer (scanned images; OCR not "
        f"supported), not indexed: page {shown}{more}"
    )


def _clean(text: str) -> str:
    # PDFium ends lines with \r\n and marks soft hyphens and unknown glyphs with controls.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.replace("\x02", "").replace("\ufffe", "").replace("\x00", "")


def _title(document: Any) -> str | None:
    try:
        title = document.get_metadata_value("Title")
    except Exception:  # metadata is optional; a damaged info dict is not a reason to fail
        return None
    return title.strip() or None if isinstance(title, str) else None


def _pdfium_reason(exc: Exception) -> str:
    message = str(exc)
    start = message.find("PDFium: ")
    return message[start + len("PDFium: ") :].rstrip(").") if start != -1 else message
