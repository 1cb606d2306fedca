"""Text that a slide shows from graphics (knowledge.extraction.pptx).

A SmartArt graphic (process steps, org charts: common in real decks) keeps its text in
its own diagram data part, not on the slide; a chart's title is in the chart part. Both
are what the audience reads, so both are indexed with the slide's citation.
"""

from __future__ import annotations

import io

import pptx
from ooxml_parts import with_part
from pptx.chart.data import CategoryChartData
from pptx.enum.chart import XL_CHART_TYPE
from pptx.util import Inches

from knowledge.extraction import extract_document

_DGM = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
_R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_P = "http://schemas.openxmlformats.org/presentationml/2006/main"
_DATA_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/diagramData"
_DATA_TYPE = "application/vnd.openxmlformats-officedocument.drawingml.diagramData+xml"


def _point(model_id: str, text: str | None, kind: str | None = None) -> str:
    kind_attr = f' type="{kind}"' if kind else ""
    body = f"<dgm:t><a:bodyPr/><a:p><a:r><a:t>{text}</a:t></a:r></a:p></dgm:t>" if text else ""
    return f'<dgm:pt modelId="{model_id}"{kind_attr}><dgm:prSet/>{body}</dgm:pt>'


def deck_with_smartart(title: str, steps: list[str]) -> bytes:
    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[5])  # title only
    slide.shapes.title.text = title
    buffer = io.BytesIO()
    presentation.save(buffer)

    frame = (
        f'<p:graphicFrame xmlns:p="{_P}" xmlns:a="{_A}" xmlns:r="{_R}">'
        '<p:nvGraphicFramePr><p:cNvPr id="10" name="Diagram 1"/><p:cNvGraphicFramePr/><p:nvPr/>'
        '</p:nvGraphicFramePr><p:xfrm><a:off x="0" y="0"/><a:ext cx="100" cy="100"/></p:xfrm>'
        f'<a:graphic><a:graphicData uri="{_DGM}"><dgm:relIds xmlns:dgm="{_DGM}" '
        'r:dm="rIdDgm" r:lo="rIdDgm" r:qs="rIdDgm" r:cs="rIdDgm"/></a:graphicData></a:graphic>'
        "</p:graphicFrame>"
    )
    points = [_point("0", None, "doc")]
    points += [_point(str(n), step) for n, step in enumerate(steps, start=1)]
    points += [_point("99", None, "parTrans")]
    data = (
        f'<dgm:dataModel xmlns:dgm="{_DGM}" xmlns:a="{_A}"><dgm:ptLst>{"".join(points)}'
        "</dgm:ptLst><dgm:cxnLst/><dgm:bg/><dgm:whole/></dgm:dataModel>"
    )
    return with_part(
        buffer.getvalue(),
        name="ppt/diagrams/data1.xml",
        content=data,
        content_type=_DATA_TYPE,
        owner_rels="ppt/slides/_rels/slide1.xml.rels",
        rel_id="rIdDgm",
        rel_type=_DATA_REL,
        target="../diagrams/data1.xml",
        edits={
            "ppt/slides/slide1.xml": lambda raw: raw.replace(
                b"</p:spTree>", frame.encode() + b"</p:spTree>"
            )
        },
    )


def test_smartart_boxes_are_read_on_their_slide() -> None:
    steps = ["Detect the outage", "Page the on-call", "Fail over the database"]
    document = extract_document("drill.pptx", deck_with_smartart("Incident flow", steps))
    blocks = list(document.blocks or ())
    assert [b.text for b in blocks] == ["Incident flow", *steps]
    assert {b.section["slide"] for b in blocks} == {1}


def test_a_chart_title_is_read() -> None:
    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[5])
    slide.shapes.title.text = "Capacity"
    data = CategoryChartData()
    data.categories = ["Q1", "Q2"]
    data.add_series("Nodes", (4, 6))
    frame = slide.shapes.add_chart(
        XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(1), Inches(1), Inches(4), Inches(3), data
    )
    frame.chart.has_title = True
    frame.chart.chart_title.text_frame.text = "Search nodes per quarter"
    buffer = io.BytesIO()
    presentation.save(buffer)
    texts = [b.text for b in extract_document("plan.pptx", buffer.getvalue()).blocks or ()]
    assert texts == ["Capacity", "Search nodes per quarter"]
