"""Round 8's second audit of real documents: what a reader of the file sees is what is
indexed, and what is left out is said (docs/documents.md, "What is read and what is not").

Every file is generated here; each case failed on the code before its fix.
"""

from __future__ import annotations

import codecs
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lambda_support import BUCKET, log_records, s3_notification, sqs_event
from test_handlers_indexer import RUNBOOKS, indexer, s3  # noqa: F401 (fixtures)

from knowledge.core.errors import ExtractionError
from knowledge.core.model import SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument, is_document_path
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.extraction import DOCUMENT_PATTERNS, extract_document
from knowledge.ingest.pipeline import upsert_document
from knowledge.local.cli import main
from knowledge.stores.embedded import EmbeddedKnowledgeStore
from knowledge.stores.memory import MemoryKnowledgeStore
from knowledge.stores.protocol import KnowledgeStore

SCOPE = KnowledgeScope("agent", "docs")


def doc(path: str, data: bytes) -> SourceDocument:
    return SourceDocument(path, len(data), lambda: data)


# --- a text file without text is a problem, as an empty DOCX is ------------------------------

EMPTY_TEXTS = [
    ("empty.md", b""),
    ("blank.txt", b" \n\t\r\n  "),
    ("bom-only.md", codecs.BOM_UTF8 + b"\n\n"),
    ("front-matter-only.md", b"---\ntitle: Draft\ntags: [a, b]\n---\n\n   \n"),
    ("utf16-blank.txt", " \n ".encode("utf-16")),
]


@pytest.mark.parametrize(("name", "data"), EMPTY_TEXTS, ids=[n for n, _ in EMPTY_TEXTS])
def test_a_text_file_without_text_is_no_text(name: str, data: bytes) -> None:
    with pytest.raises(ExtractionError) as caught:
        extract_document(name, data)
    assert str(caught.value).startswith("no text: ")


def test_text_with_front_matter_and_a_body_is_read() -> None:
    document = extract_document("note.md", b"---\ntitle: x\n---\nThe body.\n")
    assert document.text is not None
    assert "The body." in document.text


def make_store(kind: str, tmp_path: Path) -> KnowledgeStore:
    if kind == "memory":
        return MemoryKnowledgeStore()
    return EmbeddedKnowledgeStore(tmp_path / "kb.sqlite3", embedder=HashingEmbedder(16))


@pytest.mark.parametrize("kind", ["memory", "embedded"])
def test_an_emptied_text_file_is_a_problem_and_its_old_text_stays_searchable(
    kind: str, tmp_path: Path
) -> None:
    """A failed write never removes what was searchable before: a file emptied to white
    space is a "no text" problem naming that the previous version is still searched."""
    store = make_store(kind, tmp_path)
    upsert_document(store, SCOPE, doc("notes.md", b"# Notes\n\nquarterly figures"))
    assert [r.document_path for r in store.search(SCOPE, SearchQuery("quarterly"))] == ["notes.md"]
    result = upsert_document(store, SCOPE, doc("notes.md", b"\n \n"))
    assert result.indexed_chunks == 0
    (problem,) = store.status(SCOPE).problems
    assert problem.path == "notes.md"
    assert problem.reason.startswith("no text: ")
    assert "the previously indexed version is still searched" in problem.reason
    assert store.status(SCOPE).document_count == 1
    assert [r.document_path for r in store.search(SCOPE, SearchQuery("quarterly"))] == ["notes.md"]


# --- XLSX: what Excel shows -------------------------------------------------------------------


def _workbook_bytes(build: Callable[[Any], None]) -> bytes:
    import openpyxl

    workbook = openpyxl.Workbook()
    build(workbook)
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def _blocks(name: str, data: bytes) -> tuple[list[tuple[str, Any]], list[str]]:
    document = extract_document(name, data)
    blocks = [(block.text, dict(block.section)) for block in document.blocks or ()]
    return blocks, document.warnings


