"""Text-like documents in the encodings real files use (knowledge.extraction.encoding).

Excel writes CSV as Windows-1252 or CP949 and "Unicode text" as UTF-16; old pages declare
``<meta charset="euc-kr">``. Each is read as its text (a detected encoding is said in a
warning), never refused as binary, never turned into U+FFFD silently, and never crashes
the batch it is in.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knowledge.core.errors import ExtractionError
from knowledge.extraction import extract_text
from knowledge.local.cli import main

KOREAN_ROWS = "이름,도시,메모\n김민준,서울특별시,배포 담당자\n이서연,부산광역시,장애 대응 책임자\n"
GERMAN_ROWS = "Name;Stadt;Notiz\nMüller;Köln;Größe prüfen\nSchäfer;Düsseldorf;Übergabe\n"


@pytest.mark.parametrize(
    ("name", "text", "encoding", "expected"),
    [
        ("people.csv", KOREAN_ROWS, "cp949", "이름: 김민준; 도시: 서울특별시; 메모: 배포 담당자"),
        ("people.csv", KOREAN_ROWS, "utf-16", "이름: 김민준; 도시: 서울특별시; 메모: 배포 담당자"),
        ("leute.csv", GERMAN_ROWS, "cp1252", "Name: Müller; Stadt: Köln; Notiz: Größe prüfen"),
        ("leute.csv", GERMAN_ROWS, "utf-16-le", "Name: Müller; Stadt: Köln; Notiz: Größe prüfen"),
        ("notes.txt", KOREAN_ROWS, "cp949", "김민준,서울특별시,배포 담당자"),
        ("notes.md", GERMAN_ROWS, "cp1252", "Müller;Köln;Größe prüfen"),
    ],
)
def test_legacy_and_utf16_text_files_are_read_as_their_text(
    name: str, text: str, encoding: str, expected: str
) -> None:
    data = text.encode(encoding)
    if encoding == "utf-16-le":
        data = b"\xff\xfe" + data  # what Excel's "Unicode text" and Notepad write
    result = extract_text(name, data)
    assert expected in result.text
    assert "\ufffd" not in result.text
    if encoding.startswith("cp"):
        assert any("not UTF-8" in warning for warning in result.warnings), result.warnings


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_without_a_byte_order_mark_is_detected_not_binary(encoding: str) -> None:
    result = extract_text("people.csv", KOREAN_ROWS.encode(encoding))
    assert "이름: 김민준; 도시: 서울특별시; 메모: 배포 담당자" in result.text
    assert any("no byte order mark" in warning for warning in result.warnings)


def test_a_binary_file_named_txt_is_still_binary() -> None:
    with pytest.raises(ExtractionError, match="binary content"):
        extract_text("dump.txt", bytes(range(256)) * 64)


@pytest.mark.parametrize("declared", ["euc-kr", "EUC-KR", "ks_c_5601-1987", "cp949"])
def test_html_declaring_a_charset_libxml2_spells_differently_is_read(declared: str) -> None:
    page = (
        f'<html><head><meta charset="{declared}"><title>장애 대응</title></head>'
        "<body><h1>장애 대응 절차</h1><p>서울 리전의 데이터베이스를 복구한다.</p></body></html>"
    )
    result = extract_text("runbook.html", page.encode("cp949"))
    assert "서울 리전의 데이터베이스를 복구한다." in result.text
    assert result.warnings == ()


def test_html_in_a_legacy_encoding_without_a_declaration_is_detected() -> None:
    page = "<html><body><h1>장애 대응 절차</h1><p>서울 리전의 데이터베이스를 복구한다.</p></body>"
    result = extract_text("runbook.html", page.encode("cp949"))
    assert "서울 리전의 데이터베이스를 복구한다." in result.text
    assert any("not UTF-8" in warning for warning in result.warnings)


def test_html_mislabelled_as_utf8_is_detected() -> None:
    page = (
        '<html><head><meta charset="utf-8"></head><body><p>Größe prüfen, Müller</p></body></html>'
    )
    result = extract_text("page.html", page.encode("cp1252"))
    assert "Größe prüfen, Müller" in result.text


def test_kb_index_reads_every_encoding_and_the_batch_survives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    korean_page = (
        '<html><head><meta http-equiv="Content-Type" content="text/html; charset=euc-kr">'
        "</head><body><p>서울 리전 복구 절차: 스냅샷에서 데이터베이스를 되살린다.</p></body></html>"
    )
    (folder / "runbook.html").write_bytes(korean_page.encode("cp949"))
    (folder / "people.csv").write_bytes(KOREAN_ROWS.encode("cp949"))
    (folder / "leute.csv").write_bytes(GERMAN_ROWS.encode("utf-16"))
    (folder / "plain.md").write_text("# Plain\n\nNothing special here.\n", "utf-8")
    db = str(tmp_path / "k.db")
    scope = ["--agent", "ops", "--context", "docs", "--db", db]

    code = main(["index", str(folder), *scope, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    body = json.loads(out)
    assert body["indexed_documents"] == 4, body
    assert body["errors"] == []
    assert body["skipped"] == []

    code = main(["search", "스냅샷에서 데이터베이스", *scope, "--json", "--mode", "keyword"])
    out, err = capsys.readouterr()
    assert code == 0, err
    paths = [hit["document_path"] for hit in json.loads(out)["results"]]
    assert paths[:1] == ["runbook.html"]

    code = main(["search", "Düsseldorf Übergabe", *scope, "--json", "--mode", "keyword"])
    out, err = capsys.readouterr()
    assert code == 0, err
    paths = [hit["document_path"] for hit in json.loads(out)["results"]]
    assert paths[:1] == ["leute.csv"]


@pytest.mark.parametrize("declared", ["iso-8859-1", "ISO_8859-1", "us-ascii"])
def test_a_latin1_label_is_read_as_windows_1252_as_browsers_do(declared: str) -> None:
    page = (
        f'<html><head><meta charset="{declared}"></head>'
        "<body><p>\u201cFail over\u201d costs 5 \u20ac</p></body></html>"
    )
    result = extract_text("page.html", page.encode("cp1252"))
    assert "\u201cFail over\u201d costs 5 \u20ac" in result.text


def test_a_utf16_label_on_a_page_without_a_bom_is_ignored() -> None:
    page = '<html><head><meta charset="utf-16"></head><body><p>서울 리전 복구</p></body></html>'
    assert "서울 리전 복구" in extract_text("page.html", page.encode("utf-8")).text
