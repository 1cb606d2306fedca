"""The embedded store's status of one scope: counts, last indexed time, state, problems.

State: ``ERROR`` once the store has met a damaged file (with the fix in ``message``),
else ``INDEXING`` while this process has a write session open on the scope, else
``EMPTY`` or ``READY`` by its document count. ``problems`` are the scope's recorded
problems (``write_session``), the most recent first, at most ``MAX_STATUS_PROBLEMS``;
``unread_files`` the counts of the files no pattern selects, by extension.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import datetime

from knowledge.core.model import MAX_STATUS_PROBLEMS, FileProblem, IndexState, IndexStatus
from knowledge.core.scope import KnowledgeScope

__all__ = ["damaged_status", "scope_status"]


def scope_status(conn: sqlite3.Connection, scope: KnowledgeScope, *, writing: bool) -> IndexStatus:
    """The scope's status as of the caller's read snapshot."""
    where = (scope.agent, scope.context)
    documents, chunks, last, embedded, reused = conn.execute(
        "SELECT count(*), coalesce(sum(chunk_count), 0), max(indexed_at),"
        " coalesce(sum(embedded_chunks), 0), coalesce(sum(reused_chunks), 0)"
        " FROM documents WHERE agent = ? AND context = ?",
        where,
    ).fetchone()
    problems = tuple(
        FileProblem(path, reason)
        for path, reason in conn.execute(
            "SELECT path, reason FROM problems WHERE agent = ? AND context = ?"
            " ORDER BY id DESC LIMIT ?",
            (*where, MAX_STATUS_PROBLEMS),
        )
    )
    unread = {
        str(extension): int(count)
        for extension, count in conn.execute(
            "SELECT extension, count FROM unread_files WHERE agent = ? AND context = ?", where
        )
    }
    if writing:
        state = IndexState.INDEXING
    elif documents == 0:
        state = IndexState.EMPTY
    else:
        state = IndexState.READY
    return IndexStatus(
        document_count=int(documents),
        chunk_count=int(chunks),
        last_indexed_at=None if last is None else datetime.fromisoformat(last),
        state=state,
        problems=problems,
        embedded_chunks=int(embedded),
        reused_chunks=int(reused),
        unread_files=unread,
    )


def damaged_status(advice: str, counted: IndexStatus | None) -> IndexStatus:
    """``ERROR`` with ``advice``, keeping the counts when they could still be read."""
    if counted is None:
        return IndexStatus(0, 0, None, IndexState.ERROR, message=advice)
    # Every count as read; only the state and its message change (scope_status makes no
    # progress: that is the local server's).
    return replace(counted, state=IndexState.ERROR, message=advice)
