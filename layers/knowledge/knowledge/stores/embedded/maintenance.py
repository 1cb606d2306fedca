"""Giving disk and memory back after large writes: free pages, the WAL, freed heap.

Deleting or replacing a large document frees its pages inside the file, and a long write
leaves a long ``-wal`` file behind; neither shrinks by itself. Measured with
``python -m bench resources`` (``kb serve``, one 120,000-chunk document indexed, searched
and deleted): without this module the index file stayed 34 times its size before the
document, three quarters of it free pages, beside a WAL of 330 MB.

**Free pages.** A new file is made with ``auto_vacuum = INCREMENTAL`` (``prepare``: it
must be set before the first table exists), so free pages can be cut off the end of the
file a few at a time. A file made without it is converted once when it is opened
(``convert``: ``VACUUM`` rewrites its live pages; 320 MB took 1.8 s) when it holds at
most ``CONVERT_MAX_BYTES`` of them; a larger one would keep the store closed for too long
at start-up, so it is left as it is (its free pages are still reused by later writes) and
the log says how to convert it. ``reclaim`` cuts the free pages off in transactions of
``STEP_PAGES`` pages, pausing between them, so another writer (another scope, another
process) waits for one step at most.

**The keyword index.** FTS5 does not remove a deleted row's terms: it writes a delete
marker beside them, and both stay until their segments are merged, so a deleted
document's terms outlive it (measured: the keyword data *grew* by half when a document
of 13,000 chunks was deleted). After a write that left many free pages, the keyword
tables of the written scope are merged into one segment (``merge_keywords``: FTS5's
``merge`` command, ``MERGE_STEP_PAGES`` of merge work per transaction), which drops the
deleted terms, before the free pages are cut off. That rewrites the table's live terms
once; a write that frees a quarter of the file has freed at least a third of what is
left, so the work is of the order of the write.

**The WAL.** Every connection sets ``journal_size_limit`` (``connections``): whenever the
WAL starts over, its file is cut to ``WAL_LIMIT_BYTES``. It starts over only once every
reader has left its old frames, and one write transaction needs as much WAL as it
writes, so after a large write ``checkpoint`` copies the WAL back (``PASSIVE``, which
never waits) and then cuts it to nothing (``TRUNCATE``) with a short busy timeout: a
search holding the old frames makes it give up (and retry a few times), never fail.

**Memory.** Measured in the server after the 120,000-chunk document: glibc kept the
blocks freed by the reads behind its vector matrix in its arenas (130 MB), the store's
caches held versions no search could use any more (the store drops them when a write
ends), and SQLite held its page caches (up to 2 MiB per pooled connection, full of the
write's pages). After a large write the connections' page caches are freed
(``ConnectionPool.shrink``) and ``release_memory`` asks glibc to hand its free pages back
(``malloc_trim``; elsewhere it does nothing).

**Taking turns.** Every step is its own short transaction. The store's other write
sessions come first: while one is open, the work stops (``busy``) and what is left is
done when the last of them ends. ``Maintenance.after_write`` is the policy the store runs
on the thread that ended a write session (the writer that made the work pays for it:
some 5 s after deleting the 120,000-chunk document, against the 40 s its indexing took);
``Maintenance.run`` does the rest at once, and ``Maintenance.due`` says whether there is
any: a run that stopped for another session or whose checkpoint gave up to a search is
owed until one finishes (``kb serve`` runs it once the server is idle:
``knowledge.local.idle_maintenance``).
"""

from __future__ import annotations

import ctypes
import logging
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from .connections import BUSY_TIMEOUT_S, MEMORY, WAL_LIMIT_BYTES, ConnectionPool

__all__ = [
    "CONVERT_MAX_BYTES",
    "MERGE_STEP_PAGES",
    "RECLAIM_MIN_PAGES",
    "RECLAIM_SHARE",
    "STEP_PAGES",
    "WAL_LIMIT_BYTES",
    "FileSpace",
    "Maintenance",
    "MaintenanceReport",
    "checkpoint",
    "convert",
    "file_space",
    "merge_keywords",
    "prepare",
    "reclaim",
    "release_memory",
]

logger = logging.getLogger("knowledge.stores.embedded.store")

STEP_PAGES: Final = 1024
"""Free pages cut off the file per transaction (4 MiB at 4 KiB pages): measured 40 ms on
average, 0.2 s at most, while cutting off a deleted 120,000-chunk document's pages."""

