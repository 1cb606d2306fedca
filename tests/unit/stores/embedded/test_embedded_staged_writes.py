"""Large documents in the embedded store: written without holding the one write lock.

While a large document of one scope is read, chunked and embedded, other scopes' writes
commit at once; its chunks are invisible until they are swapped in, all at once; a
failure half-way keeps the previous version and leaves nothing behind.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from gated_embedding import GatedEmbedder, large_text

from knowledge.core.model import SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.ingest.pipeline import upsert_document
from knowledge.stores.embedded import EmbeddedKnowledgeStore

BIG = KnowledgeScope("big-agent", "manuals")
SMALL = KnowledgeScope("small-agent", "notes")


def document(path: str, data: bytes) -> SourceDocument:
    return SourceDocument(path=path, read=lambda: data, size=len(data))


def hits(store: EmbeddedKnowledgeStore, scope: KnowledgeScope, query: str) -> set[str]:
    found = store.search(scope, SearchQuery(text=query, mode=SearchMode.KEYWORD, min_score=0))
    return {result.document_path for result in found}


def aside_rows(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(
            conn.execute(
                "SELECT count(*) FROM chunks WHERE substr(context, 1, 1) = ?", ["\x1f"]
            ).fetchone()[0]
        )


@pytest.fixture
def gated(tmp_path: Path) -> tuple[EmbeddedKnowledgeStore, GatedEmbedder, Path]:
    embedder = GatedEmbedder("zeppelin")
    db = tmp_path / "k.db"
    store = EmbeddedKnowledgeStore(db, embedder=embedder)
    yield store, embedder, db
    embedder.gate.set()
    store.close()


def test_other_scopes_write_while_a_large_document_is_embedded(gated) -> None:
    store, embedder, db = gated
    upsert_document(store, BIG, document("manual.md", b"# Manual\n\nthe old manual text\n"))
    writer = threading.Thread(
        target=upsert_document, args=(store, BIG, document("manual.md", large_text("zeppelin")))
    )
    writer.start()
    try:
        assert embedder.arrived.wait(30), "the large document never reached its third batch"
        # Half-way: the old version is what is searched, the staged chunks are nobody's.
        assert hits(store, BIG, "old manual") == {"manual.md"}
        assert hits(store, BIG, "zeppelin") == set()
        assert store.status(BIG).chunk_count == 1
        small = threading.Thread(
            target=upsert_document,
            args=(store, SMALL, document("note.md", b"# Note\n\nthe quokka note\n")),
        )
        small.start()
        small.join(10)  # before: waits for the large document's transaction (30 s, then fails)
        assert not small.is_alive(), "another scope's write waited for the large document"
        assert hits(store, SMALL, "quokka") == {"note.md"}
    finally:
        embedder.gate.set()
        writer.join(60)
    assert hits(store, BIG, "zeppelin") == {"manual.md"}
    assert hits(store, BIG, "old manual") == set()
    status = store.status(BIG)
    assert status.document_count == 1
    indexed = store.get_document(BIG, "manual.md")
    assert indexed is not None
    assert indexed.chunk_count == status.chunk_count
    assert aside_rows(db) == 0


def test_a_large_document_failing_half_way_keeps_the_previous_version(gated) -> None:
    store, embedder, db = gated
    upsert_document(store, BIG, document("manual.md", large_text("walrus")))
    before = store.status(BIG).chunk_count
    embedder.fail = True
    result = upsert_document(store, BIG, document("manual.md", large_text("zeppelin")))
    assert result.errors, "the failed embedding is an error of the document"
    assert hits(store, BIG, "walrus") == {"manual.md"}
    assert hits(store, BIG, "zeppelin") == set()
    assert store.status(BIG).chunk_count == before
    assert aside_rows(db) == 0


def test_rows_a_dead_run_left_aside_are_cleaned_by_the_next_write(gated) -> None:
    store, _, db = gated
    upsert_document(store, BIG, document("manual.md", large_text("walrus")))
    with sqlite3.connect(db) as conn:  # what a process killed between two pieces leaves
        conn.execute(
            "INSERT INTO chunks (doc_id, agent, context, path, chunk_index, content, metadata)"
            " SELECT doc_id, agent, ? || context, path, chunk_index, content, metadata"
            " FROM chunks WHERE agent = ? AND context = ?",
            ["\x1fstaged\x1f", BIG.agent, BIG.context],
        )
    assert aside_rows(db) > 0
    assert hits(store, BIG, "walrus") == {"manual.md"}  # never searched
    upsert_document(store, BIG, document("manual.md", large_text("narwhal")))
    assert aside_rows(db) == 0
    assert hits(store, BIG, "narwhal") == {"manual.md"}
    assert store.list_scopes() == [BIG]
