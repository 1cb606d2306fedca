"""Turn a document's bytes into text with structure, chosen by the file name's extension.

Formats are a registry (``_FORMATS``: extension -> format, from the table of
``knowledge.core.formats``), one module per format:

========================  ===========  ===========================================  ==========
extensions                format       structure (citation metadata per chunk)       module
========================  ===========  ===========================================  ==========
``.md`` ``.markdown``     markdown     Markdown headings -> ``heading_path``        ``plain``
``.txt``                  text         (headings recognised too)                    ``plain``
``.json`` ``.yaml``       text         read as plain text                           ``plain``
``.yml`` ``.xml``
``.toml``
``.rst``                  rst          reStructuredText, read as text (markup kept) ``plain``
``.adoc``                 asciidoc     AsciiDoc, read as text (markup kept)         ``plain``
no extension              text         ``README``, ``LICENSE``, ``Makefile``: plain  ``plain``
                                       text if the content is text
``.pdf``                  pdf          pages -> ``page`` (+ ``page_end``)            ``pdf``
``.docx``                 docx         heading styles -> ``heading_path``; lists,   ``docx``
                                       tables as rows
``.pptx``                 pptx         one section per slide -> ``slide``; title,   ``pptx``
                                       body, notes
``.xlsx``                 xlsx         one section per sheet -> ``sheet``,          ``xlsx``
                                       ``row_start``/``row_end``; "column: value"
``.csv``                  csv          rows -> ``row_start``/``row_end``            ``csv``
``.html`` ``.htm``        html         main text, headings -> ``heading_path``      ``html``
========================  ===========  ===========================================  ==========

Legacy binary Office files (``.doc``, ``.xls``, ``.ppt``), OpenDocument (``.odt``,
``.ods``, ``.odp``), ``.rtf``, ``.epub`` and ``.eml`` are refused with ``unsupported
format: ... convert to .docx`` (etc.): the default patterns select them so that they are
listed as problems instead of being ignored without a word. A format's module, and the library it
needs, is imported only when a document of that format is extracted: importing this
package loads no extractor (the search function's cold start stays lean).

``extract_document(name, data)`` returns an ``ExtractedDocument`` (text, or a lazy stream
of blocks); ``extract_text(name, data)`` returns the whole text as ``ExtractedText``.
Errors are ``ExtractionError`` whose message starts with the reason (``knowledge.
extraction.base``): ``unsupported format``, ``too large``, ``corrupt file: ...``,
``encrypted PDF``, ``no text layer (scanned image; OCR not supported)``, ``archive bomb``.
Whatever else a format's library raises on a damaged file, on opening it or while its
blocks are read, is ``corrupt file: the <type> reader failed (...)``: one file's problem,
never the batch's. A file whose content is another known type than its name says (a
PDF named ``.docx``, an image named ``.txt``) is ``wrong file type: the content is ...,
not .docx; rename it to .pdf`` (``sniff``). A structured document that gives no text at
all (an empty DOCX, a PPTX of pictures, a sheet without data rows) is ``no text: ...``.
Text files are decoded as UTF-8 or their detected encoding (see ``plain``); data over
``max_bytes`` (``DEFAULT_MAX_DOCUMENT_BYTES`` when ``None``) is ``too large``.
"""

from __future__ import annotations

import importlib
import logging
import posixpath
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from knowledge.core.errors import ExtractionError, KnowledgeError, ValidationError
from knowledge.core.formats import (
    DOCUMENT_PATTERNS,
    REFUSED_FORMATS,
    SOURCE_TYPE_BY_EXTENSION,
)
from knowledge.extraction.base import (
    DEFAULT_LIMITS,
    REASON_CORRUPT,
    REASON_NO_TEXT,
    REASON_UNSUPPORTED,
    Block,
    ExtractedDocument,
    ExtractionLimits,
    corrupt,
    human_size,
    timed,
    too_large,
)
from knowledge.extraction.sniff import content_kind, misnamed

