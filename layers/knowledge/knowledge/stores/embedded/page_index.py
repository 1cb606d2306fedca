"""The embedded store's page rows: one FTS5 row per document (``knowledge.ranking.page_signal``).

Beside each keyword table of chunks (``chunks_fts``, or ``chunks_fts_<n>`` per statistics
owner under agent isolation: each agent, and each shared library on its own,
``keyword_index``) is a table of pages, ``pages_fts`` (``pages_fts_<n>``), created,
dropped and rebuilt with it (``KeywordIndex.table``, ``rebuild``), one column
``terms``: the document's text terms, every chunk's ``keyword_terms`` in chunk order, as
the chunks hold them (no headings: a title repeated on every chunk would count once per
chunk). Its rowid is the id of the document's first chunk, so the page goes with its
chunks: deleted by the same chunk condition, before them, and ``UNIQUE`` as chunk ids are.
BM25 is taken over the pages of that table, as the chunks' over its chunks, for the same
terms: the typed ones, and those a scope's synonym added at ``SYNONYM_WEIGHT``, a second
``MATCH`` summed in as on the chunk side (``knowledge.ranking.synonym_expansion``).

A search reads the pages of its keyword candidates' documents only, so what the filters
kept out is never read and never sets the best page's score. A page is found by its
document's first chunk (``first_pages``): the chunk with the lowest index, one entry of
the scope's index per document, whose id is the page's rowid when the document's chunks
were written in order (as the pipeline and ``rebuild`` write them); the pages at those ids
are scored by one full-text query (``first_page_sql``), ``bm25()`` computed only for
them. A document whose page is not at that id (its chunks were written out of order, or
it has no page) is read as before, from ``chunks`` (``page_sql``), one of two ways, the
same rows and scores either way: every matching page scored and its chunk looked up by
id, or the candidate documents' chunks walked in the scope's index and only their pages
scored and looked up. A lookup of a chunk's row costs about ten entries of the index,
and scoring a page reads its terms' positions, so the index is walked when the candidate
documents have at most ``_WALK_FACTOR`` times as many chunks as the table has pages
(``walk_chunks``). Where 2,000 short documents hold a common term, their first chunks
cost 30 entries of the index where the walk read some 2,000 (bench/REPORT.md, section
16).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Final

from .candidates import Candidate, pairs_condition
from .schema import PAGE_TABLE_DDL

__all__ = [
    "add_page",
    "create_page_table",
    "first_page_sql",
    "first_pages",
    "page_rows",
    "page_scores",
    "page_sql",
    "page_table",
    "remove_pages",
    "walk_chunks",
]

_WALK_FACTOR: Final = 8
"""Index entries walked per page of the table that cost about what scoring every matching
page and looking it up does (a lookup is about ten entries)."""


Document = tuple[str, str, str]
"""(agent, context, path): ``ranking.document_of`` of a candidate key."""


def page_table(chunk_table: str) -> str:
    """The page table beside a chunk table (``chunks_fts`` -> ``pages_fts``)."""
    return "pages" + chunk_table.removeprefix("chunks")


def create_page_table(conn: sqlite3.Connection, chunk_table: str) -> None:
    conn.execute(PAGE_TABLE_DDL.format(table=page_table(chunk_table)))


def add_page(conn: sqlite3.Connection, chunk_table: str, rowid: int, terms: Iterable[str]) -> None:
    """Index one document's page row (``rowid``: its first chunk's id)."""
    text = " ".join(term for term in terms if term)
    if text:
        conn.execute(
            f"INSERT INTO {page_table(chunk_table)} (rowid, terms) VALUES (?, ?)",  # noqa: S608
            (rowid, text),
        )


def remove_pages(
    conn: sqlite3.Connection, chunk_table: str, chunk_ids: str, params: list[str]
) -> None:
    """Drop the page rows of the documents whose chunks ``chunk_ids`` selects."""
    if _exists(conn, page_table(chunk_table)):
        conn.execute(
            f"DELETE FROM {page_table(chunk_table)} WHERE rowid IN ({chunk_ids})",  # noqa: S608
            params,
        )


def page_rows(conn: sqlite3.Connection, chunk_table: str) -> int:
    """The page rows beside ``chunk_table`` (about its documents; 0 without a page
    table): the rows of the page table's FTS5 ``_docsize`` table, a few small pages."""
    table = page_table(chunk_table)
    if not _exists(conn, table):
        return 0
    return int(conn.execute(f'SELECT count(*) FROM "{table}_docsize"').fetchone()[0])  # noqa: S608


