"""The embedded store's term statistics for absolute scores: counted over the searched
scope only, kept per write generation, never served stale."""

from __future__ import annotations

from pathlib import Path

from knowledge.core.model import SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import delete_document, upsert_document
from knowledge.ranking import explain
from knowledge.stores.embedded import EmbeddedKnowledgeStore
from knowledge.stores.embedded.term_statistics import TermStatistics

SCOPE = KnowledgeScope("ops-bot", "runbooks")
OTHER = KnowledgeScope("other-bot", "notes")


def _doc(path: str, text: str) -> SourceDocument:
    data = text.encode("utf-8")
    return SourceDocument(path=path, size=len(data), read=lambda: data)


def _read(
    store: EmbeddedKnowledgeStore, scope: KnowledgeScope, *terms: str
) -> tuple[int, dict[str, int]]:
    keywords = store._keywords
    with store._reading() as conn:
        return keywords.scope_statistics(
            conn,
            scope,
            SearchQuery("x"),
            list(terms),
            store._statistics,
        )


def test_counts_cover_the_scope_only_and_follow_every_write(tmp_path: Path) -> None:
    store = EmbeddedKnowledgeStore(tmp_path / "kb.db", embedder=HashingEmbedder(64))
    try:
        upsert_document(store, SCOPE, _doc("rollback.md", "# Rollback\n\nRoll back the release."))
        upsert_document(store, OTHER, _doc("rollback.md", "rollback rollback release"))
        chunks, df = _read(store, SCOPE, "releas", "cake")
        assert chunks == 1
        assert df == {"releas": 1, "cake": 0}
        # A write to the scope is seen at once, though the first count was kept.
        upsert_document(store, SCOPE, _doc("cake.md", "Bake the cake for the release party."))
        chunks, df = _read(store, SCOPE, "releas", "cake")
        assert (chunks, df) == (2, {"releas": 2, "cake": 1})
        delete_document(store, SCOPE, "cake.md")
        assert _read(store, SCOPE, "cake") == (1, {"cake": 0})
    finally:
        store.close()


def test_a_kept_count_is_served_only_for_its_generation() -> None:
    statistics = TermStatistics(max_entries=2)
    key = ((("a", "b"),), "term")
    statistics._put(key, (1,), 5)
    assert statistics._cached(key, (1,)) == 5
    assert statistics._cached(key, (2,)) is None
    statistics._put(key, (0,), 9)
    assert statistics._cached(key, (1,)) == 5
    for n in range(3):
        statistics._put(((("a", "b"),), f"t{n}"), (1,), n)
    assert statistics._cached(key, (1,)) is None


def test_another_scopes_documents_never_move_a_score(tmp_path: Path) -> None:
    store = EmbeddedKnowledgeStore(tmp_path / "kb.db", embedder=HashingEmbedder(64))
    try:
        upsert_document(store, SCOPE, _doc("rollback.md", "Roll back the release with helm."))
        query = SearchQuery("roll back the release", mode=SearchMode.HYBRID, min_score=0.0)
        with explain.explaining():
            before = store.search(SCOPE, query)
        for n in range(40):
            upsert_document(store, OTHER, _doc(f"n{n}.md", "release release helm notes"))
        with explain.explaining():
            after = store.search(SCOPE, query)
        assert [r.score for r in after] == [r.score for r in before]
    finally:
        store.close()
