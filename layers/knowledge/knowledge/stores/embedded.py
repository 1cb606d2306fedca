"""The embedded store: one SQLite file with keyword (BM25), vector and hybrid search.

The local default (DESIGN section 4): no server to start, nothing to install.

**Why SQLite.** It ships with Python, so the store costs no dependency; the index is
one file that can be copied, deleted or inspected with the ``sqlite3`` shell; its
transactions give the guarantees the store needs (a write session is one transaction,
a search one read snapshot); FTS5 gives a real BM25 over an inverted index. Vectors
are unit-normalised float32 BLOBs (little-endian) in the chunk rows and searched by
brute force: one numpy matrix product over the scope's vectors (numpy is imported
only by vector searches and vector writes), kept in memory between searches until the
next write (``vector_cache_bytes``, 256 MiB by default). That is exact kNN, and it is
meant for local scale: up to some 50,000 chunks per scope, where a vector search takes
about 20 ms at 384 dimensions (the first one after a write reads the vectors: a
quarter of a second). Beyond that use the OpenSearch backend, whose HNSW index is
approximate but sub-linear.

**Schema.** ``documents`` (one row per document: scope, path, content hash, version,
chunk count, indexed time, metadata), ``chunks`` (scope, path, index, content,
metadata JSON, vector), ``chunks_fts`` (FTS5 keyed by ``chunks.id``), ``meta``
(schema version, keyword analysis, embedder identity, and a generation that every
write session bumps, which tells cached vectors from stale ones, also across processes).

**Keyword (CJK-aware, English stems).** FTS5 cannot call a Python tokenizer, so every
chunk is indexed as the space-joined terms of ``knowledge.text.keyword_terms`` (CJK
bigrams, English Snowball stems, no stop words) under FTS5's ``unicode61`` tokenizer
with diacritics kept, which splits that text back into exactly those terms. A query
becomes its distinct terms, each a quoted FTS5 string, OR-ed (``fts_query``): user
input never reaches FTS5 as syntax. The score is ``-bm25()`` (SQLite's lower-is-better
turned around). Its term statistics are those of the whole file, not of one scope, as
in OpenSearch's one shared index (D11).

**Search.** The scope is always a SQL condition (``agent`` and ``context``, or
``agent`` only with ``cross_context``). File patterns and metadata filters are then
applied to the ranked candidates (``knowledge.filters``: filter first, then
normalise among what is left), until enough candidates pass:
``fusion.candidate_count(offset + max_results)`` for one mode, ``fusion.HYBRID_CANDIDATES``
per side for hybrid (a fixed depth: every page is a slice of one order). Keyword mode is
``fusion.keyword_only``; vector mode ``fusion.vector_only`` over
``fusion.cosine_to_unit`` above the relevance floor (``fusion.above_floor``); hybrid
``fusion.fuse_weighted`` with the store's weights (default: the embedder's)
(or ``fusion.fuse_rrf`` with ``fusion="rrf"``); then ``fusion.select`` (per-document
cap, ``offset``, ``max_results``). The query is
embedded once per search, only in vector and hybrid modes, and before the read
snapshot is taken. A query whose embedding is the zero vector finds nothing on the
vector side. Ties rank by (path, chunk index, context).

**Embedder identity.** The first chunk written to a file records what made its
vectors: the embedder's name and dimension, or "no embedder (keyword only)". A store
opened with a different embedder is refused with ``EmbeddingMismatchError`` (a store
opened without an embedder may still run keyword searches on any file), and so is a
write that would mix vectors of another kind into the file. A file without chunks
has no identity yet. Likewise the keyword analysis (``knowledge.text.ANALYSIS``): a
file whose chunks were analysed otherwise (a file of an older version has none recorded)
is refused with ``AnalysisMismatchError``: reindex it into a new file.

**Concurrency.** WAL journal. Every operation borrows a connection from a small
pool; a write session keeps one for its whole life, in one ``BEGIN IMMEDIATE``
transaction committed by ``__exit__`` (rolled back on an exception), and each
``put_document`` is a savepoint, so a document that fails half-way leaves its
previous version intact. Each search is one read transaction: it sees the file as of
the last commit, never half a session, and never waits for a writer. Writers (also
in other processes) queue on SQLite's write lock for up to 30 seconds. A
``":memory:"`` store has one connection: there, searches from other threads wait for
an open session (and the session's own thread sees its uncommitted writes).
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from knowledge.chunking import DocumentChunker, MarkdownSectionChunker
from knowledge.errors import (
    AnalysisMismatchError,
    ConfigurationError,
    EmbeddingError,
    EmbeddingMismatchError,
    StoreError,
    UnsupportedModeError,
    ValidationError,
)
from knowledge.filters import matches_file_patterns, matches_metadata
from knowledge.fusion import (
    DEFAULT_RRF_K,
    HYBRID_CANDIDATES,
    Fused,
    above_floor,
    candidate_count,
    cosine_to_unit,
    fuse_rrf,
    fuse_weighted,
    hybrid_weights,
    keyword_only,
    select,
    vector_only,
)
from knowledge.fusion import (
    relevance_floor as fusion_floor,
)
from knowledge.indexing import DEFAULT_EMBED_CONTEXT, Indexer, IndexingStoreMixin
from knowledge.model import (
    FileProblem,
    IndexState,
    IndexStatus,
    SearchMode,
    SearchQuery,
    SearchResult,
)
from knowledge.scope import KnowledgeScope
from knowledge.store import DocumentHeader, EmbeddedChunk, StoredDocument
from knowledge.text import ANALYSIS, has_cjk, keyword_terms

if TYPE_CHECKING:
    from knowledge.embedding.base import EmbeddingClient

__all__ = [
    "DEFAULT_VECTOR_CACHE_BYTES",
    "FUSION_METHODS",
    "EmbeddedKnowledgeStore",
    "EmbeddedWriteSession",
    "fts_query",
]

FUSION_METHODS: Final = ("weighted", "rrf")
"""Hybrid fusion methods: the weighted linear default (D9) or reciprocal rank fusion."""

DEFAULT_VECTOR_CACHE_BYTES: Final = 256 * 1024 * 1024
"""Memory for vectors kept between searches (all scopes together)."""

_MEMORY: Final = ":memory:"
_SCHEMA_VERSION: Final = 1
# What a file of the schema's first version, which records no analysis, was indexed with.
_ANALYSIS_V1: Final = "tokenize-v1"
_STORE_NAME: Final = "embedded"
_BUSY_TIMEOUT_S: Final = 30.0
_MAX_IDLE_CONNECTIONS: Final = 4
_FETCH_BATCH: Final = 256

_KEYWORD_SELECT: Final = (
    "SELECT c.id, c.path, c.chunk_index, c.context, c.metadata, -bm25(chunks_fts) AS s"
    " FROM chunks_fts JOIN chunks AS c ON c.id = chunks_fts.rowid"
)
_KEYWORD_ORDER: Final = "ORDER BY s DESC, c.path, c.chunk_index, c.context"
_VECTOR_SELECT: Final = "SELECT id, path, chunk_index, context, vector FROM chunks"
_VECTOR_ORDER: Final = "ORDER BY path, chunk_index, context"

_SCHEMA: Final = (
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
        UNIQUE (agent, context, path, chunk_index)
    )""",
    # The unique index above serves the scope filter (its prefix), per-document deletes
    # and the (path, chunk_index) order, so no other index is needed; doc_id is kept for
    # inspection and joins.
    # Not external-content: FTS5 then keeps its own copy of the terms, so rows are deleted
    # by rowid alone (SQLite < 3.43 has no contentless delete).
    """CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
        terms, tokenize = 'unicode61 remove_diacritics 0'
    )""",
)


