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
``MATCH`` summed in as on the chunk side (``knowledge.ranking.synonyms``).

A search reads the pages of its keyword candidates' documents only, with the same scope
condition as the candidates (``pairs_condition``) and their paths named, so what the
filters kept out is never read and never sets the best page's score.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from .candidates import Candidate, pairs_condition
from .schema import PAGE_TABLE_DDL

__all__ = ["add_page", "create_page_table", "page_scores", "page_table", "remove_pages"]


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
    table's pages read with its own statistics."""
    paths = sorted({c.key[0] for c in candidates})
    if not paths:
        return {}
    wanted = {(c.key[3], c.key[2], c.key[0]) for c in candidates}
    scores: dict[Document, float] = {}
    marks = ", ".join("?" * len(paths))
    for chunk_table, pairs in groups.items():
        table = page_table(chunk_table)
        if not _exists(conn, table):
            continue
        scope_sql, params = pairs_condition(pairs, "c.")
        for weight, match in matches:
            # The matching pages first (one full-text query), then their chunks' scope and
            # path: joined the other way SQLite would run the query once per chunk.
            rows = conn.execute(
                f"WITH p AS MATERIALIZED (SELECT rowid AS id, -bm25({table}) AS s"  # noqa: S608
                f" FROM {table} WHERE {table} MATCH ?)"
                " SELECT c.agent, c.context, c.path, p.s FROM p JOIN chunks AS c ON c.id = p.id"
                f" WHERE {scope_sql} AND c.path IN ({marks})",
                [match, *params, *paths],
            )
            for agent, context, path, score in rows:
                if (agent, context, path) in wanted:
                    key = (agent, context, path)
                    scores[key] = scores.get(key, 0.0) + weight * float(score)
    return scores
