"""The searched scope's term statistics that the absolute scores weigh terms by.

``knowledge.ranking.relevance`` weighs each query term by its inverse document frequency
over the chunks a search covers: the scope (every context of the agent with
``cross_context``) and the query's shared libraries, the request's other filters not
applied. ``TermStatistics.read`` counts them in the caller's read transaction: the chunks
(the ``chunks`` table's scope prefix) and, per term, the chunks whose indexed terms (text
and headings) hold it, with the count its caller gives (``KeywordIndex.scope_statistics``:
one FTS5 ``MATCH`` per term and keyword table, joined to the scope unless the scope is
every row of its tables, which it tells from the chunk count it is given).

Counting a common term walks its whole posting list, and joined to the scope reads a row
of ``chunks`` for each chunk holding it (about 100 ms for a term in 30,000 of a scope's
120,000 chunks; 1 ms without the join), so the counts are kept: per searched scope and
term, valid for one write generation of each agent involved (``schema.generation``,
bumped by every write transaction of the agent), as the vector cache keeps its
matrices. A search on a newer
snapshot never reads an older count; the cache is bounded in entries, least recently
used out first.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Final

from knowledge.core.model import SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.scope_set import searched_scopes

from .candidates import pairs_condition
from .schema import generation

__all__ = ["MAX_ENTRIES", "TermStatistics"]

MAX_ENTRIES: Final = 20_000
"""Counts kept (a scope's chunk count or one term's), about 200 bytes each."""

Pairs = tuple[tuple[str, str | None], ...]
_Key = tuple[Pairs, str | None]  # a term, or None for the chunk count


class TermStatistics:
    """Counts of the searched scopes' chunks and terms (module docstring)."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._max_entries = max_entries
        self._entries: OrderedDict[_Key, tuple[tuple[int, ...], int]] = OrderedDict()
        self._lock = threading.Lock()

    def read(
        self,
        conn: sqlite3.Connection,
        scope: KnowledgeScope,
        query: SearchQuery,
        terms: Sequence[str],
        count: Callable[[str, int], int],
    ) -> tuple[int, dict[str, int]]:
        """``(chunks, {term: chunks holding it})`` of what a search of ``scope`` covers;
        ``count(term, chunks)`` counts a term that is not kept for the current
        generations, ``chunks`` the searched scopes' chunks."""
        pairs: Pairs = tuple(searched_scopes(scope, query.cross_context, query.shared_libraries))
        agents = sorted({agent for agent, _ in pairs})
        stamp = tuple(generation(conn, agent) for agent in agents)
        chunks = self._cached((pairs, None), stamp)
        if chunks is None:
            scope_sql, params = pairs_condition(list(pairs))
            chunks = int(
                conn.execute(
                    f"SELECT count(*) FROM chunks WHERE {scope_sql}",  # noqa: S608
                    params,
                ).fetchone()[0]
            )
            self._put((pairs, None), stamp, chunks)
        frequencies: dict[str, int] = {}
        for term in dict.fromkeys(terms):
            found = self._cached((pairs, term), stamp) if chunks else 0
            if found is None:
                found = count(term, chunks)
                self._put((pairs, term), stamp, found)
            frequencies[term] = found
        return chunks, frequencies

    def drop_stale(self, agent: str, current: int) -> None:
        """Drop the counts that involve ``agent`` at another generation than ``current``
        (its current one): no search can use them again."""
        with self._lock:
            places: dict[Pairs, int | None] = {}  # where the agent is in a stamp, per pairs
            stale = []
            for key, (stamp, _) in self._entries.items():
                pairs = key[0]
                if pairs not in places:
                    agents = sorted({name for name, _ in pairs})
                    places[pairs] = agents.index(agent) if agent in agents else None
                place = places[pairs]
                if place is not None and stamp[place] != current:
                    stale.append(key)
            for key in stale:
                del self._entries[key]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def _cached(self, key: _Key, stamp: tuple[int, ...]) -> int | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != stamp:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def _put(self, key: _Key, stamp: tuple[int, ...], value: int) -> None:
        if self._max_entries <= 0:
            return
        with self._lock:
            current = self._entries.get(key)
            if current is not None and current[0] > stamp:
                return  # a search on an older snapshot finished late
            self._entries[key] = (stamp, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)
