"""The embedded store's write session: batched transactions on one scope.

A session keeps one pooled connection for its life and writes in transactions of at most
``batch_documents`` documents or ``batch_seconds`` seconds, whichever comes first
(``BEGIN IMMEDIATE`` at the first write of a batch, ``COMMIT`` after the document that
fills it, and at a clean ``__exit__``). So a long first index becomes searchable batch by
batch, a crash loses at most the batch being written, and between batches other writers
(other scopes, other processes) get their turn at SQLite's one write lock.

**Never half a document.** A batch ends only between documents, and ``put_document`` is
a savepoint: a document that fails half-way (bad vector, a failing chunk stream) keeps
its previous version, and the session stays usable. A block that raises rolls back the
batch being written; earlier batches stay committed (each is whole).

**replace_scope.** The scope is not emptied first (searches would see it empty until the
new documents land, and a failed run would lose it). The session remembers the scope's
paths when it begins, and its clean ``__exit__`` removes those it neither wrote, deleted
nor recorded a problem for, with their problems. A reindex that fails part-way leaves the
old documents searchable.

**Embedding reuse.** Every chunk row keeps its ``embedding_key``; ``stored_vectors(path)``
reads the document's keys and vectors (inside the session's transaction, so it sees
what the session wrote) for the pipeline to reuse. A reused vector is written back as
the same bytes (normalising a stored unit float32 vector again leaves it as it is).

**Problems.** ``record_problem(path, reason)`` remembers why the latest attempt to index
``path`` was skipped or failed (replacing an earlier reason) and leaves its indexed
version alone; ``put_document`` or ``delete_document`` of the path clears it.
"""

from __future__ import annotations

import math
import sqlite3
import sys
import time
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Final

from knowledge.core.errors import ConfigurationError, StoreError, ValidationError
from knowledge.core.model import FileProblem
from knowledge.core.origin import FORMAT
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SYNONYMS_FILE
from knowledge.ranking.page_signal import PageRow
from knowledge.stores.protocol import DocumentHeader, EmbeddedChunk

from .connections import BUSY_TIMEOUT_S, damage_advice, is_damage
from .page_index import remove_pages
from .schema import KEYWORD_ONLY, Identity, bump_generation, recorded_identity, to_json, utc_text
from .vector_search import encode

if TYPE_CHECKING:
    from knowledge.core.errors import EmbeddingMismatchError

    from .connections import ConnectionPool
    from .keyword_index import KeywordIndex

__all__ = [
    "DEFAULT_BATCH_DOCUMENTS",
    "DEFAULT_BATCH_SECONDS",
    "STAGED_DOCUMENT_BYTES",
    "EmbeddedWriteSession",
    "SessionStore",
    "check_batches",
    "require_count",
]

DEFAULT_BATCH_DOCUMENTS: Final = 100
"""Documents (puts, deletes, problems) per transaction, at most."""

DEFAULT_BATCH_SECONDS: Final = 1.0
"""Seconds a transaction stays open, at most (checked between documents)."""

STAGED_DOCUMENT_BYTES: Final = 1024 * 1024
"""A document of this many bytes or more is staged (``EmbeddedWriteSession._put_staged``):
reading, chunking and embedding it takes seconds to minutes, too long to hold the write
lock every other scope is waiting for."""

STAGE_PIECE_CHUNKS: Final = 256
"""Chunks per staging transaction: a few milliseconds of inserts."""


def aside(context: str, purpose: str) -> str:
    """A context no scope can have (contexts hold no control characters), where a large
    document's chunks wait to be swapped in (``staged``) or removed (``retired``): no
    search, listing or count of ``context`` sees them."""
    return f"\x1f{purpose}\x1f{context}"


def require_count(field: str, value: object, *, minimum: int) -> None:
    """``ValidationError`` naming ``field`` unless ``value`` is an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValidationError(field, f"must be an integer >= {minimum}, got {value!r}")


def check_batches(batch_documents: object, batch_seconds: object) -> None:
    """Check a store's batch limits (documents per transaction, seconds it stays open)."""
    require_count("batch_documents", batch_documents, minimum=1)
    if (
        isinstance(batch_seconds, bool)
        or not isinstance(batch_seconds, int | float)
        or not math.isfinite(batch_seconds)
        or batch_seconds <= 0
    ):
        raise ValidationError(
            "batch_seconds", f"must be a number of seconds > 0, got {batch_seconds!r}"
        )


