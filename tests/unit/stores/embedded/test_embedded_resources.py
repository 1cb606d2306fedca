"""The embedded store gives disk and memory back after a large document comes and goes:
new files are made with incremental vacuum (older ones converted when opened), a delete
that frees much is followed by a keyword merge and by cutting the free pages off the file,
the WAL is cut back, and searches keep answering meanwhile. Real store, real files."""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
from pathlib import Path

from knowledge.core.model import SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.sources.folders import LocalDirectorySource
from knowledge.stores.embedded import EmbeddedKnowledgeStore
from knowledge.stores.embedded.connections import WAL_LIMIT_BYTES

SCOPE = KnowledgeScope("ops-bot", "runbooks")
OTHER = KnowledgeScope("ops-bot", "oncall")
INCREMENTAL = 2  # PRAGMA auto_vacuum


def _pragma(db: Path, name: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute(f"PRAGMA {name}").fetchone()[0])
    finally:
        conn.close()


def _wal_bytes(db: Path) -> int:
    wal = Path(f"{db}-wal")
    return wal.stat().st_size if wal.exists() else 0


def _write_notes(folder: Path, count: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        text = f"# Note {n}\n\nkeepsake{n} rollback the deployment of service {n}\n"
        (folder / f"note{n:03d}.md").write_text(text, encoding="utf-8")


def _write_large(path: Path, chunks: int) -> None:
    """A Markdown file of about ``chunks`` chunks (headed sections of random words)."""
    rng = random.Random(7)
    words = [f"w{rng.randrange(50_000)}" for _ in range(3000)]
    with path.open("w", encoding="utf-8") as out:
        out.write("# Large\n\n")
        for n in range(chunks):
            out.write(f"## Part {n}\n\n{' '.join(rng.choices(words, k=60))}\n\n")


def _index(store: EmbeddedKnowledgeStore, folder: Path, scope: KnowledgeScope = SCOPE) -> int:
    result = index_source(store, scope, LocalDirectorySource(folder))
    assert not result.errors, result.errors
    return result.indexed_chunks


def _settled_pages(db: Path) -> int:
    """The file's pages once its WAL is copied back (what the file will be)."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(conn.execute("PRAGMA page_count").fetchone()[0])
    finally:
        conn.close()


def test_a_new_file_is_made_with_incremental_vacuum(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    EmbeddedKnowledgeStore(db).close()
    assert _pragma(db, "auto_vacuum") == INCREMENTAL


def test_a_file_made_without_it_is_converted_when_opened(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    folder = tmp_path / "docs"
    _write_notes(folder, 20)
    store = EmbeddedKnowledgeStore(db)
    _index(store, folder)
    store.close()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA auto_vacuum = NONE")
    conn.execute("VACUUM")  # how an older release made its files
    conn.close()
    assert _pragma(db, "auto_vacuum") == 0

    store = EmbeddedKnowledgeStore(db)
    try:
        assert _pragma(db, "auto_vacuum") == INCREMENTAL
        found = store.search(SCOPE, SearchQuery("keepsake7", mode="keyword"))
        assert [r.document_path for r in found] == ["note007.md"]
    finally:
        store.close()


def test_deleting_a_large_document_gives_its_pages_back_and_cuts_the_wal(
    tmp_path: Path,
) -> None:
    db = tmp_path / "kb.db"
    folder = tmp_path / "docs"
    _write_notes(folder, 30)
    store = EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(64))
    try:
        _index(store, folder)
        before = _settled_pages(db)
        _write_large(folder / "large.md", 3000)
        assert _index(store, folder) >= 2500
        assert _settled_pages(db) > 5 * before

        (folder / "large.md").unlink()
        _index(store, folder)  # the delete; the session's end maintains the file

        assert _pragma(db, "freelist_count") == 0
        assert _wal_bytes(db) <= WAL_LIMIT_BYTES
        assert _wal_bytes(db) == 0  # cut to nothing after the large delete
        # Its keyword terms went too (FTS5 keeps a deleted row's terms until a merge).
        assert _pragma(db, "page_count") <= before * 1.1
        found = store.search(SCOPE, SearchQuery("keepsake12"))
        assert [r.document_path for r in found][:1] == ["note012.md"]
    finally:
        store.close()


def test_searches_answer_throughout_the_maintenance(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    folder = tmp_path / "docs"
    _write_notes(folder, 30)
    _write_large(folder / "large.md", 3000)
    store = EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(64))
    try:
        _index(store, folder)
        failures: list[BaseException] = []
        answered: list[tuple[float, list[str]]] = []
        stop = threading.Event()

        def search() -> None:
            modes = ("keyword", "vector", "hybrid")
            n = 0
            while not stop.is_set():
                try:
                    query = SearchQuery("keepsake5 deployment", mode=modes[n % 3])
                    paths = [r.document_path for r in store.search(SCOPE, query)]
                    answered.append((time.monotonic(), paths))
                except BaseException as exc:
                    failures.append(exc)
                    return
                n += 1

        searchers = [threading.Thread(target=search) for _ in range(3)]
        for thread in searchers:
            thread.start()
        (folder / "large.md").unlink()
        started = time.monotonic()
        _index(store, folder)  # the delete and the maintenance after it
        ended = time.monotonic()
        stop.set()
        for thread in searchers:
            thread.join(30)

        assert failures == []
        assert _pragma(db, "freelist_count") == 0
        during = [paths for at, paths in answered if started <= at <= ended]
        assert during, "no search ran while the delete and its maintenance did"
        assert all("note005.md" in paths for paths in during)
    finally:
        store.close()


def test_another_open_session_is_not_made_to_wait_then_its_end_finishes_the_work(
    tmp_path: Path,
) -> None:
    db = tmp_path / "kb.db"
    folder = tmp_path / "docs"
    _write_notes(folder, 10)
    _write_large(folder / "large.md", 3000)
    store = EmbeddedKnowledgeStore(db, batch_documents=1)
    try:
        _index(store, folder)
        other = store.write_session(OTHER)
        with other:
            other.delete_document("nothing.md")  # a write of its own, committed
            (folder / "large.md").unlink()
            _index(store, folder)
            # Maintenance waits for the open session rather than taking turns with it.
            assert _pragma(db, "freelist_count") > 0
        assert _pragma(db, "freelist_count") == 0
    finally:
        store.close()


def test_maintain_cuts_every_free_page_and_the_wal(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    folder = tmp_path / "docs"
    _write_notes(folder, 40)
    store = EmbeddedKnowledgeStore(db)
    try:
        _index(store, folder)
        for n in range(0, 40, 4):  # a few small deletes: below the threshold of a write
            (folder / f"note{n:03d}.md").unlink()
        _index(store, folder)
        report = store.maintain()
        assert report.wal_truncated
        assert _pragma(db, "freelist_count") == 0
        assert _wal_bytes(db) == 0
        assert os.path.getsize(db) == _pragma(db, "page_count") * _pragma(db, "page_size")
    finally:
        store.close()


def test_a_write_drops_the_cached_vectors_and_counts_it_made_stale(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    folder = tmp_path / "docs"
    _write_notes(folder, 10)
    _write_large(folder / "large.md", 500)
    store = EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(64))
    try:
        _index(store, folder)
        store.search(SCOPE, SearchQuery("keepsake3 deployment", mode="hybrid"))
        generation = next(iter(store._vectors._entries.values())).generation
        cached = store._vectors.get((SCOPE.agent, SCOPE.context), generation)
        assert cached is not None
        assert len(cached.rowids) > 500
        assert store._statistics._entries

        (folder / "large.md").unlink()
        _index(store, folder)

        # Nothing a search could still use was kept: the matrix and the counts are gone,
        # and a search on the older snapshot finishing late cannot put them back.
        assert store._vectors._entries == {}
        assert store._statistics._entries == {}
        store._vectors.put((SCOPE.agent, SCOPE.context), cached)
        assert store._vectors._entries == {}
        # The next search reads the scope as it is now.
        found = store.search(SCOPE, SearchQuery("keepsake3 deployment", mode="vector"))
        assert "large.md" not in {r.document_path for r in found}
        assert len(next(iter(store._vectors._entries.values())).rowids) == 10
    finally:
        store.close()


def test_maintenance_is_due_while_a_search_kept_the_wal_from_being_cut(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    folder = tmp_path / "docs"
    _write_notes(folder, 10)
    _write_large(folder / "large.md", 3000)
    store = EmbeddedKnowledgeStore(db)
    try:
        _index(store, folder)
        assert not store.maintenance_due()  # the write's end did its part
        reader = sqlite3.connect(db, isolation_level=None)
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM documents").fetchone()
            (folder / "large.md").unlink()
            _index(store, folder)  # its checkpoint gives up on the held frames
        finally:
            reader.close()
        assert _wal_bytes(db) > 0
        assert store.maintenance_due()
        store.maintain()
        assert _wal_bytes(db) == 0
        assert not store.maintenance_due()
    finally:
        store.close()