def _document_of(key: tuple[str, int, str]) -> tuple[str, str]:
    """The document of a candidate key ``(path, chunk_index, context)``."""
    return key[2], key[0]


def fts_query(text: str) -> str | None:
    """The FTS5 MATCH expression for ``text``: its distinct terms, each quoted, OR-ed.

    Terms come from ``knowledge.text.keyword_terms``; each is an FTS5 string literal (``"``
    doubled), so no operator, column filter, prefix or NEAR group can be expressed.
    ``None`` when the text has no terms (it then matches nothing).
    """
    terms = dict.fromkeys(keyword_terms(text))
    if not terms:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


@dataclass(frozen=True, slots=True)
class _Identity:
    """What made a file's vectors: an embedder and its dimension, or nothing."""

    name: str
    dimensions: int

    def describe(self) -> str:
        if self == _KEYWORD_ONLY:
            return "no embedder (keyword only)"
        return f"{self.name} ({self.dimensions} dims)"

    def built_with(self) -> str:
        if self == _KEYWORD_ONLY:
            return "without an embedder (keyword only, no vectors)"
        return f"with {self.describe()}"


_KEYWORD_ONLY: Final = _Identity("none", 0)


def _identity_of(embedder: EmbeddingClient | None) -> _Identity:
    if embedder is None:
        return _KEYWORD_ONLY
    return _Identity(embedder.name, embedder.dimensions)


def _utc_text(moment: datetime) -> str:
    # One fixed format in UTC, so that max() over the text column is the latest time.
    aware = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return aware.isoformat(timespec="microseconds")


def _json(mapping: Mapping[str, Any]) -> str:
    return json.dumps(dict(mapping), ensure_ascii=False, sort_keys=True, default=str)


def _load_json(text: str) -> dict[str, Any]:
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


