"""Document decisions on the real OpenSearch node: a text file emptied after it was
indexed is a ``no text`` problem in the index's status and its old text is still found
until a good version or a delete (a failed write never removes what was searchable
before); a workbook's hidden sheet is not searchable (docs/documents.md, "What is read").
And a changed file of any format that can no longer be indexed is listed in the status
and its previous version stays searchable."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from opensearch_index import NodeIndex

from knowledge.core.model import SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import index_source, reindex_source, upsert_document
from knowledge.stores.opensearch import OpenSearchKnowledgeStore, RetryPolicy

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]

SCOPE = KnowledgeScope("agent", "docs")


@pytest.fixture
def store(node: NodeIndex) -> Iterator[OpenSearchKnowledgeStore]:
    made = OpenSearchKnowledgeStore(
        node.config(),
        embedder=HashingEmbedder(32),
        retry=RetryPolicy(max_retries=1, initial_backoff=0.01, max_backoff=0.02),
    )
    yield made
    made.close()


def _doc(path: str, data: bytes) -> SourceDocument:
    return SourceDocument(path, len(data), lambda: data)


def _paths(store: OpenSearchKnowledgeStore, text: str) -> list[str]:
    return [
        r.document_path for r in store.search(SCOPE, SearchQuery(text, mode=SearchMode.KEYWORD))
    ]


def test_an_emptied_file_is_a_problem_and_a_hidden_sheet_is_not_found(
    store: OpenSearchKnowledgeStore,
) -> None:
    import openpyxl

    workbook = openpyxl.Workbook()
    visible = workbook.active
    visible.append(["item", "cost"])
    visible.append(["quokka rent", 1200])
    hidden = workbook.create_sheet("Draft")
    hidden.append(["item"])
    hidden.append(["wombat draft"])
    hidden.sheet_state = "hidden"
    buffer = io.BytesIO()
    workbook.save(buffer)

    upsert_document(store, SCOPE, _doc("notes.md", b"# Notes\n\nnarwhal figures"))
    result = upsert_document(store, SCOPE, _doc("plan.xlsx", buffer.getvalue()))
    assert [w.reason for w in result.warnings] == ["1 hidden sheet left out: 'Draft'"]
    assert _paths(store, "narwhal") == ["notes.md"]
    assert _paths(store, "quokka") == ["plan.xlsx"]
    assert _paths(store, "wombat") == []

    upsert_document(store, SCOPE, _doc("notes.md", b"\n   \n"))
    assert _paths(store, "narwhal") == ["notes.md"]
    status = store.status(SCOPE)
    assert [(p.path, p.reason) for p in status.problems] == [
        (
            "notes.md",
            "no text: empty or whitespace only in this markdown file; "
            "this version is not indexed: the previously indexed version is still searched",
        )
    ]
    assert status.document_count == 2


def _docx(text: str) -> bytes:
    import docx

    document = docx.Document()
    document.add_paragraph(text)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("path", "good", "bad", "reason"),
    [
        ("notes.md", b"# Notes\n\nnarwhal figures", b"  \n", "no text: "),
        ("guide.docx", _docx("narwhal figures"), b"PK\x03\x04 damaged", "corrupt file: "),
    ],
)
def test_a_changed_file_that_can_no_longer_be_indexed_is_a_problem_in_the_status(
    store: OpenSearchKnowledgeStore, path: str, good: bytes, bad: bytes, reason: str
) -> None:
    upsert_document(store, SCOPE, _doc(path, good))
    assert _paths(store, "narwhal") == [path]
    upsert_document(store, SCOPE, _doc(path, bad))
    assert _paths(store, "narwhal") == [path]
    (problem,) = store.status(SCOPE).problems
    assert problem.path == path
    assert problem.reason.startswith(reason)
    assert problem.reason.endswith(
        "; this version is not indexed: the previously indexed version is still searched"
    )
    assert store.status(SCOPE).document_count == 1
    record = store.get_document(SCOPE, path)
    assert record is not None
    assert record.stale


@pytest.mark.parametrize("client_ids", [True, False])
def test_unread_counts_are_one_record_per_scope_with_or_without_client_ids(
    node: NodeIndex, tmp_path, client_ids: bool
) -> None:
    """The status reads the latest unread-files record (Serverless names no ids, so each
    full listing writes a new one); a reindex's replace removes the older ones, and the
    record is never a document, a problem or a scope of its own."""
    from knowledge.core.model import IndexOptions
    from knowledge.ingest.sources.folders import LocalDirectorySource

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nquokka", "utf-8")
    for i in range(3):
        (folder / f"shot{i}.png").write_bytes(b"\x89PNG")
    store = OpenSearchKnowledgeStore(
        node.config(client_ids=client_ids), embedder=HashingEmbedder(32)
    )
    try:
        source = LocalDirectorySource(folder)
        index_source(store, SCOPE, source, IndexOptions())
        assert dict(store.status(SCOPE).unread_files) == {".png": 3}
        (folder / "shot0.png").unlink()
        (folder / "tool.exe").write_bytes(b"MZ")
        index_source(store, SCOPE, source, IndexOptions())
        status = store.status(SCOPE)
        assert dict(status.unread_files) == {".png": 2, ".exe": 1}
        assert (status.document_count, status.problems) == (1, ())
        assert [d.path for d in store.list_documents(SCOPE).documents] == ["a.md"]
        assert store.list_scopes() == [SCOPE]
        reindex_source(store, SCOPE, source, IndexOptions())
        assert dict(store.status(SCOPE).unread_files) == {".png": 2, ".exe": 1}
        assert len(node.records(record="unread")) == 1
    finally:
        store.close()
