"""What real Word files hold beyond plain paragraphs is read (knowledge.extraction.docx).

Tables inside table cells, text boxes, content controls (cover pages, form fields),
custom XML, simple fields, tracked insertions, footnotes and endnotes are text a reader
sees; tracked deletions and moved-away text are not. Each document is built here with
python-docx plus the WordprocessingML a real editor writes for that feature.
"""

from __future__ import annotations

import io

import docx
import pytest
from docx.oxml import parse_xml
from docx.oxml.ns import nsdecls
from ooxml_parts import with_part

from knowledge.extraction import extract_document, extract_text

W = nsdecls("w")
VML = 'xmlns:v="urn:schemas-microsoft-com:vml"'
MC = 'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"'
REVISION = 'w:author="Reviewer" w:date="2026-01-01T00:00:00Z"'


def word_file(*body_xml: str) -> bytes:
    """A document with a heading, then each of ``body_xml`` appended to its body."""
    document = docx.Document()
    document.add_heading("Disaster recovery", level=1)
    body = document.element.body
    for xml in body_xml:
        body.insert(len(body) - 1, parse_xml(xml))  # before the final w:sectPr
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def lines(data: bytes) -> list[str]:
    return extract_text("plan.docx", data).text.splitlines()


@pytest.mark.parametrize(
    ("feature", "xml", "expected"),
    [
        (
            "content control at body level",
            f"<w:sdt {W}><w:sdtContent><w:p><w:r><w:t>Restore from the nightly snapshot."
            "</w:t></w:r></w:p></w:sdtContent></w:sdt>",
            "Restore from the nightly snapshot.",
        ),
        (
            "content control inside a paragraph",
            f"<w:p {W}><w:r><w:t>Owner: </w:t></w:r><w:sdt><w:sdtContent><w:r>"
            "<w:t>Platform team</w:t></w:r></w:sdtContent></w:sdt></w:p>",
            "Owner: Platform team",
        ),
        (
            "simple field",
            f'<w:p {W}><w:r><w:t xml:space="preserve">Revised </w:t></w:r>'
            '<w:fldSimple w:instr=" DATE "><w:r><w:t>2026-03-01</w:t></w:r></w:fldSimple></w:p>',
            "Revised 2026-03-01",
        ),
        (
            "tracked insertion and deletion",
            f'<w:p {W}><w:r><w:t xml:space="preserve">Fail over to </w:t></w:r>'
            f'<w:ins w:id="1" {REVISION}><w:r><w:t>eu-west-1</w:t></w:r></w:ins>'
            f'<w:del w:id="2" {REVISION}><w:r><w:delText>us-east-1</w:delText></w:r></w:del>'
            "</w:p>",
            "Fail over to eu-west-1",
        ),
        (
            "custom XML",
            f'<w:customXml {W} w:element="step"><w:p><w:r><w:t>Page the on-call engineer.'
            "</w:t></w:r></w:p></w:customXml>",
            "Page the on-call engineer.",
        ),
        (
            "VML text box",
            f"<w:p {W} {VML}><w:r><w:pict><v:shape><v:textbox><w:txbxContent><w:p><w:r>"
            "<w:t>Call the DBA before promoting.</w:t></w:r></w:p></w:txbxContent></v:textbox>"
            "</v:shape></w:pict></w:r></w:p>",
            "Call the DBA before promoting.",
        ),
    ],
)
def test_body_features_are_read(feature: str, xml: str, expected: str) -> None:
    assert expected in lines(word_file(xml)), feature


def test_a_text_box_with_a_fallback_copy_is_read_once() -> None:
    box = (
        "<w:txbxContent><w:p><w:r><w:t>Escalate after 15 minutes.</w:t></w:r></w:p></w:txbxContent>"
    )
    xml = (
        f'<w:p {W} {MC} {VML}><w:r><mc:AlternateContent><mc:Choice Requires="wps">'
        f"<w:drawing>{box}</w:drawing></mc:Choice><mc:Fallback><w:pict><v:shape><v:textbox>"
        f"{box}</v:textbox></v:shape></w:pict></mc:Fallback></mc:AlternateContent></w:r></w:p>"
    )
    assert lines(word_file(xml)).count("Escalate after 15 minutes.") == 1


def test_a_table_inside_a_cell_is_read_into_that_cell() -> None:
    document = docx.Document()
    table = document.add_table(rows=1, cols=2)
    table.cell(0, 0).text = "Region"
    inner = table.cell(0, 1).add_table(rows=2, cols=1)
    inner.cell(0, 0).text = "eu-west-1"
    inner.cell(1, 0).text = "ap-northeast-2"
    buffer = io.BytesIO()
    document.save(buffer)
    text = extract_text("regions.docx", buffer.getvalue()).text
    assert "eu-west-1" in text
    assert "ap-northeast-2" in text
    assert text.startswith("Region | ")


