"""The embedded store's file: its tables, its version, and what it records about itself.

Tables (schema version 3):

- ``documents``: the per-document record: scope, path, ``source_type``, ``size``
  (bytes), ``chunk_count``, ``version`` (S3 version id or ``None``), ``content_hash``,
  ``indexed_at``, document metadata, and how many of its chunks were embedded or kept
  their vector at its last write (``embedded_chunks`` / ``reused_chunks``);
- ``chunks``: scope, path, index, content, metadata JSON, vector (unit float32 BLOB),
  ``embedding_key`` (``identity.embedding_key`` of the text embedded and the embedder:
  a later version of the document reuses the vector of a chunk with the same key);
- ``unread_files``: per scope and extension, how many files no pattern selects
  (``IndexStatus.unread_files``);
- ``synonyms``: per scope, the text of its synonyms file (``knowledge.ranking.synonym_expansion``);
- ``problems``: per scope and path, why the latest attempt to index it was skipped or
  failed (``WriteSession.record_problem``); the indexed version, if any, stays;
- ``chunks_fts`` and, with ``isolation="agent"``, one ``chunks_fts_<n>`` per agent and
  per shared library (listed in ``fts_agents``): the keyword index (``keyword_index``);
- ``generations``: per agent, a counter every write transaction bumps, which tells cached
  vectors from stale ones, also across processes (``vector_search``);
- ``meta``: schema version, keyword analysis, embedder identity, keyword isolation.

A version 1 file (no records, problems or per-agent generations) or a version 2 file (no
``embedding_key``: its vectors are not reused until their document is written again) is
upgraded in place when opened; a newer version is refused. The two count columns came
later within version 3 (``_COLUMNS_V3``): added when missing, left at 0 by older releases.

**Keyword analysis.** The terms in the keyword index are those of one analysis
(``knowledge.ranking.analysis.ANALYSIS``), recorded in ``meta`` under ``analysis`` by the first open
of a file without chunks (``check_analysis``). A file whose chunks were analysed otherwise
(one that records none was made by ``tokenize``, whatever its schema version) is refused
with ``AnalysisMismatchError``: its keyword side would silently miss; reindex it into a
new file. The same holds for the record fields (``knowledge.core.origin.RECORDS``, under
``records``): a file with chunks written before they carried ``origin`` and ``format``
is refused with ``RecordsMismatchError`` (a subclass, so ``kb serve`` moves it aside
and rebuilds it from its folder as for another analysis).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from knowledge.core.errors import AnalysisMismatchError, RecordsMismatchError
from knowledge.core.origin import RECORDS
from knowledge.ranking.analysis import ANALYSIS

if TYPE_CHECKING:
    from knowledge.embedding.base import EmbeddingClient

__all__ = [
    "KEYWORD_ONLY",
    "KINDS_INDEX",
    "KIND_NAMED",
    "PAGE_TABLE_DDL",
    "SCHEMA_VERSION",
    "Identity",
    "bump_generation",
    "check_analysis",
    "create_or_upgrade",
    "generation",
    "identity_of",
    "load_json",
    "recorded_identity",
    "to_json",
    "utc_text",
]

SCHEMA_VERSION: Final = 3

# What a file that records no analysis (made before it was recorded) was indexed with.
_ANALYSIS_BEFORE_RECORDING: Final = "tokenize-v1"

# Not external-content: FTS5 then keeps its own copy of the terms, so rows are deleted by
# rowid alone (SQLite < 3.43 has no contentless delete). ``headings``: the terms of the
# chunk's title and heading path (analysis version 4, ``knowledge.ranking.headings``).
_KEYWORD_TABLE: Final = """CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    terms, headings, tokenize = 'unicode61 remove_diacritics 0'
)"""

PAGE_TABLE_DDL: Final = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5("
    "terms, tokenize = 'unicode61 remove_diacritics 0')"
)
"""A page table (``page_index``): ``pages_fts``, or ``pages_fts_<n>`` per agent."""
_PAGE_TABLE: Final = PAGE_TABLE_DDL.format(table="pages_fts")

_TABLES: Final = (
    """CREATE TABLE IF NOT EXISTS meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS documents (
        doc_id TEXT PRIMARY KEY,
        agent TEXT NOT NULL,
        context TEXT NOT NULL,
        path TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        version TEXT,
        chunk_count INTEGER NOT NULL,
        indexed_at TEXT NOT NULL,
        metadata TEXT NOT NULL,
        source_type TEXT,
        size INTEGER,
        embedded_chunks INTEGER NOT NULL DEFAULT 0,
        reused_chunks INTEGER NOT NULL DEFAULT 0,
        UNIQUE (agent, context, path)
    )""",
    """CREATE TABLE IF NOT EXISTS chunks (
        id INTEGER PRIMARY KEY,
        doc_id TEXT NOT NULL,
        agent TEXT NOT NULL,
        context TEXT NOT NULL,
        path TEXT NOT NULL,
        chunk_index INTEGER NOT NULL,
        content TEXT NOT NULL,
        metadata TEXT NOT NULL,
        vector BLOB,
        embedding_key TEXT,
        UNIQUE (agent, context, path, chunk_index)
    )""",
    # The unique index above serves the scope filter (its prefix), per-document deletes
    # and the (path, chunk_index) order, so no other index is needed; doc_id is kept for
    # inspection and joins.
    _KEYWORD_TABLE,
    # One row per document, rowid its first chunk's id (analysis version 6,
    # ``knowledge.ranking.page_signal``; per-agent ones beside ``chunks_fts_<n>``).
    _PAGE_TABLE,
)

# New in version 2; a version 1 file gets them (and the two record columns) on open.
_TABLES_V2: Final = (
    # id orders problems: the most recently recorded has the highest.
    """CREATE TABLE IF NOT EXISTS problems (
        id INTEGER PRIMARY KEY,
        agent TEXT NOT NULL,
        context TEXT NOT NULL,
        path TEXT NOT NULL,
        reason TEXT NOT NULL,
        recorded_at TEXT NOT NULL,
        UNIQUE (agent, context, path)
    )""",
    """CREATE TABLE IF NOT EXISTS fts_agents (
        agent TEXT PRIMARY KEY,
        id INTEGER NOT NULL UNIQUE
    )""",
    """CREATE TABLE IF NOT EXISTS generations (
        agent TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    )""",
)

KINDS_INDEX: Final = "chunks_kinds"
KIND_NAMED: Final = "instr(metadata, '\"kind\"') > 0"
"""A chunk row whose metadata JSON may have a ``kind`` key: one without the text
``"kind"`` has none (``candidates.facts_columns`` reads it the same way)."""

# Added within version 3 without a new version (an older release never reads it).
_TABLES_V3: Final = (
    # IndexStatus.unread_files: per scope, the files no pattern selects, by extension.
    """CREATE TABLE IF NOT EXISTS unread_files (
        agent TEXT NOT NULL,
        context TEXT NOT NULL,
        extension TEXT NOT NULL,
        count INTEGER NOT NULL,
        PRIMARY KEY (agent, context, extension)
    )""",
    # The scope's synonyms (knowledge.ranking.synonym_expansion): its checked file's text, read by
    # every keyword search of the scope (one primary-key lookup), kept by a reindex.
    """CREATE TABLE IF NOT EXISTS synonyms (
        agent TEXT NOT NULL,
        context TEXT NOT NULL,
        rules TEXT NOT NULL,
        PRIMARY KEY (agent, context)
    )""",
    # The chunks whose metadata names a ``kind`` (lesson cards among them), by scope: a
    # few index entries, so a search tells whether a scope holds any without reading its
    # chunks (``deeper_bound``). SQLite keeps it with every write, in any release; built
    # once when an older file is opened.
    f"CREATE INDEX IF NOT EXISTS {KINDS_INDEX} ON chunks (agent, context) WHERE {KIND_NAMED}",
)

# Columns added to version 3 without a new version: an older release writing the file
# leaves them at their defaults (its inserts name their columns), so it can still open it.
_COLUMNS_V3: Final = (
    # ``IndexStatus.embedded_chunks`` / ``reused_chunks``: counted from the document's
    # first write by a release that has them (0 for documents written before).
    ("documents", "embedded_chunks", "INTEGER NOT NULL DEFAULT 0"),
    ("documents", "reused_chunks", "INTEGER NOT NULL DEFAULT 0"),
)


def create_or_upgrade(conn: sqlite3.Connection, display: str) -> None:
    """Create the tables of an empty file, or upgrade a version 1 file, inside the
    caller's write transaction. Raises ``ValueError`` with the reason for a file this
    store cannot use (another database, a newer version)."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if tables and "meta" not in tables:
        raise ValueError(
            f"{display} is an SQLite database but not a knowledge index; use --db with another file"
        )
    for statement in (*_TABLES, *_TABLES_V2, *_TABLES_V3):
        conn.execute(statement)
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
        )
        return
    if row[0] in ("1", "2"):
        _add_columns(
            conn,
            (
                ("documents", "source_type", "TEXT"),  # new in version 2
                ("documents", "size", "INTEGER"),  # new in version 2
                ("chunks", "embedding_key", "TEXT"),  # new in version 3
            ),
        )
        conn.execute("DELETE FROM meta WHERE key = 'generation'")  # per agent since version 2
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),)
        )
    elif row[0] != str(SCHEMA_VERSION):
        raise ValueError(
            f"index file {display} has schema version {row[0]}; this version of the store "
            f"reads version {SCHEMA_VERSION}. Reindex into a new file"
        )
    _add_columns(conn, _COLUMNS_V3)


