"""Strict isolation of the embedded store: with ``isolation="agent"`` no keyword score of
one agent depends on what another agent's documents contain (the BM25 side channel)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from knowledge.core.errors import StoreError, ValidationError
from knowledge.core.model import SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.ingest.pipeline import delete_document, upsert_document
from knowledge.stores.embedded import EmbeddedKnowledgeStore

PROBER = KnowledgeScope("agent-a", "notes")
VICTIM = KnowledgeScope("agent-b", "secrets")
VICTIM_OTHER_CONTEXT = KnowledgeScope("agent-b", "archive")


def document(path: str, text: str) -> SourceDocument:
    data = text.encode()
    return SourceDocument(path=path, size=len(data), read=lambda: data)


def probe_scores(
    db: Path, isolation: str, victim_word: str, *, absolute: bool = False
) -> dict[str, float]:
    """agent-a's ranking scores (``rank_score``, BM25 relative to the best hit; with
    ``absolute``, the absolute ``score``) for a query of two words, one of which agent-b
    may hold a lot."""
    store = EmbeddedKnowledgeStore(db, isolation=isolation)
    try:
        upsert_document(store, PROBER, document("falcon.md", "falcon sighting report"))
        upsert_document(store, PROBER, document("harbor.md", "harbor opening hours"))
        for n in range(12):
            scope = VICTIM if n % 2 else VICTIM_OTHER_CONTEXT
            upsert_document(store, scope, document(f"s{n}.md", f"{victim_word} plan number {n}"))
        query = SearchQuery("falcon harbor", mode="keyword", min_score=0.0)
        results = store.search(PROBER, query)
        if absolute:
            return {r.document_path: r.score for r in results}
        return {r.document_path: r.rank_score or 0.0 for r in results}
    finally:
        store.close()


def test_the_probe_tells_with_shared_statistics(tmp_path: Path) -> None:
    # The side channel exists in the default mode (documented in the README).
    holds = probe_scores(tmp_path / "holds.db", "shared", victim_word="falcon")
    lacks = probe_scores(tmp_path / "lacks.db", "shared", victim_word="meadow")
    assert holds["falcon.md"] < 0.01 < 0.99 < lacks["falcon.md"]
    # The absolute score weighs the query's terms over the searched scope alone: it
    # cannot tell, whatever the isolation.
    assert probe_scores(
        tmp_path / "holds.db", "shared", victim_word="falcon", absolute=True
    ) == probe_scores(tmp_path / "lacks.db", "shared", victim_word="meadow", absolute=True)


def test_the_probe_cannot_tell_with_agent_isolation(tmp_path: Path) -> None:
    holds = probe_scores(tmp_path / "holds.db", "agent", victim_word="falcon")
    lacks = probe_scores(tmp_path / "lacks.db", "agent", victim_word="meadow")
    assert holds == lacks
    assert holds["falcon.md"] == pytest.approx(1.0)


def test_agent_isolation_still_searches_every_context_of_an_agent(tmp_path: Path) -> None:
    store = EmbeddedKnowledgeStore(tmp_path / "kb.db", isolation="agent")
    try:
        upsert_document(store, VICTIM, document("a.md", "falcon one"))
        upsert_document(store, VICTIM_OTHER_CONTEXT, document("b.md", "falcon two"))
        upsert_document(store, PROBER, document("c.md", "falcon three"))
        one = store.search(VICTIM, SearchQuery("falcon", mode="keyword"))
        every = store.search(VICTIM, SearchQuery("falcon", mode="keyword", cross_context=True))
        assert [r.document_path for r in one] == ["a.md"]
        assert sorted(r.document_path for r in every) == ["a.md", "b.md"]
        assert delete_document(store, VICTIM, "a.md")
        assert store.search(VICTIM, SearchQuery("falcon", mode="keyword")) == []
    finally:
        store.close()


def test_switching_isolation_rebuilds_the_keyword_index(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    shared = probe_scores(db, "shared", victim_word="falcon")
    assert shared["falcon.md"] < 0.01
    # The same file reopened with isolation="agent": the same documents, the same
    # answers as a file built that way from the start.
    isolated = probe_scores(db, "agent", victim_word="falcon")
    assert isolated == probe_scores(tmp_path / "fresh.db", "agent", victim_word="falcon")
    back = probe_scores(db, "shared", victim_word="falcon")
    assert back == shared


def test_a_switch_by_another_process_is_refused_never_silent(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    strict = EmbeddedKnowledgeStore(db, isolation="agent")
    try:
        upsert_document(strict, PROBER, document("a.md", "falcon"))
        EmbeddedKnowledgeStore(db, isolation="shared").close()  # rebuilds the keyword index
        with pytest.raises(StoreError, match="isolation=shared"):
            strict.search(PROBER, SearchQuery("falcon", mode="keyword"))
        with pytest.raises(StoreError, match="isolation=shared"):
            upsert_document(strict, PROBER, document("b.md", "harbor"))
    finally:
        strict.close()


def test_an_unknown_isolation_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="isolation"):
        EmbeddedKnowledgeStore(tmp_path / "kb.db", isolation="tenant")


PLAYBOOKS = KnowledgeScope("_shared", "playbooks")
POLICIES = KnowledgeScope("_shared", "policies")


def page_rows(db: Path) -> dict[str, int]:
    """Each statistics owner's page rows (``page_index``: ``pages_fts_<n>`` beside its
    ``chunks_fts_<n>``)."""
    conn = sqlite3.connect(db)
    try:
        owners = conn.execute("SELECT agent, id FROM fts_agents").fetchall()
        return {
            owner: conn.execute(f"SELECT count(*) FROM pages_fts_{int(n)}").fetchone()[0]
            for owner, n in owners
        }
    finally:
        conn.close()


def test_each_shared_library_has_a_table_and_the_owner_still_searches_them_all(
    tmp_path: Path,
) -> None:
    store = EmbeddedKnowledgeStore(tmp_path / "kb.db", isolation="agent")
    try:
        upsert_document(store, PLAYBOOKS, document("p.md", "falcon drill"))
        upsert_document(store, POLICIES, document("q.md", "falcon rule"))
        conn = sqlite3.connect(tmp_path / "kb.db")
        owners = {row[0] for row in conn.execute("SELECT agent FROM fts_agents")}
        conn.close()
        assert owners == {"_shared/playbooks", "_shared/policies"}
        # Each library's page rows beside its own chunks (one document each).
        assert page_rows(tmp_path / "kb.db") == {"_shared/playbooks": 1, "_shared/policies": 1}
        every = store.search(PLAYBOOKS, SearchQuery("falcon", mode="keyword", cross_context=True))
        assert sorted(r.document_path for r in every) == ["p.md", "q.md"]
        one = store.search(PLAYBOOKS, SearchQuery("falcon", mode="keyword"))
        assert [r.document_path for r in one] == ["p.md"]
        assert delete_document(store, POLICIES, "q.md")
        assert store.search(POLICIES, SearchQuery("falcon", mode="keyword")) == []
        assert page_rows(tmp_path / "kb.db") == {"_shared/playbooks": 1, "_shared/policies": 0}
    finally:
        store.close()


def test_a_file_keeping_the_libraries_in_one_table_is_rebuilt_on_opening(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    store = EmbeddedKnowledgeStore(db, isolation="agent")
    upsert_document(store, PLAYBOOKS, document("p.md", "falcon drill"))
    upsert_document(store, PROBER, document("a.md", "falcon notes"))
    store.close()
    # The layout of a file written before each library had its own table: the library's
    # terms in the one table of the owner "_shared".
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE fts_agents SET agent = '_shared' WHERE agent = '_shared/playbooks'")
    conn.close()
    store = EmbeddedKnowledgeStore(db, isolation="agent")
    try:
        query = SearchQuery("falcon", mode="keyword", shared_libraries=(PLAYBOOKS,))
        assert sorted(r.document_path for r in store.search(PROBER, query)) == ["a.md", "p.md"]
    finally:
        store.close()
    conn = sqlite3.connect(db)
    owners = {row[0] for row in conn.execute("SELECT agent FROM fts_agents")}
    conn.close()
    assert owners == {"_shared/playbooks", "agent-a"}
    # The rebuild made the page rows again, each beside its owner's chunks.
    assert page_rows(db) == {"_shared/playbooks": 1, "agent-a": 1}