__all__ = [
    "DEFAULT_MAX_DOCUMENT_BYTES",
    "DOCUMENT_PATTERNS",
    "SOURCE_TYPES",
    "SUPPORTED_EXTENSIONS",
    "Block",
    "ExtractedDocument",
    "ExtractedText",
    "ExtractionLimits",
    "extract_document",
    "extract_text",
    "is_supported",
    "source_type_of",
]

DEFAULT_MAX_DOCUMENT_BYTES = 64 * 1024 * 1024

_LOG = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ExtractedText:
    """The text of a document, its MIME type, and what was repaired on the way."""

    text: str
    content_type: str
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Format:
    source_type: str
    module: str  # knowledge.extraction.<module>.extract(data, limits) -> ExtractedDocument


_READERS: dict[str, str] = {
    "markdown": "plain",
    "text": "plain",
    "rst": "plain",
    "asciidoc": "plain",
    "pdf": "pdf",
    "docx": "docx",
    "pptx": "pptx",
    "xlsx": "xlsx",
    "csv": "csv",
    "html": "html",
}
"""The module that reads each source type (``knowledge.core.formats`` says which extension
is which type)."""
_FORMATS: dict[str, _Format] = {
    extension: _Format(source_type, _READERS[source_type])
    for extension, source_type in SOURCE_TYPE_BY_EXTENSION.items()
}
# A file without an extension is read as text when its content is text (a binary one is
# ``unsupported format (no extension)``); the conventional names
# (``core.formats.TEXT_FILE_NAMES``) are in the defaults.
_NO_EXTENSION = _Format("text", "plain")
_LEGACY = REFUSED_FORMATS

SUPPORTED_EXTENSIONS: tuple[str, ...] = tuple(sorted(_FORMATS))
SOURCE_TYPES: tuple[str, ...] = tuple(dict.fromkeys(f.source_type for f in _FORMATS.values()))


def extract_document(
    name: str,
    data: bytes,
    *,
    max_bytes: int | None = None,
    limits: ExtractionLimits = DEFAULT_LIMITS,
) -> ExtractedDocument:
    """The structure of ``data``, a document called ``name`` (a path or key; only its
    extension matters, case-insensitively). Blocks, if any, are produced lazily: errors
    in the body of a document may be raised while they are consumed."""
    limit = _checked_limit(max_bytes)
    extension = _extension(name)
    legacy = _LEGACY.get(extension)
    if legacy is not None:
        # A renamed .docx or a web app's HTML "Excel export" is not legacy Office at all.
        kind = content_kind(data)
        wrong_type = misnamed(extension, data) if kind is not None and kind[1] else None
        raise wrong_type or ExtractionError(f"{REASON_UNSUPPORTED}: {legacy}")
    fmt = _format_of(name)
    if fmt is None:
        raise _unsupported(extension)
    if len(data) > limit:
        raise too_large(
            f"document is {human_size(len(data))} ({len(data)} bytes), over the limit of "
            f"{human_size(limit)} ({limit} bytes)"
        )
    extract = _extractor(fmt.module)
    try:
        document = extract(data, limits, fmt.source_type)
    except ExtractionError as exc:
        corrupt_file = str(exc).startswith(REASON_CORRUPT)
        wrong_type = misnamed(extension, data) if corrupt_file else None
        if wrong_type is not None:
            raise wrong_type from exc
        if corrupt_file and not extension:  # binary, without extension: not a document
            raise _unsupported(extension, binary=True) from exc
        raise
    except KnowledgeError:
        raise
    except Exception as exc:
        raise _unexpected(fmt.source_type, exc) from exc
    if document.blocks is not None:
        document.blocks = timed(_guarded(document.blocks, fmt.source_type), limits.max_seconds)
    return document


