"""Word (.docx) through python-docx: the body in reading order, with structure.

- a paragraph styled ``Title`` or ``Heading N`` (or with an outline level) starts a
  section; its text joins the ``heading_path`` at level N (``Title`` is level 1), as a
  Markdown heading would, and is the first line of the section;
- list paragraphs (numbering, or a ``List ...`` style) read ``- item``, indented by level;
- a table is one block per row, its cells joined with `` | `` (merged cells once);
- empty paragraphs are dropped.

The archive is checked first (``archive.open_office_package``: zip bombs, encrypted
files). The document's title is its core property ``title``, else the first heading.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import IO, Any

from knowledge.extraction.archive import core_title, open_office_package
from knowledge.extraction.base import Block, ExtractedDocument, ExtractionLimits

__all__ = ["extract"]

_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
_HEADING_STYLE = re.compile(r"heading\s*([1-9])", re.IGNORECASE)


def extract(data: bytes, limits: ExtractionLimits, source_type: str) -> ExtractedDocument:
    document = open_office_package(data, limits, "docx", "Word document", _load)
    return ExtractedDocument(
        source_type=source_type,
        content_type=_CONTENT_TYPE,
        blocks=_blocks(document),
        title=core_title(document.core_properties),
    )


def _load() -> tuple[Callable[[IO[bytes]], Any], tuple[type[Exception], ...]]:
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    return docx.Document, (PackageNotFoundError,)


def _blocks(document: Any) -> Iterator[Block]:
    from docx.table import Table

    headings: list[tuple[int, str]] = []
    section: Mapping[str, Any] = MappingProxyType({"heading_path": []})
    for item in document.iter_inner_content():
        if isinstance(item, Table):
            for row in _table_rows(item):
                yield Block(row, section)
            continue
        text = item.text.strip()
        if not text:
            continue
        level = _heading_level(item)
        if level is not None:
            while headings and headings[-1][0] >= level:
                headings.pop()
            headings.append((level, " ".join(text.split())))
            section = MappingProxyType({"heading_path": [h for _, h in headings]})
            yield Block(text, section)
            continue
        list_level = _list_level(item)
        if list_level is not None:
            text = "  " * list_level + "- " + text
        yield Block(text, section)


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


def _style_name(paragraph: Any) -> str:
    try:
        style = paragraph.style
    except (KeyError, ValueError):
        return ""
    name = getattr(style, "name", None)
    return name if isinstance(name, str) else ""


def _table_rows(table: Any) -> Iterator[str]:
    for row in table.rows:
        cells: list[str] = []
        previous: object = None
        for cell in row.cells:
            # A merged cell is returned once per grid column it spans: keep it once.
            if cell._tc is previous:
                continue
            previous = cell._tc
            text = " ".join(cell.text.split())
            cells.append(text)
        if any(cells):
            yield " | ".join(cells)
