"""What every extractor produces, and the reasons it gives when it cannot.

An extractor turns a document's bytes into an ``ExtractedDocument``: either plain
``text`` (Markdown and text files, chunked by their Markdown headings), or a lazy stream
of ``Block``\\ s in reading order (every other format), each block carrying the citation
metadata of its section and its position (page or row number). The stream is consumed
once, by the chunker, so a 100k-row sheet or a 1,000-page PDF is never in memory whole.

Every failure is an ``ExtractionError`` whose message starts with one of the reasons
below, so the status list says *why* in words a user can act on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from knowledge.core.errors import ExtractionError

__all__ = [
    "DEFAULT_LIMITS",
    "NO_SECTION",
    "REASON_ARCHIVE_BOMB",
    "REASON_CORRUPT",
    "REASON_ENCRYPTED_PDF",
    "REASON_NO_TEXT",
    "REASON_NO_TEXT_LAYER",
    "REASON_TOO_LARGE",
    "REASON_UNSUPPORTED",
    "Block",
    "ExtractedDocument",
    "ExtractionLimits",
    "PositionKey",
    "corrupt",
    "human_size",
    "timed",
    "too_large",
]

REASON_ENCRYPTED_PDF = "encrypted PDF"
REASON_NO_TEXT_LAYER = "no text layer (scanned image; OCR not supported)"
REASON_NO_TEXT = "no text"
REASON_UNSUPPORTED = "unsupported format"
REASON_TOO_LARGE = "too large"
REASON_CORRUPT = "corrupt file"
REASON_ARCHIVE_BOMB = "archive bomb"

NO_SECTION: Mapping[str, Any] = MappingProxyType({})

PositionKey = Literal["page", "row"]


@dataclass(frozen=True, slots=True)
class ExtractionLimits:
    """Bounds on what one document may cost, whatever its bytes claim.

    ``max_unpacked_bytes``: decompressed bytes of an Office file (zip), counted while
    decompressing; ``max_pdf_pages``: pages of a PDF; ``max_seconds``: time spent inside
    the extractor for one document, on the CPU (summed over the stream, so the chunker's
    and the embedder's time does not count, nor time waiting for a CPU).
    """

    max_unpacked_bytes: int = 256 * 1024 * 1024
    max_pdf_pages: int = 2000
    max_seconds: float = 120.0


DEFAULT_LIMITS = ExtractionLimits()


@dataclass(frozen=True, slots=True)
class Block:
    """One paragraph, list item, table row, page text or sheet row, in reading order.

    ``section`` is the citation metadata of the section the block belongs to
    (``heading_path``, ``slide``, ``sheet``); a block whose section differs from the
    previous one starts a new section, and chunks never cross sections. ``position`` is
    the block's page (PDF) or row (sheets) number, 1-based, or ``None``.
    """

    text: str
    section: Mapping[str, Any] = field(default_factory=lambda: NO_SECTION)
    position: int | None = None


@dataclass(slots=True)
class ExtractedDocument:
    """A document as text (``text``) or as a stream of blocks (``blocks``), never both.

    ``position_key`` names what ``Block.position`` counts (``page`` or ``row``);
    ``title`` is the document's own title when it has one (DOCX core properties, HTML
    ``<title>``). ``warnings`` may grow while ``blocks`` is consumed.
    """

    source_type: str
    content_type: str
    text: str | None = None
    blocks: Iterable[Block] | None = None
    position_key: PositionKey | None = None
    title: str | None = None
    warnings: list[str] = field(default_factory=list)


def human_size(size: int) -> str:
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MiB"
    if size >= 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size} B"


def corrupt(detail: str) -> ExtractionError:
    # One line: a library's message may hold line breaks, a status list should not.
    return ExtractionError(f"{REASON_CORRUPT}: {' '.join(detail.split())}")


def too_large(detail: str) -> ExtractionError:
    return ExtractionError(f"{REASON_TOO_LARGE}: {detail}")


def timed(
    blocks: Iterable[Block],
    max_seconds: float,
    *,
    clock: Callable[[], float] = time.thread_time,
) -> Iterator[Block]:
    """``blocks``, stopped with ``too large`` once the extractor itself has spent more than
    ``max_seconds`` producing them (time between blocks, spent by the consumer, is free).
    ``clock`` reads the time (seconds): by default the CPU time of the thread that
    extracts, so a document costs the same on a loaded machine (a 100,000-row sheet took
    8 s of CPU and 44 s of wall time at load 6, over 120 s at load 19, and was refused
    as too large when this was wall time)."""
    spent = 0.0
    iterator = iter(blocks)
    while True:
        started = clock()
        try:
            block = next(iterator)
        except StopIteration:
            return
        spent += clock() - started
        if spent > max_seconds:
            raise too_large(f"extraction took more than {max_seconds:g} s")
        yield block
