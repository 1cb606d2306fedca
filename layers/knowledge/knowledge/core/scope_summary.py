"""The contexts of one agent in a word each: what ``KnowledgeStore.agent_scopes`` answers.

A listing of an agent's scopes (the console's scope list, an agent choosing where to
search) needs each context's counts, last indexed time and state, not its problems or
unread files: a store answers them for every context of the agent at once (one grouped
query, one aggregation) instead of one status read per scope. A context is listed when
it holds an indexed document or a problem, as ``list_scopes`` lists scopes. The counts
are the ones ``status`` gives for that scope.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from knowledge.core.model import IndexState

__all__ = ["ScopeSummary", "summary_state"]


@dataclass(frozen=True, slots=True)
class ScopeSummary:
    """One context of an agent: its counts, when it was last indexed and its state
    (``READY``, ``EMPTY``, ``INDEXING`` while the store writes it, as ``status`` says)."""

    context: str
    document_count: int
    chunk_count: int
    problem_count: int
    last_indexed_at: datetime | None
    state: IndexState

    def to_dict(self) -> dict[str, Any]:
        return {
            "context": self.context,
            "state": self.state.value,
            "document_count": self.document_count,
            "chunk_count": self.chunk_count,
            "problem_count": self.problem_count,
            "last_indexed_at": None
            if self.last_indexed_at is None
            else self.last_indexed_at.isoformat(),
        }


def summary_state(document_count: int, *, writing: bool) -> IndexState:
    """The state ``status`` gives a scope: ``INDEXING`` while written, else by its documents."""
    if writing:
        return IndexState.INDEXING
    return IndexState.READY if document_count else IndexState.EMPTY
