"""What both sides of an embedded search produce and read: candidates and chunk rows."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from knowledge.core.model import SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.scope_set import searched_scopes
from knowledge.ranking.origin_weights import LESSON, NEUTRAL, RankWeights

from .schema import load_json

__all__ = [
    "FETCH_BATCH",
    "Candidate",
    "ChunkKey",
    "Facts",
    "candidate_facts",
    "chunk_rows",
    "facts_columns",
    "metadata_of",
    "pairs_condition",
    "scope_condition",
]

FETCH_BATCH: Final = 256
"""Rows read (or candidates checked against the filters) at a time."""

ChunkKey = tuple[str, int, str, str]
"""(path, chunk index, context, agent): unique in the file, the fusion key; its order
ranks equal scores."""

Facts = tuple[object, object]
"""A chunk's metadata ``origin`` and ``kind`` as ``json_extract`` reads them
(``facts_columns``): what ``candidate_facts`` makes its ``(origin, is_lesson)`` of."""

_ORIGIN: Final = (
    "CASE WHEN instr(c.metadata, '\"origin\"') > 0 THEN json_extract(c.metadata, '$.origin') END"
)
_KIND: Final = (
    "CASE WHEN instr(c.metadata, '\"kind\"') > 0 THEN json_extract(c.metadata, '$.kind') END"
)


def facts_columns(weights: RankWeights | None) -> str:
    """The two ``Facts`` columns of a chunk row ``c`` for a search's ``weights``
    (``None``: ``NEUTRAL``): a metadata without the text ``"origin"`` (or ``"kind"``)
    has no such key, so it is parsed as JSON only where it has. The origin is read only
    when some origin is weighted (``candidate_facts`` leaves it ``None`` otherwise: most
    chunks have an origin, and parsing each one's metadata for it costs more than
    reading its row), and neither when the weights are inert (``weigh`` asks for no
    facts)."""
    weights = weights or NEUTRAL
    if weights.inert:
        return "NULL, NULL"
    return f"{'NULL' if weights.neutral_origins else _ORIGIN}, {_KIND}"


@dataclass(frozen=True, slots=True)
class Candidate:
    """A chunk that passed the scope and the filters, with its raw side score.

    ``key`` is a ``ChunkKey``.
    """

    rowid: int
    key: ChunkKey
    score: float


def scope_condition(
    scope: KnowledgeScope, query: SearchQuery, alias: str = ""
) -> tuple[str, list[str]]:
    """The SQL condition (and its values) of what a search covers: the scope (agent and
    context, or agent only with ``cross_context``) or one of the query's shared libraries
    (``knowledge.core.scope_set``). Every search read of chunks goes through it."""
    return pairs_condition(
        searched_scopes(scope, query.cross_context, query.shared_libraries), alias
    )


def pairs_condition(
    pairs: Sequence[tuple[str, str | None]], alias: str = ""
) -> tuple[str, list[str]]:
    """The SQL condition of (agent, context) pairs, any of which may match (context
    ``None``: every context of that agent); never empty."""
    if not pairs:
        raise ValueError("a scope condition needs at least one scope")
    by_agent: dict[str, list[str] | None] = {}
    for agent, context in pairs:
        if context is None:
            by_agent[agent] = None
        elif agent not in by_agent or by_agent[agent] is not None:
            contexts = by_agent.setdefault(agent, [])
            assert contexts is not None
            if context not in contexts:
                contexts.append(context)
    clauses: list[str] = []
    params: list[str] = []
    for agent, contexts in by_agent.items():
        if contexts is None:
            clauses.append(f"{alias}agent = ?")
            params.append(agent)
        elif len(contexts) == 1:
            clauses.append(f"{alias}agent = ? AND {alias}context = ?")
            params.extend((agent, contexts[0]))
        else:
            marks = ", ".join("?" * len(contexts))
            clauses.append(f"{alias}agent = ? AND {alias}context IN ({marks})")
            params.extend((agent, *contexts))
    if len(clauses) == 1:
        return clauses[0], params
    return "(" + " OR ".join(f"({c})" for c in clauses) + ")", params


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


def candidate_facts(
    conn: sqlite3.Connection,
    *sides: Sequence[Candidate],
    weights: RankWeights | None = None,
    known: Mapping[int, Facts] | None = None,
) -> Callable[[ChunkKey], tuple[object, bool]]:
    """``(origin, is_lesson)`` of each candidate key (``knowledge.ranking.origin_weights``):
    from ``known`` (the ``Facts`` a search read with its candidates' rows, by rowid), the
    others read on the first call in one query (never read when nobody asks: inert
    weights). Without ``origins`` (every origin weighted 1.0, so none matters) the origin
    is left ``None``. ``weights``: the search's (``None``: ``NEUTRAL``)."""
    origins = not (weights or NEUTRAL).neutral_origins
    rowids = {c.key: c.rowid for side in sides for c in side}
    known = known or {}
    facts: dict[int, tuple[object, bool]] = {}
    read = [False]

    def load() -> None:
        read[0] = True
        ids = []
        for rowid in dict.fromkeys(rowids.values()):
            found = known.get(rowid)
            if found is None:
                ids.append(rowid)
            else:
                facts[rowid] = (found[0] if origins else None, _is_lesson(found[1]))
        for start in range(0, len(ids), FETCH_BATCH):
            batch = ids[start : start + FETCH_BATCH]
            marks = ", ".join("?" * len(batch))
            sql = f"SELECT c.id, {facts_columns(weights)} FROM chunks AS c WHERE c.id IN ({marks})"  # noqa: S608
            for rowid, origin, kind in conn.execute(sql, batch):
                facts[rowid] = (origin if origins else None, _is_lesson(kind))

    def of(key: ChunkKey) -> tuple[object, bool]:
        if not read[0]:
            load()
        return facts.get(rowids[key], (None, False))

    return of


def _is_lesson(kind: object) -> bool:
    """A ``kind`` read with ``json_extract``: the text itself, or a list as JSON text."""
    if kind == LESSON:
        return True
    if isinstance(kind, str) and kind.startswith("["):
        try:
            values = json.loads(kind)
        except ValueError:
            return False
        return isinstance(values, list) and LESSON in values
    return False
