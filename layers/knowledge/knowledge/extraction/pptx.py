"""PowerPoint (.pptx) through python-pptx: one section per slide.

Each slide is a section with ``slide`` (1-based) and ``heading_path`` = [its title]; its
blocks are the title, then the text of every other shape in the slide's order (text
frames, table rows with cells joined by `` | ``, the shapes inside groups, a chart's
title, the boxes of a SmartArt graphic, whose text lives in its own data part), then the
speaker notes, prefixed ``Notes:``. Slides without any text give nothing. A hidden slide
(not shown in the slide show: often a draft or a spare) is left out, as hidden sheets
are, and named by its number in a warning; the others keep their numbers. A shape
hidden in the selection pane is left out too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import MappingProxyType
from typing import IO, Any

from knowledge.extraction.archive import core_title, open_office_package
from knowledge.extraction.base import Block, ExtractedDocument, ExtractionLimits
from knowledge.extraction.diagrams import (
    DIAGRAM_DATA_ID,
    DIAGRAM_REL_IDS,
    diagram_data,
    diagram_texts,
)

__all__ = ["extract"]

_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.presentationml.presentation"


def extract(data: bytes, limits: ExtractionLimits, source_type: str) -> ExtractedDocument:
    presentation = open_office_package(data, limits, "pptx", "PowerPoint file", _load)
    document = ExtractedDocument(
        source_type=source_type,
        content_type=_CONTENT_TYPE,
        title=core_title(presentation.core_properties),
    )
    document.blocks = _blocks(presentation, document.warnings)
    return document


def _load() -> tuple[Callable[[IO[bytes]], Any], tuple[type[Exception], ...]]:
    import pptx
    from pptx.exc import PackageNotFoundError

    return pptx.Presentation, (PackageNotFoundError,)


def _blocks(presentation: Any, warnings: list[str]) -> Iterator[Block]:
    hidden = [
        number
        for number, slide in enumerate(presentation.slides, start=1)
        if slide.element.get("show") in ("0", "false")
    ]
    if hidden:
        plural = "slide" if len(hidden) == 1 else "slides"
        warnings.append(f"{len(hidden)} hidden {plural} left out: {', '.join(map(str, hidden))}")
    skipped = frozenset(hidden)
    for number, slide in enumerate(presentation.slides, start=1):
        if number in skipped:
            continue
        title_shape = slide.shapes.title
        title = _one_line(title_shape.text_frame.text) if title_shape is not None else ""
        section = MappingProxyType({"slide": number, "heading_path": [title] if title else []})
        if title:
            yield Block(title, section)
        for shape in slide.shapes:
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            for text in _shape_texts(shape):
                yield Block(text, section)
        if slide.has_notes_slide:
            frame = slide.notes_slide.notes_text_frame
            notes = frame.text.strip() if frame is not None else ""
            if notes:
                yield Block("Notes: " + notes, section)


_C_NV_PR = "{http://schemas.openxmlformats.org/presentationml/2006/main}cNvPr"


def _shape_texts(shape: Any) -> Iterator[str]:
    element = getattr(shape, "element", None)
    properties = next(element.iter(_C_NV_PR), None) if element is not None else None
    if properties is not None and properties.get("hidden") in ("1", "true"):
        return  # hidden in the selection pane: not on the slide anyone sees
    if getattr(shape, "shape_type", None) is not None and hasattr(shape, "shapes"):
        for inner in shape.shapes:  # a group shape
            yield from _shape_texts(inner)
        return
    if getattr(shape, "has_chart", False):
        chart = shape.chart
        frame = chart.chart_title.text_frame if chart.has_title else None
        if frame is not None and (text := _one_line(frame.text)):
            yield text
        return
    diagram = _diagram_data(shape)
    if diagram is not None:
        yield from diagram_texts(diagram)
        return
    if getattr(shape, "has_table", False):
        for row in shape.table.rows:
            cells = [_one_line(cell.text) for cell in row.cells]
            if any(cells):
                yield " | ".join(cells)
        return
    if getattr(shape, "has_text_frame", False):
        for paragraph in shape.text_frame.paragraphs:
            # ``text`` includes fields and line breaks (as vertical tabs), unlike the runs.
            text = " ".join(paragraph.text.split())
            if text:
                yield "  " * paragraph.level + text


def _diagram_data(shape: Any) -> Any:
    """The data part of a SmartArt graphic frame (its text lives there, not in the
    slide), parsed, or None (not SmartArt, or the part is missing: nothing to read)."""
    element = getattr(shape, "element", None)
    if element is None:
        return None
    for ids in element.iter(DIAGRAM_REL_IDS):
        rid = ids.get(DIAGRAM_DATA_ID)
        if not rid:
            continue
        try:
            part = shape.part.related_part(rid)
        except KeyError:
            return None
        return diagram_data(part.blob)
    return None


def _one_line(text: str) -> str:
    return " ".join(text.split())
