"""The embedded store's documents listing: the ``documents`` and ``problems`` tables read
together, by path (``knowledge.core.documents``).

A path is listed once: its document row (with its problem, if any) or, for a path that
only has a problem, the problem row. Both tables have a unique ``(agent, context, path)``
index, so a page is two index range scans merged, whatever the size of the scope.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Final

from knowledge.core.documents import IndexedDocument
from knowledge.core.scope import KnowledgeScope

__all__ = ["read_document", "read_documents", "read_scopes"]

# Values are always bound; ``{after}`` is one of two constant clauses.
_PAGE: Final = """
SELECT path, source_type, size, chunk_count, version, content_hash, indexed_at, reason,
       origin FROM (
    SELECT d.path AS path, d.source_type AS source_type, d.size AS size,
           d.chunk_count AS chunk_count, d.version AS version,
           d.content_hash AS content_hash, d.indexed_at AS indexed_at, p.reason AS reason,
           json_extract(d.metadata, '$.origin') AS origin
    FROM documents AS d
    LEFT JOIN problems AS p
        ON p.agent = d.agent AND p.context = d.context AND p.path = d.path
    WHERE d.agent = :agent AND d.context = :context {after_d}
    UNION ALL
    SELECT p.path, NULL, NULL, 0, NULL, NULL, NULL, p.reason, NULL
    FROM problems AS p
    WHERE p.agent = :agent AND p.context = :context {after_p}
      AND NOT EXISTS (
        SELECT 1 FROM documents AS d
        WHERE d.agent = p.agent AND d.context = p.context AND d.path = p.path
      )
)
ORDER BY path
LIMIT :size
"""

_PAGE_FROM_START: Final = _PAGE.format(after_d="", after_p="")
_PAGE_AFTER: Final = _PAGE.format(after_d="AND d.path > :after", after_p="AND p.path > :after")

_ONE: Final = _PAGE.format(after_d="AND d.path = :path", after_p="AND p.path = :path")


def _document(row: tuple[object, ...]) -> IndexedDocument:
    path, source_type, size, chunk_count, version, content_hash, indexed_at, reason, origin = row
    return IndexedDocument(
        path=str(path),
        format=None if source_type is None else str(source_type),  # the format's old column
        origin=None if origin is None else str(origin),
        size=size if isinstance(size, int) else None,
        chunk_count=chunk_count if isinstance(chunk_count, int) else 0,
        version=None if version is None else str(version),
        content_hash=None if content_hash is None else str(content_hash),
        indexed_at=None if indexed_at is None else datetime.fromisoformat(str(indexed_at)),
        problem=None if reason is None else str(reason),
    )


def read_documents(
    conn: sqlite3.Connection, scope: KnowledgeScope, after: str | None, size: int
) -> list[IndexedDocument]:
    """Up to ``size`` documents of the scope with a path after ``after``, by path."""
    params: dict[str, object] = {"agent": scope.agent, "context": scope.context, "size": size}
    if after is None:
        return [_document(row) for row in conn.execute(_PAGE_FROM_START, params)]
    params["after"] = after
    return [_document(row) for row in conn.execute(_PAGE_AFTER, params)]


def read_document(
    conn: sqlite3.Connection, scope: KnowledgeScope, path: str
) -> IndexedDocument | None:
    params = {"agent": scope.agent, "context": scope.context, "path": path, "size": 1}
    row = conn.execute(_ONE, params).fetchone()
    return None if row is None else _document(row)


def read_scopes(conn: sqlite3.Connection) -> list[KnowledgeScope]:
    """Every scope with at least one document or problem, sorted (index-only queries)."""
    rows = conn.execute(
        "SELECT agent, context FROM documents UNION SELECT agent, context FROM problems"
        " ORDER BY 1, 2"
    ).fetchall()
    return [KnowledgeScope(agent, context) for agent, context in rows]
