"""Connections to the embedded store's file, and how a damaged file is recognised.

A pool rather than one connection per thread: a thread-per-request server would
otherwise leave a connection behind for every finished thread. ``":memory:"`` is one
connection behind a re-entrant lock (each connection to it would be its own database).

**Damage.** ``check_file`` runs ``PRAGMA quick_check`` when the store opens (it reads
every page of the file once, a second or so per 500 MB: damage found at start-up is
better than a server that answers READY and fails every search). SQLite reports damage
it meets later as ``SQLITE_CORRUPT`` (``is_damage``); the store then says so in its
status. Either way the fix is the same: the index is a copy, so delete the file and it
is rebuilt from the documents.

**Concurrency.** WAL journal. Every operation of the store borrows a connection from this
pool. Each search is one read transaction: it sees the file as of the last commit, never
half a document, and never waits for a writer. Writes go through ``write_session``
(batched transactions). Writers (also in other processes) queue on
SQLite's write lock for up to 30 seconds. A ``":memory:"`` store has one connection:
there, searches from other threads wait for an open session (and the session's own
thread sees its uncommitted writes).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from typing import Final

from knowledge.core.errors import StoreError

from .filter_sql import register_functions

__all__ = [
    "BUSY_TIMEOUT_S",
    "MEMORY",
    "MMAP_BYTES",
    "WAL_LIMIT_BYTES",
    "ConnectionPool",
    "DamagedFileError",
    "check_file",
    "damage_advice",
    "is_damage",
]

MEMORY: Final = ":memory:"
BUSY_TIMEOUT_S: Final = 30.0
WAL_LIMIT_BYTES: Final = 64 * 1024 * 1024
"""The size a WAL file is cut back to whenever it starts over (``journal_size_limit``,
``maintenance``)."""
MMAP_BYTES: Final = 1024 * 1024 * 1024
"""How much of the file each connection reads through a memory map (``PRAGMA
mmap_size``) rather than by a system call per page into its own page cache: a keyword
search in a large scope reads a few hundred scattered pages (FTS5's index blocks, the
best candidates' rows), which otherwise cost a copy each and push one another out of
the connection's 2 MB cache. The mapped pages are the kernel's file cache, shared by
every connection and process (a process's RSS counts those it touched, as file pages
the kernel may reclaim, not as its heap)."""
_MAX_IDLE_CONNECTIONS: Final = 4
_CORRUPTION_CODES: Final = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
_SHOWN_PROBLEMS: Final = 3


class DamagedFileError(Exception):
    """``check_file`` found damage; the message says what SQLite found.
    ``not_a_database``: the file does not even start like an SQLite database."""

    def __init__(self, found: str, *, not_a_database: bool = False) -> None:
        super().__init__(found)
        self.not_a_database = not_a_database


def is_damage(exc: BaseException) -> bool:
    """True if ``exc`` is SQLite reporting a damaged file (or not a database at all)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and (code & 0xFF) in _CORRUPTION_CODES


def damage_advice(name: str) -> str:
    """What to tell the operator about the damaged index file ``name``."""
    return (
        f"the index file {name} is damaged: delete it (and its -wal and -shm files, with "
        "the server stopped) and start again; the index is rebuilt from the folder"
    )


def check_file(conn: sqlite3.Connection) -> None:
    """Raise ``DamagedFileError`` unless ``PRAGMA quick_check`` finds the file sound."""
    try:
        rows = conn.execute("PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError as exc:
        if is_damage(exc):
            code = getattr(exc, "sqlite_errorcode", 0)
            raise DamagedFileError(str(exc), not_a_database=code == sqlite3.SQLITE_NOTADB) from exc
        raise
    if rows != [("ok",)]:
        found = "; ".join(str(row[0]) for row in rows[:_SHOWN_PROBLEMS])
        more = f" (and {len(rows) - _SHOWN_PROBLEMS} more)" if len(rows) > _SHOWN_PROBLEMS else ""
        raise DamagedFileError(f"quick_check: {found}{more}")


class ConnectionPool:
    """SQLite connections to one database, each used by one thread at a time."""

    def __init__(self, target: str) -> None:
        self._target = target
        self._lock = threading.Lock()
        self._idle: list[sqlite3.Connection] = []
        self._borrowed = 0
        self._to_shrink = 0  # borrowed connections to shrink when released (``shrink``)
        self._closed = False
        self._memory_lock: threading.RLock | None = None
        self._memory: sqlite3.Connection | None = None
        if target == MEMORY:
            self._memory_lock = threading.RLock()
            self._memory = self._connect()

    @property
    def target(self) -> str:
        return self._target

    @property
    def name(self) -> str:
        """The file's name without its folder (for messages that leave this machine)."""
        return self._target if self._target == MEMORY else os.path.basename(self._target)

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: transactions are begun and ended explicitly, never implied.
        try:
            conn = sqlite3.connect(
                self._target,
                timeout=BUSY_TIMEOUT_S,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the index file {self._target}: {exc}") from exc
        try:
            # WAL + NORMAL cannot corrupt the file; a power cut may lose the last commits,
            # and an index can always be rebuilt from its source.
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")  # reads map the file (MMAP_BYTES)
            # Per connection, not kept in the file: without it a WAL that once grew for a
            # large write keeps its size for good (``maintenance``).
            conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")
            register_functions(conn)  # what filter conditions call
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
                self._borrowed += 1
                return self._idle.pop()
        conn = self._connect()
        with self._lock:
            self._borrowed += 1
        return conn

    def release(self, conn: sqlite3.Connection) -> None:
        if conn is self._memory and self._memory_lock is not None:
            self._memory_lock.release()
            return
        if conn.in_transaction:
            conn.rollback()
        with self._lock:
            self._borrowed -= 1
            shrink = self._to_shrink > 0
            if shrink:
                self._to_shrink -= 1
        if shrink:
            conn.execute("PRAGMA shrink_memory")
        with self._lock:
            if not self._closed and len(self._idle) < _MAX_IDLE_CONNECTIONS:
                self._idle.append(conn)
                return
        conn.close()

    def shrink(self) -> None:
        """Free the connections' page caches (``PRAGMA shrink_memory``): the idle ones'
        now, the borrowed ones' when they are released. After a large write they hold
        its pages, up to 2 MiB each, which no search may read again."""
        with self._lock:
            self._to_shrink = self._borrowed
            for conn in self._idle:
                conn.execute("PRAGMA shrink_memory")

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