def test_hidden_sheets_are_left_out_and_named_in_a_warning() -> None:
    def build(workbook: Any) -> None:
        visible = workbook.active
        visible.title = "Budget"
        visible.append(["item", "cost"])
        visible.append(["rent", 1200])
        for title, state in (("Old figures", "hidden"), ("Macro data", "veryHidden")):
            sheet = workbook.create_sheet(title)
            sheet.append(["item", "cost"])
            sheet.append(["draft", 99])
            sheet.sheet_state = state

    blocks, warnings = _blocks("plan.xlsx", _workbook_bytes(build))
    assert blocks == [("item: rent; cost: 1200", {"sheet": "Budget"})]
    assert warnings == ["2 hidden sheets left out: 'Old figures', 'Macro data'"]


def test_formulas_without_a_saved_value_are_named_in_a_warning() -> None:
    # openpyxl writes formulas without the value Excel would have saved with them.
    def build(workbook: Any) -> None:
        sheet = workbook.active
        sheet.title = "Totals"
        sheet.append(["item", "cost", "with tax"])
        sheet.append(["rent", 1000, "=B2*1.2"])
        sheet.append(["power", 200, "=B3*1.2"])
        sheet.append(["sum", "=SUM(B2:B3)"])
        other = workbook.create_sheet("Notes")
        other.append(["note"])
        other.append(["no formulas here"])

    blocks, warnings = _blocks("totals.xlsx", _workbook_bytes(build))
    assert [text for text, _ in blocks][:2] == ["item: rent; cost: 1000", "item: power; cost: 200"]
    assert warnings == [
        "sheet 'Totals': 3 formula cells have no saved value (the file was written by a "
        "program, not saved by Excel), so their values are not indexed; open and save it "
        "in Excel or LibreOffice to index them"
    ]


def test_numbers_read_as_excel_shows_them() -> None:
    def build(workbook: Any) -> None:
        sheet = workbook.active
        sheet.append(["name", "share", "total", "tiny"])
        sheet.append(["a", 0.1 + 0.2, 1 / 3, 1e-20])
        sheet["B2"].number_format = "0%"
        sheet.append(["b", 0.125, 2.5e20, 12345678.9])
        sheet["B3"].number_format = "0.0%"

    blocks, _ = _blocks("numbers.xlsx", _workbook_bytes(build))
    assert [text for text, _ in blocks] == [
        "name: a; share: 30%; total: 0.333333333333333; tiny: 1E-20",
        "name: b; share: 12.5%; total: 2.5E+20; tiny: 12345678.9",
    ]


# --- PPTX: hidden slides, as hidden sheets ------------------------------------------------------


def test_hidden_slides_are_left_out_keep_their_numbers_and_are_named() -> None:
    import pptx as python_pptx

    presentation = python_pptx.Presentation()
    layout = presentation.slide_layouts[1]
    for title in ("Plan", "Draft idea", "Launch"):
        slide = presentation.slides.add_slide(layout)
        slide.shapes.title.text = title
        slide.placeholders[1].text_frame.text = f"{title} body"
    presentation.slides[1]._element.set("show", "0")
    buffer = io.BytesIO()
    presentation.save(buffer)

    blocks, warnings = _blocks("deck.pptx", buffer.getvalue())
    assert [(text, section["slide"]) for text, section in blocks] == [
        ("Plan", 1),
        ("Plan body", 1),
        ("Launch", 3),
        ("Launch body", 3),
    ]
    assert warnings == ["1 hidden slide left out: 2"]


def _with_sheet_xml(data: bytes, edit: Callable[[bytes], bytes]) -> bytes:
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            body = source.read(info)
            if info.filename == "xl/worksheets/sheet1.xml":
                body = edit(body)
            target.writestr(info, body)
    return out.getvalue()


