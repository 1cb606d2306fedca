"""A failed write never removes what was searchable before, on every store.

A new version of an indexed document that cannot be extracted (encrypted, an archive
bomb, over the bounds, corrupt, no text) is a problem, and the previous version stays
searchable, marked ``stale`` in the documents listing and named in the problem's reason.
A delete still removes it; the next good version (or the old content again) replaces it
and clears the problem. A document never indexed before is a problem and nothing else.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import document_files as files
import pytest

from knowledge.core.documents import format_documents
from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.ingest.pipeline import (
    delete_document,
    index_source,
    reindex_source,
    upsert_document,
)
from knowledge.ingest.sources.folders import BucketFolderSource
from knowledge.stores.protocol import KnowledgeStore

SCOPE = KnowledgeScope("keeper", "docs")
KEPT = "the previously indexed version is still searched"


def _doc(path: str, data: bytes, version: str | None = None) -> SourceDocument:
    return SourceDocument(path, len(data), lambda: data, version=version)


@functools.cache
def _bomb() -> bytes:
    """A docx whose document part inflates to 260 MiB: over the extraction bounds."""
    return files.zip_bomb("word/document.xml", 260)


def _found(store: KnowledgeStore, text: str) -> list[str]:
    query = SearchQuery(text, mode=SearchMode.KEYWORD, max_results=20)
    return sorted({r.document_path for r in store.search(SCOPE, query)})


# (path, a good version holding "narwhal", a bad one, how the reason starts, options)
BadVersion = tuple[str, Callable[[str], bytes], Callable[[], bytes], str, IndexOptions]
CASES: dict[str, BadVersion] = {
    "encrypted-pdf": (
        "report.pdf",
        lambda word: files.pdf([f"quarterly {word} numbers"]),
        lambda: files.pdf(["secret"], password="pw"),
        "encrypted PDF",
        IndexOptions(),
    ),
    "zip-bomb-docx": (
        "guide.docx",
        lambda word: files.docx([("p", f"the {word} guide")]),
        _bomb,
        "archive bomb",
        IndexOptions(),
    ),
    "corrupt-docx": (
        "guide.docx",
        lambda word: files.docx([("p", f"the {word} guide")]),
        lambda: b"PK\x03\x04 damaged",
        "corrupt file: ",
        IndexOptions(),
    ),
    "too-large": (
        "notes.md",
        lambda word: f"# Notes\n\n{word} figures".encode(),
        lambda: b"# Notes\n\n" + b"x " * 400,
        "too large: ",
        IndexOptions(max_document_bytes=200),
    ),
    "emptied-md": (
        "notes.md",
        lambda word: f"# Notes\n\n{word} figures".encode(),
        lambda: b"  \n",
        "no text: ",
        IndexOptions(),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_new_version_that_cannot_be_indexed_keeps_the_previous_one_searchable(
    store: KnowledgeStore, case: str
) -> None:
    path, good, bad, reason, options = CASES[case]
    upsert_document(store, SCOPE, _doc(path, good("narwhal"), "0001"), options)
    assert _found(store, "narwhal") == [path]

    result = upsert_document(store, SCOPE, _doc(path, bad(), "0002"), options)
    assert result.indexed_documents == 0
    assert result.deleted_documents == 0
    assert _found(store, "narwhal") == [path]
    status = store.status(SCOPE)
    assert status.document_count == 1
    (problem,) = status.problems
    assert problem.path == path
    assert problem.reason.startswith(reason)
    assert "version 0002 is not indexed" in problem.reason
    assert KEPT in problem.reason
    record = store.get_document(SCOPE, path)
    assert record is not None
    assert record.indexed
    assert record.stale
    assert record.version == "0001"
    assert record.to_dict()["stale"] is True
    page = store.list_documents(SCOPE)
    (listed,) = page.documents
    assert f"chunks, {record.indexed_at.isoformat(timespec='seconds')}, stale]" in (
        format_documents(page)
    )
    assert listed.stale
    assert listed.problem == problem.reason

    # The next good version replaces it as normal.
    upsert_document(store, SCOPE, _doc(path, good("walrus"), "0003"), options)
    assert _found(store, "walrus") == [path]
    assert _found(store, "narwhal") == []
    assert store.status(SCOPE).problems == ()
    record = store.get_document(SCOPE, path)
    assert record is not None
    assert not record.stale
    assert record.to_dict()["stale"] is False


def test_a_delete_still_removes_a_stale_document(store: KnowledgeStore) -> None:
    upsert_document(store, SCOPE, _doc("report.pdf", files.pdf(["narwhal numbers"]), "0001"))
    upsert_document(store, SCOPE, _doc("report.pdf", files.pdf(["x"], password="pw"), "0002"))
    assert _found(store, "narwhal") == ["report.pdf"]
    assert delete_document(store, SCOPE, "report.pdf", "0003") is True
    assert _found(store, "narwhal") == []
    assert store.get_document(SCOPE, "report.pdf") is None
    status = store.status(SCOPE)
    assert status.document_count == 0
    assert status.problems == ()


def test_a_document_never_indexed_is_a_problem_and_nothing_else(store: KnowledgeStore) -> None:
    result = upsert_document(store, SCOPE, _doc("secret.pdf", files.pdf(["x"], password="pw")))
    assert result.indexed_documents == 0
    (problem,) = store.status(SCOPE).problems
    assert problem.reason == "encrypted PDF"
    record = store.get_document(SCOPE, "secret.pdf")
    assert record is not None
    assert not record.indexed
    assert not record.stale
    assert record.to_dict()["stale"] is False
    assert store.status(SCOPE).document_count == 0


def test_a_folder_index_keeps_the_previous_version_and_the_old_content_again_clears_it(
    store: KnowledgeStore, bucket: Path
) -> None:
    folder = bucket / SCOPE.agent / SCOPE.context
    folder.mkdir(parents=True)
    good = files.docx([("p", "the narwhal guide")])
    (folder / "guide.docx").write_bytes(good)
    (folder / "other.md").write_bytes(b"# Other\n\nunrelated")
    source = BucketFolderSource(bucket)
    index_source(store, SCOPE, source)

    (folder / "guide.docx").write_bytes(_bomb())
    result = index_source(store, SCOPE, source)
    assert result.deleted_documents == 0
    assert _found(store, "narwhal") == ["guide.docx"]
    (problem,) = store.status(SCOPE).problems
    assert problem.reason.startswith("archive bomb")
    assert KEPT in problem.reason

    # The very content that is indexed, back again: "unchanged" must not leave it stale.
    (folder / "guide.docx").write_bytes(good)
    index_source(store, SCOPE, source)
    assert store.status(SCOPE).problems == ()
    record = store.get_document(SCOPE, "guide.docx")
    assert record is not None
    assert record.indexed
    assert not record.stale
    assert _found(store, "narwhal") == ["guide.docx"]


@pytest.mark.parametrize(
    "bad",
    [
        lambda: files.pdf(["x"], password="pw"),  # refused before any chunk
        lambda: files.scanned_pdf(2),  # found while its chunks stream
    ],
    ids=["encrypted", "scanned"],
)
def test_a_reindex_keeps_the_previous_version_of_a_file_it_cannot_index(
    store: KnowledgeStore, bucket: Path, bad: Callable[[], bytes]
) -> None:
    folder = bucket / SCOPE.agent / SCOPE.context
    folder.mkdir(parents=True)
    (folder / "report.pdf").write_bytes(files.pdf(["narwhal numbers"]))
    (folder / "gone.md").write_bytes(b"# Gone\n\nwalrus")
    source = BucketFolderSource(bucket)
    index_source(store, SCOPE, source)
    (folder / "report.pdf").write_bytes(bad())
    (folder / "gone.md").unlink()
    (folder / "new.md").write_bytes(b"# New\n\nokapi")

    result = reindex_source(store, SCOPE, source)
    assert result.deleted_documents == 1  # gone.md, not report.pdf
    assert _found(store, "narwhal") == ["report.pdf"]
    assert _found(store, "walrus") == []
    assert _found(store, "okapi") == ["new.md"]
    (problem,) = store.status(SCOPE).problems
    assert problem.path == "report.pdf"
    assert KEPT in problem.reason
    record = store.get_document(SCOPE, "report.pdf")
    assert record is not None
    assert record.stale
    assert record.chunk_count == 1
    assert store.status(SCOPE).document_count == 2
