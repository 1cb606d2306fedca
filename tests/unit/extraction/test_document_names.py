"""Files whose names do not tell the truth, as users name them.

An upper-case extension (``Scan.PDF``, ``Notes.Docx``, what cameras, scanners and
Windows tools write) is the same type as the lower-case one and is indexed by the
default patterns; a file whose content is another known type than its extension says
(a PDF saved as ``.docx``, a screenshot named ``.txt``) is a problem that says what the
content is and which name would work, not the parser's complaint about the wrong format.
"""

from __future__ import annotations

import json
from pathlib import Path

import document_files as files
import pytest

from knowledge.core.errors import ExtractionError
from knowledge.core.source import is_document_path
from knowledge.extraction import DOCUMENT_PATTERNS, extract_text
from knowledge.local.cli import main

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64)


@pytest.mark.parametrize(
    "path", ["Scan.PDF", "notes/Meeting.Docx", "Deck.PPTX", "Budget.XLSX", "README.MD", "x.Htm"]
)
def test_upper_case_extensions_are_documents_under_the_default_patterns(path: str) -> None:
    assert is_document_path(path, DOCUMENT_PATTERNS)


@pytest.mark.parametrize(
    ("path", "patterns", "selected"),
    [
        ("Report.PDF", ("*.pdf",), True),
        ("Report.pdf", ("*.pdf",), True),
        ("docs/Report.PDF", ("docs/*.pdf",), True),
        ("Docs/Report.pdf", ("docs/*.pdf",), False),  # only the extension is case-blind
        ("Report.PDF", ("*.md",), False),
        ("archive.PDF.metadata.json", DOCUMENT_PATTERNS, False),
    ],
)
def test_only_the_extension_matches_case_insensitively(
    path: str, patterns: tuple[str, ...], selected: bool
) -> None:
    assert is_document_path(path, patterns) is selected


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        (
            "report.docx",
            files.pdf(["Quarterly report"]),
            "wrong file type: the content is a PDF document, not .docx; rename it to .pdf",
        ),
        (
            "minutes.pdf",
            files.docx([("p", "Minutes")]),
            "wrong file type: the content is a Word document, not .pdf; rename it to .docx",
        ),
        (
            "export.txt",
            files.xlsx({"Sheet": [["a"], ["b"]]}),
            "wrong file type: the content is an Excel workbook, not .txt; rename it to .xlsx",
        ),
        (
            "screenshot.txt",
            PNG,
            "wrong file type: the content is a PNG image, not .txt; it cannot be indexed",
        ),
        (
            "download.pdf",
            b"<!DOCTYPE html>\n<html><body><h1>403 Forbidden</h1></body></html>",
            "wrong file type: the content is an HTML page, not .pdf; rename it to .html",
        ),
        (
            "export.xls",  # a web app's "Excel export"
            b"<html><body><table><tr><td>Region</td></tr></table></body></html>",
            "wrong file type: the content is an HTML page, not .xls; rename it to .html",
        ),
        (
            "renamed.doc",
            files.docx([("p", "Minutes")]),
            "wrong file type: the content is a Word document, not .doc; rename it to .docx",
        ),
    ],
)
def test_a_file_whose_content_is_another_type_says_so(name: str, data: bytes, reason: str) -> None:
    with pytest.raises(ExtractionError) as caught:
        extract_text(name, data)
    assert str(caught.value) == reason


def test_a_real_legacy_office_file_keeps_its_reason() -> None:
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(1024)
    with pytest.raises(ExtractionError) as caught:
        extract_text("minutes.doc", ole)
    assert str(caught.value) == "unsupported format: legacy Word .doc; convert to .docx"


def test_an_encrypted_office_file_keeps_its_own_reason() -> None:
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(1024)
    with pytest.raises(ExtractionError) as caught:
        extract_text("salaries.xlsx", ole)
    assert "password-protected" in str(caught.value)
    assert str(caught.value).startswith("corrupt file: ")


def test_kb_index_indexes_upper_case_names_and_explains_misnamed_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "Scan.PDF").write_bytes(files.pdf(["The walrus procedure restores the primary."]))
    (folder / "Notes.Docx").write_bytes(files.docx([("p", "Narwhal rotation is weekly.")]))
    (folder / "report.docx").write_bytes(files.pdf(["Quarterly report"]))
    scope = ["--agent", "ops", "--context", "docs", "--db", str(tmp_path / "k.db")]

    code = main(["index", str(folder), *scope, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["indexed_documents"] == 2

    code = main(["search", "walrus procedure", *scope, "--json", "--mode", "keyword"])
    out, err = capsys.readouterr()
    assert code == 0, err
    (hit,) = json.loads(out)["results"]
    assert (hit["document_path"], hit["metadata"]["format"]) == ("Scan.PDF", "pdf")

    assert main(["status", *scope, "--json"]) == 0
    out, _ = capsys.readouterr()
    problems = {p["document_path"]: p["reason"] for p in json.loads(out)["problems"]}
    assert problems == {
        "report.docx": "wrong file type: the content is a PDF document, not .docx; "
        "rename it to .pdf"
    }
