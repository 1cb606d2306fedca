"""Word (.docx) through python-docx: the body in reading order, with structure.

- a paragraph styled ``Title`` or ``Heading N`` (or with an outline level) starts a
  section; its text joins the ``heading_path`` at level N (``Title`` is level 1), as a
  Markdown heading would, and is the first line of the section;
- list paragraphs (numbering, or a ``List ...`` style) read ``- item``, indented by
  level; a numbered one with the number Word shows (``1.``, ``a)``, ``2.IV``: the
  level's format and text in the numbering part, counted per list, deeper levels
  restarting), so "step 3" or "clause 4.2" is found;
- a table is one block per row, its cells joined with `` | `` (merged cells once; a
  table inside a cell is read into that cell);
- empty paragraphs are dropped;
- the body is walked in the XML itself, so what python-docx's own iteration skips is
  read too: content controls (``w:sdt``) and custom XML, SmartArt (``diagrams``), text
  boxes (after their paragraph; the VML fallback copy of a drawing once, not twice),
  simple fields, hyperlinks, equations (OMML, linear: ``q=n/2+1``) and tracked
  insertions (not tracked deletions, moved-away text or text formatted as hidden); a
  picture's alt text, ``Picture: ...``, after its paragraph (not Word's "Description
  automatically generated" guesses);
- then the page headers and footers, ``Header: ...`` / ``Footer: ...``, each distinct
  text once (a document number or title there is found; page numbers are left out), and
  footnotes and endnotes, ``Footnote: ...``. Review comments and symbol-font
  characters (``w:sym``) are not read.

The archive is checked first (``archive.open_office_package``: zip bombs, encrypted
files). A file python-docx cannot read, as it opens or while its body is read, is the
plain ``corrupt file: `` + ``DAMAGED_WORD_FILE`` (the library's own error is logged).
The document's title is its core property ``title``, else the first heading.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import IO, Any

from knowledge.core.errors import ExtractionError, KnowledgeError
from knowledge.extraction.archive import core_title, open_office_package
from knowledge.extraction.base import Block, ExtractedDocument, ExtractionLimits, corrupt
from knowledge.extraction.diagrams import (
    DIAGRAM_DATA_ID,
    DIAGRAM_REL_IDS,
    diagram_data,
    diagram_texts,
)

__all__ = ["DAMAGED_WORD_FILE", "extract"]

DAMAGED_WORD_FILE = "the Word file could not be read: it is damaged or not a .docx"
"""The reason (after ``corrupt file: ``) for a Word file python-docx cannot read."""
_LOG = logging.getLogger("knowledge.extraction")

_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
_HEADING_STYLE = re.compile(r"heading\s*([1-9])", re.IGNORECASE)

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_W_P, _W_TBL, _W_TR, _W_TC = f"{_W}p", f"{_W}tbl", f"{_W}tr", f"{_W}tc"
_W_SDT, _W_SDT_CONTENT, _W_CUSTOM_XML = f"{_W}sdt", f"{_W}sdtContent", f"{_W}customXml"
_TRANSPARENT = frozenset({_W_SDT, _W_CUSTOM_XML})
_W_T, _W_TAB, _W_BR, _W_CR = f"{_W}t", f"{_W}tab", f"{_W}br", f"{_W}cr"
_W_NO_BREAK_HYPHEN = f"{_W}noBreakHyphen"
_W_R, _W_VANISH = f"{_W}r", f"{_W}rPr/{_W}vanish"
_W_TXBX_CONTENT = f"{_W}txbxContent"
_M = "{http://schemas.openxmlformats.org/officeDocument/2006/math}"
_M_T, _M_DEN = f"{_M}t", f"{_M}den"
_WP_DOC_PR = "{http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing}docPr"
_R_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
_PAGE_CHROME = {f"{_W}headerReference": "Header", f"{_W}footerReference": "Footer"}
# A header or footer that only numbers the page: "3", "Page 3", "Page 3 of 12", "3 / 12".
_PAGE_NUMBER = re.compile(r"(?:page\s*)?\d+(?:\s*(?:of|/)\s*\d+)?", re.IGNORECASE)
_W_FOOTNOTE, _W_ENDNOTE, _W_TYPE = f"{_W}footnote", f"{_W}endnote", f"{_W}type"
# Text under these is not what the document reads: deleted or moved-away revisions, a
# drawing's fallback copy, a text box (read on its own), a tab stop definition.
_HIDDEN_ANCESTORS = frozenset(
    {f"{_W}del", f"{_W}moveFrom", _MC_FALLBACK, _W_TXBX_CONTENT, f"{_W}tabs", f"{_W}pPr"}
)
_NOTE_PARTS = {
    "http://schemas.openxmlformats.org/officeDocument/2006/relationships/footnotes": "Footnote",
    "http://schemas.openxmlformats.org/officeDocument/2006/relationships/endnotes": "Endnote",
}


def extract(data: bytes, limits: ExtractionLimits, source_type: str) -> ExtractedDocument:
    try:
        document = open_office_package(
            data, limits, "docx", "Word document", _load, reason=DAMAGED_WORD_FILE
        )
        title = core_title(document.core_properties)
    except (KnowledgeError, MemoryError):
        raise
    except Exception as exc:
        raise _damaged(exc) from exc
    return ExtractedDocument(
        source_type=source_type,
        content_type=_CONTENT_TYPE,
        blocks=_plain_failures(_blocks(document)),
        title=title,
    )


def _damaged(exc: Exception) -> ExtractionError:
    """The problem of a Word file python-docx fails on, in words a user reads in a status:
    its own errors name lxml's classes and XML line numbers (``AttributeError:
    'lxml.etree._Element' object has no attribute 'body'``), which say nothing to whoever
    must fix the file, so they go to the log only."""
    _LOG.warning("the docx reader failed on a document", exc_info=exc)
    return corrupt(DAMAGED_WORD_FILE)


def _plain_failures(blocks: Iterator[Block]) -> Iterator[Block]:
    """``blocks``, with a failure while the body is read (a damaged part only shows then)
    said as ``_damaged`` does. Running out of memory stays what it is (``too large``)."""
    try:
        yield from blocks
    except (KnowledgeError, MemoryError):
        raise
    except Exception as exc:
        raise _damaged(exc) from exc


def _load() -> tuple[Callable[[IO[bytes]], Any], tuple[type[Exception], ...]]:
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    return docx.Document, (PackageNotFoundError,)


def _blocks(document: Any) -> Iterator[Block]:
    from docx.text.paragraph import Paragraph

    container = document._body  # what a Paragraph needs to resolve its style
    numbering = _Numbering(document)
    headings: list[tuple[int, str]] = []
    section: Mapping[str, Any] = MappingProxyType({"heading_path": []})
    for kind, element in _body_items(document.element.body):
        if kind == "table":
            for row in _table_rows(element):
                yield Block(row, section)
            continue
        text = _paragraph_text(element).strip()
        paragraph = Paragraph(element, container)
        level = _heading_level(paragraph) if text else None
        if level is not None:
            while headings and headings[-1][0] >= level:
                headings.pop()
            headings.append((level, " ".join(text.split())))
            section = MappingProxyType({"heading_path": [h for _, h in headings]})
            yield Block(text, section)
        elif text:
            list_level = _list_level(paragraph)
            if list_level is not None:
                label = numbering.label(paragraph, list_level) or "-"
                text = "  " * list_level + label + " " + text
            yield Block(text, section)
        for text in _diagram_lines(element, document.part):
            yield Block(text, section)
        for text in _alt_texts(element):
            yield Block(f"Picture: {text}", section)
        # Text boxes anchored in the paragraph: their paragraphs and tables follow it.
        for box in _text_boxes(element):
            for inner_kind, inner in _body_items(box):
                if inner_kind == "table":
                    for row in _table_rows(inner):
                        yield Block(row, section)
                elif inner_text := _paragraph_text(inner).strip():
                    yield Block(inner_text, section)
    yield from _page_chrome(document, section)
    yield from _notes(document, section)


def _body_items(container: Any) -> Iterator[tuple[str, Any]]:
    """The paragraphs and tables of a body, cell or text box in reading order, also those
    inside content controls (``w:sdt``: cover pages, tables of contents, form fields) and
    custom XML, which python-docx's own iteration skips."""
    for child in container.iterchildren():
        tag = child.tag
        if tag == _W_P:
            yield "paragraph", child
        elif tag == _W_TBL:
            yield "table", child
        elif tag in _TRANSPARENT:
            content = child.find(_W_SDT_CONTENT) if tag == _W_SDT else child
            if content is not None:
                yield from _body_items(content)