_SCOPE_CONDITION: Final = "agent = ? AND context = ?"
_PATH_CONDITION: Final = "agent = ? AND context = ? AND path = ?"


@dataclass(frozen=True, slots=True)
class SessionStore:
    """What a write session needs of its store, handed over explicitly: the file's
    ``path`` (for messages), its connection ``pool``, its ``keywords`` index, the
    ``identity`` its vectors are made with (``with_vectors``: the store has an embedder),
    and the store's callbacks: ``mismatch`` (the error for a file built otherwise),
    ``damaged`` (the file is damaged: the status says ERROR), ``started``/``ended`` (a
    session on a scope opened/closed: the status says INDEXING meanwhile)."""

    path: str
    pool: ConnectionPool
    keywords: KeywordIndex
    identity: Identity
    with_vectors: bool
    mismatch: Callable[[Identity, Identity], EmbeddingMismatchError]
    damaged: Callable[[sqlite3.Error], None]
    started: Callable[[KnowledgeScope], None]
    ended: Callable[[KnowledgeScope], None]


class EmbeddedWriteSession:
    """Writes to one scope of an ``EmbeddedKnowledgeStore`` in batched transactions
    (module docstring). Use it in a ``with`` block."""

    def __init__(
        self,
        store: SessionStore,
        scope: KnowledgeScope,
        *,
        replace_scope: bool,
        batch_documents: int,
        batch_seconds: float,
    ) -> None:
        self._store = store
        self._scope = scope
        self._replace_scope = replace_scope
        self._batch_documents = batch_documents
        self._batch_seconds = batch_seconds
        self._conn: sqlite3.Connection | None = None
        self._verified: Identity | None = None
        self._bumped = False
        self._in_batch = 0
        self._batch_started = 0.0
        self._replaced: set[str] = set()  # replace_scope: paths to drop unless touched
        self._touched: set[str] = set()

    @property
    def failures(self) -> Sequence[FileProblem]:
        # SQLite fails whole statements, not items of a batch: failures are raised instead.
        return ()

    def __enter__(self) -> EmbeddedWriteSession:
        if self._conn is not None:
            raise StoreError("this write session is already open")
        store = self._store
        conn = self._conn = store.pool.acquire()
        try:
            # Refused before anything is written: the indexer would otherwise drop every
            # changed document it fails to write.
            self._begin(conn)
            if self._replace_scope:
                scope = [self._scope.agent, self._scope.context]
                for table in ("documents", "problems"):
                    rows = conn.execute(
                        f"SELECT path FROM {table} WHERE {_SCOPE_CONDITION}",  # noqa: S608
                        scope,
                    )
                    self._replaced.update(row[0] for row in rows)
        except BaseException as exc:
            self._conn = None
            _rollback(conn)
            store.pool.release(conn)
            if isinstance(exc, sqlite3.Error):
                raise self._store_error("cannot start writing", exc) from exc
            raise
        store.started(self._scope)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            if exc_type is None:
                if self._replace_scope:
                    self._drop_untouched()
                if conn.in_transaction:
                    conn.execute("COMMIT")
            elif conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.Error as error:
            _rollback(conn)
            if exc_type is None:
                raise self._store_error("cannot commit", error) from error
        finally:
            _rollback(conn)  # after an error other than SQLite's while dropping
            self._conn = None
            self._store.ended(self._scope)
            self._store.pool.release(conn)

    # --- the three writes -------------------------------------------------------------

    def put_document(self, header: DocumentHeader, chunks: Iterable[EmbeddedChunk]) -> int:
        """Replace the document with ``chunks``; return how many were written. A document
        of ``STAGED_DOCUMENT_BYTES`` or more is staged (``_put_staged``)."""
        if header.size is not None and header.size >= STAGED_DOCUMENT_BYTES:
            return self._put_staged(header, chunks)
        conn = self._writing(header.path)
        conn.execute("SAVEPOINT put_document")
        try:
            self._delete_path(header.path)
            count = self._insert(conn, header, chunks)
        except BaseException as exc:
            conn.execute("ROLLBACK TO put_document")
            conn.execute("RELEASE put_document")
            # The identity this document may have recorded was rolled back with it.
            self._verified = None
            if isinstance(exc, sqlite3.Error):
                raise self._store_error(f"cannot write {header.path}", exc) from exc
            raise
        conn.execute("RELEASE put_document")
        self._document_done()
        return count

    def delete_document(self, path: str) -> bool:
        """Remove the document and all its chunks; ``False`` if it was not indexed."""
        try:
            self._writing(path)
            deleted = self._delete_path(path)
        except sqlite3.Error as exc:
            raise self._store_error(f"cannot delete {path}", exc) from exc
        self._document_done()
        return deleted

    def record_problem(self, path: str, reason: str) -> None:
        """Remember that the latest attempt to index ``path`` was skipped or failed with
        ``reason``; its indexed version, if any, stays searchable."""
        try:
            conn = self._writing(path)
            where = [self._scope.agent, self._scope.context, path]
            # Deleted and inserted again: the newest problem has the highest id.
            conn.execute(f"DELETE FROM problems WHERE {_PATH_CONDITION}", where)  # noqa: S608
            conn.execute(
                "INSERT INTO problems (agent, context, path, reason, recorded_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (*where, reason, utc_text(datetime.now(UTC))),
            )
        except sqlite3.Error as exc:
            raise self._store_error(f"cannot record the problem of {path}", exc) from exc
        self._document_done()

    def record_unread(self, counts: Mapping[str, int]) -> None:
        """Replace the scope's counts of unread files (``IndexStatus.unread_files``)."""
        try:
            conn = self._writing("unread files", touch=False)
            where = [self._scope.agent, self._scope.context]
            conn.execute(f"DELETE FROM unread_files WHERE {_SCOPE_CONDITION}", where)  # noqa: S608
            conn.executemany(
                "INSERT INTO unread_files (agent, context, extension, count) VALUES (?, ?, ?, ?)",
                [(*where, extension, int(count)) for extension, count in counts.items()],
            )
        except sqlite3.Error as exc:
            raise self._store_error("cannot record the unread files", exc) from exc
        self._document_done()

    def put_synonyms(self, text: str | None) -> None:
        """Replace the scope's synonyms (``None``: none) and clear the synonyms file's
        problem; a reindex's replace leaves them (configuration, not documents)."""
        try:
            conn = self._writing(SYNONYMS_FILE, touch=False)
            where = [self._scope.agent, self._scope.context]
            conn.execute(f"DELETE FROM synonyms WHERE {_SCOPE_CONDITION}", where)  # noqa: S608
            if text:
                conn.execute(
                    "INSERT INTO synonyms (agent, context, rules) VALUES (?, ?, ?)", (*where, text)
                )
            conn.execute(
                f"DELETE FROM problems WHERE {_PATH_CONDITION}",  # noqa: S608
                [*where, SYNONYMS_FILE],
            )
        except sqlite3.Error as exc:
            raise self._store_error("cannot store the synonyms", exc) from exc
        self._document_done()

    def stored_vectors(self, path: str) -> Mapping[str, Sequence[float]]:
        """The vectors of the indexed version of ``path`` by ``embedding_key`` (float32,
        as stored); empty without an embedder or for a document not indexed."""
        conn = self._conn
        if conn is None:
            raise StoreError("the write session is not open (use it in a with-block)")
        dimensions = self._store.identity.dimensions
        if not self._store.with_vectors or dimensions == 0:
            return {}
        try:
            rows = conn.execute(
                f"SELECT embedding_key, vector FROM chunks WHERE {_PATH_CONDITION}"  # noqa: S608
                " AND embedding_key IS NOT NULL AND vector IS NOT NULL",
                (self._scope.agent, self._scope.context, path),
            ).fetchall()
        except sqlite3.Error as exc:
            raise self._store_error(f"cannot read the vectors of {path}", exc) from exc
        vectors: dict[str, Sequence[float]] = {}
        for key, blob in rows:
            if len(blob) == 4 * dimensions:  # else another dimension: not reusable
                vector = array("f")
                vector.frombytes(blob)
                if sys.byteorder != "little":
                    vector.byteswap()
                vectors[key] = vector
        return vectors

    # --- large documents: staged in short transactions ---------------------------------

    def _put_staged(self, header: DocumentHeader, chunks: Iterable[EmbeddedChunk]) -> int:
        """Write a large document without holding SQLite's one write lock while it is read,
        chunked and embedded, nor while its previous version's terms are removed.

        Its chunks go in under the scope's staging context (``aside``: no search, listing
        or count ever names it) in transactions of at most ``STAGE_PIECE_CHUNKS`` chunks,
        each chunk analysed before its transaction begins. One short transaction then
        swaps: the indexed version's chunks are set aside (a context change, no term is
        touched), the staged ones take the scope's context, the document row is written.
        The set-aside rows are deleted afterwards, a piece per transaction. Other writers
        (other scopes, other processes) get the lock between pieces. The previous version
        stays searchable until the swap commits; a document that fails half-way loses its
        staged rows and keeps its previous version, as a savepoint would. Between pieces
        another process could also write this scope (its sessions otherwise wait for this
        one's): ``kb serve`` keeps its own writers of a scope one at a time
        (``knowledge.local.scheduling.ScopeLocks``)."""
        conn = self._conn
        if conn is None:
            raise StoreError("the write session is not open (use it in a with-block)")
        self._commit_batch()  # the documents before this one are whole: they land now
        scope = self._scope
        path = header.path
        staged = [scope.agent, aside(scope.context, "staged"), path]
        retired = [scope.agent, aside(scope.context, "retired"), path]
        keywords = self._store.keywords
        page = PageRow()
        totals = [0, 0, 0]  # chunks, embedded, reused
        first: int | None = None
        try:
            # What a run that died here left behind.
            self._drop_in_pieces(staged)
            self._drop_in_pieces(retired)
            pending: list[tuple[EmbeddedChunk, str, str]] = []
            for item in chunks:
                pending.append((item, *keywords.analyse(item.chunk.content, item.chunk.metadata)))
                if len(pending) == STAGE_PIECE_CHUNKS:
                    first = self._stage_piece(
                        header, staged[1], pending, page=page, totals=totals, first=first
                    )
                    pending = []
            if pending:
                first = self._stage_piece(
                    header, staged[1], pending, page=page, totals=totals, first=first
                )
            count = totals[0]
            conn = self._writing(path)
            where = [scope.agent, scope.context, path]
            table = keywords.table(conn, scope.agent, scope.context, create=True)
            assert table is not None  # create=True always names one
            old_ids = f"SELECT id FROM chunks WHERE {_PATH_CONDITION}"  # noqa: S608
            remove_pages(conn, table, old_ids, where)
            conn.execute(
                f"UPDATE chunks SET context = ? WHERE {_PATH_CONDITION}",  # noqa: S608
                [retired[1], *where],
            )
            for name in ("problems", "documents"):
                conn.execute(f"DELETE FROM {name} WHERE {_PATH_CONDITION}", where)  # noqa: S608
            moved = conn.execute(
                f"UPDATE chunks SET context = ? WHERE {_PATH_CONDITION}",  # noqa: S608
                [scope.context, *staged],
            ).rowcount
            if moved != count:  # another process cleaned this scope's staging meanwhile
                raise StoreError(
                    f"cannot write {path}: {count - moved} of its {count} staged chunks "
                    "went missing (another writer cleaned up the scope); try again"
                )
            if first is not None:
                keywords.add_page(conn, table, first, page)
            self._insert_document(conn, header, count, totals[1], totals[2])
            conn.execute("COMMIT")
        except BaseException as exc:
            _rollback(conn)
            self._verified = None  # an identity recorded by the failed piece went with it
            with suppress(sqlite3.Error, StoreError):
                self._drop_in_pieces(staged)
            if isinstance(exc, sqlite3.Error):
                raise self._store_error(f"cannot write {path}", exc) from exc
            raise
        try:
            self._drop_in_pieces(retired)
        except sqlite3.Error as exc:  # written and searchable; the next write of it cleans up
            raise self._store_error(f"cannot clean up after writing {path}", exc) from exc
        return count

    def _stage_piece(
        self,
        header: DocumentHeader,
        context: str,
        pending: list[tuple[EmbeddedChunk, str, str]],
        *,
        page: PageRow,
        totals: list[int],
        first: int | None,
    ) -> int | None:
        """One short transaction of staged chunks (analysed: ``KeywordIndex.analyse``);
        adds to ``totals`` (chunks, embedded, reused) and returns the first chunk's rowid."""
        conn = self._conn
        assert conn is not None
        scope = self._scope
        keywords = self._store.keywords
        self._begin(conn)
        table = keywords.table(conn, scope.agent, scope.context, create=True)
        assert table is not None  # create=True always names one
        for item, terms, headings in pending:
            rowid = self._insert_chunk(conn, header, context, item)
            keywords.insert(conn, table, rowid, terms, headings)
            page.add(terms.split())
            first = rowid if first is None else first
            totals[0] += 1
            if item.vector is not None:
                totals[2 if item.reused else 1] += 1
        conn.execute("COMMIT")
        return first

    def _drop_in_pieces(self, where: list[str]) -> None:
        """Delete the chunk rows at ``where`` (a staged or set-aside document) and their
        terms, ``STAGE_PIECE_CHUNKS`` per transaction."""
        conn = self._conn
        assert conn is not None
        scope = self._scope
        while True:
            rowids = [
                row[0]
                for row in conn.execute(
                    f"SELECT id FROM chunks WHERE {_PATH_CONDITION} LIMIT ?",  # noqa: S608
                    [*where, STAGE_PIECE_CHUNKS],
                )
            ]
            if not rowids:
                return
            self._begin(conn)
            table = self._store.keywords.table(conn, scope.agent, scope.context, create=False)
            marks = ", ".join("?" * len(rowids))
            if table is not None:
                conn.execute(f"DELETE FROM {table} WHERE rowid IN ({marks})", rowids)  # noqa: S608
            conn.execute(f"DELETE FROM chunks WHERE id IN ({marks})", rowids)  # noqa: S608
            conn.execute("COMMIT")

    def _commit_batch(self) -> None:
        """End the batch being written now (it holds whole documents only)."""
        conn = self._conn
        if conn is not None and conn.in_transaction:
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                _rollback(conn)
                raise self._store_error("cannot commit", exc) from exc

    # --- transactions -----------------------------------------------------------------

    def _begin(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        self._in_batch = 0
        self._bumped = False
        self._batch_started = time.monotonic()
        store = self._store
        store.keywords.check(conn, store.path)
        recorded = recorded_identity(conn)
        if recorded is not None and recorded != store.identity:
            raise store.mismatch(recorded, store.identity)

    def _writing(self, path: str, *, touch: bool = True) -> sqlite3.Connection:
        """The session's connection inside a write transaction, before a change to
        ``path``. Bumps the agent's generation once per transaction, so cached vectors of
        the old generation are not used once it commits."""
        if self._conn is None:
            raise StoreError("the write session is not open (use it in a with-block)")
        conn = self._conn
        try:
            if not conn.in_transaction:
                try:
                    self._begin(conn)
                except BaseException:
                    _rollback(conn)
                    raise
            if not self._bumped:
                bump_generation(conn, self._scope.agent)
                self._bumped = True
        except sqlite3.Error as exc:
            raise self._store_error(f"cannot start writing {path}", exc) from exc
        if touch:
            self._touched.add(path)
        return conn

    def _document_done(self) -> None:
        """End the batch if it is full or old enough (only ever between documents)."""
        conn = self._conn
        if conn is None or not conn.in_transaction:
            return
        self._in_batch += 1
        full = self._in_batch >= self._batch_documents
        if full or time.monotonic() - self._batch_started >= self._batch_seconds:
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                _rollback(conn)
                raise self._store_error("cannot commit", exc) from exc

    # --- rows -------------------------------------------------------------------------

    def _insert(
        self, conn: sqlite3.Connection, header: DocumentHeader, chunks: Iterable[EmbeddedChunk]
    ) -> int:
        scope = self._scope
        keywords = self._store.keywords
        table = keywords.table(conn, scope.agent, scope.context, create=True)
        assert table is not None  # create=True always names one
        count = embedded = reused = 0
        first: int | None = None  # the page row's rowid (page_index)
        page = PageRow()
        for item in chunks:
            rowid = self._insert_chunk(conn, header, scope.context, item)
            page.add(keywords.add(conn, table, rowid, item.chunk.content, item.chunk.metadata))
            first = rowid if first is None else first
            count += 1
            if item.vector is not None:
                reused += item.reused
                embedded += not item.reused
        if first is not None:
            keywords.add_page(conn, table, first, page)
        self._insert_document(conn, header, count, embedded, reused)
        return count

    def _insert_chunk(
        self, conn: sqlite3.Connection, header: DocumentHeader, context: str, item: EmbeddedChunk
    ) -> int:
        """Insert one chunk row under ``context`` (the scope's, or its staging context);
        its rowid."""
        chunk = item.chunk
        cursor = conn.execute(
            "INSERT INTO chunks (doc_id, agent, context, path, chunk_index, content,"
            " metadata, vector, embedding_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                header.document_id,
                self._scope.agent,
                context,
                header.path,
                chunk.chunk_index,
                chunk.content,
                to_json(chunk.metadata),
                self._vector_blob(conn, header.path, chunk.chunk_index, item.vector),
                item.embedding_key if item.vector is not None else None,
            ),
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def _insert_document(
        self,
        conn: sqlite3.Connection,
        header: DocumentHeader,
        count: int,
        embedded: int,
        reused: int,
    ) -> None:
        scope = self._scope
        source_type = header.metadata.get(FORMAT)  # the column's name from before origins
        conn.execute(
            "INSERT INTO documents (doc_id, agent, context, path, content_hash, version,"
            " chunk_count, indexed_at, metadata, source_type, size, embedded_chunks,"
            " reused_chunks) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                header.document_id,
                scope.agent,
                scope.context,
                header.path,
                header.content_hash,
                header.version,
                count,
                utc_text(header.indexed_at),
                to_json(header.metadata),
                source_type if isinstance(source_type, str) else None,
                header.size,
                embedded,
                reused,
            ),
        )

    def _delete_path(self, path: str) -> bool:
        """Delete the document, its chunks, terms and problem; True if it was indexed."""
        return self._delete_where(_PATH_CONDITION, [self._scope.agent, self._scope.context, path])

    def _delete_where(self, condition: str, params: list[str]) -> bool:
        conn = self._conn
        assert conn is not None
        # ``condition`` is one of this module's constant clauses; values are bound.
        self._store.keywords.remove(conn, self._scope, condition, params)
        conn.execute(f"DELETE FROM chunks WHERE {condition}", params)  # noqa: S608
        conn.execute(f"DELETE FROM problems WHERE {condition}", params)  # noqa: S608
        deleted = conn.execute(f"DELETE FROM documents WHERE {condition}", params)  # noqa: S608
        return deleted.rowcount > 0

    def _drop_untouched(self) -> None:
        """replace_scope: remove what the scope held when the session began and the
        session did not touch (in the last transaction, committed by ``__exit__``)."""
        for path in sorted(self._replaced - self._touched):
            self._writing(path)
            self._delete_path(path)

    def _vector_blob(
        self,
        conn: sqlite3.Connection,
        path: str,
        chunk_index: int,
        vector: Sequence[float] | None,
    ) -> bytes | None:
        """Check the vector against the file's identity; return it unit-normalised."""
        store = self._store
        if vector is not None and not store.with_vectors:
            raise ConfigurationError(
                f"chunk {chunk_index} of {path} has a vector, but the store was opened "
                "without an embedder to name it"
            )
        identity = store.identity if vector is not None else KEYWORD_ONLY
        if identity != self._verified:
            self._claim_identity(conn, identity)
        if vector is None:
            return None
        return encode(vector, identity, f"chunk {chunk_index} of {path}")

    def _claim_identity(self, conn: sqlite3.Connection, identity: Identity) -> None:
        """Record ``identity`` in a file that has none; refuse one that differs."""
        recorded = recorded_identity(conn)
        if recorded is None:
            conn.executemany(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                [("embedder", identity.name), ("dimensions", str(identity.dimensions))],
            )
        elif recorded != identity:
            raise self._store.mismatch(recorded, identity)
        self._verified = identity

    def _store_error(self, what: str, exc: sqlite3.Error) -> StoreError:
        store = self._store
        if is_damage(exc):
            store.damaged(exc)
            return StoreError(f"index {store.path}: {what}: {damage_advice(store.path)} ({exc})")
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            return StoreError(
                f"index {store.path}: {what}: the file is locked by another writer "
                f"(waited {BUSY_TIMEOUT_S:.0f} s)"
            )
        return StoreError(f"index {store.path}: {what}: {exc}")


def _rollback(conn: sqlite3.Connection) -> None:
    """End the connection's transaction, if any, undoing it (errors are beside the point)."""
    if conn.in_transaction:
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
