"""SmartArt text, shared by Word and PowerPoint: it lives in the graphic's own data part.

A SmartArt graphic frame holds ``<dgm:relIds r:dm="rIdN" .../>``; relationship ``rIdN``
of the slide or document names the diagram *data* part, whose points of type ``node``
(the default) are the boxes, in the order drawn, each with DrawingML paragraphs. The
others are connectors and the document point. The part is parsed with lxml without
entity resolution or network access (as python-docx/python-pptx parse their parts).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["DIAGRAM_DATA_ID", "DIAGRAM_REL_IDS", "diagram_data", "diagram_texts"]

_DGM = "{http://schemas.openxmlformats.org/drawingml/2006/diagram}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
DIAGRAM_REL_IDS = f"{_DGM}relIds"
DIAGRAM_DATA_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}dm"
_PT, _T, _A_P, _A_T = f"{_DGM}pt", f"{_DGM}t", f"{_A}p", f"{_A}t"


def diagram_data(blob: bytes) -> Any:
    """The data part's XML, parsed safely."""
    import lxml.etree

    parser = lxml.etree.XMLParser(resolve_entities=False, no_network=True, remove_comments=True)
    return lxml.etree.fromstring(blob, parser)


def diagram_texts(data: Any) -> Iterator[str]:
    """The text of each box, one line per paragraph."""
    for point in data.iter(_PT):
        if point.get("type", "node") != "node":
            continue
        body = point.find(_T)
        if body is None:
            continue
        for paragraph in body.iter(_A_P):
            text = " ".join("".join(t.text or "" for t in paragraph.iter(_A_T)).split())
            if text:
                yield text