def _paragraph_text(paragraph: Any) -> str:
    """The text a reader sees: runs, hyperlinks, fields' results, content controls and
    tracked insertions; not tracked deletions or moved-away text, not the text of text
    boxes (``_text_boxes``) and not the fallback copy of a drawing."""
    parts: list[str] = []
    for element in paragraph.iter(_W_T, _W_TAB, _W_BR, _W_CR, _W_NO_BREAK_HYPHEN, _M_T, _M_DEN):
        if any(a.tag in _HIDDEN_ANCESTORS for a in _ancestors_within(element, paragraph)):
            continue
        if _vanished(element):
            continue
        tag = element.tag
        if tag in (_W_T, _M_T):
            parts.append(element.text or "")
        elif tag == _M_DEN:  # an equation's fraction, read as a reader says it: n/2
            parts.append("/")
        elif tag == _W_NO_BREAK_HYPHEN:
            parts.append("-")
        else:
            parts.append(" " if tag != _W_TAB else "\t")
    return "".join(parts)


def _vanished(element: Any) -> bool:
    """True for text in a run formatted as hidden (``w:vanish``): Word does not show or
    print it (a template's hints, a note to the author)."""
    run = element.getparent()
    if run is None or run.tag != _W_R:
        return False
    vanish = run.find(_W_VANISH)
    return vanish is not None and vanish.get(_W_VAL) not in ("0", "false", "off")