def _exists(conn: sqlite3.Connection, table: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).fetchone()
    return row is not None


def page_scores(
    conn: sqlite3.Connection,
    groups: dict[str, list[tuple[str, str | None]]],
    matches: Sequence[tuple[float, str]],
    candidates: Sequence[Candidate],
) -> dict[Document, float]:
    """The page rows' scores of the candidates' documents, by ``(agent, context, path)``:
    for each ``(weight, expression)`` of ``matches`` (the typed terms at 1.0, those a
    synonym added at ``SYNONYM_WEIGHT``: ``keyword_index._matches``, as the chunks are
    scored) ``weight * -bm25()`` of the rows that match it, summed. ``groups`` maps each
    chunk table to the scope pairs searched in it (``KeywordIndex._groups``), each
    table's pages read with its own statistics: found by the documents' first chunks,
    the others read from ``chunks`` (module docstring)."""
    wanted = sorted({(c.key[3], c.key[2], c.key[0]) for c in candidates})
    scores: dict[Document, float] = {}
    for chunk_table, pairs in groups.items():
        table = page_table(chunk_table)
        documents = [d for d in wanted if _searched(pairs, d)]
        if not documents or not _exists(conn, table):
            continue
        firsts, elsewhere = first_pages(conn, table, documents)
        read = _read_pages(conn, table, pairs, elsewhere, matches) if elsewhere else {}
        for weight, match in matches:
            if firsts:
                for rowid, score in conn.execute(*first_page_sql(table, list(firsts), match)):
                    key = firsts[rowid]
                    scores[key] = scores.get(key, 0.0) + weight * float(score)
        for key, score in read.items():
            scores[key] = scores.get(key, 0.0) + score
    return scores


def _searched(pairs: Sequence[tuple[str, str | None]], document: Document) -> bool:
    """Whether ``document`` is in one of the scope ``pairs`` (``pairs_condition``)."""
    agent, context, _ = document
    return any(agent == a and (c is None or context == c) for a, c in pairs)


def first_pages(
    conn: sqlite3.Connection, table: str, documents: Sequence[Document]
) -> tuple[dict[int, Document], set[Document]]:
    """The page rowids of ``documents`` in page table ``table`` found at their first
    chunk (the lowest chunk index: one entry of the ``chunks`` key index each), by
    rowid; and the documents without a page row at that id (module docstring)."""
    values = ", ".join("(?, ?, ?)" for _ in documents)
    sql = (
        f'SELECT agent, context, path, first, first IN (SELECT id FROM "{table}_docsize")'  # noqa: S608
        " FROM (SELECT d.column1 AS agent, d.column2 AS context, d.column3 AS path,"
        " (SELECT g.id FROM chunks AS g WHERE g.agent = d.column1"
        " AND g.context = d.column2 AND g.path = d.column3"
        " ORDER BY g.chunk_index LIMIT 1) AS first"
        f" FROM (VALUES {values}) AS d)"
    )
    firsts: dict[int, Document] = {}
    elsewhere: set[Document] = set()
    for agent, context, path, first, paged in conn.execute(sql, [v for d in documents for v in d]):
        if first is not None and paged:
            firsts[first] = (agent, context, path)
        else:
            elsewhere.add((agent, context, path))
    return firsts, elsewhere


def first_page_sql(table: str, rowids: Sequence[int], match: str) -> tuple[str, list[object]]:
    """The statement (and its values) of the scores of page table ``table``'s rows among
    ``rowids`` that match ``match``, as ``(rowid, score)``: the ``+`` keeps SQLite from
    handing the ids to FTS5 as rowid lookups (each would count the query's terms again),
    and ``bm25()`` is computed only for the rows the ``WHERE`` keeps, weighing each term
    over every row of the table."""
    marks = ", ".join("?" * len(rowids))
    return (
        f"SELECT rowid, -bm25({table}) FROM {table}"  # noqa: S608
        f" WHERE {table} MATCH ? AND +rowid IN ({marks})",
        [match, *rowids],
    )


