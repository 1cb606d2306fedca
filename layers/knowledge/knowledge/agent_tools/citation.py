"""Where in its document a passage comes from, for its source line (``tool.passage_header``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from knowledge.core.origin import FORMAT

__all__ = ["citation"]


def citation(metadata: Mapping[str, Any]) -> str:
    """Where in its document a chunk comes from, for a result line ("" if not known):
    ``p. 12`` / ``pp. 12-13`` (PDF), ``slide 4``, ``sheet "Budget" rows 2-40`` (XLSX),
    ``rows 2-40`` (CSV), ``§ Install > Linux`` (the heading path of DOCX and HTML; a
    Markdown or text result has none: its line is path, score and chunk only)."""
    page, page_end = _number(metadata.get("page")), _number(metadata.get("page_end"))
    if page is not None:
        return f"pp. {page}-{page_end}" if page_end not in (None, page) else f"p. {page}"
    slide = _number(metadata.get("slide"))
    if slide is not None:
        return f"slide {slide}"
    parts: list[str] = []
    sheet = metadata.get("sheet")
    if isinstance(sheet, str) and sheet:
        parts.append(f'sheet "{sheet}"')
    first, last = _number(metadata.get("row_start")), _number(metadata.get("row_end"))
    if first is not None:
        parts.append(f"rows {first}-{last}" if last not in (None, first) else f"row {first}")
    if parts:
        return " ".join(parts)
    headings = metadata.get("heading_path")
    if metadata.get(FORMAT) in _HEADING_CITED and isinstance(headings, list | tuple):
        names = [str(h) for h in headings if str(h).strip()]
        if names:
            return "§ " + " > ".join(names)
    return ""


_HEADING_CITED = frozenset({"docx", "html"})


def _number(value: object) -> int | None:
    # Metadata read back from a store may spell numbers as strings.
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None