def _ancestors_within(element: Any, stop: Any) -> Iterator[Any]:
    parent = element.getparent()
    while parent is not None and parent is not stop:
        yield parent
        parent = parent.getparent()


def _text_boxes(paragraph: Any) -> Iterator[Any]:
    for box in paragraph.iter(_W_TXBX_CONTENT):
        ancestors = list(_ancestors_within(box, paragraph))
        # Not the VML fallback of a drawing (its text is in the drawing too), nor a box
        # inside another box (that box's walk reads it).
        if not any(a.tag in (_MC_FALLBACK, _W_TXBX_CONTENT) for a in ancestors):
            yield box


def _alt_texts(paragraph: Any) -> Iterator[str]:
    """The alt text of the pictures and drawings anchored in the paragraph: written for a
    reader who cannot see the picture, so it says what the picture shows."""
    for properties in paragraph.iter(_WP_DOC_PR):
        if any(a.tag == _MC_FALLBACK for a in _ancestors_within(properties, paragraph)):
            continue
        text = " ".join((properties.get("descr") or "").split())
        if text and not text.lower().endswith("automatically generated"):
            yield text


def _page_chrome(document: Any, section: Mapping[str, Any]) -> Iterator[Block]:
    """The page headers and footers of every section (first-page, odd and even ones),
    each distinct text once, page numbers left out."""
    seen: set[str] = set()
    for reference in document.element.body.iter(*_PAGE_CHROME):
        part = document.part.related_parts.get(reference.get(_R_ID) or "")
        root = getattr(part, "element", None)
        if root is None:
            continue
        lines: list[str] = []
        for kind, element in _body_items(root):
            if kind == "table":
                lines.extend(_table_rows(element))
            else:
                lines.append(" ".join(_paragraph_text(element).split()))
                lines.extend(_cell_text(box) for box in _text_boxes(element))
        text = " ".join(
            " ".join(line for line in lines if not _PAGE_NUMBER.fullmatch(line)).split()
        )
        if text and text not in seen:
            seen.add(text)
            yield Block(f"{_PAGE_CHROME[reference.tag]}: {text}", section)


