"""Markdown and plain text: decoded to ``str``; the chunker finds the headings.

Text is decoded as UTF-8 (a UTF-8 BOM is dropped; a UTF-16 BOM selects UTF-16); bytes
that are not valid UTF-8 become U+FFFD and are reported in ``warnings``; newlines become
``\\n``. Binary content (a NUL byte in the first 8 KiB, or a high share of control bytes
there) is ``corrupt file: binary content ...``.
"""

from __future__ import annotations

import codecs
import re

from knowledge.extraction.base import ExtractedDocument, ExtractionLimits, corrupt, human_size

__all__ = ["decode_text", "extract", "reject_binary"]

_SNIFF_BYTES = 8 * 1024
# Above this share of control bytes in the sniffed prefix, the data is not text.
_MAX_CONTROL_RATIO = 0.10
# C0 controls and DEL, except the ones text uses: \t \n \v \f \r and ESC (ANSI colours in logs).
_CONTROL_BYTES = bytes(
    [b for b in range(0x20) if b not in (0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1B)] + [0x7F]
)
# ``surrogateescape`` turns each undecodable byte into one of these code points.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")

_CONTENT_TYPES = {"markdown": "text/markdown", "text": "text/plain"}


def extract(data: bytes, limits: ExtractionLimits, source_type: str) -> ExtractedDocument:
    text, warnings = decode_text(data)
    return ExtractedDocument(
        source_type=source_type,
        content_type=_CONTENT_TYPES[source_type],
        text=text,
        warnings=list(warnings),
    )


def decode_text(data: bytes) -> tuple[str, tuple[str, ...]]:
    """Decode a plain-text format: BOM, binary check, UTF-8, newlines."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        text, warnings = _decode_utf16(data)
    else:
        reject_binary(data)
        text, warnings = _decode_utf8(data)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text, warnings


def reject_binary(data: bytes) -> None:
    sample = data[:_SNIFF_BYTES]
    nul = sample.find(b"\x00")
    if nul != -1:
        raise corrupt(f"binary content (NUL byte at offset {nul}); not a text document")
    if sample:
        controls = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
        ratio = controls / len(sample)
        if ratio > _MAX_CONTROL_RATIO:
            raise corrupt(
                f"binary content ({ratio:.0%} control bytes in the first "
                f"{human_size(len(sample))}); not a text document"
            )


def _decode_utf8(data: bytes) -> tuple[str, tuple[str, ...]]:
    body = data[len(codecs.BOM_UTF8) :] if data.startswith(codecs.BOM_UTF8) else data
    try:
        return body.decode("utf-8"), ()
    except UnicodeDecodeError as exc:
        first_offset = exc.start + (len(data) - len(body))
    # One escaped code point per bad byte, so the count is exact (``replace`` merges runs).
    escaped = body.decode("utf-8", errors="surrogateescape")
    text, bad_bytes = _ESCAPED_BYTE.subn("\ufffd", escaped)
    plural = "byte" if bad_bytes == 1 else "bytes"
    return text, (
        f"{bad_bytes} invalid UTF-8 {plural} replaced with U+FFFD "
        f"(first at byte offset {first_offset})",
    )


def _decode_utf16(data: bytes) -> tuple[str, tuple[str, ...]]:
    # The "utf-16" codec reads the BOM, picks the byte order and drops the BOM.
    try:
        return data.decode("utf-16"), ()
    except UnicodeDecodeError:
        text = data.decode("utf-16", errors="replace")
    return text, ("invalid UTF-16 data replaced with U+FFFD",)
