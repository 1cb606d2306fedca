"""CSV through the standard library's ``csv`` module, streamed row by row.

The bytes are decoded as text files are (``plain.text_stream``: a BOM, UTF-8, UTF-16,
or a detected legacy encoding such as CP949 or Windows-1252, said in a warning; invalid
bytes become U+FFFD) by a reader that decodes as it goes; the delimiter (``,`` ``;``
tab or ``|``) is sniffed from the first 8 KiB. The first non-empty row is the header;
every later row is one block ``header: value; ...`` with ``position`` = its record
number (the header is row 1).
A field over the ``csv`` module's limit (128 KiB), or binary content, is ``corrupt file``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator

from knowledge.extraction.base import (
    NO_SECTION,
    Block,
    ExtractedDocument,
    ExtractionLimits,
    corrupt,
)
from knowledge.extraction.plain import text_stream
from knowledge.extraction.rows import row_blocks

__all__ = ["extract"]

_SNIFF_CHARS = 8 * 1024
_DELIMITERS = ",;\t|"


def extract(data: bytes, limits: ExtractionLimits, source_type: str) -> ExtractedDocument:
    stream, warnings = text_stream(data)
    return ExtractedDocument(
        source_type=source_type,
        content_type="text/csv",
        blocks=_blocks(stream),
        position_key="row",
        warnings=list(warnings),
    )


def _blocks(stream: io.TextIOWrapper) -> Iterator[Block]:
    sample = stream.read(_SNIFF_CHARS)
    stream.seek(0)
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(sample, _DELIMITERS)
    except csv.Error:
        dialect = csv.excel
    yield from row_blocks(_records(csv.reader(stream, dialect)), NO_SECTION)


def _records(reader: Iterator[list[str]]) -> Iterator[list[str]]:
    try:
        yield from reader
    except csv.Error as exc:
        raise corrupt(f"CSV cannot be parsed ({exc})") from exc
