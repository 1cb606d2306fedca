"""The embedded store's keyword index: FTS5 tables, BM25 candidates, per-agent statistics.

**CJK-aware terms, English stems.** FTS5 cannot call a Python tokenizer, so every chunk
is indexed as the space-joined terms of ``knowledge.ranking.analysis.keyword_terms`` (Korean
morphemes, Han and Kana bigrams, English Snowball stems, no stop words) under FTS5's
``unicode61`` tokenizer with diacritics kept, which splits that text back into exactly
those terms, in the shared table and in every per-agent table alike. The analysis is
recorded in the file (``schema.check_analysis``). A query becomes its distinct terms,
each a quoted FTS5 string, OR-ed (``fts_query``): user input never reaches FTS5 as
syntax. The score is ``-bm25()`` (SQLite's lower-is-better turned around).

**Title and headings.** Every table has two columns: ``terms`` (the chunk's text) and
``headings`` (the terms of its title and heading path, ``headings.heading_context``,
analysed the same way; analysis version 4). ``bm25()`` weighs a match in ``headings``
by ``headings_weight`` against 1.0 for the text (FTS5 column weights: the weight
multiplies that column's term frequency; the row's length is both columns'). A weight
of 0 indexes no headings (``knowledge.ranking.headings``).

**Isolation.** BM25 weighs a term by how many rows of *its table* hold it. With
``isolation="shared"`` (the default) every scope's chunks are rows of one table,
``chunks_fts``, as in OpenSearch's one shared index (docs/architecture.md, "One shared
index"): a score then depends a little on other agents' documents, and an agent can
probe whether some other agent's documents contain a word (a word they hold a lot of
scores near zero). With ``isolation="agent"`` each agent's chunks have their own table,
``chunks_fts_<n>`` (``n`` from ``fts_agents``), so an agent's scores depend on its own
documents only (contexts of one agent share their statistics, as they share
``cross_context`` searches), and each shared library ``_shared/<context>`` has a table of
its own (``knowledge.core.scope_set.statistics_owner``: ``fts_agents`` names the owner), so
a library no caller is granted changes nothing that caller measures. A search that covers
shared libraries (``knowledge.core.scope_set``) is one statement: in the shared table one
scope condition; per agent, the caller's table and each granted library's, one ``SELECT``
each (each its own statistics) joined by ``UNION ALL`` and ranked together. A file built
when the libraries shared ``_shared``'s one table is rebuilt on opening
(``needs_rebuild``). A file remembers its isolation;
opened with the other one, its keyword index is rebuilt from the chunks (``rebuild``), and
a store still open with the old setting (another process) is refused on its next search
or write (``check``) rather than silently searching the other way.

**Large scopes.** Nothing a search does may cost a read of ``chunks`` per chunk that holds
a query term: a common term is in tens of thousands of a large scope's chunks, each row
a random read of the file. FTS5 ranks alone and only the best rows are looked up
(``candidates``, ``ranked_rows``; the synonym case, two expressions summed per chunk,
still joins); a term's chunks are counted by FTS5 alone when the searched scopes are
every row of their tables (``scope_statistics``, ``table_rows``); the page rows are those
of the candidates' documents, found at their first chunks (``page_index``); a chunk's
terms are read for the chunks whose absolute scores a page reads (``chunk_terms``,
``ranking.scores_read``); whether any chunk holds enough of a query to answer is asked
of FTS5 (``holds_any``). Same chunks, scores and order as the joined statements
(``_joined_candidates``), several times faster in a scope of 120,000 chunks
(bench/REPORT.md, "Keyword search at scale")."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Final

from knowledge.core.errors import StoreError
from knowledge.core.model import SearchQuery
from knowledge.core.path_filters import matches_file_patterns, matches_metadata
from knowledge.core.scope import KnowledgeScope
from knowledge.core.scope_set import SHARED_AGENT, searched_scopes, statistics_owner
from knowledge.ranking.analysis import keyword_terms
from knowledge.ranking.headings import DEFAULT_HEADINGS_WEIGHT, heading_terms
from knowledge.ranking.page_signal import (
    PAGE_WEIGHT,
    PageRow,
    PageScores,
    check_page_weight,
    with_pages,
)
from knowledge.ranking.synonym_expansion import SYNONYM_WEIGHT, QueryTerms

from .candidates import FETCH_BATCH, Candidate, ChunkKey, pairs_condition
from .filter_sql import filter_sql
from .page_index import (
    Document,
    add_page,
    create_page_table,
    page_rows,
    page_scores,
    remove_pages,
)
from .ranked_rows import (
    Condition,
    Row,
    SearchReads,
    best_candidates,
    check_rows,
    ranked_sql,
)
from .ranking import DEEPEST
from .schema import load_json
from .term_statistics import TermStatistics

__all__ = [
    "DEFAULT_ISOLATION",
    "ISOLATION_MODES",
    "KeywordIndex",
    "fts_match",
    "fts_query",
    "scope_synonyms",
]

ISOLATION_MODES: Final = ("shared", "agent")
"""Keyword statistics over the whole file (``shared``) or per agent (``agent``)."""

DEFAULT_ISOLATION: Final = "shared"

_SHARED_TABLE: Final = "chunks_fts"
_TABLE_DDL: Final = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5("
    "terms, headings, tokenize = 'unicode61 remove_diacritics 0')"
)


def fts_query(text: str) -> str | None:
    """The FTS5 MATCH expression for ``text``: its distinct terms, each quoted, OR-ed.

    Terms come from ``knowledge.ranking.analysis.keyword_terms``; each is an FTS5 string
    literal (``"``
    doubled), so no operator, column filter, prefix or NEAR group can be expressed.
    ``None`` when the text has no terms (it then matches nothing).
    """
    return fts_match(keyword_terms(text))


def fts_match(terms: Iterable[str]) -> str | None:
    """The FTS5 MATCH expression of already analysed ``terms`` (``fts_query``)."""
    distinct = dict.fromkeys(terms)
    if not distinct:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in distinct)


def term_count_sql(table: str, scope_sql: str | None) -> str:
    """How many rows of ``table`` hold the bound ``MATCH`` expression, those of the
    scope condition (on ``chunks AS c``) only; ``None``: every row, counted by FTS5 alone
    (no row of ``chunks`` is read: ``table_rows``)."""
    if scope_sql is None:
        return f"SELECT count(*) FROM {table} WHERE {table} MATCH ?"  # noqa: S608
    return (
        f"SELECT count(*) FROM {table} CROSS JOIN chunks AS c"  # noqa: S608
        f" ON c.id = {table}.rowid WHERE {table} MATCH ? AND {scope_sql}"
    )


def table_rows(conn: sqlite3.Connection, table: str) -> int:
    """The rows of keyword table ``table``: the rows of its FTS5 ``_docsize`` table, one
    per row and written with it (never deferred to the commit, as the index's totals
    are), a few hundred small pages for 100,000 rows. Every chunk has its row in the
    table of its statistics owner, so searched scopes with as many chunks as their
    tables have rows are every row of them: a term's chunks are then counted by FTS5
    alone (``term_count_sql``)."""
    return int(conn.execute(f'SELECT count(*) FROM "{table}_docsize"').fetchone()[0])  # noqa: S608


def scope_synonyms(conn: sqlite3.Connection, scope: KnowledgeScope) -> str | None:
    """The text of the scope's synonyms (``knowledge.ranking.synonym_expansion``), ``None``
    for none: one primary-key lookup in the search's read transaction."""
    row = conn.execute(
        "SELECT rules FROM synonyms WHERE agent = ? AND context = ?", (scope.agent, scope.context)
    ).fetchone()
    return None if row is None else str(row[0])


