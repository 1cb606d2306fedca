"""Memory-store specifics; the behaviour it shares with every store is in tests/contract."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from knowledge.core.errors import StoreError, UnsupportedModeError, ValidationError
from knowledge.core.model import DocumentChunk, IndexState, SearchMode, SearchQuery, SearchResult
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.ingest.pipeline import delete_document, upsert_document
from knowledge.stores.memory import MemoryKnowledgeStore
from knowledge.stores.protocol import (
    DocumentHeader,
    EmbeddedChunk,
    IndexWriter,
    KnowledgeStore,
    WriteSession,
)

SCOPE = KnowledgeScope("agent", "ctx")
OTHER = KnowledgeScope("agent", "other")


def header(path: str, digest: str = "h") -> DocumentHeader:
    return DocumentHeader(path, f"id-{path}", digest, datetime.now(UTC))


def chunks(path: str, *texts: str) -> list[EmbeddedChunk]:
    return [EmbeddedChunk(DocumentChunk(path, i, text)) for i, text in enumerate(texts)]


def put(store: MemoryKnowledgeStore, scope: KnowledgeScope, path: str, *texts: str) -> None:
    with store.write_session(scope) as session:
        session.put_document(header(path), chunks(path, *texts))


def found(
    store: MemoryKnowledgeStore, text: str, scope: KnowledgeScope = SCOPE, **fields: Any
) -> list[SearchResult]:
    return store.search(scope, SearchQuery(text, max_results=100, **fields))


def test_is_a_knowledge_store_and_its_own_index_writer() -> None:
    store = MemoryKnowledgeStore()
    assert isinstance(store, KnowledgeStore)
    assert isinstance(store, IndexWriter)
    # The pipeline indexes (knowledge.ingest.pipeline); the store only writes what it is given.
    assert not hasattr(store, "upsert_document")
    assert isinstance(store.write_session(SCOPE), WriteSession)
    assert store.supported_modes == frozenset({SearchMode.KEYWORD})


@pytest.mark.parametrize("mode", [SearchMode.VECTOR, SearchMode.HYBRID])
def test_vector_and_hybrid_are_refused(mode: SearchMode) -> None:
    store = MemoryKnowledgeStore()
    with pytest.raises(
        UnsupportedModeError, match=f"'{mode.value}' is not supported by the memory"
    ):
        store.search(SCOPE, SearchQuery("x", mode=mode))


def test_an_open_session_is_invisible_until_it_commits() -> None:
    store = MemoryKnowledgeStore()
    put(store, SCOPE, "old.md", "deploy old")
    with store.write_session(SCOPE) as session:
        session.put_document(header("new.md"), chunks("new.md", "deploy new", "deploy more"))
        session.delete_document("old.md")
        # A search meanwhile sees the published snapshot, whole.
        assert [r.document_path for r in found(store, "deploy")] == ["old.md"]
        status = store.status(SCOPE)
        assert status.state is IndexState.INDEXING
        assert (status.document_count, status.chunk_count) == (1, 1)
    assert {r.document_path for r in found(store, "deploy")} == {"new.md"}
    status = store.status(SCOPE)
    assert (status.state, status.document_count, status.chunk_count) == (IndexState.READY, 1, 2)


def test_a_failed_session_publishes_nothing() -> None:
    store = MemoryKnowledgeStore()
    put(store, SCOPE, "kept.md", "deploy kept")

    def fail_midway() -> None:
        with store.write_session(SCOPE) as session:
            session.put_document(header("new.md"), chunks("new.md", "deploy new"))
            session.delete_document("kept.md")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        fail_midway()
    assert [r.document_path for r in found(store, "deploy")] == ["kept.md"]
    assert store.status(SCOPE).state is IndexState.READY


def test_a_failing_chunk_stream_leaves_the_document_as_it_was() -> None:
    store = MemoryKnowledgeStore()
    put(store, SCOPE, "a.md", "alpha original")

    def stream() -> Iterator[EmbeddedChunk]:
        yield EmbeddedChunk(DocumentChunk("a.md", 0, "alpha replaced"))
        raise StoreError("stream broke")

    with store.write_session(SCOPE) as session:
        with pytest.raises(StoreError):
            session.put_document(header("a.md", "new"), stream())
        session.put_document(header("b.md"), chunks("b.md", "bravo"))
    assert [r.content for r in found(store, "alpha")] == ["alpha original"]
    stored = store.stored_document(SCOPE, "a.md")
    assert stored is not None
    assert stored.content_hash == "h"


def test_concurrent_searches_never_see_half_a_batch() -> None:
    store = MemoryKnowledgeStore()
    batch = 40
    rounds = 15
    seen: list[int] = []
    done = threading.Event()

    def searcher() -> None:
        while not done.is_set():
            seen.append(len(found(store, "shared")))

    thread = threading.Thread(target=searcher)
    thread.start()
    try:
        for r in range(rounds):
            with store.write_session(SCOPE, replace_scope=True) as session:
                for i in range(batch):
                    session.put_document(header(f"d{i}.md"), chunks(f"d{i}.md", f"shared {r}"))
    finally:
        done.set()
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert seen
    assert set(seen) <= {0, batch}


def test_sessions_on_one_scope_are_serialised() -> None:
    store = MemoryKnowledgeStore()
    entered = threading.Event()

    def second_writer() -> None:
        with store.write_session(SCOPE) as session:
            entered.set()
            session.put_document(header("second.md"), chunks("second.md", "second"))

    with store.write_session(SCOPE) as session:
        session.put_document(header("first.md"), chunks("first.md", "first"))
        thread = threading.Thread(target=second_writer)
        thread.start()
        assert not entered.wait(timeout=0.2)
        # Another scope is not blocked.
        put(store, OTHER, "o.md", "other")
    thread.join(timeout=30)
    assert entered.is_set()
    # The second session started from the first one's result: both documents are there.
    assert set(store.stored_documents(SCOPE)) == {"first.md", "second.md"}


def test_replace_scope_starts_empty() -> None:
    store = MemoryKnowledgeStore()
    put(store, SCOPE, "old.md", "alpha")
    with store.write_session(SCOPE, replace_scope=True) as session:
        assert session.delete_document("old.md") is False
        session.put_document(header("new.md"), chunks("new.md", "bravo"))
    assert set(store.stored_documents(SCOPE)) == {"new.md"}
    assert found(store, "alpha") == []


def test_a_session_is_used_once_and_only_inside_its_block() -> None:
    store = MemoryKnowledgeStore()
    session = store.write_session(SCOPE)
    with pytest.raises(StoreError, match="outside its 'with' block"):
        session.put_document(header("a.md"), chunks("a.md", "x"))
    with session:
        pass
    with pytest.raises(StoreError, match="only once"), session:
        pass


def test_tf_idf_ranks_rare_terms_and_more_matches_higher() -> None:
    store = MemoryKnowledgeStore()
    with store.write_session(SCOPE) as session:
        session.put_document(header("both.md"), chunks("both.md", "common rare"))
        session.put_document(header("rare.md"), chunks("rare.md", "rare words only"))
        for i in range(5):
            session.put_document(header(f"c{i}.md"), chunks(f"c{i}.md", f"common filler {i}"))
    results = found(store, "common rare", min_score=0.0)
    assert [r.document_path for r in results[:2]] == ["both.md", "rare.md"]
    assert results[0].rank_score == 1.0
    assert results[1].rank_score > results[2].rank_score
    # The absolute score agrees: both terms, then the rarer (weightier) one alone.
    assert results[0].score > results[1].score > results[2].score
    # Repeating a term helps the ranking, sublinearly.
    put(store, OTHER, "once.md", "term other")
    put(store, OTHER, "twice.md", "term term other")
    put(store, OTHER, "none.md", "nothing here")
    term = found(store, "term", OTHER, min_score=0.0)
    scores = {r.document_path: r.rank_score for r in term}
    assert scores["twice.md"] == 1.0
    assert 0.5 < scores["once.md"] < 1.0
    # The absolute score counts what the chunk holds, not how often.
    assert len({r.score for r in term}) == 1


def test_title_and_heading_terms_count_by_their_weight() -> None:
    titled = DocumentChunk(
        "pay.md", 0, "A chargeback is answered.", {"title": "Payments", "heading_path": []}
    )

    def scores(weight: float) -> dict[str, float]:
        # No page part (ranking.page_signal): the chunks' own scores alone.
        store = MemoryKnowledgeStore(headings_weight=weight, page_weight=0)
        with store.write_session(SCOPE) as session:
            session.put_document(header("pay.md"), [EmbeddedChunk(titled)])
        put(store, SCOPE, "text.md", "payments by card")
        put(store, SCOPE, "other.md", "nothing here")
        results = found(store, "payments", min_score=0.0)
        return {r.document_path: r.rank_score or 0.0 for r in results}

    assert scores(0) == {"text.md": 1.0}  # 0: the title is not indexed
    # A title term weighs its weight next to the same term once in the text (1.0).
    assert scores(0.5) == {"text.md": 1.0, "pay.md": 0.5}
    assert scores(1.0) == {"text.md": 1.0, "pay.md": 1.0}
    # Above 1 it is sublinear, as repeated terms are: 1 + ln 2.
    assert scores(2.0)["pay.md"] == 1.0
    assert scores(2.0)["text.md"] == pytest.approx(1 / (1 + math.log(2)))


@pytest.mark.parametrize("weight", [-1.0, float("nan"), True])
def test_a_bad_headings_weight_is_refused(weight: object) -> None:
    with pytest.raises(ValidationError) as caught:
        MemoryKnowledgeStore(headings_weight=weight)  # type: ignore[arg-type]
    assert caught.value.field == "headings_weight"


def test_filters_apply_before_normalising() -> None:
    store = MemoryKnowledgeStore()
    put(store, SCOPE, "best.md", "deploy deploy deploy rollback")
    put(store, SCOPE, "notes.txt", "deploy")
    results = found(store, "deploy rollback", file_patterns=("*.txt",), min_score=0.0)
    # The best chunk the caller can see ranks at 1.0, whatever is filtered away.
    assert [(r.document_path, r.rank_score) for r in results] == [("notes.txt", 1.0)]


def test_equal_scores_rank_by_path_then_chunk() -> None:
    # Without the page part, which lifts b.md (it matches twice as a whole).
    store = MemoryKnowledgeStore(page_weight=0)
    put(store, SCOPE, "b.md", "alike", "alike")
    put(store, SCOPE, "a.md", "alike")
    assert [(r.document_path, r.chunk_index) for r in found(store, "alike")] == [
        ("a.md", 0),
        ("b.md", 0),
        ("b.md", 1),
    ]


def test_deleted_terms_leave_no_postings() -> None:
    store = MemoryKnowledgeStore()
    put(store, SCOPE, "a.md", "unique kept")
    put(store, SCOPE, "b.md", "kept")
    assert delete_document(store, SCOPE, "a.md") is True
    snapshot = store._snapshots[SCOPE.key]
    assert "unique" not in snapshot.postings
    assert set(snapshot.postings["kept"]) == {("b.md", 0, SCOPE.key)}


def test_upsert_and_status_through_the_mixin() -> None:
    store = MemoryKnowledgeStore()
    data = b"# Title\n\nbody text"
    result = upsert_document(store, SCOPE, SourceDocument("doc.md", len(data), lambda: data))
    assert result.indexed_documents == 1
    status = store.status(SCOPE)
    assert (status.document_count, status.chunk_count, status.state) == (1, 1, IndexState.READY)
    assert status.last_indexed_at is not None
    assert store.status(OTHER).state is IndexState.EMPTY


def test_close_drops_everything_and_later_calls_fail() -> None:
    store = MemoryKnowledgeStore()
    put(store, SCOPE, "a.md", "alpha")
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        found(store, "alpha")
    with pytest.raises(StoreError, match="closed"):
        store.status(SCOPE)
    with pytest.raises(StoreError, match="closed"), store.write_session(SCOPE):
        pass