def test_formulas_with_a_saved_value_or_an_empty_text_result_give_no_warning() -> None:
    def build(workbook: Any) -> None:
        sheet = workbook.active
        sheet.append(["item", "cost", "label"])
        sheet.append(["rent", "=1000*1.2", '=IF(1,"","x")'])

    def as_excel_saves_it(xml: bytes) -> bytes:
        xml = xml.replace(b"<f>1000*1.2</f><v></v>", b"<f>1000*1.2</f><v>1200</v>")
        return xml.replace(b'<c r="C2">', b'<c r="C2" t="str">')

    data = _with_sheet_xml(_workbook_bytes(build), as_excel_saves_it)
    blocks, warnings = _blocks("saved.xlsx", data)
    assert [text for text, _ in blocks] == ["item: rent; cost: 1200"]
    assert warnings == []


# --- DOCX: page headers and footers, equations, pictures' alt text ----------------------------

W_NS = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
M_NS = 'xmlns:m="http://schemas.openxmlformats.org/officeDocument/2006/math"'
WP_NS = 'xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"'


def _word_lines(build: Callable[[Any], None]) -> list[str]:
    import docx

    document = docx.Document()
    document.add_heading("Runbook", level=1)
    build(document)
    buffer = io.BytesIO()
    document.save(buffer)
    blocks, _ = _blocks("runbook.docx", buffer.getvalue())
    return [text for text, _ in blocks]


def _append_xml(document: Any, xml: str) -> None:
    from docx.oxml import parse_xml

    body = document.element.body
    body.insert(len(body) - 1, parse_xml(xml))  # before the final w:sectPr


def test_page_headers_and_footers_are_read_once_after_the_body() -> None:
    def build(document: Any) -> None:
        document.add_paragraph("Restart the service.")
        section = document.sections[0]
        section.header.paragraphs[0].text = "DOC-4711 Rev B"
        section.header.add_paragraph("Confidential")
        section.footer.paragraphs[0].text = "Page 1 of 3"  # a page number: left out
        section.different_first_page_header_footer = True
        section.first_page_header.paragraphs[0].text = "DOC-4711 Rev B"
        section.first_page_header.add_paragraph("Confidential")
        second = document.add_section()
        second.header.is_linked_to_previous = False
        second.header.paragraphs[0].text = "Appendix A"
        document.add_paragraph("More text.")

    assert _word_lines(build) == [
        "Runbook",
        "Restart the service.",
        "More text.",
        "Header: DOC-4711 Rev B Confidential",
        "Header: Appendix A",
    ]


def test_equations_and_pictures_alt_text_are_read() -> None:
    def build(document: Any) -> None:
        _append_xml(
            document,
            f'<w:p {W_NS} {M_NS}><w:r><w:t xml:space="preserve">Quorum is </w:t></w:r>'
            "<m:oMath><m:r><m:t>q=</m:t></m:r><m:f><m:num><m:r><m:t>n</m:t></m:r></m:num>"
            "<m:den><m:r><m:t>2</m:t></m:r></m:den></m:f><m:r><m:t>+1</m:t></m:r></m:oMath>"
            "</w:p>",
        )
        _append_xml(
            document,
            f"<w:p {W_NS} {WP_NS}><w:r><w:drawing><wp:inline>"
            '<wp:docPr id="7" name="Picture 7" descr="Load balancer in front of three app '
            'servers"/></wp:inline></w:drawing></w:r></w:p>',
        )
        _append_xml(
            document,
            f"<w:p {W_NS} {WP_NS}><w:r><w:drawing><wp:inline>"
            '<wp:docPr id="8" name="Picture 8" descr="A screenshot of a computer&#10;&#10;'
            'Description automatically generated"/></wp:inline></w:drawing></w:r></w:p>',
        )

    assert _word_lines(build) == [
        "Runbook",
        "Quorum is q=n/2+1",
        "Picture: Load balancer in front of three app servers",
    ]