class _ConnectionPool:
    """SQLite connections to one database, each used by one thread at a time.

    A pool rather than one connection per thread: a thread-per-request server would
    otherwise leave a connection behind for every finished thread. ``":memory:"`` is one
    connection behind a re-entrant lock (each connection to it would be its own database).
    """

    def __init__(self, target: str) -> None:
        self._target = target
        self._lock = threading.Lock()
        self._idle: list[sqlite3.Connection] = []
        self._closed = False
        self._memory_lock: threading.RLock | None = None
        self._memory: sqlite3.Connection | None = None
        if target == _MEMORY:
            self._memory_lock = threading.RLock()
            self._memory = self._connect()

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: transactions are begun and ended explicitly, never implied.
        try:
            conn = sqlite3.connect(
                self._target,
                timeout=_BUSY_TIMEOUT_S,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the index file {self._target}: {exc}") from exc
        try:
            # WAL + NORMAL cannot corrupt the file; a power cut may lose the last commits,
            # and an index can always be rebuilt from its source.
            conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error as exc:
            conn.close()
            raise StoreError(f"cannot open the index file {self._target}: {exc}") from exc
        return conn

    def acquire(self) -> sqlite3.Connection:
        if self._memory is not None and self._memory_lock is not None:
            self._memory_lock.acquire()
            if self._closed:
                self._memory_lock.release()
                raise StoreError("the embedded store is closed")
            return self._memory
        with self._lock:
            if self._closed:
                raise StoreError("the embedded store is closed")
            if self._idle:
                return self._idle.pop()
        return self._connect()

    def release(self, conn: sqlite3.Connection) -> None:
        if conn is self._memory and self._memory_lock is not None:
            self._memory_lock.release()
            return
        if conn.in_transaction:
            conn.rollback()
        with self._lock:
            if not self._closed and len(self._idle) < _MAX_IDLE_CONNECTIONS:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        """Close idle connections now; borrowed ones close when they are released."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        if self._memory is not None and self._memory_lock is not None:
            with self._memory_lock:
                self._memory.close()


@dataclass(frozen=True, slots=True)
class _ScopeVectors:
    """The vectors of one scope (or of one agent) as of one generation of the file."""

    generation: int
    rowids: list[int]
    keys: list[tuple[str, int, str]]
    matrix: Any  # numpy float32 (chunks x dimensions), unit rows; numpy is not imported here

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes)


class _VectorCache:
    """The vector matrices of recently searched scopes, so a search skips reading them.

    Every write session bumps the file's ``generation`` in its own transaction, and an
    entry serves only a search whose snapshot has the same generation: an entry is never
    stale, also when another process wrote the file. Bounded in bytes, least recently
    used out first; ``max_bytes=0`` disables it.
    """

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, str | None], _ScopeVectors] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str | None], generation: int) -> _ScopeVectors | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.generation != generation:
                return None
            self._entries.move_to_end(key)
            return entry

    def put(self, key: tuple[str, str | None], entry: _ScopeVectors) -> None:
        if entry.nbytes > self._max_bytes:
            return
        with self._lock:
            current = self._entries.get(key)
            if current is not None and current.generation > entry.generation:
                return  # a search on an older snapshot finished late
            self._entries[key] = entry
            self._entries.move_to_end(key)
            total = sum(e.nbytes for e in self._entries.values())
            while total > self._max_bytes:
                _, dropped = self._entries.popitem(last=False)
                total -= dropped.nbytes

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


@dataclass(frozen=True, slots=True)
class _Candidate:
    """A chunk that passed the scope and the filters, with its raw side score."""

    rowid: int
    key: tuple[str, int, str]
    score: float


class EmbeddedKnowledgeStore(IndexingStoreMixin):
    """``KnowledgeStore`` in one SQLite file (module docstring); the local default.

    ``path`` is the file (its folder is created) or ``":memory:"``. Without an
    ``embedder`` only keyword search is supported. ``default_mode`` defaults to hybrid
    with an embedder, keyword without. ``fusion`` is ``"weighted"`` (``keyword_weight``,
    ``vector_weight``) or ``"rrf"`` (``rrf_k``). ``relevance_floor`` (unit score) drops
    weaker vector candidates; ``None`` takes the embedder's calibrated floor
    (``fusion.relevance_floor``). Raises ``EmbeddingMismatchError`` when
    the file was built with another embedder, ``ConfigurationError`` when the file is
    not a usable index, ``ValidationError`` for bad options. The embedder and chunker
    are the caller's: ``close()`` never closes them.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        embedder: EmbeddingClient | None = None,
        chunker: DocumentChunker | None = None,
        *,
        default_mode: SearchMode | str | None = None,
        keyword_weight: float | None = None,
        vector_weight: float | None = None,
        fusion: str = "weighted",
        rrf_k: int = DEFAULT_RRF_K,
        vector_cache_bytes: int = DEFAULT_VECTOR_CACHE_BYTES,
        relevance_floor: float | None = None,
        embed_context: bool = DEFAULT_EMBED_CONTEXT,
    ) -> None:
        target = os.fspath(path)
        if not isinstance(target, str) or not target:
            raise ValidationError("path", "must be a file path or ':memory:'")
        if fusion not in FUSION_METHODS:
            raise ValidationError(
                "fusion", f"{fusion!r} is not one of: {', '.join(FUSION_METHODS)}"
            )
        # Validated now; resolved per query (fusion.hybrid_weights: the embedder's default
        # where none are given, which may depend on the query's script).
        hybrid_weights(None if embedder is None else embedder.name, keyword_weight, vector_weight)
        fuse_rrf([], [], rrf_k)  # validates rrf_k exactly as every search will, but now
        if (
            isinstance(vector_cache_bytes, bool)
            or not isinstance(vector_cache_bytes, int)
            or vector_cache_bytes < 0
        ):
            raise ValidationError(
                "vector_cache_bytes", f"must be an integer >= 0, got {vector_cache_bytes!r}"
            )
        with_vectors = embedder is not None
        self._modes = frozenset(SearchMode) if with_vectors else frozenset({SearchMode.KEYWORD})
        self._default_mode = self._supported(
            SearchMode.parse(default_mode, "default_mode")
            if default_mode is not None
            else (SearchMode.HYBRID if with_vectors else SearchMode.KEYWORD)
        )
        self._embedder = embedder
        self._identity = _identity_of(embedder)
        # Vector candidates below it are none (fusion.above_floor); None: the embedder's.
        if relevance_floor is None:
            self._floor = fusion_floor(embedder.name) if embedder is not None else 0.0
        else:
            above_floor({}, relevance_floor)  # validates it, as every search would
            self._floor = float(relevance_floor)
        self._keyword_weight = keyword_weight
        self._vector_weight = vector_weight
        self._fusion = fusion
        self._rrf_k = rrf_k
        self._display = target
        self._writing: Counter[KnowledgeScope] = Counter()
        self._writing_lock = threading.Lock()
        # Not for ":memory:": there a read inside a session's thread sees uncommitted rows.
        self._vectors = _VectorCache(0 if target == _MEMORY else vector_cache_bytes)
        # Read by IndexingStoreMixin: index, reindex, upsert and delete run through it.
        self._indexer = Indexer(
            chunker or MarkdownSectionChunker(), embedder, embed_context=embed_context
        )
        if target != _MEMORY:
            try:
                Path(target).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigurationError(
                    f"cannot create the folder of the index file {target}: {exc.strerror}"
                ) from exc
        try:
            self._pool = _ConnectionPool(target)
        except StoreError as exc:
            raise ConfigurationError(str(exc)) from exc
        try:
            self._open_file()
        except StoreError as exc:
            self._pool.close()
            raise ConfigurationError(str(exc)) from exc
        except BaseException:
            self._pool.close()
            raise

    # --- KnowledgeStore --------------------------------------------------------------

    @property
    def name(self) -> str:
        return _STORE_NAME

    @property
    def supported_modes(self) -> frozenset[SearchMode]:
        return self._modes

    @property
    def default_mode(self) -> SearchMode:
        return self._default_mode

    @property
    def path(self) -> str:
        """The index file as given (``":memory:"`` for an in-memory store)."""
        return self._display

    def search(self, scope: KnowledgeScope, query: SearchQuery) -> list[SearchResult]:
        """Rank the scope's chunks for ``query`` (module docstring); ``[]`` when none match."""
        mode = self._supported(query.mode or self._default_mode)
        match = fts_query(query.text) if mode is not SearchMode.VECTOR else None
        query_vector = self._embed_query(query.text) if mode is not SearchMode.KEYWORD else None
        # Enough candidates for the page after the per-document cap (fusion.select); hybrid
        # fuses a fixed depth, so that every page is a slice of one order.
        limit = (
            HYBRID_CANDIDATES
            if mode is SearchMode.HYBRID
            else candidate_count(query.offset + query.max_results)
        )
        with self._reading() as conn:
            keyword: list[_Candidate] = []
            vector: list[_Candidate] = []
            if match is not None:
                keyword = self._keyword_candidates(conn, scope, query, match, limit)
            if query_vector is not None:
                vector = self._vector_candidates(conn, scope, query, query_vector, limit)
            chosen = select(
                self._fuse(mode, keyword, vector, cjk_query=has_cjk(query.text)),
                query.min_score,
                query.max_results,
                offset=query.offset,
                per_document=query.max_chunks_per_document,
                document_of=_document_of,
            )
            rowids = {c.key: c.rowid for c in (*keyword, *vector)}
            rows = self._chunk_rows(conn, [rowids[f.key] for f in chosen])
        results = []
        for fused in chosen:
            path, chunk_index, content, metadata = rows[rowids[fused.key]]
            results.append(
                SearchResult(
                    document_path=path,
                    chunk_index=chunk_index,
                    content=content,
                    score=fused.score,
                    keyword_score=fused.keyword_score,
                    vector_score=fused.vector_score,
                    metadata=_load_json(metadata),
                )
            )
        return results

    def status(self, scope: KnowledgeScope) -> IndexStatus:
        """Counts and last indexed time of exactly this scope; INDEXING while this process
        has a write session open on it."""
        with self._reading() as conn:
            documents, chunks, last = conn.execute(
                "SELECT count(*), coalesce(sum(chunk_count), 0), max(indexed_at)"
                " FROM documents WHERE agent = ? AND context = ?",
                (scope.agent, scope.context),
            ).fetchone()
        with self._writing_lock:
            writing = self._writing[scope] > 0
        if writing:
            state = IndexState.INDEXING
        elif documents == 0:
            state = IndexState.EMPTY
        else:
            state = IndexState.READY
        return IndexStatus(
            document_count=int(documents),
            chunk_count=int(chunks),
            last_indexed_at=None if last is None else datetime.fromisoformat(last),
            state=state,
        )

    def close(self) -> None:
        """Release the file. Idempotent; the embedder and chunker are left alone."""
        self._pool.close()
        self._vectors.clear()

    def __repr__(self) -> str:
        return f"EmbeddedKnowledgeStore({self._display!r}, embedder={self._embedder!r})"

    # --- IndexWriter -----------------------------------------------------------------

    def stored_documents(self, scope: KnowledgeScope) -> dict[str, StoredDocument]:
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT path, content_hash, version, chunk_count FROM documents"
                " WHERE agent = ? AND context = ? ORDER BY path",
                (scope.agent, scope.context),
            ).fetchall()
        return {row[0]: StoredDocument(*row) for row in rows}

    def stored_document(self, scope: KnowledgeScope, path: str) -> StoredDocument | None:
        with self._reading() as conn:
            row = conn.execute(
                "SELECT path, content_hash, version, chunk_count FROM documents"
                " WHERE agent = ? AND context = ? AND path = ?",
                (scope.agent, scope.context, path),
            ).fetchone()
        return None if row is None else StoredDocument(*row)

    def write_session(
        self, scope: KnowledgeScope, *, replace_scope: bool = False
    ) -> EmbeddedWriteSession:
        """A write batch on ``scope``: one transaction, begun on ``__enter__``."""
        return EmbeddedWriteSession(self, scope, replace_scope=replace_scope)

    # --- internals -------------------------------------------------------------------

    def _supported(self, mode: SearchMode) -> SearchMode:
        if mode not in self._modes:
            supported = ", ".join(m.value for m in SearchMode if m in self._modes)
            raise UnsupportedModeError(mode.value, f"{_STORE_NAME} (no embedder)", supported)
        return mode

    def _open_file(self) -> None:
        conn = self._pool.acquire()
        try:
            # Persistent in the file. Where WAL is impossible (some network file systems)
            # SQLite keeps its rollback journal: still atomic, readers just wait more.
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("BEGIN IMMEDIATE")
            tables = {
                row[0]
                for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            if tables and "meta" not in tables:
                raise ConfigurationError(
                    f"{self._display} is an SQLite database but not a knowledge index; "
                    "use --db with another file"
                )
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('generation', '0')")
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
                    (str(_SCHEMA_VERSION),),
                )
            elif row[0] != str(_SCHEMA_VERSION):
                raise ConfigurationError(
                    f"index file {self._display} has schema version {row[0]}; this version "
                    f"of the store reads version {_SCHEMA_VERSION}. Reindex into a new file"
                )
            self._check_analysis(conn)
            if self._embedder is not None:
                recorded = _recorded_identity(conn)
                if recorded is not None and recorded != self._identity:
                    raise self._mismatch(recorded, self._identity)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise ConfigurationError(f"cannot open the index file {self._display}: {exc}") from exc
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._pool.release(conn)

    def _check_analysis(self, conn: sqlite3.Connection) -> None:
        """Record the keyword analysis in a file without chunks; refuse another one's."""
        row = conn.execute("SELECT value FROM meta WHERE key = 'analysis'").fetchone()
        if row is None:
            if conn.execute("SELECT 1 FROM chunks LIMIT 1").fetchone() is None:
                conn.execute("INSERT INTO meta (key, value) VALUES ('analysis', ?)", (ANALYSIS,))
                return
            recorded = _ANALYSIS_V1
        else:
            recorded = row[0]
        if recorded != ANALYSIS:
            raise AnalysisMismatchError(
                f"index file {self._display} holds keyword terms of the analysis "
                f"'{recorded}'; this version analyses text as '{ANALYSIS}', so keyword "
                "searches would miss. Reindex into a new file (kb index DIR --db NEW_FILE "
                "--reindex), or delete this file and index again"
            )

    def _mismatch(self, recorded: _Identity, wanted: _Identity) -> EmbeddingMismatchError:
        refused = (
            "to write chunks without vectors (the store has no embedder)"
            if wanted == _KEYWORD_ONLY
            else wanted.describe()
        )
        return EmbeddingMismatchError(
            f"index {self._display} was built {recorded.built_with()}; refusing {refused}. "
            "Use --db with another file or reindex into a new one"
        )

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A connection inside one read transaction: a consistent snapshot of the file."""
        conn = self._pool.acquire()
        began = False
        try:
            # Already in a transaction only on ":memory:", inside this thread's write session.
            if not conn.in_transaction:
                conn.execute("BEGIN")
                began = True
            yield conn
        except sqlite3.Error as exc:
            raise StoreError(f"index {self._display}: {exc}") from exc
        finally:
            if began and conn.in_transaction:
                conn.execute("ROLLBACK")
            self._pool.release(conn)

    def _embed_query(self, text: str) -> list[float] | None:
        """The query's unit vector, or ``None`` when it is the zero vector (no signal)."""
        assert self._embedder is not None  # guaranteed by _supported
        vector = list(self._embedder.embed(text).vector)
        if len(vector) != self._identity.dimensions:
            raise EmbeddingError(
                f"embedder {self._identity.name} returned {len(vector)} dimensions for the "
                f"query; it declares {self._identity.dimensions}"
            )
        norm = math.sqrt(math.fsum(x * x for x in vector))
        if not math.isfinite(norm):
            raise EmbeddingError(f"embedder {self._identity.name} returned a non-finite vector")
        if norm == 0.0:
            return None
        return [x / norm for x in vector]

    @staticmethod
    def _scope_sql(scope: KnowledgeScope, query: SearchQuery, alias: str) -> tuple[str, list[str]]:
        if query.cross_context:
            return f"{alias}agent = ?", [scope.agent]
        return f"{alias}agent = ? AND {alias}context = ?", [scope.agent, scope.context]

    @staticmethod
    def _passes(query: SearchQuery, path: str, metadata: str) -> bool:
        if not matches_file_patterns(path, query.file_patterns):
            return False
        return not query.metadata or matches_metadata(_load_json(metadata), query.metadata)

    def _keyword_candidates(
        self,
        conn: sqlite3.Connection,
        scope: KnowledgeScope,
        query: SearchQuery,
        match: str,
        limit: int,
    ) -> list[_Candidate]:
        scope_sql, params = self._scope_sql(scope, query, "c.")
        filtered = bool(query.file_patterns or query.metadata)
        where = f"WHERE chunks_fts MATCH ? AND {scope_sql}"
        sql = f"{_KEYWORD_SELECT} {where} {_KEYWORD_ORDER}"
        # Without filters every row is a candidate, so SQLite can stop at the limit.
        cursor = (
            conn.execute(sql, [match, *params])
            if filtered
            else conn.execute(sql + " LIMIT ?", [match, *params, limit])
        )
        found: list[_Candidate] = []
        while len(found) < limit and (batch := cursor.fetchmany(_FETCH_BATCH)):
            for rowid, path, chunk_index, context, metadata, score in batch:
                if self._passes(query, path, metadata):
                    found.append(_Candidate(rowid, (path, chunk_index, context), float(score)))
                    if len(found) == limit:
                        break
        cursor.close()
        return found

    def _vector_candidates(
        self,
        conn: sqlite3.Connection,
        scope: KnowledgeScope,
        query: SearchQuery,
        query_vector: Sequence[float],
        limit: int,
    ) -> list[_Candidate]:
        import numpy as np  # lazy: keyword-only use never loads numpy

        vectors = self._scope_vectors(conn, scope, query, len(query_vector))
        if vectors is None:
            return []
        cosines = vectors.matrix @ np.asarray(query_vector, dtype=np.float32)
        # Stable, so equal cosines keep the (path, chunk_index, context) order of the rows.
        order = np.argsort(-cosines, kind="stable")
        found: list[_Candidate] = []
        for start in range(0, len(order), _FETCH_BATCH):
            positions = [
                int(p)
                for p in order[start : start + _FETCH_BATCH]
                if matches_file_patterns(vectors.keys[int(p)][0], query.file_patterns)
            ]
            metadata = (
                self._metadata_of(conn, [vectors.rowids[p] for p in positions])
                if query.metadata
                else {}
            )
            for p in positions:
                rowid = vectors.rowids[p]
                if query.metadata and not matches_metadata(metadata[rowid], query.metadata):
                    continue
                unit = cosine_to_unit(float(cosines[p]))
                found.append(_Candidate(rowid, vectors.keys[p], unit))
                if len(found) == limit:
                    return found
        return found

    def _scope_vectors(
        self, conn: sqlite3.Connection, scope: KnowledgeScope, query: SearchQuery, dimensions: int
    ) -> _ScopeVectors | None:
        """The scope's vectors in (path, chunk_index, context) order, cached per generation."""
        import numpy as np  # lazy: keyword-only use never loads numpy

        cache_key = (scope.agent, None if query.cross_context else scope.context)
        generation = int(
            conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0]
        )
        cached = self._vectors.get(cache_key, generation)
        if cached is not None:
            return cached
        scope_sql, params = self._scope_sql(scope, query, "")
        where = f"WHERE {scope_sql} AND vector IS NOT NULL"
        rows = conn.execute(f"{_VECTOR_SELECT} {where} {_VECTOR_ORDER}", params).fetchall()
        if not rows:
            return None
        width = 4 * dimensions
        if any(len(row[4]) != width for row in rows):
            raise StoreError(
                f"index {self._display} holds vectors of another dimension than "
                f"{dimensions}; reindex into a new file"
            )
        matrix = np.frombuffer(b"".join(row[4] for row in rows), dtype="<f4")
        entry = _ScopeVectors(
            generation=generation,
            rowids=[row[0] for row in rows],
            keys=[(row[1], row[2], row[3]) for row in rows],
            matrix=matrix.reshape(len(rows), dimensions),
        )
        self._vectors.put(cache_key, entry)
        return entry

    @staticmethod
    def _metadata_of(conn: sqlite3.Connection, rowids: Sequence[int]) -> dict[int, dict[str, Any]]:
        if not rowids:
            return {}
        marks = ", ".join("?" * len(rowids))
        sql = f"SELECT id, metadata FROM chunks WHERE id IN ({marks})"  # noqa: S608
        return {row[0]: _load_json(row[1]) for row in conn.execute(sql, list(rowids))}

    def _fuse(
        self,
        mode: SearchMode,
        keyword: list[_Candidate],
        vector: list[_Candidate],
        *,
        cjk_query: bool = False,
    ) -> list[Fused[tuple[str, int, str]]]:
        if mode is SearchMode.KEYWORD:
            return keyword_only({c.key: c.score for c in keyword})
        kept = above_floor({c.key: c.score for c in vector}, self._floor)
        vector = [c for c in vector if c.key in kept]
        if mode is SearchMode.VECTOR:
            return vector_only({c.key: c.score for c in vector})
        if self._fusion == "rrf":
            return fuse_rrf([c.key for c in keyword], [c.key for c in vector], self._rrf_k)
        return fuse_weighted(
            {c.key: c.score for c in keyword},
            {c.key: c.score for c in vector},
            *hybrid_weights(
                None if self._embedder is None else self._embedder.name,
                self._keyword_weight,
                self._vector_weight,
                cjk_query=cjk_query,
            ),
        )

    @staticmethod
    def _chunk_rows(
        conn: sqlite3.Connection, rowids: Sequence[int]
    ) -> dict[int, tuple[str, int, str, str]]:
        if not rowids:
            return {}
        marks = ", ".join("?" * len(rowids))
        sql = f"SELECT id, path, chunk_index, content, metadata FROM chunks WHERE id IN ({marks})"  # noqa: S608
        rows = conn.execute(sql, list(rowids)).fetchall()
        return {row[0]: (row[1], row[2], row[3], row[4]) for row in rows}

    def _session_started(self, scope: KnowledgeScope) -> None:
        with self._writing_lock:
            self._writing[scope] += 1

    def _session_ended(self, scope: KnowledgeScope) -> None:
        with self._writing_lock:
            self._writing[scope] -= 1
            if self._writing[scope] <= 0:
                del self._writing[scope]


