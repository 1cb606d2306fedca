"""Damaged and empty documents end as problems with a reason; the batch goes on.

A library may fail on a damaged Office file with any exception (a ``KeyError`` for a
missing part, raised while the slides are read, not when the file is opened); a
document that gives no text at all (an empty DOCX, a deck of pictures, a sheet without
data rows) is not an "indexed" document that no search can find. Both are checked
through ``kb index`` and ``kb status``, as a user meets them.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import document_files as files
import pytest

from knowledge.core.errors import ExtractionError
from knowledge.extraction import extract_text
from knowledge.ingest.pipeline import index_source
from knowledge.local.cli import main

GOOD = "# Failover\n\nPromote the read replica when the primary database is lost.\n"


def without_member(data: bytes, member: str) -> bytes:
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            if info.filename != member:
                target.writestr(info.filename, source.read(info))
    return out.getvalue()


def deck_without_its_slide() -> bytes:
    return without_member(files.pptx([("Rollout", ["step one"], "")]), "ppt/slides/slide1.xml")


def pictures_only_deck() -> bytes:
    import pptx

    presentation = pptx.Presentation()
    presentation.slides.add_slide(presentation.slide_layouts[6])  # blank: no text at all
    buffer = io.BytesIO()
    presentation.save(buffer)
    return buffer.getvalue()


def empty_docx() -> bytes:
    import docx

    buffer = io.BytesIO()
    docx.Document().save(buffer)
    return buffer.getvalue()


def sheet_without_its_shared_strings() -> bytes:
    """Cells that point into a shared-strings table the workbook does not have."""
    source = zipfile.ZipFile(io.BytesIO(files.xlsx({"Sheet": [["name"], ["alpha"]]})))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            content = source.read(info)
            if info.filename.startswith("xl/worksheets/"):
                text = content.decode()
                for index, word in enumerate(["name", "alpha"]):
                    text = text.replace(
                        f't="inlineStr"><is><t>{word}</t></is>', f't="s"><v>{index}</v>'
                    )
                content = text.encode()
            target.writestr(info.filename, content)
    return out.getvalue()


def word_file_with(member: str, change: Callable[[bytes], bytes] | None) -> bytes:
    """A real Word file whose ``member`` is changed (``None``: left out), as a damaged
    copy or another program's broken writer leaves it."""
    source = zipfile.ZipFile(io.BytesIO(files.docx([("Heading 1", "Runbook"), ("p", "Rotate.")])))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            content = source.read(info)
            if info.filename == member:
                if change is None:
                    continue
                content = change(content)
            target.writestr(info.filename, content)
    return out.getvalue()


DAMAGED_WORD_FILES = {
    # python-docx opens these, then trips on them while the body is read: the reason was
    # "the docx reader failed (AttributeError: 'lxml.etree._Element' object has no ...)".
    "root-not-a-document": word_file_with(
        "word/document.xml", lambda xml: xml.replace(b"w:document", b"w:documenx")
    ),
    "no-body": word_file_with("word/document.xml", lambda xml: xml.replace(b"w:body", b"w:bodx")),
    # These fail while the package opens: "not a readable Word document (XMLSyntaxError:
    # ..., line 2, column 753 (<string>, line 2))", "(KeyError: ...)".
    "cut-xml": word_file_with("word/document.xml", lambda xml: xml[: len(xml) // 2]),
    "broken-core-properties": word_file_with("docProps/core.xml", lambda xml: b"<x"),
    "no-content-types": word_file_with("[Content_Types].xml", None),
}
WORD_FILE_DAMAGED = "corrupt file: the Word file could not be read: it is damaged or not a .docx"


@pytest.mark.parametrize("data", DAMAGED_WORD_FILES.values(), ids=DAMAGED_WORD_FILES.keys())
def test_a_damaged_word_file_is_a_plain_reason_without_library_internals(data: bytes) -> None:
    with pytest.raises(ExtractionError) as caught:
        extract_text("guide.docx", data)
    assert str(caught.value) == WORD_FILE_DAMAGED


def test_kb_status_says_a_damaged_word_file_in_plain_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "guide.docx").write_bytes(DAMAGED_WORD_FILES["root-not-a-document"])
    scope = ["--agent", "ops", "--context", "docs", "--db", str(tmp_path / "k.db")]
    assert main(["index", str(folder), *scope, "--json"]) == 0
    capsys.readouterr()
    assert main(["status", *scope, "--json"]) == 0
    out, _ = capsys.readouterr()
    problems = {p["document_path"]: p["reason"] for p in json.loads(out)["problems"]}
    assert problems == {"guide.docx": WORD_FILE_DAMAGED}


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("deck.pptx", deck_without_its_slide(), "corrupt file: the pptx reader failed (KeyError: "),
        (
            "sheet.xlsx",
            sheet_without_its_shared_strings(),
            "corrupt file: the xlsx reader failed (IndexError: ",
        ),
    ],
)
def test_a_library_error_while_the_blocks_are_read_is_a_corrupt_file(
    name: str, data: bytes, reason: str
) -> None:
    with pytest.raises(ExtractionError) as caught:
        extract_text(name, data)
    assert str(caught.value).startswith(reason)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("empty.docx", empty_docx(), "no text: nothing readable in this docx"),
        ("pictures.pptx", pictures_only_deck(), "no text: nothing readable in this pptx"),
        ("header.csv", b"name,city\n", "no text: no data rows in this csv"),
        ("blank.xlsx", files.xlsx({"Sheet": [["only", "a header"]]}), "no text: no data rows"),
        ("menu.html", b"<html><body><nav><a href='/'>Home</a></nav></body></html>", "no text"),
    ],
)
def test_a_structured_document_without_text_is_a_problem(
    name: str, data: bytes, reason: str
) -> None:
    with pytest.raises(ExtractionError) as caught:
        extract_text(name, data)
    assert str(caught.value).startswith(reason)


