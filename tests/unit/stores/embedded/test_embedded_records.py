"""The embedded store's per-document records and problems (``WriteSession.record_problem``,
``IndexStatus.problems``), read back with sqlite3 alone where the file is the contract."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pytest

from knowledge.core.errors import AnalysisMismatchError, RecordsMismatchError
from knowledge.core.identity import document_id
from knowledge.core.model import (
    MAX_STATUS_PROBLEMS,
    DocumentChunk,
    FileProblem,
    IndexState,
    SearchMode,
    SearchQuery,
)
from knowledge.core.origin import RECORDS
from knowledge.core.scope import KnowledgeScope
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import delete_document
from knowledge.ranking import explain
from knowledge.ranking.analysis import ANALYSIS, KOREAN_MORPHEMES
from knowledge.stores.embedded import EmbeddedKnowledgeStore
from knowledge.stores.protocol import DocumentHeader, EmbeddedChunk

SCOPE = KnowledgeScope("ops-bot", "runbooks")
OTHER = KnowledgeScope("ops-bot", "oncall")
EMBEDDER = HashingEmbedder(32)
WHEN = datetime(2026, 5, 4, 3, 2, 1, tzinfo=UTC)


def header(path: str, *, size: int = 10, version: str | None = None) -> DocumentHeader:
    return DocumentHeader(
        path=path,
        document_id=document_id(SCOPE, path),
        content_hash=f"hash-of-{path}",
        indexed_at=WHEN,
        version=version,
        metadata={"format": "markdown", "content_type": "text/markdown"},
        size=size,
    )


def chunks(path: str, *texts: str) -> list[EmbeddedChunk]:
    return [
        EmbeddedChunk(DocumentChunk(path, n, text, {}), EMBEDDER.embed(text).vector)
        for n, text in enumerate(texts)
    ]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "kb.db"


@pytest.fixture
def store(db: Path):  # type: ignore[no-untyped-def]
    store = EmbeddedKnowledgeStore(db, embedder=EMBEDDER)
    yield store
    store.close()


def test_each_document_has_its_record(store: EmbeddedKnowledgeStore, db: Path) -> None:
    with store.write_session(SCOPE) as session:
        session.put_document(header("a.md", size=1234, version="v7"), chunks("a.md", "x", "y"))
    raw = sqlite3.connect(db)
    row = raw.execute(
        "SELECT path, source_type, size, chunk_count, version, content_hash, indexed_at"
        " FROM documents WHERE agent = 'ops-bot' AND context = 'runbooks'"
    ).fetchone()
    raw.close()
    assert row == (
        "a.md",
        "markdown",
        1234,
        2,
        "v7",
        "hash-of-a.md",
        "2026-05-04T03:02:01.000000+00:00",
    )


def test_a_problem_is_listed_and_keeps_the_indexed_version(store: EmbeddedKnowledgeStore) -> None:
    with store.write_session(SCOPE) as session:
        session.put_document(header("a.md"), chunks("a.md", "kubectl rollout undo"))
    with store.write_session(SCOPE) as session:
        session.record_problem("a.md", "encrypted PDF")
        session.record_problem("never.md", "unsupported format")
        session.record_problem("a.md", "corrupt file: bad xref")  # replaces the first
    status = store.status(SCOPE)
    assert status.problems == (
        FileProblem("a.md", "corrupt file: bad xref"),
        FileProblem("never.md", "unsupported format"),
    )
    assert status.state is IndexState.READY
    assert status.document_count == 1
    found = store.search(SCOPE, SearchQuery("rollout", mode="keyword"))
    assert [r.document_path for r in found] == ["a.md"]
    assert store.status(OTHER).problems == ()
    assert store.status(SCOPE).to_dict()["problems"][0] == {
        "document_path": "a.md",
        "reason": "corrupt file: bad xref",
    }


def test_a_later_put_or_delete_clears_the_problem(store: EmbeddedKnowledgeStore, db: Path) -> None:
    with store.write_session(SCOPE) as session:
        for path in ("a.md", "b.md", "c.md"):
            session.record_problem(path, "too large")
    with store.write_session(SCOPE) as session:
        session.put_document(header("a.md"), chunks("a.md", "fixed now"))
        session.delete_document("b.md")  # not indexed: still clears its problem
    assert store.status(SCOPE).problems == (FileProblem("c.md", "too large"),)
    reopened = EmbeddedKnowledgeStore(db, embedder=EMBEDDER)  # problems live in the file
    try:
        assert reopened.status(SCOPE).problems == (FileProblem("c.md", "too large"),)
    finally:
        reopened.close()


def test_a_scope_with_only_problems_is_empty_and_says_why(store: EmbeddedKnowledgeStore) -> None:
    with store.write_session(SCOPE) as session:
        session.record_problem("scan.pdf", "no text layer (scanned image; OCR not supported)")
    status = store.status(SCOPE)
    assert (status.state, status.document_count) == (IndexState.EMPTY, 0)
    assert [p.path for p in status.problems] == ["scan.pdf"]


def test_status_lists_the_most_recent_problems_first_and_at_most_the_maximum(
    store: EmbeddedKnowledgeStore,
) -> None:
    with store.write_session(SCOPE) as session:
        for n in range(MAX_STATUS_PROBLEMS + 20):
            session.record_problem(f"f{n:03d}.md", f"reason {n}")
    problems = store.status(SCOPE).problems
    assert len(problems) == MAX_STATUS_PROBLEMS
    last = MAX_STATUS_PROBLEMS + 19
    assert problems[0] == FileProblem(f"f{last:03d}.md", f"reason {last}")
    assert problems[-1].path == "f020.md"


def test_a_problem_recorded_in_a_failed_session_is_rolled_back(
    store: EmbeddedKnowledgeStore,
) -> None:
    def record_then_fail() -> None:
        with store.write_session(SCOPE) as session:
            session.record_problem("a.md", "too large")
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        record_then_fail()
    assert store.status(SCOPE).problems == ()


def test_a_replace_session_keeps_the_indexed_version_of_a_document_with_a_problem(
    store: EmbeddedKnowledgeStore,
) -> None:
    with store.write_session(SCOPE) as session:
        for path in ("a.md", "b.md", "gone.md"):
            session.put_document(header(path), chunks(path, f"text of {path}"))
        session.record_problem("vanished.md", "too large")
    with store.write_session(SCOPE, replace_scope=True) as session:
        session.put_document(header("a.md"), chunks("a.md", "new text of a"))
        session.record_problem("b.md", "corrupt file: truncated")
    assert set(store.stored_documents(SCOPE)) == {"a.md", "b.md"}
    assert store.status(SCOPE).problems == (FileProblem("b.md", "corrupt file: truncated"),)


VERSION_1_FILE = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE documents (doc_id TEXT PRIMARY KEY, agent TEXT NOT NULL,"
    " context TEXT NOT NULL, path TEXT NOT NULL, content_hash TEXT NOT NULL, version TEXT,"
    " chunk_count INTEGER NOT NULL, indexed_at TEXT NOT NULL, metadata TEXT NOT NULL,"
    " UNIQUE (agent, context, path))",
    "CREATE TABLE chunks (id INTEGER PRIMARY KEY, doc_id TEXT NOT NULL, agent TEXT NOT NULL,"
    " context TEXT NOT NULL, path TEXT NOT NULL, chunk_index INTEGER NOT NULL,"
    " content TEXT NOT NULL, metadata TEXT NOT NULL, vector BLOB,"
    " UNIQUE (agent, context, path, chunk_index))",
    "CREATE VIRTUAL TABLE chunks_fts USING fts5(terms, tokenize = 'unicode61 remove_diacritics 0')",
    "INSERT INTO meta VALUES ('schema_version', '1'), ('generation', '7'),"
    " ('embedder', 'none'), ('dimensions', '0')",
    "INSERT INTO documents VALUES ('d1', 'ops-bot', 'runbooks', 'old.md', 'h', NULL, 1,"
    " '2025-01-01T00:00:00.000000+00:00', '{}')",
    "INSERT INTO chunks VALUES (1, 'd1', 'ops-bot', 'runbooks', 'old.md', 0,"
    " 'kubectl rollout undo', '{}', NULL)",
    "INSERT INTO chunks_fts (rowid, terms) VALUES (1, 'kubectl rollout undo')",
)


def _version_1_file(db: Path, *, with_chunks: bool) -> None:
    raw = sqlite3.connect(db)
    with raw:
        for statement in VERSION_1_FILE:
            if with_chunks or not statement.startswith("INSERT INTO chunks"):
                raw.execute(statement)
    raw.close()


@pytest.mark.parametrize("isolation", ["shared", "agent"])
def test_a_version_1_file_of_tokenized_chunks_is_refused_and_left_as_it_was(
    db: Path, isolation: str
) -> None:
    # Its keyword terms are tokenize's, not keyword_terms' (stems, no stop words): a
    # keyword search would silently miss, so the file is refused before it is upgraded.
    _version_1_file(db, with_chunks=True)
    with pytest.raises(AnalysisMismatchError, match="tokenize-v1"):
        EmbeddedKnowledgeStore(db, isolation=isolation)
    raw = sqlite3.connect(db)
    assert raw.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("1",)
    assert raw.execute("SELECT value FROM meta WHERE key = 'analysis'").fetchone() is None
    raw.close()


@pytest.mark.parametrize("isolation", ["shared", "agent"])
def test_a_version_1_file_without_chunks_is_upgraded_in_place(db: Path, isolation: str) -> None:
    # Nothing analysed yet (its one document is empty): upgraded, and this version's
    # analysis recorded, so what is indexed next is searchable.
    _version_1_file(db, with_chunks=False)
    store = EmbeddedKnowledgeStore(db, isolation=isolation)  # keyword only, as built
    try:
        with store.write_session(SCOPE) as session:
            session.record_problem("new.pdf", "encrypted PDF")
            session.put_document(
                header("rolls.md"),
                [EmbeddedChunk(DocumentChunk("rolls.md", 0, "kubectl rolled out", {}), None)],
            )
        found = store.search(SCOPE, SearchQuery("rollout rolling", mode="keyword"))
        assert [r.document_path for r in found] == ["rolls.md"]
        status = store.status(SCOPE)
        assert (status.document_count, status.problems) == (
            2,
            (FileProblem("new.pdf", "encrypted PDF"),),
        )
    finally:
        store.close()
    raw = sqlite3.connect(db)
    assert raw.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("3",)
    assert raw.execute("SELECT value FROM meta WHERE key = 'analysis'").fetchone() == (ANALYSIS,)
    assert raw.execute(
        "SELECT source_type, size FROM documents WHERE path = 'old.md'"
    ).fetchall() == [(None, None)]
    raw.close()


def _file_with(db: Path, isolation: str, chunk: DocumentChunk) -> None:
    """A file holding one document of ``SCOPE`` with ``chunk`` (no vector), closed."""
    store = EmbeddedKnowledgeStore(db, isolation=isolation)
    try:
        with store.write_session(SCOPE) as session:
            session.put_document(header(chunk.document_path), [EmbeddedChunk(chunk, None)])
    finally:
        store.close()


@pytest.mark.parametrize("isolation", ["shared", "agent"])
def test_a_file_of_the_bigram_analysis_is_refused_with_the_reindex_hint(
    db: Path, isolation: str
) -> None:
    # A file indexed by the previous analysis (Hangul as bigrams, "english-snowball-v2"):
    # its Korean terms would not meet this version's morphemes, so it is refused.
    _file_with(db, isolation, DocumentChunk("ko.md", 0, "배포 실패 시 롤백한다", {}))
    raw = sqlite3.connect(db)
    with raw:
        raw.execute("UPDATE meta SET value = 'english-snowball-v2' WHERE key = 'analysis'")
    raw.close()
    with pytest.raises(AnalysisMismatchError, match="english-snowball-v2") as caught:
        EmbeddedKnowledgeStore(db, isolation=isolation)
    assert "reindex" in str(caught.value)


@pytest.mark.parametrize("isolation", ["shared", "agent"])
def test_a_file_written_before_origins_is_refused_with_the_reindex_hint(
    db: Path, isolation: str
) -> None:
    # Its chunks carry "source_type" and no "origin"/"format" (a file of the version
    # before records them): a filter on either would silently miss.
    _file_with(db, isolation, DocumentChunk("a.md", 0, "rollback the deploy", {}))
    raw = sqlite3.connect(db)
    with raw:
        raw.execute("DELETE FROM meta WHERE key = 'records'")
    raw.close()
    with pytest.raises(RecordsMismatchError, match="origin and format") as caught:
        EmbeddedKnowledgeStore(db, isolation=isolation)
    assert isinstance(caught.value, AnalysisMismatchError)  # kb serve moves it aside
    assert "Reindex into a new file" in str(caught.value)


def test_a_new_file_records_its_record_fields(db: Path) -> None:
    _file_with(db, "shared", DocumentChunk("a.md", 0, "rollback the deploy", {}))
    with closing(sqlite3.connect(db)) as raw:
        (recorded,) = raw.execute("SELECT value FROM meta WHERE key = 'records'").fetchone()
    assert recorded == RECORDS
    EmbeddedKnowledgeStore(db).close()  # and opens again


# --- analysis version 3 (no title and heading terms) -------------------------------------

PREVIOUS_ANALYSIS = (
    "english-snowball-mecab-ko-v3" if KOREAN_MORPHEMES else "english-snowball-hangul-bigrams-v3"
)
PAYMENTS = DocumentChunk(
    "pay.md",
    0,
    "A chargeback is answered with the receipt.",
    {"title": "Payments", "heading_path": ["Payments", "Disputes"]},
)


def _as_analysis_3(db: Path) -> None:
    """Make the file look as analysis version 3 left it: every FTS5 table with one column
    (``terms``) and that analysis recorded."""
    raw = sqlite3.connect(db)
    with raw:
        tables = ["chunks_fts"] + [
            f"chunks_fts_{n}" for (n,) in raw.execute("SELECT id FROM fts_agents").fetchall()
        ]
        for table in tables:
            raw.execute(f"DROP TABLE {table}")
            raw.execute(
                f"CREATE VIRTUAL TABLE {table} USING fts5("
                "terms, tokenize = 'unicode61 remove_diacritics 0')"
            )
        raw.execute("UPDATE meta SET value = ? WHERE key = 'analysis'", (PREVIOUS_ANALYSIS,))
    raw.close()


@pytest.mark.parametrize("isolation", ["shared", "agent"])
def test_a_file_of_analysis_3_is_refused_with_the_reindex_hint(db: Path, isolation: str) -> None:
    # Its keyword index has no title and heading terms: searched as it is, a question
    # that names a heading would silently miss, so it is refused.
    _file_with(db, isolation, PAYMENTS)
    _as_analysis_3(db)
    with pytest.raises(AnalysisMismatchError, match=PREVIOUS_ANALYSIS) as caught:
        EmbeddedKnowledgeStore(db, isolation=isolation)
    assert "Reindex" in str(caught.value)
    assert ANALYSIS in str(caught.value)


@pytest.mark.parametrize("isolation", ["shared", "agent"])
def test_a_file_of_analysis_3_without_chunks_gets_the_headings_column(
    db: Path, isolation: str
) -> None:
    # Its (empty) FTS5 tables lack the headings column: made again, so the next write
    # works and its title and headings are searchable.
    store = EmbeddedKnowledgeStore(db, isolation=isolation)
    try:
        with store.write_session(SCOPE) as session:  # leaves the agent's table (isolation)
            old = DocumentChunk("old.md", 0, "old text", {})
            session.put_document(header("old.md"), [EmbeddedChunk(old, None)])
        assert delete_document(store, SCOPE, "old.md")
    finally:
        store.close()
    _as_analysis_3(db)
    store = EmbeddedKnowledgeStore(db, isolation=isolation)
    try:
        with store.write_session(SCOPE) as session:
            session.put_document(header("pay.md"), [EmbeddedChunk(PAYMENTS, None)])
        found = store.search(SCOPE, SearchQuery("payments", mode="keyword"))
        assert [(r.document_path, r.content) for r in found] == [("pay.md", PAYMENTS.content)]
    finally:
        store.close()
    raw = sqlite3.connect(db)
    assert raw.execute("SELECT value FROM meta WHERE key = 'analysis'").fetchone() == (ANALYSIS,)
    raw.close()


# --- analysis version 5 (no page rows) ------------------------------------------------

ANALYSIS_5 = (
    "english-snowball-mecab-ko-v5" if KOREAN_MORPHEMES else "english-snowball-hangul-bigrams-v5"
)


def _as_analysis_5(db: Path) -> None:
    """Make the file look as analysis version 5 left it: no page tables, that analysis
    recorded."""
    raw = sqlite3.connect(db)
    with raw:
        tables = ["pages_fts"] + [
            f"pages_fts_{n}" for (n,) in raw.execute("SELECT id FROM fts_agents").fetchall()
        ]
        for table in tables:
            raw.execute(f"DROP TABLE IF EXISTS {table}")
        raw.execute("UPDATE meta SET value = ? WHERE key = 'analysis'", (ANALYSIS_5,))
    raw.close()


@pytest.mark.parametrize("isolation", ["shared", "agent"])
def test_a_file_of_analysis_5_is_refused_with_the_reindex_hint(db: Path, isolation: str) -> None:
    # Its keyword index has no page rows: searched as it is, every page would rank by its
    # best chunk alone, so it is refused.
    _file_with(db, isolation, PAYMENTS)
    _as_analysis_5(db)
    with pytest.raises(AnalysisMismatchError, match=ANALYSIS_5) as caught:
        EmbeddedKnowledgeStore(db, isolation=isolation)
    assert "Reindex" in str(caught.value)
    assert ANALYSIS in str(caught.value)


@pytest.mark.parametrize("isolation", ["shared", "agent"])
def test_a_file_of_analysis_5_without_chunks_gets_its_page_tables(db: Path, isolation: str) -> None:
    # Emptied, it is this version's: the next write gets its page row (per agent too).
    store = EmbeddedKnowledgeStore(db, isolation=isolation)
    try:
        with store.write_session(SCOPE) as session:  # leaves the agent's table (isolation)
            old = DocumentChunk("old.md", 0, "old text", {})
            session.put_document(header("old.md"), [EmbeddedChunk(old, None)])
        assert delete_document(store, SCOPE, "old.md")
    finally:
        store.close()
    _as_analysis_5(db)
    store = EmbeddedKnowledgeStore(db, isolation=isolation)
    try:
        with store.write_session(SCOPE) as session:
            session.put_document(header("pay.md"), [EmbeddedChunk(PAYMENTS, None)])
        with explain.explaining() as trace:
            found = store.search(SCOPE, SearchQuery("chargeback", mode=SearchMode.KEYWORD))
        assert [r.document_path for r in found] == ["pay.md"]
        (search,) = trace.to_dict(found)["searches"]
        assert search["keyword"]["page_max"] > 0  # the page row was written and read
    finally:
        store.close()