def _recorded_identity(conn: sqlite3.Connection) -> _Identity | None:
    """The identity recorded in the file, or ``None`` when it has none (or no chunks)."""
    recorded = dict(
        conn.execute("SELECT key, value FROM meta WHERE key IN ('embedder', 'dimensions')")
    )
    if "embedder" not in recorded:
        return None
    if conn.execute("SELECT NOT EXISTS (SELECT 1 FROM chunks)").fetchone()[0]:
        return None
    return _Identity(recorded["embedder"], int(recorded.get("dimensions", "0")))


class EmbeddedWriteSession:
    """One write transaction on one scope of an ``EmbeddedKnowledgeStore``.

    Begun (``BEGIN IMMEDIATE``, waiting for other writers) on ``__enter__``; committed
    on a clean ``__exit__``, rolled back when the block raises. ``put_document`` is
    all-or-nothing per document: if it raises (bad vector, a failing chunk stream),
    the document keeps its previous state and the session stays usable.
    """

    def __init__(
        self, store: EmbeddedKnowledgeStore, scope: KnowledgeScope, *, replace_scope: bool
    ) -> None:
        self._store = store
        self._scope = scope
        self._replace_scope = replace_scope
        self._conn: sqlite3.Connection | None = None
        self._verified: _Identity | None = None
        self._touched = False

    @property
    def failures(self) -> Sequence[FileProblem]:
        # SQLite fails whole statements, not items of a batch: failures are raised instead.
        return ()

    def __enter__(self) -> EmbeddedWriteSession:
        if self._conn is not None:
            raise StoreError("this write session is already open")
        store = self._store
        conn = self._conn = store._pool.acquire()
        try:
            conn.execute("BEGIN IMMEDIATE")
            # Refused before anything is written: the indexer would otherwise drop every
            # changed document it fails to write.
            recorded = _recorded_identity(conn)
            if recorded is not None and recorded != store._identity:
                raise store._mismatch(recorded, store._identity)
            if self._replace_scope:
                self._touch(conn)
                self._delete_where(
                    "agent = ? AND context = ?", [self._scope.agent, self._scope.context]
                )
        except BaseException as exc:
            self._conn = None
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            store._pool.release(conn)
            if isinstance(exc, sqlite3.Error):
                raise self._store_error("cannot start writing", exc) from exc
            raise
        store._session_started(self._scope)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if exc_type is None:
                conn.execute("COMMIT")
            else:
                conn.execute("ROLLBACK")
        except sqlite3.Error as error:
            if conn.in_transaction:
                with suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            if exc_type is None:
                raise self._store_error("cannot commit", error) from error
        finally:
            self._store._session_ended(self._scope)
            self._store._pool.release(conn)

    def put_document(self, header: DocumentHeader, chunks: Iterable[EmbeddedChunk]) -> int:
        """Replace the document with ``chunks``; return how many were written."""
        conn = self._open()
        self._touch(conn)  # outside the savepoint: a failed document must not undo it
        conn.execute("SAVEPOINT put_document")
        try:
            self._delete_where(
                "agent = ? AND context = ? AND path = ?",
                [self._scope.agent, self._scope.context, header.path],
            )
            count = 0
            for item in chunks:
                chunk = item.chunk
                cursor = conn.execute(
                    "INSERT INTO chunks (doc_id, agent, context, path, chunk_index, content,"
                    " metadata, vector) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        header.document_id,
                        self._scope.agent,
                        self._scope.context,
                        header.path,
                        chunk.chunk_index,
                        chunk.content,
                        _json(chunk.metadata),
                        self._vector_blob(conn, header.path, chunk.chunk_index, item.vector),
                    ),
                )
                conn.execute(
                    "INSERT INTO chunks_fts (rowid, terms) VALUES (?, ?)",
                    (cursor.lastrowid, " ".join(keyword_terms(chunk.content))),
                )
                count += 1
            conn.execute(
                "INSERT INTO documents (doc_id, agent, context, path, content_hash, version,"
                " chunk_count, indexed_at, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    header.document_id,
                    self._scope.agent,
                    self._scope.context,
                    header.path,
                    header.content_hash,
                    header.version,
                    count,
                    _utc_text(header.indexed_at),
                    _json(header.metadata),
                ),
            )
        except BaseException as exc:
            conn.execute("ROLLBACK TO put_document")
            conn.execute("RELEASE put_document")
            # The identity this document may have recorded was rolled back with it.
            self._verified = None
            if isinstance(exc, sqlite3.Error):
                raise self._store_error(f"cannot write {header.path}", exc) from exc
            raise
        conn.execute("RELEASE put_document")
        return count

    def delete_document(self, path: str) -> bool:
        """Remove the document and all its chunks; ``False`` if it was not indexed."""
        conn = self._open()
        try:
            self._touch(conn)
            return self._delete_where(
                "agent = ? AND context = ? AND path = ?",
                [self._scope.agent, self._scope.context, path],
            )
        except sqlite3.Error as exc:
            raise self._store_error(f"cannot delete {path}", exc) from exc

    # --- internals -------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("the write session is not open (use it in a with-block)")
        return self._conn

    def _touch(self, conn: sqlite3.Connection) -> None:
        """Bump the file's generation once per session, before its first change, so cached
        vectors of the old generation are not used once this session commits."""
        if not self._touched:
            conn.execute(
                "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'"
            )
            self._touched = True

    def _delete_where(self, condition: str, params: list[str]) -> bool:
        """Delete the documents, chunks and terms matching ``condition``; True if any."""
        conn = self._open()
        # ``condition`` is one of this module's constant clauses; values are bound.
        chunk_ids = f"SELECT id FROM chunks WHERE {condition}"  # noqa: S608
        conn.execute(f"DELETE FROM chunks_fts WHERE rowid IN ({chunk_ids})", params)  # noqa: S608
        conn.execute(f"DELETE FROM chunks WHERE {condition}", params)  # noqa: S608
        deleted = conn.execute(f"DELETE FROM documents WHERE {condition}", params)  # noqa: S608
        return deleted.rowcount > 0

    def _vector_blob(
        self,
        conn: sqlite3.Connection,
        path: str,
        chunk_index: int,
        vector: Sequence[float] | None,
    ) -> bytes | None:
        """Check the vector against the file's identity; return it unit-normalised."""
        embedder = self._store._embedder
        if vector is not None and embedder is None:
            raise ConfigurationError(
                f"chunk {chunk_index} of {path} has a vector, but the store was opened "
                "without an embedder to name it"
            )
        identity = self._store._identity if vector is not None else _KEYWORD_ONLY
        if identity != self._verified:
            self._claim_identity(conn, identity)
        if vector is None:
            return None
        import numpy as np  # lazy: keyword-only use never loads numpy

        array = np.asarray(vector, dtype=np.float64)
        if array.shape != (identity.dimensions,):
            raise EmbeddingMismatchError(
                f"chunk {chunk_index} of {path} has a vector of shape {array.shape}; "
                f"{identity.describe()} was expected"
            )
        norm = float(np.linalg.norm(array))
        if not math.isfinite(norm):
            raise EmbeddingError(f"chunk {chunk_index} of {path} has a non-finite vector")
        if norm > 0.0:
            array = array / norm
        return array.astype("<f4").tobytes()

    def _claim_identity(self, conn: sqlite3.Connection, identity: _Identity) -> None:
        """Record ``identity`` in a file that has none; refuse one that differs."""
        recorded = _recorded_identity(conn)
        if recorded is None:
            conn.executemany(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                [("embedder", identity.name), ("dimensions", str(identity.dimensions))],
            )
        elif recorded != identity:
            raise self._store._mismatch(recorded, identity)
        self._verified = identity

    def _store_error(self, what: str, exc: sqlite3.Error) -> StoreError:
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            return StoreError(
                f"index {self._store.path}: {what}: the file is locked by another writer "
                f"(waited {_BUSY_TIMEOUT_S:.0f} s)"
            )
        return StoreError(f"index {self._store.path}: {what}: {exc}")