# --- files a team keeps next to its documents: indexed, or refused with a reason -------------


@pytest.mark.parametrize(
    ("path", "data"),
    [
        ("README", b"Project Walrus\n\nRun make deploy."),
        ("docs/LICENSE", b"Apache License\nVersion 2.0"),
        ("tools/Makefile", b"deploy:\n\t./deploy.sh --walrus\n"),
        ("api.json", b'{"service": "walrus", "port": 8080}'),
        ("config.yaml", b"service: walrus\nport: 8080\n"),
        ("build.yml", b"steps:\n  - walrus\n"),
        ("pom.xml", b"<project><name>walrus</name></project>"),
    ],
)
def test_text_files_without_a_document_extension_are_read_as_text(path: str, data: bytes) -> None:
    assert is_document_path(path, DOCUMENT_PATTERNS)
    document = extract_document(path, data)
    assert document.source_type == "text"
    assert document.text is not None
    assert "walrus" in document.text.lower() or "license" in document.text.lower()


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("minutes.odt", "unsupported format: OpenDocument text .odt; save it as .docx"),
        ("budget.ods", "unsupported format: OpenDocument spreadsheet .ods; save it as .xlsx"),
        ("deck.odp", "unsupported format: OpenDocument presentation .odp; save it as .pptx"),
        ("memo.rtf", "unsupported format: Rich Text Format .rtf; save it as .docx"),
        ("book.epub", "unsupported format: EPUB e-book .epub; convert it to .pdf or .html"),
        ("thread.eml", "unsupported format: e-mail message .eml; save it as .pdf or .txt"),
    ],
)
def test_formats_no_library_in_the_layer_reads_are_problems_with_a_reason(
    path: str, reason: str
) -> None:
    assert is_document_path(path, DOCUMENT_PATTERNS)
    with pytest.raises(ExtractionError) as caught:
        extract_document(path, b"{\\rtf1 PK whatever the content}")
    assert str(caught.value) == reason


def test_binary_and_dot_files_without_extension_are_not_read_as_text() -> None:
    with pytest.raises(ExtractionError) as caught:
        extract_document("blob", b"\x7fELF\x02\x01\x01\x00" + bytes(64))
    assert str(caught.value).startswith(
        "unsupported format (no extension, and the content is not text)"
    )
    with pytest.raises(ExtractionError, match=r"^unsupported format \(no extension"):
        extract_document(".env", b"API_KEY=secret")
    assert not is_document_path(".env", DOCUMENT_PATTERNS)
    assert not is_document_path("notes.pdf.metadata.json", DOCUMENT_PATTERNS)
    assert not is_document_path("photo.png", DOCUMENT_PATTERNS)