def test_kb_index_lists_damaged_and_empty_documents_and_indexes_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a-failover.md").write_text(GOOD, "utf-8")
    (folder / "b-deck.pptx").write_bytes(deck_without_its_slide())
    (folder / "c-empty.docx").write_bytes(empty_docx())
    (folder / "d-pictures.pptx").write_bytes(pictures_only_deck())
    (folder / "e-runbook.docx").write_bytes(
        files.docx([("Heading 1", "Runbook"), ("p", "Rotate the TLS certificate monthly.")])
    )
    scope = ["--agent", "ops", "--context", "docs", "--db", str(tmp_path / "k.db")]

    code = main(["index", str(folder), *scope, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    body = json.loads(out)
    assert body["indexed_documents"] == 2, body

    code = main(["status", *scope, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    problems = {p["document_path"]: p["reason"] for p in json.loads(out)["problems"]}
    assert sorted(problems) == ["b-deck.pptx", "c-empty.docx", "d-pictures.pptx"]
    assert problems["b-deck.pptx"].startswith("corrupt file: the pptx reader failed (KeyError")
    assert problems["c-empty.docx"].startswith("no text: ")
    assert problems["d-pictures.pptx"].startswith("no text: ")

    # Fixed: the problem is cleared, the document searchable.
    (folder / "c-empty.docx").write_bytes(files.docx([("p", "Quarterly disaster drill notes.")]))
    assert main(["index", str(folder), *scope, "--json"]) == 0
    capsys.readouterr()
    assert main(["status", *scope, "--json"]) == 0
    out, _ = capsys.readouterr()
    assert "c-empty.docx" not in {p["document_path"] for p in json.loads(out)["problems"]}


def test_a_file_that_grows_after_it_was_listed_is_read_only_to_the_size_limit(
    tmp_path: Path,
) -> None:
    from knowledge.core.model import IndexOptions
    from knowledge.core.scope import KnowledgeScope
    from knowledge.ingest.sources.folders import LocalDirectorySource
    from knowledge.stores.memory import MemoryKnowledgeStore

    folder = tmp_path / "docs"
    folder.mkdir()
    log = folder / "growing.txt"
    log.write_text("first line\n", "utf-8")
    options = IndexOptions(max_document_bytes=4096)
    (document,) = list(LocalDirectorySource(folder).documents(KnowledgeScope("a", "b"), options))
    with log.open("ab") as handle:  # a writer appends after the listing, before the read
        handle.write(b"x" * (1024 * 1024))
    assert len(document.read()) == 4097  # bounded, not the megabyte on disk

    store = MemoryKnowledgeStore()
    result = index_source(store, KnowledgeScope("a", "b"), LocalDirectorySource(folder), options)
    assert [p.reason.split(":")[0] for p in result.skipped] == ["too large"]
