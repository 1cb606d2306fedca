"""The keyword side's best chunks: ranked by FTS5 alone, then the best rows checked.

Joined to ``chunks`` inside the full-text statement (``KeywordIndex.candidates`` with a
synonym's second ``MATCH``), every row holding a query term is looked up in ``chunks``
(its scope, the search filter, its key) before the best are kept: in a scope of 120,000
chunks a common term's 30,000 rows cost about 10 microseconds each, several times FTS5's
own BM25 ranking of them. Here FTS5 ranks alone (``ranked_sql``: the best rows by the
same ``? * -bm25(...)`` score, every table's with its own statistics, one statement), and
only the best rows are looked up (``check_sql``), more of them while too few pass, until
``limit`` have passed and no row left unread can outrank or tie the weakest of them
(``best_candidates``). What it returns is what the joined statement returns: the same
chunks, the same scores, the same order (score, then ``ChunkKey``).

A search keeps what it read (``SearchReads``): a page left short (by the per-document
cap, or by the floors on the absolute scores) is read again deeper
(``ranking.read_deeper``) from the rows, keys and terms read for the first page, so a
chunk is looked up once per search; FTS5 ranks once more only for rows the first read
did not fetch (where the page is short for sure, it fetched them:
``keyword_index._first_depth``).
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from knowledge.core.model import SearchQuery
from knowledge.core.path_filters import matches_file_patterns, matches_metadata
from knowledge.core.rank_weights import RankWeights

from .candidates import FETCH_BATCH, Candidate, ChunkKey, Facts, facts_columns
from .schema import load_json

__all__ = [
    "Check",
    "Condition",
    "Row",
    "SearchReads",
    "best_candidates",
    "check_rows",
    "check_sql",
    "ranked_sql",
]

Row = tuple[int, float, int]
"""(rowid, score, index of its keyword table in the ranked statement)."""

Check = Callable[[Sequence[Row]], Mapping[int, ChunkKey | None]]
"""The key of each row's chunk if it passes the scope and the filters, else ``None``."""


def ranked_sql(tables: Sequence[str]) -> str:
    """The best rows of ``tables`` for one ``MATCH`` expression, best first, at most
    ``LIMIT ?``: each table's rows scored with its own statistics, as
    ``KeywordIndex.candidates`` scores them. Bound per table: the weight, the headings
    weight, the expression; then the limit."""
    selects = [
        f"SELECT rowid AS id, ? * -bm25({table}, 1.0, ?) AS s, {index} AS t"  # noqa: S608
        f" FROM {table} WHERE {table} MATCH ?"
        for index, table in enumerate(tables)
    ]
    return " UNION ALL ".join(selects) + " ORDER BY s DESC LIMIT ?"


def check_sql(
    rows: int,
    scope_sql: str,
    filter_clause: str,
    *,
    metadata: bool,
    weights: RankWeights | None = None,
) -> str:
    """The chunks among ``rows`` bound ids inside the scope condition (``c.``) and the
    search filter's clause (``" AND (...)"`` or empty), with their key, their facts for
    the search's ``weights`` (``candidates.facts_columns``: read here, the row at hand,
    rather than looked up again for the weights) and, for a metadata filter applied in
    Python, their metadata JSON. Looked up by id (``NOT INDEXED``): the scope's index
    would otherwise be walked for a whole scope's entries."""
    marks = ", ".join("?" * rows)
    columns = f"c.id, c.path, c.chunk_index, c.context, c.agent, {facts_columns(weights)}" + (
        ", c.metadata" if metadata else ""
    )
    return (
        f"SELECT {columns} FROM chunks AS c NOT INDEXED"  # noqa: S608
        f" WHERE c.id IN ({marks}) AND {scope_sql}{filter_clause}"
    )


@dataclass(frozen=True, slots=True)
class Condition:
    """What one keyword table's rows must pass: its scope condition and the search
    filter's clause (``check_sql``), with their bound values."""

    scope_sql: str
    filter_clause: str
    params: tuple[object, ...]