def _guarded(blocks: Iterable[Block], source_type: str) -> Iterator[Block]:
    # A library may fail on a damaged file with any exception, also while the blocks are
    # read: it is this file's problem, never the batch's. A document that gives no text
    # at all is a problem too, not an "indexed" document nobody can find.
    produced = False
    try:
        for block in blocks:
            produced = True
            yield block
    except KnowledgeError:
        raise
    except Exception as exc:
        raise _unexpected(source_type, exc) from exc
    if not produced:
        detail = _NO_TEXT.get(source_type) or _NO_TEXT_DEFAULT.format(source_type)
        raise ExtractionError(f"{REASON_NO_TEXT}: {detail}")


_NO_TEXT = {
    "xlsx": "no data rows in this xlsx (empty sheets, or a header row only)",
    "csv": "no data rows in this csv (empty, or a header row only)",
    "html": "no main text in this html page (empty, or only scripts, navigation or images)",
}
_NO_TEXT_DEFAULT = "nothing readable in this {} (empty, or only images or drawings; no OCR)"


def _unsupported(extension: str, *, binary: bool = False) -> ExtractionError:
    shown = f"'{extension}'" if extension else "no extension"
    if binary:
        shown += ", and the content is not text"
    return ExtractionError(
        f"{REASON_UNSUPPORTED} ({shown}); supported: {', '.join(SUPPORTED_EXTENSIONS)}"
    )


def _unexpected(source_type: str, exc: Exception) -> ExtractionError:
    _LOG.warning("the %s reader failed on a document", source_type, exc_info=exc)
    if isinstance(exc, MemoryError):
        return too_large(f"the {source_type} reader ran out of memory")
    detail = " ".join(str(exc).split())[:200]
    return corrupt(f"the {source_type} reader failed ({type(exc).__name__}: {detail})")


def extract_text(name: str, data: bytes, *, max_bytes: int | None = None) -> ExtractedText:
    """The whole text of ``data`` (see ``extract_document``): structured formats give their
    blocks, one per line, sections separated by a blank line."""
    document = extract_document(name, data, max_bytes=max_bytes)
    if document.text is not None:
        return ExtractedText(document.text, document.content_type, tuple(document.warnings))
    lines: list[str] = []
    section: object = None
    for block in document.blocks or ():
        if lines and block.section != section:
            lines.append("")
        section = block.section
        lines.append(block.text)
    text = "\n".join(lines)
    return ExtractedText(text, document.content_type, tuple(document.warnings))


def is_supported(name: str) -> bool:
    """True if ``extract_document`` can extract a file called ``name`` (case-insensitive;
    a name without extension is read as text if its content is text)."""
    return _format_of(name) is not None


def source_type_of(name: str) -> str | None:
    """The ``source_type`` of a file called ``name`` (``pdf``, ``markdown``, ...), or None."""
    fmt = _format_of(name)
    return None if fmt is None else fmt.source_type


def _format_of(name: str) -> _Format | None:
    extension = _extension(name)
    if extension:
        return _FORMATS.get(extension)
    base = posixpath.basename(name.replace("\\", "/"))
    # A dot file (``.env``, ``.gitignore``) is configuration, and often secret: not text to index.
    return None if not base or base.startswith(".") else _NO_EXTENSION


_Extract = Callable[[bytes, ExtractionLimits, str], ExtractedDocument]


def _extractor(module: str) -> _Extract:
    # Imported on first use: a format's library is loaded only if such a file is indexed.
    loaded = importlib.import_module(f"{__name__}.{module}")
    extract: _Extract = loaded.extract
    return extract


def _checked_limit(max_bytes: int | None) -> int:
    limit = DEFAULT_MAX_DOCUMENT_BYTES if max_bytes is None else max_bytes
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValidationError("max_bytes", f"must be a non-negative integer, got {max_bytes!r}")
    return limit


def _extension(name: str) -> str:
    base = posixpath.basename(name.replace("\\", "/"))
    return posixpath.splitext(base)[1].lower()
