"""A document's chunks as indexed (``list_chunks``), run against every store.

Documents are written through the store's own write session with chunks made by hand,
so the expected chunks are literals: their order, text and metadata (title, heading
path, page) as written, paged by a cursor bound to the scope and the document.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from knowledge.core.chunk_listing import MAX_CHUNKS_LIMIT, encode_chunk_cursor
from knowledge.core.documents import encode_cursor
from knowledge.core.errors import ValidationError
from knowledge.core.identity import document_id
from knowledge.core.model import DocumentChunk
from knowledge.core.scope import KnowledgeScope
from knowledge.stores.protocol import DocumentHeader, EmbeddedChunk, IndexWriter, KnowledgeStore

A_X = KnowledgeScope("agent-a", "ctx-x")
A_Y = KnowledgeScope("agent-a", "ctx-y")
B_X = KnowledgeScope("agent-b", "ctx-x")
WHEN = datetime(2026, 3, 14, 9, 26, 53, tzinfo=UTC)
VECTOR = [1.0] + [0.0] * 63  # the contract stores embed with HashingEmbedder(64)


def put(
    store: KnowledgeStore, scope: KnowledgeScope, path: str, texts: list[str], tag: str = ""
) -> None:
    """``path`` as one chunk per text, each with a title, a heading path and a page."""
    assert isinstance(store, IndexWriter)
    header = DocumentHeader(
        path=path,
        document_id=document_id(scope, path),
        content_hash=f"h-{tag}{path}-{len(texts)}",
        indexed_at=WHEN,
        metadata={"format": "pdf"},
        size=100,
    )
    chunks = [
        EmbeddedChunk(
            DocumentChunk(
                path,
                i,
                text,
                {"title": "Guide", "heading_path": ["Guide", f"Part {i}"], "page": i + 1},
            ),
            VECTOR,
        )
        for i, text in enumerate(texts)
    ]
    with store.write_session(scope) as session:
        assert session.put_document(header, chunks) == len(texts)


def walk(store: KnowledgeStore, scope: KnowledgeScope, path: str, limit: int) -> list[str]:
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = store.list_chunks(scope, path, limit=limit, cursor=cursor)
        assert page is not None
        assert len(page.chunks) <= limit
        seen.extend(c.content for c in page.chunks)
        if page.next_cursor is None:
            return seen
        assert page.chunks, "a page with a next cursor is never empty"
        cursor = page.next_cursor


TEXTS = [f"part {i} of the guide: {'word ' * i}".strip() for i in range(12)]


def test_the_chunks_of_a_document_page_in_index_order_with_their_metadata(
    store: KnowledgeStore,
) -> None:
    put(store, A_X, "guides/setup.pdf", TEXTS)
    page = store.list_chunks(A_X, "guides/setup.pdf")
    assert page is not None
    assert page.next_cursor is None
    assert [c.chunk_index for c in page.chunks] == list(range(12))
    assert [c.content for c in page.chunks] == TEXTS
    shown = page.chunks[3].to_dict()
    assert shown["title"] == "Guide"
    assert shown["heading_path"] == ["Guide", "Part 3"]
    assert shown["position"] == {"page": 4}
    assert walk(store, A_X, "guides/setup.pdf", 5) == TEXTS
    assert walk(store, A_X, "guides/setup.pdf", 1) == TEXTS


def test_an_overwrite_lists_only_the_new_version(store: KnowledgeStore) -> None:
    put(store, A_X, "a.md", TEXTS)
    put(store, A_X, "a.md", ["the only chunk left"], tag="2")
    page = store.list_chunks(A_X, "a.md")
    assert page is not None
    assert [(c.chunk_index, c.content) for c in page.chunks] == [(0, "the only chunk left")]


def test_a_path_of_another_scope_reads_as_missing(store: KnowledgeStore) -> None:
    assert store.list_chunks(A_X, "a.md") is None  # nothing indexed at all yet
    put(store, A_X, "a.md", TEXTS[:2])
    for scope in (A_Y, B_X):
        assert store.list_chunks(scope, "a.md") is None
    assert store.list_chunks(A_X, "b.md") is None
    with store.write_session(A_X) as session:  # a problem alone is no indexed version
        session.record_problem("broken.pdf", "not a PDF")
    assert store.list_chunks(A_X, "broken.pdf") is None
    with store.write_session(A_X) as session:
        session.delete_document("a.md")
    assert store.list_chunks(A_X, "a.md") is None


@pytest.mark.parametrize("limit", [0, -1, MAX_CHUNKS_LIMIT + 1, True, "5"])
def test_a_bad_limit_is_refused_naming_it(store: KnowledgeStore, limit: object) -> None:
    with pytest.raises(ValidationError) as caught:
        store.list_chunks(A_X, "a.md", limit=limit)  # type: ignore[arg-type]
    assert caught.value.field == "limit"


def test_a_cursor_of_another_document_or_scope_or_listing_is_refused(
    store: KnowledgeStore,
) -> None:
    put(store, A_X, "a.md", TEXTS)
    put(store, A_X, "b.md", TEXTS)
    page = store.list_chunks(A_X, "a.md", limit=2)
    assert page is not None
    assert page.next_cursor is not None
    refused = [
        (A_X, "b.md", page.next_cursor),  # another document
        (A_Y, "a.md", page.next_cursor),  # another scope
        (A_X, "a.md", encode_cursor(A_X, "a.md")),  # the documents listing's
        (A_X, "a.md", encode_chunk_cursor(B_X, "a.md", 1)),
        (A_X, "a.md", "not-a-cursor"),
        (A_X, "a.md", "W10"),  # base64 of a JSON array
    ]
    for scope, path, cursor in refused:
        with pytest.raises(ValidationError) as caught:
            store.list_chunks(scope, path, cursor=cursor)
        assert caught.value.field == "cursor", (scope, path, cursor)
    with pytest.raises(ValidationError) as caught:
        store.list_documents(A_X, cursor=page.next_cursor)
    assert caught.value.field == "cursor"
