"""What both sides of an embedded search produce and read: candidates and chunk rows."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from knowledge.core.model import SearchQuery
from knowledge.core.scope import KnowledgeScope

from .schema import load_json

__all__ = ["FETCH_BATCH", "Candidate", "chunk_rows", "metadata_of", "scope_condition"]

FETCH_BATCH: Final = 256
"""Rows read (or candidates checked against the filters) at a time."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A chunk that passed the scope and the filters, with its raw side score.

    ``key`` is (path, chunk index, context): unique within an agent, the fusion key.
    """

    rowid: int
    key: tuple[str, int, str]
    score: float


def scope_condition(
    scope: KnowledgeScope, query: SearchQuery, alias: str = ""
) -> tuple[str, list[str]]:
    """The SQL condition (and its values) of the scope: agent and context, or agent only
    with ``cross_context``. Every read of chunks goes through it."""
    if query.cross_context:
        return f"{alias}agent = ?", [scope.agent]
    return f"{alias}agent = ? AND {alias}context = ?", [scope.agent, scope.context]


def metadata_of(conn: sqlite3.Connection, rowids: Sequence[int]) -> dict[int, dict[str, Any]]:
    if not rowids:
        return {}
    marks = ", ".join("?" * len(rowids))
    sql = f"SELECT id, metadata FROM chunks WHERE id IN ({marks})"  # noqa: S608
    return {row[0]: load_json(row[1]) for row in conn.execute(sql, list(rowids))}


def chunk_rows(
    conn: sqlite3.Connection, rowids: Sequence[int]
) -> dict[int, tuple[str, int, str, str]]:
    """(path, chunk index, content, metadata JSON) of each chunk row id."""
    if not rowids:
        return {}
    marks = ", ".join("?" * len(rowids))
    sql = f"SELECT id, path, chunk_index, content, metadata FROM chunks WHERE id IN ({marks})"  # noqa: S608
    rows = conn.execute(sql, list(rowids)).fetchall()
    return {row[0]: (row[1], row[2], row[3], row[4]) for row in rows}