def _diagram_lines(paragraph: Any, part: Any) -> Iterator[str]:
    """The text of SmartArt graphics anchored in the paragraph (``diagrams``)."""
    for ids in paragraph.iter(DIAGRAM_REL_IDS):
        if any(a.tag == _MC_FALLBACK for a in _ancestors_within(ids, paragraph)):
            continue
        related = part.related_parts.get(ids.get(DIAGRAM_DATA_ID) or "")
        if related is not None:
            yield from diagram_texts(diagram_data(related.blob))


def _notes(document: Any, section: Mapping[str, Any]) -> Iterator[Block]:
    """Footnotes and endnotes (python-docx has no API for them), after the body."""
    from docx.oxml.parser import parse_xml

    for rel in document.part.rels.values():
        kind = _NOTE_PARTS.get(rel.reltype)
        if kind is None or rel.is_external:
            continue
        root = parse_xml(rel.target_part.blob)
        for note in root.iterchildren(_W_FOOTNOTE, _W_ENDNOTE):
            if note.get(_W_TYPE) not in (None, "normal"):
                continue  # the separator lines Word keeps in every notes part
            text = " ".join(
                " ".join(_paragraph_text(p).split())
                for _, p in _body_items(note)
                if _ == "paragraph"
            ).strip()
            if text:
                yield Block(f"{kind}: {text}", section)


def _heading_level(paragraph: Any) -> int | None:
    name = _style_name(paragraph)
    if name.lower() == "title":
        return 1
    match = _HEADING_STYLE.fullmatch(name.strip())
    if match:
        return int(match.group(1))
    outline = paragraph._p.xpath("./w:pPr/w:outlineLvl/@w:val")
    if outline and str(outline[0]).isdigit() and int(outline[0]) < 9:
        return int(outline[0]) + 1
    return None


def _list_level(paragraph: Any) -> int | None:
    levels = paragraph._p.xpath("./w:pPr/w:numPr/w:ilvl/@w:val")
    if paragraph._p.xpath("./w:pPr/w:numPr"):
        return int(levels[0]) if levels and str(levels[0]).isdigit() else 0
    if _style_name(paragraph).lower().startswith("list"):
        return 0
    return None


class _Numbering:
    """The numbers Word shows before numbered list paragraphs, counted as they come."""

    def __init__(self, document: Any) -> None:
        # numId -> level -> (format, text, start); counters per numId.
        self._levels: dict[str, dict[int, tuple[str, str, int]]] = {}
        self._counters: dict[str, dict[int, int]] = {}
        try:
            root = document.part.numbering_part.element
        except (KeyError, NotImplementedError, AttributeError):
            return
        abstract: dict[str, dict[int, tuple[str, str, int]]] = {}
        for definition in root.iterchildren(f"{_W}abstractNum"):
            abstract[definition.get(f"{_W}abstractNumId") or ""] = _levels_of(definition)
        for num in root.iterchildren(f"{_W}num"):
            base = num.find(f"{_W}abstractNumId")
            levels = dict(abstract.get(base.get(_W_VAL) if base is not None else "", {}))
            for override in num.iterchildren(f"{_W}lvlOverride"):
                level = _int(override.get(f"{_W}ilvl"), 0)
                replaced = override.find(f"{_W}lvl")
                if replaced is not None:
                    levels.update(_levels_of(override))
                start = override.find(f"{_W}startOverride")
                if start is not None and level in levels:
                    fmt, text, _ = levels[level]
                    levels[level] = (fmt, text, _int(start.get(_W_VAL), 1))
            self._levels[num.get(f"{_W}numId") or ""] = levels

    def label(self, paragraph: Any, level: int) -> str | None:
        """The number of a numbered list paragraph at ``level``, counted; None for a
        bullet, a list without numbering definitions, or a level it does not define."""
        num_id = _num_id(paragraph)
        levels = self._levels.get(num_id or "")
        if num_id is None or not levels or level not in levels:
            return None
        fmt, text, start = levels[level]
        if fmt not in _NUMBER_FORMATS:
            return None  # bullet, none, or a format not worth spelling out
        counters = self._counters.setdefault(num_id, {})
        counters[level] = counters.get(level, start - 1) + 1
        for deeper in [k for k in counters if k > level]:
            del counters[deeper]  # a deeper level restarts after a higher one

        def number(match: re.Match[str]) -> str:
            at = int(match.group(1)) - 1
            value = counters.get(at, levels[at][2] if at in levels else 1)
            spell = _NUMBER_FORMATS.get(levels[at][0] if at in levels else "decimal", str)
            return spell(value)

        return _LEVEL_REFERENCE.sub(number, text).strip() or None


