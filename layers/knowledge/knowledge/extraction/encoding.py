"""Which text encoding a text-like document (text, Markdown, CSV, HTML) is written in.

Real files are not all UTF-8: Excel saves CSV as Windows-1252 or CP949, "Unicode text" as
UTF-16, old web pages declare ``<meta charset="euc-kr">``. ``choose_encoding`` decides,
in this order:

1. a byte order mark (UTF-8, UTF-16, UTF-32): that encoding; NUL bytes without one:
   UTF-16/32 if the detector (4.) says so (with a warning);
2. the encoding the document declares (HTML's ``<meta charset>``), if Python knows it,
   read as browsers read it (Latin-1 and ASCII labels mean Windows-1252; a UTF-16
   label on a page without a BOM is ignored); a declared UTF-8 is checked as 3. and 4.
   do: it is the usual mislabel;
3. UTF-8, when the bytes are UTF-8 (a few invalid bytes in otherwise valid UTF-8 text,
   or a character cut off at the end, stay UTF-8 and become U+FFFD: a damaged UTF-8
   file, not another encoding);
4. otherwise the encoding ``charset_normalizer`` (a well-kept detector, already in the
   layer as a dependency of ``requests``) finds most plausible, ties broken in favour of
   the most common legacy encodings; the choice is reported as a warning, since a
   detection is a guess.

The UTF-8 check reads the data in 1 MiB steps, so a large CSV is not decoded whole here.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

__all__ = ["WIDE_CODECS", "TextEncoding", "choose_encoding", "python_codec"]

_STEP = 1024 * 1024
_NUL_SNIFF_BYTES = 8 * 1024
WIDE_CODECS = frozenset({"utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"})
"""Encodings whose text holds NUL bytes: the binary check does not apply to them."""
_DETECT_BYTES = 256 * 1024
# Among encodings the detector finds equally plausible, the ones real files use most.
_PREFERRED = (
    "cp1252",
    "cp949",
    "euc_kr",
    "cp932",
    "shift_jis",
    "euc_jp",
    "gb18030",
    "gbk",
    "big5",
    "cp1251",
    "cp1250",
    "latin_1",
)
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


@dataclass(frozen=True, slots=True)
class TextEncoding:
    """A Python codec name, and what to tell the user about the choice (if anything)."""

    codec: str
    warning: str | None = None
    # UTF-8 with invalid bytes: the bytes count and the offset of the first one.
    invalid_bytes: int = 0
    first_invalid: int = -1


_AS_BROWSERS_READ: dict[str, str | None] = {
    "utf-16": None,
    "utf-16-le": None,
    "utf-16-be": None,
    "utf-32": None,
    "utf-32-le": None,
    "utf-32-be": None,
    "iso8859-1": "cp1252",
    "ascii": "cp1252",
}


def python_codec(name: str) -> str | None:
    """Python's canonical codec name for ``name`` (e.g. ``EUC-KR`` -> ``euc_kr``), or None."""
    try:
        return codecs.lookup(name.strip()).name
    except (LookupError, ValueError):
        return None


def choose_encoding(data: bytes, declared: str | None = None) -> TextEncoding:
    """The encoding to decode ``data`` with (module docstring)."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            if codec == "utf-8-sig":  # UTF-8 by its own mark: invalid bytes are damage
                invalid, _, first = _utf8_invalid(data)
                return TextEncoding(codec, invalid_bytes=invalid, first_invalid=first)
            return TextEncoding(codec)
    if declared is not None:
        named = python_codec(declared)
        # As browsers read a declaration (WHATWG Encoding): a page cannot declare itself
        # UTF-16 in ASCII bytes (it is UTF-8), and Latin-1/ASCII labels mean Windows-1252.
        named = _AS_BROWSERS_READ.get(named or "", named)
        # A declared UTF-8 is checked like an undeclared file: it is the usual mislabel.
        if named is not None and named != "utf-8":
            return TextEncoding(named)
    if b"\x00" in data[:_NUL_SNIFF_BYTES]:
        # Text has no NUL bytes, UTF-16/32 without a byte order mark has many.
        wide = _detect(data[:_DETECT_BYTES])
        if wide in WIDE_CODECS:
            return TextEncoding(wide, warning=f"decoded as {wide} (it has no byte order mark)")
    invalid, non_ascii, first = _utf8_invalid(data)
    if invalid == 0:
        return TextEncoding("utf-8-sig")
    if invalid * 2 < non_ascii or first >= len(data) - 3:
        # Mostly valid UTF-8 sequences, or only a character cut off at the end: damaged
        # UTF-8, not another encoding.
        return TextEncoding("utf-8-sig", invalid_bytes=invalid, first_invalid=first)
    detected = _detect(data[max(0, first - 4096) : first + _DETECT_BYTES])
    if detected is None:
        return TextEncoding("utf-8-sig", invalid_bytes=invalid, first_invalid=first)
    return TextEncoding(
        detected, warning=f"not UTF-8: decoded as {detected} (detected; the file declares none)"
    )


def _utf8_invalid(data: bytes) -> tuple[int, int, int]:
    """(invalid bytes, non-ASCII bytes, offset of the first invalid byte or -1)."""
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
    invalid = 0
    first = -1
    non_ascii = 0
    view = memoryview(data)
    for start in range(0, len(data), _STEP):
        piece = bytes(view[start : start + _STEP])
        non_ascii += len(piece) - len(piece.translate(None, _HIGH_BYTES))
        text = decoder.decode(piece, final=start + _STEP >= len(data))
        bad = len(_ESCAPED_BYTE.findall(text))
        if bad and first == -1:
            first = start + _first_bad(piece)
        invalid += bad
    return invalid, non_ascii, first


_HIGH_BYTES = bytes(range(0x80, 0x100))
# ``surrogateescape`` turns each undecodable byte into one of these code points.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


def _first_bad(piece: bytes) -> int:
    try:
        piece.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start
    return 0


def _detect(sample: bytes) -> str | None:
    import charset_normalizer

    results = charset_normalizer.from_bytes(sample)
    best = results.best()
    if best is None:
        return None
    # Each result stands for every encoding that decodes the sample to the same text.
    tied = [
        name
        for result in results
        if (result.chaos, result.coherence) == (best.chaos, best.coherence)
        for name in (result.encoding, *result.could_be_from_charset)
    ]
    ranked = sorted(
        tied, key=lambda name: _PREFERRED.index(name) if name in _PREFERRED else len(_PREFERRED)
    )
    return python_codec(ranked[0]) if ranked else python_codec(best.encoding)
