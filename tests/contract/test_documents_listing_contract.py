"""The documents listing (``list_documents``/``get_document``), run against every store.

Documents are written through the store's own write session (``IndexWriter``), one tiny
chunk each, so a scope of 5,000 documents is quick to build on every backend, the real
OpenSearch node included. Expected values are literals or Python's ``sorted`` of the
paths written (the promised order is code point order, which is UTF-8 byte order).
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import pytest

from knowledge.core.documents import MAX_DOCUMENTS_LIMIT, IndexedDocument
from knowledge.core.errors import ValidationError
from knowledge.core.identity import document_id
from knowledge.core.model import DocumentChunk
from knowledge.core.scope import KnowledgeScope
from knowledge.stores.protocol import DocumentHeader, EmbeddedChunk, IndexWriter, KnowledgeStore

A_X = KnowledgeScope("agent-a", "ctx-x")
A_Y = KnowledgeScope("agent-a", "ctx-y")
B_X = KnowledgeScope("agent-b", "ctx-x")
WHEN = datetime(2026, 3, 14, 9, 26, 53, 123456, tzinfo=UTC)
VECTOR = [1.0] + [0.0] * 63  # the contract stores embed with HashingEmbedder(64)


def writer(store: KnowledgeStore) -> IndexWriter:
    assert isinstance(store, IndexWriter)
    return store


def put(
    store: KnowledgeStore,
    scope: KnowledgeScope,
    paths: list[str],
    *,
    tag: str = "",
    problems: dict[str, str] | None = None,
    deletes: tuple[str, ...] = (),
) -> None:
    """One write session: each path a one-chunk markdown document of 42 bytes with
    ``content_hash`` ``h-<tag><path>`` and version ``v-<path>``; then problems, deletes."""
    with writer(store).write_session(scope) as session:
        for path in paths:
            header = DocumentHeader(
                path=path,
                document_id=document_id(scope, path),
                content_hash=f"h-{tag}{path}",
                indexed_at=WHEN,
                version=f"v-{path}",
                metadata={"format": "markdown"},
                size=42,
            )
            chunk = DocumentChunk(path, 0, f"note {tag} {path}")
            assert session.put_document(header, [EmbeddedChunk(chunk, VECTOR)]) == 1
        for path, reason in (problems or {}).items():
            session.record_problem(path, reason)
        for path in deletes:
            session.delete_document(path)


def walk(store: KnowledgeStore, scope: KnowledgeScope, limit: int) -> list[IndexedDocument]:
    seen: list[IndexedDocument] = []
    cursor: str | None = None
    while True:
        page = store.list_documents(scope, limit=limit, cursor=cursor)
        assert len(page.documents) <= limit
        seen.extend(page.documents)
        if page.next_cursor is None:
            return seen
        assert page.documents, "a page with a next cursor is never empty"
        cursor = page.next_cursor


def test_a_scope_of_5000_documents_pages_in_path_order(store: KnowledgeStore) -> None:
    paths = [f"docs/{i % 7}/file-{i:05d}.md" for i in range(4990)]
    paths += ["a.md", "Z.md", "é.md", "가나.md", "😀.md", "docs/0", "docs/0-", "b c.md"]
    problem_only = {"zz/broken.pdf": "no text layer", "docs/scan.pdf": "encrypted"}
    # Written in an order unrelated to the listing's, in two sessions.
    shuffled = paths[::-1]
    put(store, A_X, shuffled[:2500])
    put(store, A_X, shuffled[2500:], problems=problem_only)
    expected = sorted([*paths, *problem_only])
    assert len(expected) == 5000

    listed = walk(store, A_X, MAX_DOCUMENTS_LIMIT)
    assert [d.path for d in listed] == expected
    assert [d.path for d in walk(store, A_X, 337)] == expected

    by_path = {d.path: d for d in listed}
    assert by_path["가나.md"] == IndexedDocument(
        path="가나.md",
        format="markdown",
        size=42,
        chunk_count=1,
        version="v-가나.md",
        content_hash="h-가나.md",
        indexed_at=WHEN,
        problem=None,
    )
    assert by_path["zz/broken.pdf"] == IndexedDocument(
        "zz/broken.pdf", None, None, 0, None, None, None, "no text layer"
    )
    assert not by_path["zz/broken.pdf"].indexed


def test_default_limit_and_one_document_pages(store: KnowledgeStore) -> None:
    put(store, A_X, [f"n{i:03d}.md" for i in range(150)])
    first = store.list_documents(A_X)
    assert [d.path for d in first.documents] == [f"n{i:03d}.md" for i in range(100)]
    assert first.next_cursor is not None
    rest = store.list_documents(A_X, cursor=first.next_cursor)
    assert [d.path for d in rest.documents] == [f"n{i:03d}.md" for i in range(100, 150)]
    assert rest.next_cursor is None
    exact = store.list_documents(A_X, limit=150)  # exactly full: no cursor to an empty page
    assert len(exact.documents) == 150
    assert exact.next_cursor is None


def test_a_cursor_resumes_after_its_path_while_the_scope_changes(store: KnowledgeStore) -> None:
    put(store, A_X, ["b.md", "d.md", "f.md", "h.md"])
    page = store.list_documents(A_X, limit=2)
    assert [d.path for d in page.documents] == ["b.md", "d.md"]
    cursor = page.next_cursor
    assert cursor is not None
    # Before the cursor: never shown again; after it: seen; deleted: gone.
    put(store, A_X, ["a.md", "c.md", "g.md"], deletes=("f.md",))
    rest = walk_from(store, A_X, cursor)
    assert [d.path for d in rest] == ["g.md", "h.md"]
    # The same cursor twice gives the same page.
    assert store.list_documents(A_X, limit=1, cursor=cursor) == store.list_documents(
        A_X, limit=1, cursor=cursor
    )


def walk_from(store: KnowledgeStore, scope: KnowledgeScope, cursor: str) -> list[IndexedDocument]:
    page = store.list_documents(scope, limit=MAX_DOCUMENTS_LIMIT, cursor=cursor)
    assert page.next_cursor is None
    return list(page.documents)


@pytest.mark.parametrize("limit", [0, -1, MAX_DOCUMENTS_LIMIT + 1, True, 2.0, "5", None])
def test_a_bad_limit_is_refused_naming_it(store: KnowledgeStore, limit: object) -> None:
    with pytest.raises(ValidationError) as caught:
        store.list_documents(A_X, limit=limit, cursor=None)  # type: ignore[arg-type]
    assert caught.value.field == "limit"


@pytest.mark.parametrize("cursor", ["", "not a cursor", "e30", "eyJ2IjoxfQ", "%%%", "x" * 5000])
def test_a_bad_cursor_is_refused_naming_it(store: KnowledgeStore, cursor: str) -> None:
    with pytest.raises(ValidationError) as caught:
        store.list_documents(A_X, limit=10, cursor=cursor)
    assert caught.value.field == "cursor"


@pytest.mark.parametrize("last_path", ["\ud800", "a\udfff.md"])
def test_a_forged_cursor_whose_path_is_not_text_is_refused(
    store: KnowledgeStore, last_path: str
) -> None:
    # Well-formed JSON of this scope, but its path holds a lone surrogate (JSON allows
    # "\ud800"), which no listed path has and no store can compare alike.
    put(store, A_X, ["a.md", "\uff21.md"])
    payload = {"v": 1, "a": A_X.agent, "c": A_X.context, "p": last_path}
    forged = base64.urlsafe_b64encode(json.dumps(payload).encode("ascii")).decode("ascii")
    with pytest.raises(ValidationError) as caught:
        store.list_documents(A_X, limit=10, cursor=forged.rstrip("="))
    assert caught.value.field == "cursor"


def test_a_cursor_never_crosses_into_another_scope(store: KnowledgeStore) -> None:
    same = ["a.md", "b.md", "c.md"]
    put(store, A_X, same, tag="ax-")
    put(store, A_Y, same, tag="ay-")
    put(store, B_X, [*same, "secret.md"], tag="bx-")
    for scope, tag in ((A_X, "ax-"), (A_Y, "ay-"), (B_X, "bx-")):
        listed = walk(store, scope, 1)
        assert {d.content_hash for d in listed} == {f"h-{tag}{p}" for p in [d.path for d in listed]}
    assert [d.path for d in walk(store, A_X, 2)] == same
    b_cursor = store.list_documents(B_X, limit=1).next_cursor
    y_cursor = store.list_documents(A_Y, limit=1).next_cursor
    assert b_cursor is not None
    assert y_cursor is not None
    for foreign in (b_cursor, y_cursor):  # another agent, another context of the same agent
        with pytest.raises(ValidationError) as caught:
            store.list_documents(A_X, limit=10, cursor=foreign)
        assert caught.value.field == "cursor"


def test_one_document_by_path_and_nothing_of_another_scope(store: KnowledgeStore) -> None:
    put(store, A_X, ["guides/setup.md"])
    # A later attempt fails: the indexed version stays, with the problem beside it.
    put(store, A_X, [], problems={"guides/setup.md": "too large", "scan.pdf": "no text layer"})
    put(store, B_X, ["secret.md"])
    both = store.get_document(A_X, "guides/setup.md")
    assert both is not None
    assert (both.indexed, both.chunk_count, both.problem) == (True, 1, "too large")
    assert both.indexed_at == WHEN
    only_problem = store.get_document(A_X, "scan.pdf")
    assert only_problem == IndexedDocument(
        "scan.pdf", None, None, 0, None, None, None, "no text layer"
    )
    assert store.get_document(A_X, "secret.md") is None
    assert store.get_document(A_Y, "guides/setup.md") is None
    assert store.get_document(A_X, "guides") is None
    assert store.get_document(A_X, "missing.md") is None


def test_a_later_write_or_delete_clears_the_problem(store: KnowledgeStore) -> None:
    put(store, A_X, ["a.md"], problems={"a.md": "timeout", "b.pdf": "corrupt"})
    put(store, A_X, ["a.md"], tag="again-", deletes=("b.pdf",))
    listed = store.list_documents(A_X).documents
    assert [(d.path, d.problem, d.content_hash) for d in listed] == [("a.md", None, "h-again-a.md")]


def test_an_empty_or_unknown_scope_has_no_documents(store: KnowledgeStore) -> None:
    page = store.list_documents(A_X)
    assert page.documents == ()
    assert page.next_cursor is None
    assert store.get_document(A_X, "a.md") is None
