"""Markdown and plain text: decoded to ``str``; the chunker finds the headings.

Text is decoded in the encoding ``encoding.choose_encoding`` picks (a BOM; UTF-8; else a
detected legacy encoding such as CP949 or Windows-1252, reported in ``warnings``); bytes
that are not valid in it become U+FFFD and are reported in ``warnings``; newlines become
``\\n``. ``text_stream`` is the same decision for a reader that decodes as it goes
(CSV). Binary content (a NUL byte in the first 8 KiB, or a high share of control bytes
there) is ``corrupt file: binary content ...``. A file with no text (empty, whitespace
only, or Markdown YAML front matter and nothing after it) is ``no text: ...``, as an
empty DOCX is: not an "indexed" document nobody can find.
"""

from __future__ import annotations

import codecs
import io
import re

from knowledge.core.errors import ExtractionError
from knowledge.extraction.base import (
    REASON_NO_TEXT,
    ExtractedDocument,
    ExtractionLimits,
    corrupt,
    human_size,
)
from knowledge.extraction.encoding import WIDE_CODECS, TextEncoding, choose_encoding

__all__ = [
    "FRONT_MATTER",
    "decode_as",
    "decode_text",
    "extract",
    "reject_binary",
    "text_stream",
]

FRONT_MATTER = re.compile(r"---[ \t]*\n(?:.*?\n)?(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
"""YAML front matter at the very top of a Markdown or text file (``---`` ... ``---``)."""

_SNIFF_BYTES = 8 * 1024
# Above this share of control bytes in the sniffed prefix, the data is not text.
_MAX_CONTROL_RATIO = 0.10
# C0 controls and DEL, except the ones text uses: \t \n \v \f \r and ESC (ANSI colours in logs).
_CONTROL_BYTES = bytes(
    [b for b in range(0x20) if b not in (0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1B)] + [0x7F]
)
# ``surrogateescape`` turns each undecodable byte into one of these code points.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


_CONTENT_TYPES = {
    "markdown": "text/markdown",
    "text": "text/plain",
    "rst": "text/x-rst",
    "asciidoc": "text/asciidoc",
}


def extract(data: bytes, limits: ExtractionLimits, source_type: str) -> ExtractedDocument:
    text, warnings = decode_text(data)
    front_matter = FRONT_MATTER.match(text)
    if not text[front_matter.end() if front_matter else 0 :].strip():
        detail = "only YAML front matter, no body" if front_matter else "empty or whitespace only"
        raise ExtractionError(f"{REASON_NO_TEXT}: {detail} in this {source_type} file")
    return ExtractedDocument(
        source_type=source_type,
        content_type=_CONTENT_TYPES[source_type],
        text=text,
        warnings=list(warnings),
    )


def decode_text(data: bytes) -> tuple[str, tuple[str, ...]]:
    """Decode a plain-text format: BOM, binary check, encoding (``encoding``), newlines."""
    text, warnings = decode_as(data, _text_encoding(data))
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text, warnings


def decode_as(data: bytes, encoding: TextEncoding) -> tuple[str, tuple[str, ...]]:
    """``data`` decoded with ``encoding.codec``; invalid data becomes U+FFFD, with a warning."""
    if encoding.invalid_bytes:
        return _decode_utf8(data)
    notes = (encoding.warning,) if encoding.warning else ()
    try:
        return data.decode(encoding.codec), notes
    except UnicodeDecodeError:
        text = data.decode(encoding.codec, errors="replace")
    return text, (*notes, f"invalid {encoding.codec} data replaced with U+FFFD")


def text_stream(data: bytes) -> tuple[io.TextIOWrapper, tuple[str, ...]]:
    """``data`` as a text stream decoded as it is read (``decode_text``'s encoding and
    binary check), universal newlines left to the reader, and the warnings so far."""
    encoding = _text_encoding(data)
    warnings: tuple[str, ...] = (encoding.warning,) if encoding.warning else ()
    if encoding.invalid_bytes:
        warnings = (_invalid_utf8(encoding.invalid_bytes, encoding.first_invalid),)
    stream = io.TextIOWrapper(
        io.BytesIO(data), encoding=encoding.codec, errors="replace", newline=""
    )
    return stream, warnings


def _text_encoding(data: bytes) -> TextEncoding:
    """The encoding to decode ``data`` with; binary content (in a one-byte encoding: wide
    ones hold NUL bytes by design) is refused."""
    encoding = choose_encoding(data)
    if encoding.codec not in WIDE_CODECS:
        reject_binary(data)
    return encoding


def _invalid_utf8(count: int, first_offset: int) -> str:
    plural = "byte" if count == 1 else "bytes"
    return (
        f"{count} invalid UTF-8 {plural} replaced with U+FFFD (first at byte offset {first_offset})"
    )


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
    return text, (_invalid_utf8(bad_bytes, first_offset),)
