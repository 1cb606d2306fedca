"""Real documents on every store: mixed formats in one scope, ``source_type`` filters,
citations that survive the store, and the status ``problems`` list.

The bucket holds files made with the libraries people make them with
(``tests/support/document_files.py``), indexed through the whole pipeline.
"""

from __future__ import annotations

from pathlib import Path

import document_files as files
import pytest

from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.ingest.pipeline import delete_document, index_source, upsert_document
from knowledge.ingest.sources.folders import BucketFolderSource
from knowledge.stores.protocol import KnowledgeStore

SCOPE = KnowledgeScope("docs-bot", "handbook")
OTHER = KnowledgeScope("docs-bot", "other")


def put(bucket: Path, scope: KnowledgeScope, rel: str, data: bytes) -> None:
    path = bucket / scope.agent / scope.context / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def mixed_bucket(bucket: Path) -> None:
    put(bucket, SCOPE, "runbook.md", b"# Runbook\n\nThe zebracorn alarm means disk full.")
    put(bucket, SCOPE, "notes.txt", b"Plain notes: zebracorn drills happen on Fridays.")
    put(
        bucket,
        SCOPE,
        "handbook.pdf",
        files.pdf(["Cover page.", "Chapter two: the zebracorn procedure."], title="Handbook"),
    )
    put(
        bucket,
        SCOPE,
        "guide.docx",
        files.docx([("h1", "Guide"), ("h2", "Alarms"), ("p", "Silence the zebracorn alarm.")]),
    )
    put(
        bucket, SCOPE, "deck.pptx", files.pptx([("Intro", ["hello"], ""), ("Zebracorn", ["x"], "")])
    )
    put(bucket, SCOPE, "plan.xlsx", files.xlsx({"Q1": [["task", "owner"], ["zebracorn", "ann"]]}))
    put(bucket, SCOPE, "owners.csv", b"system,owner\nzebracorn,bob\n")
    put(bucket, SCOPE, "page.html", b"<html><body><h1>Web</h1><p>zebracorn page</p></body></html>")


def search(store: KnowledgeStore, text: str, mode: SearchMode, **fields: object):
    return store.search(SCOPE, SearchQuery(text, mode=mode, max_results=50, **fields))


def test_mixed_formats_in_one_scope_are_all_found_with_citations(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    mixed_bucket(bucket)
    result = index_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions())
    assert result.errors == ()
    assert result.skipped == ()
    assert result.indexed_documents == 8
    # The chunk that holds the word, per document (vector mode also returns the others).
    results = search(store, "zebracorn", mode)
    hits = {r.document_path: r for r in results if "zebracorn" in r.content.lower()}
    assert set(hits) == {
        "runbook.md",
        "notes.txt",
        "handbook.pdf",
        "guide.docx",
        "deck.pptx",
        "plan.xlsx",
        "owners.csv",
        "page.html",
    }
    types = {path: r.metadata["format"] for path, r in hits.items()}
    assert types == {
        "runbook.md": "markdown",
        "notes.txt": "text",
        "handbook.pdf": "pdf",
        "guide.docx": "docx",
        "deck.pptx": "pptx",
        "plan.xlsx": "xlsx",
        "owners.csv": "csv",
        "page.html": "html",
    }
    assert hits["handbook.pdf"].metadata["page"] == 1
    assert hits["handbook.pdf"].metadata["page_end"] == 2
    assert hits["guide.docx"].metadata["heading_path"] == ["Guide", "Alarms"]
    assert hits["deck.pptx"].metadata["slide"] == 2
    assert hits["plan.xlsx"].metadata["sheet"] == "Q1"
    assert (hits["plan.xlsx"].metadata["row_start"], hits["plan.xlsx"].metadata["row_end"]) == (
        2,
        2,
    )
    assert hits["owners.csv"].metadata["row_start"] == 2
    assert hits["page.html"].metadata["heading_path"] == ["Web"]


@pytest.mark.modes(SearchMode.KEYWORD)
def test_source_type_is_a_metadata_filter(
    store: KnowledgeStore, bucket: Path, mode: SearchMode
) -> None:
    mixed_bucket(bucket)
    index_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions())
    pdfs = search(store, "zebracorn", mode, metadata={"format": "pdf"})
    assert [r.document_path for r in pdfs] == ["handbook.pdf"]
    sheets = search(store, "zebracorn", mode, metadata={"format": "xlsx"})
    assert [r.document_path for r in sheets] == ["plan.xlsx"]
    assert search(store, "zebracorn", mode, metadata={"format": "doc"}) == []