_W_VAL = f"{_W}val"
_LEVEL_REFERENCE = re.compile(r"%([1-9])")


def _levels_of(definition: Any) -> dict[int, tuple[str, str, int]]:
    levels: dict[int, tuple[str, str, int]] = {}
    for lvl in definition.iterchildren(f"{_W}lvl"):
        fmt, text, start = (lvl.find(f"{_W}{name}") for name in ("numFmt", "lvlText", "start"))
        levels[_int(lvl.get(f"{_W}ilvl"), 0)] = (
            fmt.get(_W_VAL) or "" if fmt is not None else "decimal",
            text.get(_W_VAL) or "" if text is not None else "",
            _int(start.get(_W_VAL) if start is not None else None, 1),
        )
    return levels


def _num_id(paragraph: Any) -> str | None:
    """The list (``numId``) of a paragraph: its own numbering, else its style's."""
    own = paragraph._p.xpath("./w:pPr/w:numPr/w:numId/@w:val")
    if own:
        return str(own[0])
    try:
        style = paragraph.style
    except (KeyError, ValueError):
        return None
    element = getattr(style, "element", None)
    found = element.xpath("./w:pPr/w:numPr/w:numId/@w:val") if element is not None else []
    return str(found[0]) if found else None


def _int(value: str | None, default: int) -> int:
    return int(value) if value is not None and value.isdigit() else default


def _letters(n: int) -> str:
    # Word repeats the letter past z: 27 is AA, 28 is BB.
    return chr(ord("A") + (n - 1) % 26) * ((n - 1) // 26 + 1) if n > 0 else str(n)


def _roman(n: int) -> str:
    if not 0 < n < 4000:
        return str(n)
    out = []
    for value, numeral in (
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ):
        count, n = divmod(n, value)
        out.append(numeral * count)
    return "".join(out)


_NUMBER_FORMATS: Mapping[str, Callable[[int], str]] = MappingProxyType(
    {
        "decimal": str,
        "decimalZero": lambda n: f"{n:02d}",
        "lowerLetter": lambda n: _letters(n).lower(),
        "upperLetter": _letters,
        "lowerRoman": lambda n: _roman(n).lower(),
        "upperRoman": _roman,
    }
)


def _style_name(paragraph: Any) -> str:
    try:
        style = paragraph.style
    except (KeyError, ValueError):
        return ""
    name = getattr(style, "name", None)
    return name if isinstance(name, str) else ""


def _table_rows(table: Any) -> Iterator[str]:
    """One line per row, cells joined with `` | ``; a merged cell is one ``w:tc`` in the
    XML, so it comes once; a table inside a cell is read into that cell."""
    for row in _rows(table):
        cells = [" ".join(_cell_text(cell).split()) for cell in _row_cells(row)]
        if any(cells):
            yield " | ".join(cells)


def _rows(table: Any) -> Iterator[Any]:
    for child in table.iterchildren():
        if child.tag == _W_TR:
            yield child
        elif child.tag in _TRANSPARENT:  # rows inside a content control (repeating section)
            content = child.find(_W_SDT_CONTENT) if child.tag == _W_SDT else child
            if content is not None:
                yield from _rows(content)


def _row_cells(row: Any) -> Iterator[Any]:
    for child in row.iterchildren():
        if child.tag == _W_TC:
            yield child
        elif child.tag in _TRANSPARENT:
            content = child.find(_W_SDT_CONTENT) if child.tag == _W_SDT else child
            if content is not None:
                yield from _row_cells(content)


def _cell_text(cell: Any) -> str:
    texts: list[str] = []
    for kind, element in _body_items(cell):
        if kind == "table":
            texts.extend(_table_rows(element))
        else:
            texts.append(_paragraph_text(element))
            for box in _text_boxes(element):
                texts.append(_cell_text(box))
    return " ".join(texts)