def test_kb_index_indexes_readmes_and_data_and_lists_refused_formats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "README").write_text("The narwhal service restarts at midnight.\n")
    (folder / "api.json").write_text('{"endpoint": "/walrus", "owner": "ops"}')
    (folder / "api.json.metadata.json").write_text('{"metadataAttributes": {"team": "ops"}}')
    (folder / "minutes.odt").write_bytes(b"PK\x03\x04 not really")
    (folder / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(16))
    scope = ["--agent", "ops", "--context", "docs", "--db", str(tmp_path / "k.db")]

    code = main(["index", str(folder), *scope, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["indexed_documents"] == 2

    code = main(["search", "narwhal midnight", *scope, "--json", "--mode", "keyword"])
    out, err = capsys.readouterr()
    assert code == 0, err
    (hit,) = json.loads(out)["results"]
    assert (hit["document_path"], hit["metadata"]["format"]) == ("README", "text")

    code = main(["search", "walrus endpoint", *scope, "--json", "--mode", "keyword"])
    out, _ = capsys.readouterr()
    (hit,) = json.loads(out)["results"]
    assert (hit["document_path"], hit["metadata"]["team"]) == ("api.json", "ops")

    assert main(["status", *scope, "--json"]) == 0
    out, _ = capsys.readouterr()
    problems = {p["document_path"]: p["reason"] for p in json.loads(out)["problems"]}
    assert problems == {
        "minutes.odt": "unsupported format: OpenDocument text .odt; save it as .docx"
    }


def test_the_indexer_lambda_agrees_readmes_data_refused_formats_and_empty_files(
    indexer: Any,  # noqa: F811 (the fixture imported above)
) -> None:
    uploads = {
        "README": b"The narwhal service restarts at midnight.\n",
        "config.yaml": b"service: walrus\nport: 8080\n",
        "minutes.odt": b"PK\x03\x04 not really",
        "blank.md": b"\n  \n",
    }
    for name, body in uploads.items():
        indexer.s3.put_object(Bucket=BUCKET, Key=f"ops-bot/runbooks/{name}", Body=body)
    event = sqs_event(
        *(
            s3_notification("ObjectCreated:Put", f"ops-bot/runbooks/{name}", f"0{n}")
            for n, name in enumerate(uploads)
        )
    )
    assert indexer.invoke(event) == {"batchItemFailures": []}
    assert indexer.paths() == ["README", "config.yaml"]
    assert indexer.hits("narwhal", metadata={"format": "text"}) == ["README"]
    reasons = {p.path: p.reason for p in indexer.store.status(RUNBOOKS).problems}
    assert reasons == {
        "minutes.odt": "unsupported format: OpenDocument text .odt; save it as .docx",
        "blank.md": "no text: empty or whitespace only in this markdown file",
    }


def test_a_cell_merged_down_several_rows_belongs_to_each_of_them() -> None:
    def build(workbook: Any) -> None:
        sheet = workbook.active
        sheet.title = "Sales"
        sheet.append(["Region", "Store", "Sales"])
        sheet.append(["North", "Oslo", 10])
        sheet.append([None, "Bergen", 12])
        sheet.append([None, "Tromso", 7])
        sheet.append(["South", "Note: closed for the summer", None])
        sheet.merge_cells("A2:A4")
        sheet.merge_cells("B5:C5")  # across: read once, in its first cell

    blocks, _ = _blocks("sales.xlsx", _workbook_bytes(build))
    assert [text for text, _ in blocks] == [
        "Region: North; Store: Oslo; Sales: 10",
        "Region: North; Store: Bergen; Sales: 12",
        "Region: North; Store: Tromso; Sales: 7",
        "Region: South; Store: Note: closed for the summer",
    ]


def test_a_header_merged_down_over_a_second_header_row_is_not_data() -> None:
    def build(workbook: Any) -> None:
        sheet = workbook.active
        sheet.append(["Region", "Sales", None])
        sheet.append([None, "Q1", "Q2"])
        sheet.append(["North", 10, 12])
        sheet.merge_cells("A1:A2")
        sheet.merge_cells("B1:C1")

    blocks, _ = _blocks("sales.xlsx", _workbook_bytes(build))
    assert [text for text, _ in blocks][1:] == ["Region: North; Sales: 10; column 3: 12"]


def test_numbered_lists_read_with_the_numbers_word_shows() -> None:
    from docx.oxml import parse_xml

    def item(text: str, level: int) -> str:
        return (
            f'<w:p {W_NS}><w:pPr><w:numPr><w:ilvl w:val="{level}"/><w:numId w:val="90"/>'
            f"</w:numPr></w:pPr><w:r><w:t>{text}</w:t></w:r></w:p>"
        )

    def build(document: Any) -> None:
        numbering = document.part.numbering_part.element
        numbering.append(
            parse_xml(
                f'<w:abstractNum {W_NS} w:abstractNumId="90">'
                '<w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/>'
                '<w:lvlText w:val="%1."/></w:lvl>'
                '<w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="lowerLetter"/>'
                '<w:lvlText w:val="%2)"/></w:lvl>'
                '<w:lvl w:ilvl="2"><w:start w:val="4"/><w:numFmt w:val="upperRoman"/>'
                '<w:lvlText w:val="%1.%3"/></w:lvl></w:abstractNum>'
            )
        )
        numbering.append(
            parse_xml(f'<w:num {W_NS} w:numId="90"><w:abstractNumId w:val="90"/></w:num>')
        )
        for step in ("Stop the service.", "Restore the snapshot."):
            document.add_paragraph(step, style="List Number")
        document.add_paragraph("Tell the team.", style="List Bullet")
        for text, level in (
            ("Prepare", 0),
            ("Check logs", 1),
            ("Check disk", 1),
            ("Deploy", 0),
            ("Smoke test", 1),
            ("Annex", 2),
        ):
            _append_xml(document, item(text, level))
        document.add_paragraph("Close the ticket.", style="List Number")

    assert _word_lines(build) == [
        "Runbook",
        "1. Stop the service.",
        "2. Restore the snapshot.",
        "- Tell the team.",
        "1. Prepare",
        "  a) Check logs",
        "  b) Check disk",
        "2. Deploy",
        "  a) Smoke test",
        "    2.IV Annex",
        "3. Close the ticket.",
    ]


def test_the_indexer_lambda_logs_what_was_left_out_of_a_document(
    indexer: Any,  # noqa: F811 (the fixture imported above)
    capsys: pytest.CaptureFixture[str],
) -> None:
    def build(workbook: Any) -> None:
        sheet = workbook.active
        sheet.title = "Budget"
        sheet.append(["item", "cost"])
        sheet.append(["rent", 1200])
        draft = workbook.create_sheet("Draft")
        draft.append(["item"])
        draft.append(["x"])
        draft.sheet_state = "hidden"

    key = "ops-bot/runbooks/plan.xlsx"
    indexer.s3.put_object(Bucket=BUCKET, Key=key, Body=_workbook_bytes(build))
    capsys.readouterr()
    assert indexer.invoke(sqs_event(s3_notification("ObjectCreated:Put", key, "0A"))) == {
        "batchItemFailures": []
    }
    (applied,) = [
        r for r in log_records(capsys.readouterr().out) if r["message"] == "object event applied"
    ]
    assert applied["status"] == "indexed"
    assert applied["warnings"] == ["1 hidden sheet left out: 'Draft'"]


# --- hidden text in DOCX and hidden shapes in PPTX, as hidden sheets and slides ---------------


def test_hidden_text_in_a_word_file_is_left_out() -> None:
    def build(document: Any) -> None:
        _append_xml(
            document,
            f'<w:p {W_NS}><w:r><w:t xml:space="preserve">Rotate the keys </w:t></w:r>'
            "<w:r><w:rPr><w:vanish/></w:rPr><w:t>TEMPLATE NOTE: delete this hint</w:t></w:r>"
            '<w:r><w:rPr><w:vanish w:val="false"/></w:rPr><w:t>every month.</w:t></w:r></w:p>',
        )

    assert _word_lines(build) == ["Runbook", "Rotate the keys every month."]


def test_hidden_shapes_on_a_slide_are_left_out() -> None:
    import pptx as python_pptx
    from pptx.util import Inches

    presentation = python_pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[5])  # title only
    slide.shapes.title.text = "Plan"
    for text, hidden in (("Visible note", False), ("Speaker crib hidden", True)):
        box = slide.shapes.add_textbox(Inches(1), Inches(2), Inches(4), Inches(1))
        box.text_frame.text = text
        if hidden:
            box._element.nvSpPr.cNvPr.set("hidden", "1")
    buffer = io.BytesIO()
    presentation.save(buffer)

    blocks, _ = _blocks("deck.pptx", buffer.getvalue())
    assert [text for text, _ in blocks] == ["Plan", "Visible note"]
