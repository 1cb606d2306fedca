"""Batched commits of the embedded store: a long first index is searchable as it lands,
a crash keeps what was committed, and no search ever sees half a document."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

from knowledge.core.model import IndexOptions, IndexState, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import index_source, reindex_source
from knowledge.stores.embedded import EmbeddedKnowledgeStore

SCOPE = KnowledgeScope("ops-bot", "runbooks")
DOCUMENTS = 250
PROBE_AT = 240


class ProbingSource:
    """``DOCUMENTS`` small documents; reading document ``PROBE_AT`` runs ``probe`` first,
    from another thread, as a search request of the server would."""

    def __init__(self, probe: object) -> None:
        self._probe = probe
        self.seen: list[object] = []

    def documents(self, scope: KnowledgeScope, options: IndexOptions) -> Iterator[SourceDocument]:
        for n in range(DOCUMENTS):
            text = f"# Note {n}\n\nmarker{n} shared words for note {n}\n".encode()
            yield SourceDocument(path=f"doc{n:03d}.md", size=len(text), read=self._reader(n, text))

    def _reader(self, n: int, text: bytes):  # type: ignore[no-untyped-def]
        def read() -> bytes:
            if n == PROBE_AT:
                worker = threading.Thread(target=lambda: self.seen.append(self._probe()))  # type: ignore[operator]
                worker.start()
                worker.join(timeout=30)
            return text

        return read


def test_a_long_first_index_is_searchable_as_documents_land(tmp_path: Path) -> None:
    # batches of 100 documents only: with the 1 s age limit as well, a slow machine would
    # commit more often, up to the very document before the probe
    store = EmbeddedKnowledgeStore(
        tmp_path / "kb.db", embedder=HashingEmbedder(32), batch_seconds=3600.0
    )
    try:

        def probe() -> tuple[int, IndexState, list[str]]:
            status = store.status(SCOPE)
            found = store.search(SCOPE, SearchQuery("marker3", mode="keyword"))
            return status.document_count, status.state, [r.document_path for r in found]

        source = ProbingSource(probe)
        result = index_source(store, SCOPE, source)
        assert result.indexed_documents == DOCUMENTS
        [(count, state, found)] = source.seen
        # Committed in batches: most of what was written before the probe is visible.
        assert 100 <= count < PROBE_AT
        assert state is IndexState.INDEXING
        assert found == ["doc003.md"]
        assert store.status(SCOPE).document_count == DOCUMENTS
    finally:
        store.close()


CRASHING_INDEXER = textwrap.dedent(
    """
    import os, signal, sys
    from knowledge.embedding.hashing import HashingEmbedder
    from knowledge.core.scope import KnowledgeScope
    from knowledge.core.source import SourceDocument
    from knowledge.ingest.pipeline import index_source
    from knowledge.stores.embedded import EmbeddedKnowledgeStore

    def documents(scope, options):
        for n in range(400):
            if n == 350:
                os.kill(os.getpid(), signal.SIGKILL)  # a crash: no cleanup, no rollback
            text = ("# Note %d\\n\\n" % n + "marker%d words " % n * 40).encode()
            yield SourceDocument(path="doc%03d.md" % n, size=len(text), read=lambda t=text: t)

    class Source:
        documents = staticmethod(documents)

    # batches of 100 documents only (not also every second, which on a slow machine could
    # commit the very document before the crash)
    store = EmbeddedKnowledgeStore(sys.argv[1], embedder=HashingEmbedder(32), batch_seconds=3600.0)
    index_source(store, KnowledgeScope("ops-bot", "runbooks"), Source())
    """
)


def test_a_crash_keeps_the_committed_documents_and_never_half_a_document(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    crashed = subprocess.run(
        [sys.executable, "-c", CRASHING_INDEXER, str(db)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "error"},
        check=False,
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    # The raw file, read with sqlite3 alone: the independent oracle.
    raw = sqlite3.connect(db)
    try:
        documents = dict(raw.execute("SELECT path, chunk_count FROM documents"))
        chunks = dict(raw.execute("SELECT path, count(*) FROM chunks GROUP BY path"))
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        raw.close()
    assert 300 <= len(documents) < 350
    assert documents == chunks  # every committed document whole, no orphan chunk
    store = EmbeddedKnowledgeStore(db, embedder=HashingEmbedder(32))
    try:
        assert store.status(SCOPE).document_count == len(documents)
        found = store.search(SCOPE, SearchQuery("marker299", mode="keyword"))
        assert {r.document_path for r in found} == {"doc299.md"}
    finally:
        store.close()


class OldDocuments:
    def documents(self, scope: KnowledgeScope, options: IndexOptions) -> Iterator[SourceDocument]:
        for n in range(DOCUMENTS):
            text = f"legacy page {n}\n".encode()
            yield SourceDocument(path=f"old{n:03d}.md", size=len(text), read=lambda t=text: t)


def test_a_reindex_never_shows_the_scope_empty_and_drops_what_is_gone_at_the_end(
    tmp_path: Path,
) -> None:
    store = EmbeddedKnowledgeStore(tmp_path / "kb.db")  # keyword only
    try:
        assert index_source(store, SCOPE, OldDocuments()).indexed_documents == DOCUMENTS

        def probe() -> tuple[int, int, list[str]]:
            legacy = store.search(SCOPE, SearchQuery("legacy", mode="keyword", max_results=3))
            fresh = store.search(SCOPE, SearchQuery("marker3", mode="keyword"))
            count = store.status(SCOPE).document_count
            return count, len(legacy), [r.document_path for r in fresh]

        source = ProbingSource(probe)
        result = reindex_source(store, SCOPE, source)
        [(count, legacy, fresh)] = source.seen
        # Mid-run: the old documents are all there, and the new ones land batch by batch.
        assert DOCUMENTS + 100 <= count < DOCUMENTS + PROBE_AT
        assert legacy == 3
        assert fresh == ["doc003.md"]
        # At the end: what the source no longer lists is gone.
        assert (result.indexed_documents, result.deleted_documents) == (DOCUMENTS, DOCUMENTS)
        assert store.status(SCOPE).document_count == DOCUMENTS
        assert store.search(SCOPE, SearchQuery("legacy", mode="keyword")) == []
    finally:
        store.close()
