"""An upsert decides on the indexed version as it is inside its write session.

On the memory and embedded stores the write sessions of a scope run one at a time, so
an upsert that reads the indexed version inside its session (``Indexer.upsert``) decides
on what no other writer can change before its write lands. It read it before opening
the session, so another writer could commit in between, and the decision ("unchanged",
the version check) was taken on a version the index no longer held.

The race, forced: the file at c0 is indexed. It is changed to c2 and writer B (a poll of
the watcher, ``kb index`` in another process) reads it and is slow to commit; the file
is reverted to c0 and writer A starts for that change: it read the indexed version (c0),
waited for B's session, and then found the file (c0) "unchanged" against what it had
read, while B had just committed c2. The index stayed at c2, the file at c0, and no
later change comes. B's slowness is its document's read (a test source); A's read of
the indexed version is seen through a delegating ``IndexWriter`` around the real store
(neither the pipeline nor the store is patched). B goes on once A read the indexed
version, or after 2 s: A reads it inside its session, which waits for B's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from threading import Thread
from typing import Any

import pytest

from knowledge.core.model import IndexResult, SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import upsert_document
from knowledge.stores.embedded import EmbeddedKnowledgeStore
from knowledge.stores.memory import MemoryKnowledgeStore
from knowledge.stores.protocol import KnowledgeStore, StoredDocument

SCOPE = KnowledgeScope("ops-bot", "runbooks")
C0 = "# Deploy\n\nroll back with helm"
C2 = "# Deploy\n\nroll back with argo"


@pytest.fixture(params=["memory", "embedded"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KnowledgeStore]:
    made: KnowledgeStore = (
        MemoryKnowledgeStore()
        if request.param == "memory"
        else EmbeddedKnowledgeStore(tmp_path / "kb.sqlite3", embedder=HashingEmbedder(16))
    )
    yield made
    made.close()


def _file_document(
    path: Path, after_read: threading.Event | None = None
) -> tuple[SourceDocument, threading.Event]:
    """The file as a local source hands it over (its bytes read when the writer reads
    them), and an event set once they were read; with ``after_read`` the writer is held
    after its read until that is set."""
    read_done = threading.Event()

    def read() -> bytes:
        data = path.read_bytes()
        read_done.set()
        if after_read is not None:
            assert after_read.wait(30), "the writer was never let go"
        return data

    return SourceDocument(path=path.name, size=path.stat().st_size, read=read), read_done


class _SeenReading:
    """The store; ``read`` is set once the indexed version was read through it."""

    def __init__(self, store: KnowledgeStore) -> None:
        self._store = store
        self.read = threading.Event()

    def stored_document(self, scope: KnowledgeScope, path: str) -> StoredDocument | None:
        stored = self._store.stored_document(scope, path)
        self.read.set()
        return stored

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _found(store: KnowledgeStore, word: str) -> list[str]:
    query = SearchQuery(word, mode=SearchMode.KEYWORD, max_results=5)
    return [r.document_path for r in store.search(SCOPE, query)]


def _start(name: str, write: Callable[[], IndexResult], answers: dict[str, IndexResult]) -> Thread:
    thread = Thread(target=lambda: answers.__setitem__(name, write()))
    thread.start()
    return thread


def test_an_upsert_decides_on_the_version_indexed_inside_its_session(
    store: KnowledgeStore, tmp_path: Path
) -> None:
    file = tmp_path / "deploy.md"
    file.write_text(C0, encoding="utf-8")
    assert upsert_document(store, SCOPE, _file_document(file)[0]).indexed_documents == 1
    answers: dict[str, IndexResult] = {}
    go = threading.Event()
    file.write_text(C2, encoding="utf-8")
    b_document, b_read = _file_document(file, after_read=go)
    b = _start("b", lambda: upsert_document(store, SCOPE, b_document), answers)
    # B holds its session with c2 read; the file goes back to c0, and A starts for that.
    assert b_read.wait(30), "writer B never read the file"
    file.write_text(C0, encoding="utf-8")
    seen = _SeenReading(store)
    a_document, _ = _file_document(file)
    a = _start("a", lambda: upsert_document(seen, SCOPE, a_document), answers)  # type: ignore[arg-type]
    seen.read.wait(2.0)  # before B's commit only where A reads it outside its session
    go.set()
    for writer in (a, b):
        writer.join(30)
        assert not writer.is_alive()
    assert not answers["a"].errors
    assert not answers["b"].errors
    # The index ends as the file is: c0, not B's c2.
    assert _found(store, "helm") == ["deploy.md"]
    assert _found(store, "argo") == []