def _terms(content: str) -> str:
    return " ".join(keyword_terms(content))


def _matches(terms: QueryTerms) -> list[tuple[float, str]]:
    """The FTS5 ``MATCH`` expressions of a query's terms, each with its weight: the typed
    terms at 1.0, those a synonym added at ``SYNONYM_WEIGHT`` (none without typed terms).
    The chunk side and the page side both score these."""
    match = fts_match(terms.typed)
    if match is None:
        return []
    extra = fts_match(terms.expanded)
    return [(1.0, match)] if extra is None else [(1.0, match), (SYNONYM_WEIGHT, extra)]


def _first_depth(
    conn: sqlite3.Connection, tables: Sequence[str], query: SearchQuery, limit: int
) -> int:
    """How many ranked rows a search's first keyword read fetches: twice ``limit`` (the
    rows that tie with the last are read too), or twice the deepest depth (``DEEPEST``)
    when the tables hold too few documents (page rows) for a full page under the
    per-document cap: the store then reads the candidates of that depth
    (``ranking.read_deeper``, ``deeper_read_same``) from this read (``SearchReads``)
    rather than from FTS5 ranking every row again (as it does when more rows tie with
    the last than were read: reading ``DEEPEST`` and ``limit`` more, FTS5 ranked again
    for 171 of the 200 queries of bench/REPORT.md section 16 in one long document).
    Fetching deeper costs a little on every search, so only where the page is short for
    sure."""
    wanted = query.offset + query.max_results
    documents = sum(page_rows(conn, table) for table in tables)
    short = documents * query.max_chunks_per_document < wanted
    return 2 * max(limit, DEEPEST) if short else 2 * limit


