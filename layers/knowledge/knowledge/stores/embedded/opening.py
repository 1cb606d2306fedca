"""Opening the embedded store's file: checks, schema upgrades, identity and isolation.

``open_file`` refuses a file that is not an index or is damaged (``ConfigurationError``
naming it, and saying that deleting it rebuilds the index), creates or upgrades the
schema, refuses keyword terms made by another analysis and vectors made by another
embedder (``mismatch_error``), and settles the keyword index's isolation (rebuilt when the
file was built with the other one), all in one transaction. A new file is made with
incremental vacuum, and one made without it is converted once (``maintenance``), so the
pages a deleted document frees can be given back.
"""

from __future__ import annotations

import logging
import sqlite3

from knowledge.core.errors import ConfigurationError, EmbeddingMismatchError

from .connections import (
    MEMORY,
    ConnectionPool,
    DamagedFileError,
    check_file,
    damage_advice,
    is_damage,
)
from .keyword_index import KeywordIndex
from .maintenance import convert, prepare
from .schema import (
    KEYWORD_ONLY,
    Identity,
    check_analysis,
    create_or_upgrade,
    recorded_identity,
)

__all__ = ["mismatch_error", "open_file"]

logger = logging.getLogger("knowledge.stores.embedded.store")


def open_file(
    pool: ConnectionPool,
    display: str,
    keywords: KeywordIndex,
    identity: Identity,
    *,
    with_vectors: bool,
) -> None:
    """Open, check and settle the file (module docstring); ``ConfigurationError`` if unusable."""
    conn = pool.acquire()
    try:
        if display != MEMORY:
            check_file(conn)  # before anything is written to a damaged file
            prepare(conn)  # before the first table, or never
        # Persistent in the file. Where WAL is impossible (some network file systems)
        # SQLite keeps its rollback journal: still atomic, readers just wait more.
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            create_or_upgrade(conn, display)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        check_analysis(conn, display)
        if with_vectors:
            recorded = recorded_identity(conn)
            if recorded is not None and recorded != identity:
                raise mismatch_error(display, recorded, identity)
        _settle_isolation(conn, keywords, display)
        conn.execute("COMMIT")
        if display != MEMORY:
            convert(conn, pool.target, display)
    except DamagedFileError as exc:
        raise ConfigurationError(_refusal(display, exc.not_a_database, str(exc))) from exc
    except sqlite3.Error as exc:
        if is_damage(exc):
            raise ConfigurationError(
                _refusal(display, exc.sqlite_errorcode == sqlite3.SQLITE_NOTADB, str(exc))
            ) from exc
        raise ConfigurationError(f"cannot open the index file {display}: {exc}") from exc
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        pool.release(conn)


def _refusal(display: str, not_a_database: bool, found: str) -> str:
    if not_a_database:
        return (
            f"{display} is not an index file (not an SQLite database: {found}); "
            "use --db with another file (or delete it if it is a damaged index: the "
            "index is rebuilt from the folder)"
        )
    return f"{damage_advice(display)} ({found})"


def _settle_isolation(conn: sqlite3.Connection, keywords: KeywordIndex, display: str) -> None:
    """Record the isolation in a new file; rebuild the keyword index of a file that was
    built with the other one (a version 1 file was built shared)."""
    wanted = keywords.isolation
    row = conn.execute("SELECT value FROM meta WHERE key = 'isolation'").fetchone()
    has_chunks = conn.execute("SELECT EXISTS (SELECT 1 FROM chunks)").fetchone()[0]
    recorded = row[0] if row is not None else ("shared" if has_chunks else wanted)
    if recorded != wanted:
        logger.warning(
            "index %s: rebuilding the keyword index for isolation=%s (was %s)",
            display,
            wanted,
            recorded,
        )
        keywords.rebuild(conn)
    elif keywords.needs_rebuild(conn):
        logger.warning(
            "index %s: rebuilding the keyword index: one table per shared library", display
        )
        keywords.rebuild(conn)
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('isolation', ?)", (wanted,))


def mismatch_error(display: str, recorded: Identity, wanted: Identity) -> EmbeddingMismatchError:
    """The refusal of a file whose vectors (or keyword-only chunks) ``wanted`` would not match."""
    refused = (
        "to write chunks without vectors (the store has no embedder)"
        if wanted == KEYWORD_ONLY
        else wanted.describe()
    )
    return EmbeddingMismatchError(
        f"index {display} was built {recorded.built_with()}; refusing {refused}. "
        "Use --db with another file or reindex into a new one"
    )