def _read_pages(
    conn: sqlite3.Connection,
    table: str,
    pairs: Sequence[tuple[str, str | None]],
    documents: set[Document],
    matches: Sequence[tuple[float, str]],
) -> dict[Document, float]:
    """The page scores of ``documents`` (``page_scores``) read from ``chunks``
    (``page_sql``, walked or looked up as ``walk_chunks`` says)."""
    paths = sorted({path for _, _, path in documents})
    walk = walk_chunks(conn, table, pairs, paths)
    scope = pairs_condition(pairs, "c.")
    scores: dict[Document, float] = {}
    for weight, match in matches:
        rows = conn.execute(*page_sql(table, scope, paths, match, walk=walk))
        for agent, context, path, score in rows:
            if (agent, context, path) in documents:
                key = (agent, context, path)
                scores[key] = scores.get(key, 0.0) + weight * float(score)
    return scores


def page_sql(
    table: str,
    scope: tuple[str, Sequence[object]],
    paths: Sequence[str],
    match: str,
    *,
    walk: bool,
) -> tuple[str, list[object]]:
    """The statement (and its values) of the scores of page table ``table``'s rows that
    match ``match`` and whose document is in the scope condition (on ``chunks AS c``,
    with its values) at one of ``paths``, as ``(agent, context, path, score)``.

    Without ``walk`` the matching pages are scored first (``MATERIALIZED``: inside a
    join SQLite would run the full-text query once per chunk), then each one's chunk is
    looked up by id. With ``walk`` the ids of the candidate documents' chunks are read
    from the scope's index first (SQLite keeps them in a temporary index), and only the
    matching pages among them are scored and looked up: a row's ``bm25()`` is computed
    only for a row the ``WHERE`` keeps, and the ``+`` keeps SQLite from handing the ids
    to FTS5 as rowid lookups (each would count the query's terms again). ``bm25()``
    weighs a term over every row of the table either way."""
    marks = ", ".join("?" * len(paths))
    scope_sql, params = scope
    if not walk:
        return (
            f"WITH p AS MATERIALIZED (SELECT rowid AS id, -bm25({table}) AS s"  # noqa: S608
            f" FROM {table} WHERE {table} MATCH ?)"
            " SELECT c.agent, c.context, c.path, p.s FROM p JOIN chunks AS c ON c.id = p.id"
            f" WHERE {scope_sql} AND c.path IN ({marks})",
            [match, *params, *paths],
        )
    return (
        f"WITH p AS MATERIALIZED (SELECT rowid AS id, -bm25({table}) AS s FROM {table}"  # noqa: S608
        f" WHERE {table} MATCH ? AND +rowid IN (SELECT c.id FROM chunks AS c"
        f" WHERE {scope_sql} AND c.path IN ({marks})))"
        " SELECT c.agent, c.context, c.path, p.s FROM p JOIN chunks AS c ON c.id = p.id",
        [match, *params, *paths],
    )


def walk_chunks(
    conn: sqlite3.Connection,
    table: str,
    pairs: Sequence[tuple[str, str | None]],
    paths: Sequence[str],
) -> bool:
    """Whether ``page_sql`` had better walk the candidate documents' chunks (module
    docstring): their chunks (``documents.chunk_count``) against the pages of
    ``table``, each a row of its ``_docsize`` table."""
    scope_sql, params = pairs_condition(pairs, "d.")
    marks = ", ".join("?" * len(paths))
    chunks = conn.execute(
        "SELECT coalesce(sum(d.chunk_count), 0) FROM documents AS d"  # noqa: S608
        f" WHERE {scope_sql} AND d.path IN ({marks})",
        [*params, *paths],
    ).fetchone()[0]
    pages = conn.execute(f'SELECT count(*) FROM "{table}_docsize"').fetchone()[0]  # noqa: S608
    return int(chunks) <= _WALK_FACTOR * int(pages)