def test_problems_are_listed_with_specific_reasons_most_recent_first(
    store: KnowledgeStore, bucket: Path
) -> None:
    put(bucket, SCOPE, "good.md", b"# Good\n\nindexed fine")
    put(bucket, SCOPE, "a-secret.pdf", files.pdf(["classified"], password="pw"))
    put(bucket, SCOPE, "b-scan.pdf", files.scanned_pdf(1))
    put(bucket, SCOPE, "c-old.doc", b"\xd0\xcf\x11\xe0 legacy word")
    put(bucket, SCOPE, "d-broken.xlsx", b"PK\x03\x04 not really a zip")
    result = index_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions())
    assert result.indexed_documents == 1
    status = store.status(SCOPE)
    assert status.document_count == 1
    reasons = {p.path: p.reason for p in status.problems}
    assert reasons["a-secret.pdf"] == "encrypted PDF"
    assert reasons["b-scan.pdf"] == "no text layer (scanned image; OCR not supported)"
    assert reasons["c-old.doc"] == "unsupported format: legacy Word .doc; convert to .docx"
    assert reasons["d-broken.xlsx"].startswith("corrupt file: ")
    # Listed in path order, so the most recent first is the reverse.
    assert [p.path for p in status.problems] == [
        "d-broken.xlsx",
        "c-old.doc",
        "b-scan.pdf",
        "a-secret.pdf",
    ]
    assert status.to_dict()["problems"][0] == {
        "document_path": "d-broken.xlsx",
        "reason": reasons["d-broken.xlsx"],
    }
    assert store.status(OTHER).problems == ()
    # Nothing of a problem record is searchable.
    query = SearchQuery("encrypted PDF", mode=SearchMode.KEYWORD)
    assert [r.document_path for r in store.search(SCOPE, query)] == []


def test_a_fixed_file_clears_its_problem_and_a_broken_overwrite_keeps_none_stale(
    store: KnowledgeStore, bucket: Path
) -> None:
    put(bucket, SCOPE, "report.pdf", files.pdf(["quarterly numbers"], password="pw"))
    index_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions())
    assert [p.path for p in store.status(SCOPE).problems] == ["report.pdf"]
    put(bucket, SCOPE, "report.pdf", files.pdf(["quarterly numbers"]))
    index_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions())
    status = store.status(SCOPE)
    assert status.problems == ()
    assert status.document_count == 1


def test_recording_a_problem_keeps_the_indexed_version(store: KnowledgeStore) -> None:
    data = b"# Kept\n\nstill here"
    upsert_document(store, SCOPE, SourceDocument("kept.md", len(data), lambda: data))
    with store.write_session(SCOPE) as session:  # type: ignore[attr-defined]
        session.record_problem("kept.md", "corrupt file: test")
        session.record_problem("kept.md", "too large: test")
    status = store.status(SCOPE)
    assert [(p.path, p.reason) for p in status.problems] == [("kept.md", "too large: test")]
    assert status.document_count == 1
    assert [r.document_path for r in store.search(SCOPE, SearchQuery("still"))] == ["kept.md"]


def test_deleting_a_file_that_never_indexed_clears_its_problem(store: KnowledgeStore) -> None:
    with store.write_session(SCOPE) as session:  # type: ignore[attr-defined]
        session.record_problem("gone.pdf", "encrypted PDF")
    assert len(store.status(SCOPE).problems) == 1
    assert delete_document(store, SCOPE, "gone.pdf") is False
    assert store.status(SCOPE).problems == ()


def test_an_index_clears_the_problem_of_a_file_that_is_gone(
    store: KnowledgeStore, bucket: Path
) -> None:
    put(bucket, SCOPE, "good.md", b"# Good\n\nindexed fine")
    put(bucket, SCOPE, "secret.pdf", files.pdf(["classified"], password="pw"))
    put(bucket, SCOPE, "old.doc", b"\xd0\xcf\x11\xe0 legacy word")
    index_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions())
    assert {p.path for p in store.status(SCOPE).problems} == {"secret.pdf", "old.doc"}
    (bucket / SCOPE.agent / SCOPE.context / "old.doc").unlink()
    index_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions())
    status = store.status(SCOPE)
    assert [p.path for p in status.problems] == ["secret.pdf"]
    assert status.document_count == 1