def _add_columns(conn: sqlite3.Connection, columns: tuple[tuple[str, str, str], ...]) -> None:
    """``ALTER TABLE ... ADD COLUMN`` each of ``columns`` the file does not have yet."""
    for table, column, kind in columns:
        present = {info[1] for info in conn.execute(f"PRAGMA table_info({table})")}
        if column not in present:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")


def check_analysis(conn: sqlite3.Connection, display: str) -> None:
    """Record the keyword analysis and the record fields (``knowledge.core.origin.RECORDS``)
    in a file without chunks; raise ``AnalysisMismatchError`` for a file whose chunks
    were analysed otherwise, ``RecordsMismatchError`` for one written before its records
    carried origin and format (module docstring). Inside the caller's write
    transaction, after ``create_or_upgrade``."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'analysis'").fetchone()
    has_chunks = conn.execute("SELECT EXISTS (SELECT 1 FROM chunks)").fetchone()[0]
    if not has_chunks:
        # Nothing analysed yet (new, emptied, or never written): this version's from now on.
        _settle_keyword_tables(conn)
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('analysis', ?)", (ANALYSIS,))
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('records', ?)", (RECORDS,))
        return
    recorded = _ANALYSIS_BEFORE_RECORDING if row is None else row[0]
    if recorded != ANALYSIS:
        raise AnalysisMismatchError(
            f"index file {display} holds keyword terms of the analysis '{recorded}'; this "
            f"version analyses text as '{ANALYSIS}', so keyword searches would miss. "
            f"{_REINDEX_ADVICE}"
        )
    row = conn.execute("SELECT value FROM meta WHERE key = 'records'").fetchone()
    if row is None or row[0] != RECORDS:
        raise RecordsMismatchError(
            f"index file {display} was written before its records carried their origin and "
            f"format ({RECORDS}), so filters on them would miss. {_REINDEX_ADVICE}"
        )


_REINDEX_ADVICE: Final = (
    "Reindex into a new file (kb index DIR --db NEW_FILE --reindex), or delete this "
    "file and index again"
)


def _settle_keyword_tables(conn: sqlite3.Connection) -> None:
    """Give a file without chunks this version's keyword tables: one made before analysis
    version 4 has FTS5 tables without the ``headings`` column; they are empty, so they
    are made again (per-agent tables on their next write, ``keyword_index``). One made
    before version 6 has no per-agent page tables (``page_index``): they are added."""
    for (number,) in conn.execute("SELECT id FROM fts_agents").fetchall():
        conn.execute(PAGE_TABLE_DDL.format(table=f"pages_fts_{int(number)}"))
    columns = {info[1] for info in conn.execute("PRAGMA table_info(chunks_fts)")}
    if "headings" in columns:
        return
    for (number,) in conn.execute("SELECT id FROM fts_agents").fetchall():
        conn.execute(f"DROP TABLE IF EXISTS chunks_fts_{int(number)}")
        conn.execute(f"DROP TABLE IF EXISTS pages_fts_{int(number)}")
    conn.execute("DELETE FROM fts_agents")
    conn.execute("DROP TABLE chunks_fts")
    conn.execute(_KEYWORD_TABLE)


def generation(conn: sqlite3.Connection, agent: str) -> int:
    """The agent's write generation in the caller's snapshot (0 before its first write)."""
    row = conn.execute("SELECT value FROM generations WHERE agent = ?", (agent,)).fetchone()
    return 0 if row is None else int(row[0])


def bump_generation(conn: sqlite3.Connection, agent: str) -> None:
    conn.execute(
        "INSERT INTO generations (agent, value) VALUES (?, 1)"
        " ON CONFLICT (agent) DO UPDATE SET value = value + 1",
        (agent,),
    )


@dataclass(frozen=True, slots=True)
class Identity:
    """What made a file's vectors: an embedder and its dimension, or nothing."""

    name: str
    dimensions: int

    def describe(self) -> str:
        if self == KEYWORD_ONLY:
            return "no embedder (keyword only)"
        return f"{self.name} ({self.dimensions} dims)"

    def built_with(self) -> str:
        if self == KEYWORD_ONLY:
            return "without an embedder (keyword only, no vectors)"
        return f"with {self.describe()}"


KEYWORD_ONLY: Final = Identity("none", 0)


def identity_of(embedder: EmbeddingClient | None) -> Identity:
    if embedder is None:
        return KEYWORD_ONLY
    return Identity(embedder.name, embedder.dimensions)


def recorded_identity(conn: sqlite3.Connection) -> Identity | None:
    """The identity recorded in the file, or ``None`` when it has none (or no chunks)."""
    recorded = dict(
        conn.execute("SELECT key, value FROM meta WHERE key IN ('embedder', 'dimensions')")
    )
    if "embedder" not in recorded:
        return None
    if conn.execute("SELECT NOT EXISTS (SELECT 1 FROM chunks)").fetchone()[0]:
        return None
    return Identity(recorded["embedder"], int(recorded.get("dimensions", "0")))


def utc_text(moment: datetime) -> str:
    # One fixed format in UTC, so that max() over the text column is the latest time.
    aware = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return aware.isoformat(timespec="microseconds")


def to_json(mapping: Mapping[str, Any]) -> str:
    return json.dumps(dict(mapping), ensure_ascii=False, sort_keys=True, default=str)


def load_json(text: str) -> dict[str, Any]:
    value = json.loads(text)
    return value if isinstance(value, dict) else {}
