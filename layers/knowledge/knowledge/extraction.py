"""Turn a document's bytes into text, chosen by the file name's extension.

``extract_text(name, data)`` supports ``.md``/``.markdown`` (``text/markdown``) and ``.txt``
(``text/plain``), extension matched case-insensitively. Text files are decoded as UTF-8
(a UTF-8 BOM is dropped; a UTF-16 BOM selects UTF-16); bytes that are not valid UTF-8
become U+FFFD and are reported in ``warnings``; newlines become ``\\n``.

Raises ``ExtractionError`` with a readable reason for: an unsupported extension, data
over ``max_bytes`` (``DEFAULT_MAX_DOCUMENT_BYTES`` when ``None``), and binary content
(a NUL byte in the first 8 KiB, or a high share of control bytes there).

Formats are a registry (``_EXTRACTORS``: extension -> function), so pdf, docx or html
extractors can be added here without touching callers.
"""

from __future__ import annotations

import codecs
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from knowledge.errors import ExtractionError, ValidationError

__all__ = [
    "DEFAULT_MAX_DOCUMENT_BYTES",
    "SUPPORTED_EXTENSIONS",
    "ExtractedText",
    "extract_text",
    "is_supported",
]

DEFAULT_MAX_DOCUMENT_BYTES = 64 * 1024 * 1024

_SNIFF_BYTES = 8 * 1024
# Above this share of control bytes in the sniffed prefix, the data is not text.
_MAX_CONTROL_RATIO = 0.10
# C0 controls and DEL, except the ones text uses: \t \n \v \f \r and ESC (ANSI colours in logs).
_CONTROL_BYTES = bytes(
    [b for b in range(0x20) if b not in (0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1B)] + [0x7F]
)
# ``surrogateescape`` turns each undecodable byte into one of these code points.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


@dataclass(frozen=True, slots=True)
class ExtractedText:
    """The text of a document, its MIME type, and what was repaired on the way."""

    text: str
    content_type: str
    warnings: tuple[str, ...] = ()


_Extractor = Callable[[bytes], ExtractedText]


def extract_text(name: str, data: bytes, *, max_bytes: int | None = None) -> ExtractedText:
    """Return the text of ``data``, a document called ``name`` (a path or key; only its
    extension matters). See the module docstring for the rules and errors."""
    limit = DEFAULT_MAX_DOCUMENT_BYTES if max_bytes is None else max_bytes
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValidationError("max_bytes", f"must be a non-negative integer, got {max_bytes!r}")
    extension = _extension(name)
    extractor = _EXTRACTORS.get(extension)
    if extractor is None:
        shown = f"'{extension}'" if extension else "no extension"
        raise ExtractionError(
            f"unsupported file type ({shown}); supported: {', '.join(SUPPORTED_EXTENSIONS)}"
        )
    if len(data) > limit:
        raise ExtractionError(
            f"document is {_human_size(len(data))} ({len(data)} bytes), over the limit of "
            f"{_human_size(limit)} ({limit} bytes)"
        )
    return extractor(data)


def is_supported(name: str) -> bool:
    """True if ``extract_text`` knows the extension of ``name`` (case-insensitive)."""
    return _extension(name) in _EXTRACTORS


def _extension(name: str) -> str:
    base = posixpath.basename(name.replace("\\", "/"))
    return posixpath.splitext(base)[1].lower()


def _human_size(size: int) -> str:
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MiB"
    if size >= 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size} B"


def _extract_text_file(data: bytes, *, content_type: str) -> ExtractedText:
    """Decode a plain-text format (Markdown, text): BOM, binary check, UTF-8, newlines."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        text, warnings = _decode_utf16(data)
    else:
        _reject_binary(data)
        text, warnings = _decode_utf8(data)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return ExtractedText(text=text, content_type=content_type, warnings=warnings)


def _reject_binary(data: bytes) -> None:
    sample = data[:_SNIFF_BYTES]
    nul = sample.find(b"\x00")
    if nul != -1:
        raise ExtractionError(f"binary content (NUL byte at offset {nul}); not a text document")
    if sample:
        controls = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
        ratio = controls / len(sample)
        if ratio > _MAX_CONTROL_RATIO:
            raise ExtractionError(
                f"binary content ({ratio:.0%} control bytes in the first "
                f"{_human_size(len(sample))}); not a text document"
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


_EXTRACTORS: dict[str, _Extractor] = {
    ".md": partial(_extract_text_file, content_type="text/markdown"),
    ".markdown": partial(_extract_text_file, content_type="text/markdown"),
    ".txt": partial(_extract_text_file, content_type="text/plain"),
}

SUPPORTED_EXTENSIONS: tuple[str, ...] = tuple(sorted(_EXTRACTORS))