MERGE_STEP_PAGES: Final = (16, 1024)
"""FTS5 pages (4 KB each) of merge output per transaction, at least and at most: the amount
adapts so that a step takes about ``STEP_SECONDS``. Merging away a deleted document's
terms reads far more than it writes (measured: 0.7 s for a step of 256 pages after a
120,000-chunk document was deleted, 0.4 s for 16), an ordinary merge about as much."""

STEP_SECONDS: Final = 0.1
"""What one merge step aims to take (``MERGE_STEP_PAGES``)."""

STEP_PAUSE_S: Final = 0.02
"""Between two steps: room for a waiting writer's busy handler to find the lock free."""

RECLAIM_SHARE: Final = 0.25
"""Maintain once free pages are this share of the file (and at least
``RECLAIM_MIN_PAGES``); fewer are left for later writes to reuse."""

RECLAIM_MIN_PAGES: Final = 256
"""1 MiB at SQLite's default 4 KiB page (some 10 ms of work): below it a file is not worth
maintaining."""

CONVERT_MAX_BYTES: Final = 1024 * 1024 * 1024
"""Live pages a file without auto_vacuum may have to be converted when opened (``convert``:
one ``VACUUM``; measured 1.8 s for 320 MB, so some 6 s at this size)."""

TRIM_AFTER_BYTES: Final = 16 * 1024 * 1024
"""Cache bytes dropped after a write that make asking glibc for its free pages worth it."""

_CHECKPOINT_BUSY_MS: Final = 200
_CHECKPOINT_ATTEMPTS: Final = 5
_AUTO_VACUUM_NONE: Final = 0
_AUTO_VACUUM_INCREMENTAL: Final = 2


def prepare(conn: sqlite3.Connection) -> None:
    """Make an empty file incremental-vacuum: before its first table, or never."""
    if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")


@dataclass(frozen=True, slots=True)
class FileSpace:
    """The file's pages as SQLite counts them (``page_size`` bytes each), and its WAL."""

    page_size: int
    pages: int
    free_pages: int
    auto_vacuum: int
    wal_bytes: int

    @property
    def live_bytes(self) -> int:
        return (self.pages - self.free_pages) * self.page_size

    @property
    def mostly_free(self) -> bool:
        """Free pages are many: a large write removed much (``RECLAIM_SHARE``)."""
        return self.free_pages >= max(RECLAIM_MIN_PAGES, RECLAIM_SHARE * self.pages)

    @property
    def incremental(self) -> bool:
        """Free pages can be cut off the file (``auto_vacuum = INCREMENTAL``)."""
        return self.auto_vacuum == _AUTO_VACUUM_INCREMENTAL


def file_space(conn: sqlite3.Connection, target: str) -> FileSpace:
    """Read ``FileSpace`` (``target`` names the file, whose ``-wal`` is measured)."""

    def pragma(name: str) -> int:
        return int(conn.execute(f"PRAGMA {name}").fetchone()[0])

    try:
        wal = os.stat(f"{target}-wal").st_size
    except OSError:
        wal = 0
    return FileSpace(
        page_size=pragma("page_size"),
        pages=pragma("page_count"),
        free_pages=pragma("freelist_count"),
        auto_vacuum=pragma("auto_vacuum"),
        wal_bytes=wal,
    )


def convert(conn: sqlite3.Connection, target: str, display: str) -> bool:
    """Convert a file made without auto_vacuum to incremental (module docstring); whether
    it was. Outside any transaction, when the file is opened; a failure (the disk is
    full, another process holds the write lock) leaves the file as it was."""
    space = file_space(conn, target)
    if space.auto_vacuum != _AUTO_VACUUM_NONE or space.pages == 0:
        return False
    if space.live_bytes > CONVERT_MAX_BYTES:
        logger.warning(
            "index %s: not converted to incremental vacuum (%d MB of pages would take too "
            "long to rewrite at start-up); its free pages are reused but never given back. "
            "To convert it, stop the server and run: sqlite3 %s 'PRAGMA auto_vacuum = "
            "INCREMENTAL; VACUUM'",
            display,
            space.live_bytes // 1_000_000,
            display,
        )
        return False
    started = time.monotonic()
    try:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("VACUUM")
    except sqlite3.OperationalError as exc:
        logger.warning("index %s: not converted to incremental vacuum: %s", display, exc)
        return False
    checkpoint(conn)  # VACUUM wrote every live page to the WAL
    logger.info(
        "index %s: converted to incremental vacuum in %.1f s (%d MB of free pages given back)",
        display,
        time.monotonic() - started,
        space.free_pages * space.page_size // 1_000_000,
    )
    return True