_MASK_TERMS: Final = 62
"""The most wanted terms ``_held_sql`` answers for as the bits of one integer."""


def _held_sql(table: str, terms: int, rows: int) -> str:
    """Which of ``terms`` bound terms (each as ``" term "``) the chunks of ``rows`` bound
    ids of keyword table ``table`` are indexed with, as ``(rowid, bits)``: bit ``i`` set
    when the ``i``-th term is one of the chunk's text or heading terms. Read from the
    table's FTS5 content table (``_content``: ``c0`` the text's terms, ``c1`` the
    headings', each space-joined and none holding a space) by id: scanning the text in
    SQLite rather than splitting it in Python."""
    bits = " | ".join(f"((instr(t, ?) > 0) << {bit})" for bit in range(terms)) or "0"
    marks = ", ".join("?" * rows)
    return (
        f"SELECT id, {bits} FROM (SELECT id, ' ' || c0 || ' ' || c1 || ' ' AS t"  # noqa: S608
        f" FROM {table}_content WHERE id IN ({marks}))"
    )


def _document_of(key: ChunkKey) -> Document:
    """A candidate key's document (``ranking.document_of``)."""
    return key[3], key[2], key[0]


class KeywordIndex:
    """Reads and writes the FTS5 table(s) of one isolation mode (module docstring).

    Holds no state but the mode: table names are looked up in the caller's transaction,
    so a table created by a write that is rolled back is never remembered.
    """

    def __init__(
        self,
        isolation: str,
        headings_weight: float = DEFAULT_HEADINGS_WEIGHT,
        page_weight: float = PAGE_WEIGHT,
    ) -> None:
        self._isolation = isolation
        self._headings_weight = headings_weight
        self._page_weight = check_page_weight(page_weight)

    @property
    def isolation(self) -> str:
        return self._isolation

    def check(self, conn: sqlite3.Connection, display: str) -> None:
        """Raise ``StoreError`` if the file's recorded isolation is no longer this one (the
        file was reopened with the other one by another process): never a silent switch."""
        row = conn.execute("SELECT value FROM meta WHERE key = 'isolation'").fetchone()
        if row is not None and row[0] != self._isolation:
            raise StoreError(
                f"index {display} was switched to isolation={row[0]} by another process; "
                f"this one uses isolation={self._isolation}: restart it with the same setting"
            )

    # --- which table ------------------------------------------------------------------

    def table(
        self, conn: sqlite3.Connection, agent: str, context: str, *, create: bool
    ) -> str | None:
        """The table holding the terms of ``agent/context`` (its statistics owner's,
        ``statistics_owner``); ``None`` if it has none and not ``create``."""
        if self._isolation == "shared":
            return _SHARED_TABLE
        owner = statistics_owner(agent, context)
        row = conn.execute("SELECT id FROM fts_agents WHERE agent = ?", (owner,)).fetchone()
        if row is not None:
            return f"chunks_fts_{int(row[0])}"
        if not create:
            return None
        number = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM fts_agents").fetchone()[0]
        conn.execute("INSERT INTO fts_agents (agent, id) VALUES (?, ?)", (owner, number))
        table = f"chunks_fts_{int(number)}"
        conn.execute(_TABLE_DDL.format(table=table))
        create_page_table(conn, table)
        return table

    # --- writes (inside the caller's write transaction) -------------------------------

    def add(
        self,
        conn: sqlite3.Connection,
        table: str,
        rowid: int,
        content: str,
        metadata: Mapping[str, Any],
    ) -> list[str]:
        """Index one chunk: the terms of its ``content`` and of its title and heading path
        (from its ``metadata``; none with a headings weight of 0). Returns its content's
        terms, for its document's page row (``add_page``)."""
        terms, headings = self.analyse(content, metadata)
        self.insert(conn, table, rowid, terms, headings)
        return terms.split()

    def analyse(self, content: str, metadata: Mapping[str, Any]) -> tuple[str, str]:
        """The indexed text of one chunk: its content's terms and its title's and heading
        path's, each space-joined (``add`` in two steps, so a writer can analyse a
        chunk before it takes the write lock)."""
        headings = " ".join(heading_terms(metadata)) if self._headings_weight > 0 else ""
        return _terms(content), headings

    def insert(
        self, conn: sqlite3.Connection, table: str, rowid: int, terms: str, headings: str
    ) -> None:
        """Index one chunk's analysed text (``analyse``) under its ``rowid``."""
        conn.execute(
            f"INSERT INTO {table} (rowid, terms, headings) VALUES (?, ?, ?)",  # noqa: S608
            (rowid, terms, headings),
        )

    def add_page(self, conn: sqlite3.Connection, table: str, rowid: int, page: PageRow) -> None:
        """Index a document's page row (``page_index``), ``rowid`` its first chunk's id."""
        add_page(conn, table, rowid, page.terms)

    def remove(
        self, conn: sqlite3.Connection, scope: KnowledgeScope, condition: str, params: list[str]
    ) -> None:
        """Drop the terms of the chunks matching ``condition`` (a clause on ``chunks``, inside
        ``scope``)."""
        table = self.table(conn, scope.agent, scope.context, create=False)
        if table is None:
            return
        chunk_ids = f"SELECT id FROM chunks WHERE {condition}"  # noqa: S608
        remove_pages(conn, table, chunk_ids, params)
        conn.execute(f"DELETE FROM {table} WHERE rowid IN ({chunk_ids})", params)  # noqa: S608

    def rebuild(self, conn: sqlite3.Connection) -> None:
        """Empty every keyword table and index every chunk again in this mode's tables."""
        for (number,) in conn.execute("SELECT id FROM fts_agents").fetchall():
            conn.execute(f"DROP TABLE IF EXISTS chunks_fts_{int(number)}")
            conn.execute(f"DROP TABLE IF EXISTS pages_fts_{int(number)}")
        conn.execute("DELETE FROM fts_agents")
        conn.execute("DELETE FROM chunks_fts")
        create_page_table(conn, "chunks_fts")
        conn.execute("DELETE FROM pages_fts")
        tables: dict[str, str] = {}
        page: tuple[str, int, str] | None = None  # (doc_id, first chunk id, table)
        page_terms = PageRow()
        rows = conn.execute(
            "SELECT id, doc_id, agent, context, content, metadata FROM chunks"
            " ORDER BY doc_id, chunk_index"
        )
        for batch in iter(lambda: rows.fetchmany(FETCH_BATCH), []):
            for rowid, doc_id, agent, context, content, metadata in batch:
                owner = statistics_owner(agent, context)
                table = tables.get(owner)
                if table is None:
                    table = tables[owner] = self.table(conn, agent, context, create=True) or ""
                if page is None or page[0] != doc_id:
                    if page is not None:
                        add_page(conn, page[2], page[1], page_terms.terms)
                    page, page_terms = (doc_id, rowid, table), PageRow()
                page_terms.add(self.add(conn, table, rowid, content, load_json(metadata)))
        if page is not None:
            add_page(conn, page[2], page[1], page_terms.terms)

    def needs_rebuild(self, conn: sqlite3.Connection) -> bool:
        """Whether a per-agent file still keeps every shared library in the one table of
        ``_shared`` (as files built before each library had its own did)."""
        if self._isolation == "shared":
            return False
        found = conn.execute("SELECT 1 FROM fts_agents WHERE agent = ?", (SHARED_AGENT,))
        return found.fetchone() is not None

    # --- reads --------------------------------------------------------------------------

    def _tables_of(
        self, conn: sqlite3.Connection, agent: str, context: str | None
    ) -> list[tuple[str, str | None]]:
        """The existing tables holding ``agent/context`` (``context`` ``None``: every context
        of the agent), each with the context it is searched for there: one table, except
        for every context of ``_shared`` under agent isolation (one per library)."""
        if context is not None or self._isolation == "shared" or agent != SHARED_AGENT:
            table = self.table(conn, agent, context or "", create=False)
            return [] if table is None else [(table, context)]
        prefix = f"{SHARED_AGENT}/"
        rows = conn.execute(
            "SELECT agent, id FROM fts_agents WHERE substr(agent, 1, ?) = ? ORDER BY id",
            (len(prefix), prefix),
        ).fetchall()
        return [(f"chunks_fts_{int(number)}", owner[len(prefix) :]) for owner, number in rows]

    def _groups(
        self, conn: sqlite3.Connection, scope: KnowledgeScope, query: SearchQuery
    ) -> dict[str, list[tuple[str, str | None]]]:
        """The searched scope pairs by the table holding them (``_tables_of``)."""
        groups: dict[str, list[tuple[str, str | None]]] = {}
        for agent, context in searched_scopes(scope, query.cross_context, query.shared_libraries):
            for table, searched in self._tables_of(conn, agent, context):
                groups.setdefault(table, []).append((agent, searched))
        return groups

    def scope_statistics(
        self,
        conn: sqlite3.Connection,
        scope: KnowledgeScope,
        query: SearchQuery,
        terms: Sequence[str],
        statistics: TermStatistics,
    ) -> tuple[int, dict[str, int]]:
        """The chunks a search of ``scope`` covers (its shared libraries too, the filters
        not applied) and, per term, how many of them hold it: what the absolute scores'
        term weights are computed over (``knowledge.ranking.relevance``), counted or kept
        by ``statistics``."""
        groups: dict[str, list[tuple[str, str | None]]] | None = None
        whole: bool | None = None

        def count(term: str, chunks: int) -> int:
            # The searched chunks whose indexed terms hold ``term``, over every table:
            # FTS5's own count when the searched chunks are every row of their tables.
            nonlocal groups, whole
            if groups is None:
                groups = self._groups(conn, scope, query)
            if whole is None:
                whole = chunks == sum(table_rows(conn, table) for table in groups)
            total = 0
            for table, pairs in groups.items():
                pairs_sql, params = (None, []) if whole else pairs_condition(pairs, "c.")
                total += int(
                    conn.execute(
                        term_count_sql(table, pairs_sql), [fts_match([term]), *params]
                    ).fetchone()[0]
                )
            return total

        return statistics.read(conn, scope, query, terms, count)

    def holds_any(
        self,
        conn: sqlite3.Connection,
        scope: KnowledgeScope,
        query: SearchQuery,
        term_sets: Sequence[frozenset[str]],
    ) -> bool:
        """Whether a chunk of the searched tables holds every term of one of
        ``term_sets`` (``ranking.answering_term_sets``): one FTS5 ``AND`` query per set
        and table, stopping at the first row found. Rows of other scopes sharing a
        table count too, so ``False`` is certain for the searched scopes and ``True``
        only possible."""
        tables = list(self._groups(conn, scope, query))
        for terms in term_sets:
            if not terms:
                return True
            match = " AND ".join('"' + term.replace('"', '""') + '"' for term in sorted(terms))
            for table in tables:
                sql = f"SELECT 1 FROM {table} WHERE {table} MATCH ? LIMIT 1"  # noqa: S608
                if conn.execute(sql, (match,)).fetchone() is not None:
                    return True
        return False

    def chunk_terms(
        self,
        conn: sqlite3.Connection,
        candidates: Iterable[Candidate],
        *,
        wanted: Collection[str] | None = None,
        reads: SearchReads | None = None,
    ) -> dict[ChunkKey, AbstractSet[str]]:
        """The terms each candidate's chunk is indexed with (its text's and its headings'),
        by key, read from the table holding its scope: all of them, or with ``wanted``
        those of ``wanted`` only (what ``QueryWeights.coverage`` asks about: no set of
        every term is built; ``_held_sql`` says which in the statement). Kept in
        ``reads`` (``SearchReads.held``) for the search's later reads, so a page read
        deeper reads only the candidates it adds."""
        choice = None if wanted is None else frozenset(wanted)
        held = {} if reads is None else reads.held(choice)
        tables: dict[tuple[str, str], str | None] = {}
        by_table: dict[str, list[int]] = {}
        for candidate in candidates:
            if candidate.rowid in held:
                continue
            scope = candidate.key[3], candidate.key[2]
            if scope not in tables:
                tables[scope] = self.table(conn, *scope, create=False)
            table = tables[scope]
            if table is not None:
                by_table.setdefault(table, []).append(candidate.rowid)
        order = None if choice is None or len(choice) > _MASK_TERMS else sorted(choice)
        sets: dict[int, frozenset[str]] = {}
        for table, rowids in by_table.items():
            for start in range(0, len(rowids), FETCH_BATCH):
                batch = rowids[start : start + FETCH_BATCH]
                if order is None:
                    marks = ", ".join("?" * len(batch))
                    rows = conn.execute(
                        f"SELECT id, c0, c1 FROM {table}_content WHERE id IN ({marks})",  # noqa: S608
                        batch,
                    )
                    for rowid, terms, headings in rows:
                        indexed = terms.split() + headings.split()
                        held[rowid] = (
                            frozenset(indexed) if choice is None else choice.intersection(indexed)
                        )
                    continue
                sql = _held_sql(table, len(order), len(batch))
                for rowid, mask in conn.execute(sql, [*(f" {t} " for t in order), *batch]):
                    found = sets.get(mask)
                    if found is None:
                        found = sets[mask] = frozenset(
                            term for bit, term in enumerate(order) if mask >> bit & 1
                        )
                    held[rowid] = found
        return {c.key: held[c.rowid] for c in candidates if c.rowid in held}

    def side(
        self,
        conn: sqlite3.Connection,
        scope: KnowledgeScope,
        query: SearchQuery,
        terms: QueryTerms,
        limit: int,
        *,
        reads: SearchReads | None = None,
    ) -> tuple[list[Candidate], PageScores[ChunkKey, Document]]:
        """The keyword side of a search: the best ``limit`` chunks (``candidates``), each
        scored with its page's part (``knowledge.ranking.page_signal``), best first, ties
        by key; and the two parts, for the trace. Both parts score the same ``terms``
        (the typed ones and those a synonym added, at ``SYNONYM_WEIGHT``). ``reads``:
        what this search read before (``ranked_rows.SearchReads``)."""
        chunks = self.candidates(conn, scope, query, terms, limit, reads=reads)
        pages = with_pages(
            {c.key: c.score for c in chunks},
            self.page_scores(conn, scope, query, terms, chunks) if self._page_weight else {},
            _document_of,
            self._page_weight,
        )
        combined = pages.combined()
        ranked = sorted(chunks, key=lambda c: (-combined[c.key], c.key))
        return [Candidate(c.rowid, c.key, combined[c.key]) for c in ranked], pages

    def page_scores(
        self,
        conn: sqlite3.Connection,
        scope: KnowledgeScope,
        query: SearchQuery,
        terms: QueryTerms,
        candidates: list[Candidate],
    ) -> dict[Document, float]:
        """The page rows' scores of the candidates' documents (``page_index``), by
        ``(agent, context, path)``, each table's with its own statistics."""
        matches = _matches(terms)
        if not candidates or not matches:
            return {}
        return page_scores(conn, self._groups(conn, scope, query), matches, candidates)

    def candidates(
        self,
        conn: sqlite3.Connection,
        scope: KnowledgeScope,
        query: SearchQuery,
        terms: QueryTerms,
        limit: int,
        *,
        reads: SearchReads | None = None,
    ) -> list[Candidate]:
        """The best ``limit`` chunks of the scope and the query's shared libraries for
        ``terms`` that pass the filters, best first, ties by ``ChunkKey``. With per-agent
        tables, one ``SELECT`` per table (each its own statistics,
        ``knowledge.core.scope_set``) joined by ``UNION ALL`` and ranked together. Without
        terms a synonym added, FTS5 ranks first and the best rows are checked against
        the scope and the filters after (``ranked_rows``, reusing ``reads``). Terms a
        synonym added (``terms.expanded``) are a second ``MATCH`` of each table whose
        ``bm25()`` counts ``SYNONYM_WEIGHT``: FTS5's BM25 is a sum over the query's
        phrases, so a chunk's score is that of its typed terms plus ``SYNONYM_WEIGHT``
        times that of its added ones, as in the other stores (``_matches``), each
        chunk's two scores summed in one statement joined to ``chunks``."""
        matches = _matches(terms)
        if not matches:
            return []
        extra = len(matches) > 1
        groups = self._groups(conn, scope, query)
        if not groups:
            return []
        filter_clause, filter_params = "", list[object]()
        if query.filter is not None:
            condition, filter_params = filter_sql(query.filter)  # values are bound
            filter_clause = f" AND ({condition})"
        if extra:
            return self._joined_candidates(
                conn,
                groups,
                query,
                matches,
                search_filter=(filter_clause, filter_params),
                limit=limit,
            )
        conditions = []
        for pairs in groups.values():
            scope_sql, params = pairs_condition(pairs, "c.")
            conditions.append(Condition(scope_sql, filter_clause, (*params, *filter_params)))
        return self._ranked_candidates(
            conn, list(groups), conditions, query, matches[0], limit=limit, reads=reads
        )

    def _joined_candidates(
        self,
        conn: sqlite3.Connection,
        groups: dict[str, list[tuple[str, str | None]]],
        query: SearchQuery,
        matches: list[tuple[float, str]],
        *,
        search_filter: tuple[str, list[object]],
        limit: int,
    ) -> list[Candidate]:
        """``candidates`` in one statement joined to ``chunks``: every matching row's
        chunk read for its scope, filter and key, the best kept (``ORDER BY``). What a
        search with a synonym's terms runs (each chunk's scores summed); for one
        expression it returns what ``_ranked_candidates`` returns, only slower."""
        filter_clause, filter_params = search_filter
        extra = len(matches) > 1
        selects: list[str] = []
        bound: list[object] = []
        # Inside the GROUP BY's subquery SQLite would otherwise walk ``chunks`` and probe
        # the FTS table per row (seconds on 10,000 chunks): CROSS JOIN keeps FTS outer.
        join = "CROSS JOIN" if extra else "JOIN"
        for table, pairs in groups.items():
            scope_sql, params = pairs_condition(pairs, "c.")
            for weight, expression in matches:
                selects.append(
                    "SELECT c.id AS id, c.path AS path, c.chunk_index AS chunk_index,"  # noqa: S608
                    " c.context AS context, c.agent AS agent, c.metadata AS metadata,"
                    f" ? * -bm25({table}, 1.0, ?) AS s"
                    f" FROM {table} {join} chunks AS c ON c.id = {table}.rowid"
                    f" WHERE {table} MATCH ? AND {scope_sql}{filter_clause}"
                )
                bound.extend((weight, self._headings_weight, expression, *params, *filter_params))
        union = " UNION ALL ".join(selects)
        if extra:  # a chunk matched by both: the sum of its two scores
            union = (
                "SELECT id, path, chunk_index, context, agent, metadata, sum(s) AS s"  # noqa: S608
                f" FROM ({union}) GROUP BY id"
            )
        sql = union + " ORDER BY s DESC, path, chunk_index, context, agent"
        # The search filter is part of the SQL (filter_sql), so only these are left to Python.
        filtered = bool(query.file_patterns or query.metadata)
        # Without filters every row is a candidate, so SQLite can stop at the limit.
        cursor = (
            conn.execute(sql, bound)
            if filtered
            else conn.execute(sql + " LIMIT ?", [*bound, limit])
        )
        found: list[Candidate] = []
        while len(found) < limit and (batch := cursor.fetchmany(FETCH_BATCH)):
            for rowid, path, chunk_index, context, agent, metadata, score in batch:
                if not matches_file_patterns(path, query.file_patterns):
                    continue
                if query.metadata and not matches_metadata(load_json(metadata), query.metadata):
                    continue
                found.append(Candidate(rowid, (path, chunk_index, context, agent), float(score)))
                if len(found) == limit:
                    break
        cursor.close()
        return found

    def _ranked_candidates(
        self,
        conn: sqlite3.Connection,
        tables: list[str],
        conditions: list[Condition],
        query: SearchQuery,
        match: tuple[float, str],
        *,
        limit: int,
        reads: SearchReads | None,
    ) -> list[Candidate]:
        """``candidates`` for one ``MATCH`` expression: ranked by FTS5 alone, the best rows
        checked against each table's condition after (``ranked_rows.best_candidates``),
        the first read as deep as ``_first_depth`` says."""
        weight, expression = match
        reads = reads or SearchReads()
        sql = ranked_sql(tables)
        params = [value for _ in tables for value in (weight, self._headings_weight, expression)]
        keys = reads.keys(sql, *params)

        def read(depth: int) -> tuple[list[Row], bool]:
            return reads.rows(conn, sql, params, depth)

        def check(rows: Sequence[Row]) -> Mapping[int, ChunkKey | None]:
            return check_rows(conn, rows, conditions, query, keys, facts=reads.facts)

        return best_candidates(read, check, limit, _first_depth(conn, tables, query, limit))