def test_table_rows_inside_a_repeating_content_control_are_read() -> None:
    document = docx.Document()
    table = document.add_table(rows=1, cols=2)
    table.cell(0, 0).text = "Region"
    table.cell(0, 1).text = "Owner"
    repeated = parse_xml(
        f"<w:sdt {W}><w:sdtContent><w:tr><w:tc><w:p><w:r><w:t>eu-west-1</w:t></w:r></w:p>"
        "</w:tc><w:tc><w:p><w:r><w:t>Platform</w:t></w:r></w:p></w:tc></w:tr></w:sdtContent>"
        "</w:sdt>"
    )
    table._tbl.append(repeated)
    buffer = io.BytesIO()
    document.save(buffer)
    assert lines(buffer.getvalue()) == ["Region | Owner", "eu-west-1 | Platform"]


def test_a_body_feature_keeps_the_heading_path() -> None:
    data = word_file(
        f"<w:sdt {W}><w:sdtContent><w:p><w:r><w:t>Restore from the nightly snapshot."
        "</w:t></w:r></w:p></w:sdtContent></w:sdt>"
    )
    blocks = list(extract_document("plan.docx", data).blocks or ())
    (restore,) = [b for b in blocks if b.text.startswith("Restore")]
    assert restore.section["heading_path"] == ["Disaster recovery"]


_FOOTNOTES_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/footnotes"
_FOOTNOTES_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.footnotes+xml"


def with_footnotes(data: bytes, notes: list[str]) -> bytes:
    """``data`` with a footnotes part holding ``notes`` (and Word's separator notes)."""
    footnotes = (
        f'<w:footnotes {W}><w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/>'
        "</w:r></w:p></w:footnote>"
        + "".join(
            f'<w:footnote w:id="{n}"><w:p><w:r><w:t>{note}</w:t></w:r></w:p></w:footnote>'
            for n, note in enumerate(notes, start=1)
        )
        + "</w:footnotes>"
    )
    return with_part(
        data,
        name="word/footnotes.xml",
        content=footnotes,
        content_type=_FOOTNOTES_TYPE,
        owner_rels="word/_rels/document.xml.rels",
        rel_id="rIdNotes",
        rel_type=_FOOTNOTES_REL,
        target="footnotes.xml",
    )


def test_footnotes_are_read_after_the_body() -> None:
    data = with_footnotes(word_file(), ["RPO is measured from the last WAL archive."])
    assert lines(data)[-1] == "Footnote: RPO is measured from the last WAL archive."


_DGM = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
_DATA_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/diagramData"
_DATA_TYPE = "application/vnd.openxmlformats-officedocument.drawingml.diagramData+xml"


def with_smartart(steps: list[str]) -> bytes:
    """A document whose last paragraph anchors a SmartArt graphic of ``steps``."""
    anchor = (
        f'<w:p {W} xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
        'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
        f'<w:r><w:drawing><a:graphic><a:graphicData uri="{_DGM}"><dgm:relIds '
        f'xmlns:dgm="{_DGM}" r:dm="rIdDgm" r:lo="rIdDgm" r:qs="rIdDgm" r:cs="rIdDgm"/>'
        "</a:graphicData></a:graphic></w:drawing></w:r></w:p>"
    )
    points = "".join(
        f'<dgm:pt modelId="{n}"><dgm:t><a:p><a:r><a:t>{step}</a:t></a:r></a:p></dgm:t></dgm:pt>'
        for n, step in enumerate(steps, start=1)
    )
    data = (
        f'<dgm:dataModel xmlns:dgm="{_DGM}" '
        'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><dgm:ptLst>'
        f'<dgm:pt modelId="0" type="doc"/>{points}</dgm:ptLst></dgm:dataModel>'
    )
    return with_part(
        word_file(anchor),
        name="word/diagrams/data1.xml",
        content=data,
        content_type=_DATA_TYPE,
        owner_rels="word/_rels/document.xml.rels",
        rel_id="rIdDgm",
        rel_type=_DATA_REL,
        target="diagrams/data1.xml",
    )


def test_smartart_text_is_read() -> None:
    steps = ["Detect the outage", "Fail over the database"]
    assert lines(with_smartart(steps)) == ["Disaster recovery", *steps]
