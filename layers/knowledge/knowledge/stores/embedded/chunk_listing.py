"""The embedded store's listing of one document's chunks (``knowledge.core.chunk_listing``).

The chunks of exactly the scope's context (a large document's staged or retired rows sit
under another context, ``write_session.aside``, and are never listed), after a chunk
index, by index: a range scan of the ``(agent, context, path, chunk_index)`` unique index.
The document row says whether the scope holds an indexed version at all.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from knowledge.core.chunk_listing import IndexedChunk
from knowledge.core.scope import KnowledgeScope

from .schema import load_json

__all__ = ["read_chunks"]

_DOCUMENT: Final = "SELECT 1 FROM documents WHERE agent = ? AND context = ? AND path = ?"
_CHUNKS: Final = (
    "SELECT chunk_index, content, metadata FROM chunks"
    " WHERE agent = ? AND context = ? AND path = ? AND chunk_index > ?"
    " ORDER BY chunk_index LIMIT ?"
)


def read_chunks(
    conn: sqlite3.Connection, scope: KnowledgeScope, path: str, after: int | None, size: int
) -> list[IndexedChunk] | None:
    """Up to ``size`` chunks of ``path`` with an index after ``after``, by index; ``None``
    when the scope has no indexed version of ``path``."""
    where = (scope.agent, scope.context, path)
    if conn.execute(_DOCUMENT, where).fetchone() is None:
        return None
    rows = conn.execute(_CHUNKS, (*where, -1 if after is None else after, size))
    return [
        IndexedChunk(int(index), str(content), load_json(metadata))
        for index, content, metadata in rows
    ]
