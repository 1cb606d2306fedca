"""``kb serve`` gives a large delete's disk back once it is idle, without a restart.

A served store indexes a large document; a reader (a search in another process, say) holds
its snapshot while the document is deleted from the folder, so the delete's own maintenance
cannot cut the WAL. Once the reader has gone and the server is idle, the WAL is cut to
nothing and no free page is left; while requests keep coming or a job indexes, nothing
runs. Real server on loopback, real files, a real SQLite reader.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from gated_embedding import GatedEmbedder, large_text
from polling import wait_until

from knowledge.core.scope import KnowledgeScope
from knowledge.local.server import LocalServer
from knowledge.stores.embedded import EmbeddedKnowledgeStore

SCOPE = KnowledgeScope("ops-bot", "runbooks")
IDLE_SECONDS = 0.5
MARKER = "zeppelin"


def _wal_bytes(db: Path) -> int:
    wal = Path(f"{db}-wal")
    return wal.stat().st_size if wal.exists() else 0


def _free_pages(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("PRAGMA freelist_count").fetchone()[0])
    finally:
        conn.close()


def _write_large(path: Path, chunks: int) -> None:
    """A Markdown file of about ``chunks`` chunks (headed sections of varied words)."""
    with path.open("w", encoding="utf-8") as out:
        out.write("# Large\n\n")
        for n in range(chunks):
            words = " ".join(f"w{(n * 131 + k * 7919) % 50_000}" for k in range(60))
            out.write(f"## Part {n}\n\n{words}\n\n")


def _call(server: LocalServer, method: str, route: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.url + route, data=data, method=method)
    request.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def _documents(server: LocalServer) -> int:
    code, answer = _call(server, "GET", f"/v1/agents/{SCOPE.agent}/contexts/{SCOPE.context}/status")
    assert code == 200, answer
    return int(answer["document_count"]) if answer["state"] == "READY" else -1


def _found(server: LocalServer, query: str) -> list[str]:
    route = f"/v1/agents/{SCOPE.agent}/contexts/{SCOPE.context}/search"
    code, answer = _call(server, "POST", route, {"query": query, "mode": "keyword"})
    assert code == 200, answer
    return [hit["document_path"] for hit in answer["results"]]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[LocalServer, Path, Path]]:
    folder = tmp_path / "bucket" / SCOPE.agent / SCOPE.context
    folder.mkdir(parents=True)
    for n in range(20):
        (folder / f"note{n:02d}.md").write_text(f"# Note {n}\n\nkeepsake{n} rollback\n")
    _write_large(folder / "large.md", 3000)
    db = tmp_path / "kb.db"
    embedder = GatedEmbedder(MARKER)
    with closing(EmbeddedKnowledgeStore(db, embedder=embedder)) as store:
        server = LocalServer(
            tmp_path / "bucket", store, port=0, poll_interval=0.2, maintain_after=IDLE_SECONDS
        )
        server.start()
        try:
            assert _documents(server) == 21
            yield server, folder, db
        finally:
            embedder.gate.set()
            server.stop()


def test_a_served_store_gives_a_large_deletes_wal_back_once_idle(served) -> None:
    server, folder, db = served
    reader = sqlite3.connect(db, isolation_level=None)
    try:
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM documents").fetchone()[0] == 21
        (folder / "large.md").unlink()
        wait_until(lambda: _documents(server) == 20, "the delete is applied")
        time.sleep(3.0)  # the delete's own maintenance has given up on the held WAL
        assert _wal_bytes(db) > 0
    finally:
        reader.close()  # the search is over

    wait_until(lambda: _wal_bytes(db) == 0, "the WAL is cut to nothing while idle")
    assert _free_pages(db) == 0
    assert _found(server, "keepsake3") == ["note03.md"]  # the server searches on


def _delete_under_a_reader(server: LocalServer, folder: Path, db: Path) -> sqlite3.Connection:
    """Delete the large document while a reader holds its snapshot (returned, still open)."""
    reader = sqlite3.connect(db, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM documents").fetchone()
    (folder / "large.md").unlink()
    wait_until(lambda: _documents(server) == 20, "the delete is applied")
    return reader


def test_nothing_runs_while_requests_keep_coming(served) -> None:
    server, folder, db = served
    maintenance = server.maintenance
    assert maintenance is not None
    _delete_under_a_reader(server, folder, db).close()
    runs = maintenance.runs
    stop = threading.Event()

    def search() -> None:
        while not stop.is_set():
            _found(server, "keepsake3")
            time.sleep(0.2)

    searcher = threading.Thread(target=search)
    searcher.start()
    try:
        time.sleep(4 * IDLE_SECONDS + 2.0)
        assert maintenance.runs == runs  # a request every 0.2 s: never quiet for 1 s
        assert _wal_bytes(db) > 0
    finally:
        stop.set()
        searcher.join(30)
    wait_until(lambda: _wal_bytes(db) == 0, "the WAL is cut to nothing once quiet")
    wait_until(lambda: maintenance.runs > runs, "the run that cut it ends")


def test_nothing_runs_while_a_job_indexes(served) -> None:
    server, folder, db = served
    maintenance = server.maintenance
    assert maintenance is not None
    embedder = server.api.store.embedder
    assert isinstance(embedder, GatedEmbedder)
    reader = _delete_under_a_reader(server, folder, db)
    try:
        # A large document's job, held half-way through its embedding.
        (folder / "manual.md").write_bytes(large_text(MARKER))
        assert embedder.arrived.wait(30), "the large document's job never started"
        time.sleep(2.0)  # a run begun before the job (the reader holds the WAL) has ended
        runs = maintenance.runs
    finally:
        reader.close()
    time.sleep(4 * IDLE_SECONDS + 2.0)
    assert maintenance.runs == runs  # the job runs: no maintenance beside it
    assert _wal_bytes(db) > 0
    embedder.gate.set()
    wait_until(lambda: _documents(server) == 21, "the large document is indexed")
    wait_until(lambda: _wal_bytes(db) == 0, "the WAL is cut to nothing once idle")


def test_a_store_that_cannot_maintain_gets_no_maintenance(tmp_path: Path) -> None:
    from knowledge.stores.memory import MemoryKnowledgeStore

    (tmp_path / "bucket").mkdir()
    memory = LocalServer(tmp_path / "bucket", MemoryKnowledgeStore(), port=0)
    assert memory.maintenance is None
    with closing(EmbeddedKnowledgeStore(tmp_path / "kb.db")) as store:
        assert LocalServer(tmp_path / "bucket", store, port=0).maintenance is not None
        assert (
            LocalServer(tmp_path / "bucket", store, port=0, maintain_after=None).maintenance is None
        )