def _step(conn: sqlite3.Connection, script: str) -> None:
    """Run ``script`` (one write) in its own transaction; undone if it fails."""
    try:
        # executescript steps every statement to its end: execute() would stop a pragma
        # that answers no columns after its first step (incremental_vacuum: one page).
        conn.executescript(f"BEGIN IMMEDIATE; {script}; COMMIT;")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def merge_keywords(conn: sqlite3.Connection, table: str, should_yield: Callable[[], bool]) -> bool:
    """Merge the FTS5 ``table`` into one segment, dropping deleted rows' terms, in steps of
    ``MERGE_STEP_PAGES``; ``True`` when done, ``False`` when ``should_yield()`` stopped it
    first (a later call starts over and redoes little). A missing table is done."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).fetchone()
    if exists is None or not table.replace("_", "").isalnum():
        return True  # the name is written into SQL below: one of the store's own tables only
    # A negative amount starts a merge of every segment whatever its level (an optimize,
    # step by step); a positive one carries it on. Done once a step changes fewer than
    # two rows (FTS5's documented test).
    least, most = MERGE_STEP_PAGES
    pages, sign = least, -1
    while not should_yield():
        before = conn.total_changes
        started = time.monotonic()
        _step(conn, f"INSERT INTO {table} ({table}, rank) VALUES ('merge', {sign * pages})")  # noqa: S608
        if conn.total_changes - before < 2:
            return True
        took = time.monotonic() - started
        if took < STEP_SECONDS / 2:
            pages = min(pages * 2, most)
        elif took > STEP_SECONDS:
            pages = max(pages // 2, least)
        sign = 1
        time.sleep(STEP_PAUSE_S)
    return False


def reclaim(conn: sqlite3.Connection, should_yield: Callable[[], bool]) -> int:
    """Cut every free page off the file, ``STEP_PAGES`` per transaction; the pages cut.
    Stops early when ``should_yield()`` says another writer of this store is waiting."""
    freed = 0
    while True:
        free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
        if free == 0 or should_yield():
            return freed
        _step(conn, f"PRAGMA incremental_vacuum({min(free, STEP_PAGES)})")
        after = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
        if after >= free:  # nothing moved: a file without incremental vacuum
            return freed
        freed += free - after
        time.sleep(STEP_PAUSE_S)


def checkpoint(conn: sqlite3.Connection) -> bool:
    """Copy the WAL into the file and cut it to nothing; ``False`` when searches kept
    holding its frames (the WAL is then cut to ``WAL_LIMIT_BYTES`` when it next starts
    over). Waits ``_CHECKPOINT_BUSY_MS`` per attempt at most, so a writer is never held
    up for long; readers are never refused."""
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    conn.execute(f"PRAGMA busy_timeout = {_CHECKPOINT_BUSY_MS}")
    try:
        for attempt in range(_CHECKPOINT_ATTEMPTS):
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            if not busy:
                return True
            time.sleep(0.05 * (attempt + 1))
        return False
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")


def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim  # glibc; musl and others have none
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_TRIM: Final = _malloc_trim()


def release_memory() -> None:
    """Hand the heap's free pages back to the system (glibc ``malloc_trim(0)``, every
    arena); a no-op where there is no such call."""
    if _TRIM is not None:
        _TRIM(0)


@dataclass(frozen=True, slots=True)
class MaintenanceReport:
    """What one maintenance did: keyword tables merged, pages cut off the file, whether
    the WAL was cut to nothing and freed heap handed back, and whether work is left
    (it stopped for another write session)."""

    merged_tables: tuple[str, ...] = ()
    reclaimed_pages: int = 0
    wal_truncated: bool = False
    memory_released: bool = False
    unfinished: bool = False


class Maintenance:
    """The store's maintenance of one file (module docstring), one run at a time.

    ``busy()`` says whether another write session of the store is open: the work then
    waits for that session's end (which runs ``after_write`` again) rather than taking
    turns with it. Keyword tables left unmerged are remembered for the next run.
    """

    def __init__(self, pool: ConnectionPool, busy: Callable[[], bool]) -> None:
        self._pool = pool
        self._busy = busy
        self._running = threading.Lock()
        self._unmerged: set[str] = set()
        # A run stopped for another session, or a WAL a search kept from being cut.
        self._unfinished = False
        self._wal_owed = False

    def after_write(self, tables: Iterable[str], dropped_bytes: int) -> MaintenanceReport:
        """After a write session on a scope whose keyword ``tables`` are given: when many
        pages are free, merge those tables and cut the free pages off; cut a WAL longer
        than ``WAL_LIMIT_BYTES``; hand freed heap back when much was freed
        (``dropped_bytes``: cache bytes the store just dropped)."""
        return self._maintain(tables, force=False, dropped_bytes=dropped_bytes)

    def run(self) -> MaintenanceReport:
        """Whatever the thresholds: finish merges left undone, cut every free page off,
        cut the WAL to nothing, hand freed heap back."""
        return self._maintain((), force=True, dropped_bytes=0)

    def due(self) -> bool:
        """Whether ``run`` has work a write session's end left: a run stopped for another
        session, keyword tables left unmerged, a WAL a search kept from being cut, free
        pages a write would maintain (``FileSpace.mostly_free``) or a WAL longer than
        ``WAL_LIMIT_BYTES`` (another process's write, say). A few pragmas and a ``stat``."""
        if self._pool.target == MEMORY:
            return False
        if self._unfinished or self._wal_owed or self._unmerged:
            return True
        conn = self._pool.acquire()
        try:
            space = file_space(conn, self._pool.target)
        finally:
            self._pool.release(conn)
        return (space.incremental and space.mostly_free) or space.wal_bytes > WAL_LIMIT_BYTES

    def _maintain(
        self, tables: Iterable[str], *, force: bool, dropped_bytes: int
    ) -> MaintenanceReport:
        if self._pool.target == MEMORY:
            return MaintenanceReport()
        if self._busy() or not self._running.acquire(blocking=False):
            self._unfinished = True  # the next session's end does it, or an idle run
            return MaintenanceReport(unfinished=True)
        try:
            conn = self._pool.acquire()
            try:
                report = self._on(conn, tables, force=force, dropped_bytes=dropped_bytes)
            finally:
                self._pool.release(conn)
            self._unfinished = report.unfinished
            return report
        finally:
            self._running.release()

    def _on(
        self,
        conn: sqlite3.Connection,
        tables: Iterable[str],
        *,
        force: bool,
        dropped_bytes: int,
    ) -> MaintenanceReport:
        space = file_space(conn, self._pool.target)
        if not space.incremental:  # nothing to cut off: merging would only cost
            return self._wal_and_memory(conn, space, force=force, dropped_bytes=dropped_bytes)
        if space.mostly_free:
            self._unmerged.update(tables)
        merged: list[str] = []
        for table in sorted(self._unmerged):
            if not merge_keywords(conn, table, self._busy):
                break
            merged.append(table)
            self._unmerged.discard(table)
        if merged:
            space = file_space(conn, self._pool.target)
        reclaimed, left = 0, 0
        if space.free_pages and (force or merged or space.mostly_free):
            reclaimed = reclaim(conn, self._busy)
            left = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
        report = self._wal_and_memory(
            conn, space, force=force or bool(merged) or reclaimed > 0, dropped_bytes=dropped_bytes
        )
        return MaintenanceReport(
            tuple(merged),
            reclaimed,
            report.wal_truncated,
            report.memory_released,
            unfinished=bool(self._unmerged) or left > 0,
        )

    def _wal_and_memory(
        self, conn: sqlite3.Connection, space: FileSpace, *, force: bool, dropped_bytes: int
    ) -> MaintenanceReport:
        """Cut the WAL when it is long (or ``force``), and hand memory back when much was
        freed: the idle connections' page caches, then the heap's free pages."""
        large = force or space.wal_bytes > WAL_LIMIT_BYTES
        truncated = checkpoint(conn) if large else False
        if large:
            self._wal_owed = not truncated
        released = large or dropped_bytes >= TRIM_AFTER_BYTES
        if released:
            self._pool.shrink()  # this connection too, when it is released
            release_memory()
        return MaintenanceReport(wal_truncated=truncated, memory_released=released)
