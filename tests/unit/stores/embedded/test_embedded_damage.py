"""A damaged index file is found out: refused at open with what to do, and a store that
meets damage later says ERROR in its status instead of READY."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from knowledge.core.errors import ConfigurationError, StoreError
from knowledge.core.model import IndexState, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.sources.folders import LocalDirectorySource
from knowledge.stores.embedded import EmbeddedKnowledgeStore

SCOPE = KnowledgeScope("ops-bot", "runbooks")


def build_index(tmp_path: Path, documents: int = 300) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for n in range(documents):
        body = " ".join(f"word{(n * 7 + k) % 997}" for k in range(120))
        (folder / f"note{n:03d}.md").write_text(f"# Note {n}\n\n{body}\n", encoding="utf-8")
    db = tmp_path / "index" / "kb.db"
    store = EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(64))
    try:
        assert (
            index_source(store, SCOPE, LocalDirectorySource(folder)).indexed_documents == documents
        )
    finally:
        store.close()
    assert not Path(f"{db}-wal").exists()  # everything is in the main file now
    return db


def damage_pages(db: Path, first: float = 0.4, pages: int = 6) -> None:
    """Overwrite ``pages`` whole pages from ``first`` (a fraction of the file) with noise."""
    size = db.stat().st_size
    page = 4096
    start = int(size * first) // page * page
    noise = random.Random(9).randbytes(page * pages)
    with db.open("r+b") as file:
        file.seek(start)
        file.write(noise)


def test_a_file_damaged_mid_file_is_refused_at_open_naming_it_and_the_fix(tmp_path: Path) -> None:
    db = build_index(tmp_path)
    damage_pages(db)
    with pytest.raises(ConfigurationError) as caught:
        EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(64))
    message = str(caught.value)
    assert str(db) in message
    assert "damaged" in message
    assert "delete" in message
    assert "rebuil" in message  # rebuilt / rebuilds from the folder


def test_damage_met_after_open_turns_the_status_to_error(tmp_path: Path) -> None:
    db = build_index(tmp_path)
    store = EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(64))
    try:
        assert store.status(SCOPE).state is IndexState.READY
        # Damage the keyword index's own records behind the store's back: the b-trees stay
        # well-formed (quick_check cannot see it); FTS5 finds it when it reads them.
        raw = sqlite3.connect(db)
        with raw:
            raw.execute("UPDATE chunks_fts_data SET block = x'ffffffffffffffff' WHERE id = 1")
        raw.close()
        with pytest.raises(StoreError) as caught:
            store.search(SCOPE, SearchQuery("word5 word6", mode="keyword"))
        assert "damaged" in str(caught.value)
        status = store.status(SCOPE)
        assert status.state is IndexState.ERROR
        assert status.message is not None
        assert "damaged" in status.message
        assert "delete" in status.message
        assert str(tmp_path) not in status.message  # no server path in an HTTP answer
    finally:
        store.close()
