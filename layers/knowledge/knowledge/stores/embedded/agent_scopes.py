"""The embedded store's contexts of one agent (``knowledge.core.scope_summary``).

Two grouped reads of the ``documents`` and ``problems`` tables on the agent (their
unique ``(agent, context, path)`` indexes give the agent's rows in context order), merged
by context: the counts ``status`` gives each scope, for all of them at once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from datetime import datetime
from typing import Final

from knowledge.core.scope_summary import ScopeSummary, summary_state

__all__ = ["read_agent_scopes"]

_DOCUMENTS: Final = (
    "SELECT context, count(*), coalesce(sum(chunk_count), 0), max(indexed_at)"
    " FROM documents WHERE agent = ? GROUP BY context"
)
_PROBLEMS: Final = "SELECT context, count(*) FROM problems WHERE agent = ? GROUP BY context"


def read_agent_scopes(
    conn: sqlite3.Connection, agent: str, writing: Collection[str]
) -> list[ScopeSummary]:
    """Every context of ``agent`` with a document or a problem, by name; ``writing``:
    the contexts this process has a write session open on."""
    counts = {
        str(context): (int(documents), int(chunks), last)
        for context, documents, chunks, last in conn.execute(_DOCUMENTS, (agent,))
    }
    problems = {str(context): int(n) for context, n in conn.execute(_PROBLEMS, (agent,))}
    summaries = []
    for context in sorted(counts.keys() | problems.keys()):
        documents, chunks, last = counts.get(context, (0, 0, None))
        summaries.append(
            ScopeSummary(
                context=context,
                document_count=documents,
                chunk_count=chunks,
                problem_count=problems.get(context, 0),
                last_indexed_at=None if last is None else datetime.fromisoformat(str(last)),
                state=summary_state(documents, writing=context in writing),
            )
        )
    return summaries
