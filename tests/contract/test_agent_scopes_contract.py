"""The contexts of one agent (``agent_scopes``), run against every store, isolated too.

Each context's counts and last indexed time are the ones ``status`` gives it; a context
with only a problem is listed (as ``list_scopes`` lists it), another agent's never.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from knowledge.core.identity import document_id
from knowledge.core.model import DocumentChunk, IndexState
from knowledge.core.scope import KnowledgeScope
from knowledge.core.scope_set import SHARED_AGENT
from knowledge.stores.protocol import DocumentHeader, EmbeddedChunk, IndexWriter, KnowledgeStore

pytestmark = pytest.mark.isolated_stores

WHEN = datetime(2026, 3, 14, 9, 26, 53, tzinfo=UTC)
LATER = datetime(2026, 3, 15, 10, 0, 0, tzinfo=UTC)
VECTOR = [1.0] + [0.0] * 63


def put(
    store: KnowledgeStore, scope: KnowledgeScope, paths: dict[str, int], when: datetime = WHEN
) -> None:
    """Each path with its number of chunks."""
    assert isinstance(store, IndexWriter)
    with store.write_session(scope) as session:
        for path, count in paths.items():
            header = DocumentHeader(path, document_id(scope, path), f"h-{path}", when, size=10)
            chunks = [
                EmbeddedChunk(DocumentChunk(path, i, f"{path} {i}"), VECTOR) for i in range(count)
            ]
            session.put_document(header, chunks)


def test_each_context_with_the_counts_its_status_gives(store: KnowledgeStore) -> None:
    assert store.agent_scopes("ops-bot") == []
    put(store, KnowledgeScope("ops-bot", "runbooks"), {"a.md": 2, "b.md": 3})
    put(store, KnowledgeScope("ops-bot", "notes"), {"n.md": 1}, LATER)
    put(store, KnowledgeScope("support-bot", "runbooks"), {"s.md": 4})
    with store.write_session(KnowledgeScope("ops-bot", "broken")) as session:
        session.record_problem("x.pdf", "not a PDF")
    found = store.agent_scopes("ops-bot")
    assert [s.context for s in found] == ["broken", "notes", "runbooks"]
    for summary in found:
        status = store.status(KnowledgeScope("ops-bot", summary.context))
        assert summary.document_count == status.document_count
        assert summary.chunk_count == status.chunk_count
        assert summary.last_indexed_at == status.last_indexed_at
        assert summary.state == status.state
        assert summary.problem_count == len(status.problems)
    by_name = {s.context: s for s in found}
    assert (by_name["runbooks"].document_count, by_name["runbooks"].chunk_count) == (2, 5)
    assert by_name["notes"].last_indexed_at is not None  # (the memory store's own clock)
    assert by_name["broken"].state == IndexState.EMPTY
    assert by_name["broken"].problem_count == 1
    assert [s.context for s in store.agent_scopes("support-bot")] == ["runbooks"]
    assert store.agent_scopes("ops") == []


def test_the_shared_librarys_contexts_are_its_libraries(store: KnowledgeStore) -> None:
    put(store, KnowledgeScope(SHARED_AGENT, "playbooks"), {"p.md": 1})
    put(store, KnowledgeScope(SHARED_AGENT, "policies"), {"q.md": 2})
    put(store, KnowledgeScope("ops-bot", "playbooks"), {"o.md": 1})
    found = store.agent_scopes(SHARED_AGENT)
    assert [(s.context, s.document_count, s.chunk_count) for s in found] == [
        ("playbooks", 1, 1),
        ("policies", 1, 2),
    ]
