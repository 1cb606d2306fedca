"""Where each scope of the embedded store was last indexed from (``ScopeSources``).

One row of ``meta`` per scope (``scope_source:<agent>/<context>``): ``kb index DIR`` and
``kb serve ROOT`` record their folder, so ``kb serve`` empties at start-up only the scopes
it indexed itself (``knowledge.stores.protocol.ScopeSources``).
"""

from __future__ import annotations

import sqlite3

from knowledge.core.errors import StoreError
from knowledge.core.scope import KnowledgeScope

from .connections import ConnectionPool

__all__ = ["read_scope_source", "write_scope_source"]


def read_scope_source(conn: sqlite3.Connection, scope: KnowledgeScope) -> str | None:
    """The recorded source of ``scope`` (``None``: none recorded), in ``conn``'s snapshot."""
    row = conn.execute(
        "SELECT value FROM meta WHERE key = ?", (_scope_source_key(scope),)
    ).fetchone()
    return None if row is None else str(row[0])


def write_scope_source(
    pool: ConnectionPool, display: str, scope: KnowledgeScope, source: str
) -> None:
    """Record ``source`` for ``scope`` (nothing is written when it is already recorded);
    ``StoreError`` naming the file ``display`` if SQLite fails."""
    key = _scope_source_key(scope)
    conn = pool.acquire()
    began = False
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        if row is not None and row[0] == source:
            return  # the usual case: nothing to write
        # Already in a transaction only on ":memory:", inside this thread's write session.
        if not conn.in_transaction:
            conn.execute("BEGIN IMMEDIATE")
            began = True
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, source))
        if began:
            conn.execute("COMMIT")
    except sqlite3.Error as exc:
        raise StoreError(f"index {display}: {exc}") from exc
    finally:
        if began and conn.in_transaction:
            conn.execute("ROLLBACK")
        pool.release(conn)


def _scope_source_key(scope: KnowledgeScope) -> str:
    # Agent and context names hold no "/" (``knowledge.core.scope``), so this is unambiguous.
    return f"scope_source:{scope.agent}/{scope.context}"