class SearchReads:
    """What one search read from its keyword tables, for its later reads (module
    docstring): the ranked rows and the checked chunks, by the statement and values that
    read them, the checked chunks' facts (``facts``, by rowid: what the weights read,
    ``candidates.candidate_facts``) and the chunks' terms (``KeywordIndex.chunk_terms``).
    One search's, never shared: a later search may see another snapshot."""

    def __init__(self) -> None:
        self._rows: dict[tuple[object, ...], tuple[list[Row], bool]] = {}
        self._keys: dict[tuple[object, ...], dict[int, ChunkKey | None]] = {}
        self._held: dict[frozenset[str] | None, dict[int, AbstractSet[str]]] = {}
        self.facts: dict[int, Facts] = {}

    def rows(
        self, conn: sqlite3.Connection, sql: str, params: Sequence[object], depth: int
    ) -> tuple[list[Row], bool]:
        """At least the best ``depth`` rows (all if fewer match) and whether that is all
        of them; read again (four times deeper at least) only for more than the kept
        read holds."""
        key = (sql, *params)
        kept = self._rows.get(key)
        if kept is not None and (kept[1] or len(kept[0]) >= depth):
            return kept
        if kept is not None:  # read again: FTS5 ranks every row again, so read well deeper
            depth = max(depth, 4 * len(kept[0]))
        # (rowid, score, table): an INTEGER, a REAL and an INTEGER, as SQLite returns them.
        rows: list[Row] = conn.execute(sql, [*params, depth]).fetchall()
        kept = (rows, len(rows) < depth)
        self._rows[key] = kept
        return kept

    def keys(self, *condition: object) -> dict[int, ChunkKey | None]:
        """The checked rows' keys under one set of conditions (``check_rows`` fills it)."""
        return self._keys.setdefault(condition, {})

    def held(self, wanted: frozenset[str] | None) -> dict[int, AbstractSet[str]]:
        """The terms of ``wanted`` (``None``: all) that each chunk read so far holds, by
        rowid (``KeywordIndex.chunk_terms`` fills it)."""
        return self._held.setdefault(wanted, {})


def check_rows(
    conn: sqlite3.Connection,
    rows: Sequence[Row],
    conditions: Sequence[Condition],
    query: SearchQuery,
    keys: dict[int, ChunkKey | None],
    *,
    facts: dict[int, Facts] | None = None,
) -> Mapping[int, ChunkKey | None]:
    """``keys`` completed for ``rows``: each row's chunk key if it passes its table's
    condition and the search's file patterns and metadata filter, else ``None``; the
    facts of each chunk that passes put in ``facts``."""
    unknown: dict[int, list[int]] = {}
    for rowid, _, table in rows:
        if rowid not in keys:
            unknown.setdefault(table, []).append(rowid)
    metadata = bool(query.metadata)
    patterns = query.file_patterns
    for table, rowids in unknown.items():
        condition = conditions[table]
        for start in range(0, len(rowids), FETCH_BATCH):
            batch = rowids[start : start + FETCH_BATCH]
            sql = check_sql(
                len(batch),
                condition.scope_sql,
                condition.filter_clause,
                metadata=metadata,
                weights=query.weights,
            )
            for row in conn.execute(sql, [*batch, *condition.params]):
                rowid, path, chunk_index, context, agent, origin, kind = row[:7]
                if patterns and not matches_file_patterns(path, patterns):
                    continue
                if metadata and not matches_metadata(load_json(row[7]), query.metadata):
                    continue
                keys[rowid] = (path, chunk_index, context, agent)
                if facts is not None:
                    facts[rowid] = (origin, kind)
            for rowid in batch:
                keys.setdefault(rowid, None)
    return keys


def best_candidates(
    read: Callable[[int], tuple[list[Row], bool]], check: Check, limit: int, depth: int
) -> list[Candidate]:
    """The best ``limit`` rows that pass ``check``, best first, ties by key.

    ``read(n)`` gives at least the best ``n`` ranked rows (all if fewer) and whether
    they are all; it is asked for ``depth`` at least. The rows are checked from the best
    down, more while fewer than ``limit`` pass, until the first row not checked scores
    below the ``limit``-th that passed (every later row scores no more, so none can take
    or tie its place) or every row was checked. Scores tie often (BM25 of the same term
    counts in chunks of the same length), so when the next row ties, every row down to
    the first that scores less is checked: the tie is then broken by key. Passing rows
    are ordered by score, then key, as ``ORDER BY s DESC, path, chunk_index, context,
    agent`` orders them."""
    checked = limit
    while True:
        rows, complete = read(max(depth, checked + 1))
        head = rows[:checked]
        keys = check(head)
        passed = sorted(
            (
                Candidate(rowid, key, score)
                for rowid, score, _ in head
                if (key := keys[rowid]) is not None
            ),
            key=lambda c: (-c.score, c.key),
        )
        if complete and len(head) == len(rows):
            return passed[:limit]
        # More rows follow the checked ones (``read`` gave at least one more).
        if len(passed) < limit:
            checked = _deeper(checked, len(passed), limit)
            continue
        boundary = passed[limit - 1].score
        if rows[checked][1] < boundary:
            return passed[:limit]
        checked = _below(rows, boundary, checked)


def _below(rows: Sequence[Row], boundary: float, start: int) -> int:
    """The index of the first of ``rows`` (best first) after ``start`` that scores below
    ``boundary``; ``len(rows)`` when none does (more must be read)."""
    for index in range(start, len(rows)):
        if rows[index][1] < boundary:
            return index
    return len(rows)


def _deeper(checked: int, passed: int, limit: int) -> int:
    """How many rows to check next: twice as many, or as many as the share that passed
    so far says ``limit`` takes, twice over (a filter that passes few rows is not read
    in many small steps)."""
    share = max(passed, 1) / checked
    return max(2 * checked, math.ceil(2 * (limit + 1) / share))
