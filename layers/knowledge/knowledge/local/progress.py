"""Progress of a long index run: a source that counts what the store reads, shared counts
the status route reports, and a one-line terminal bar.

The store reads a document's bytes when it processes it, so counting reads counts
progress without any callback in the indexing contract (``ListedSource``).
``IndexingProgress`` holds the counts of a run across scopes (thread-safe: the indexing
thread writes, request threads read). ``ScopeActivity`` is what the folder watcher's jobs
are doing per scope after start-up: files done of the change, the document being written
(``knowledge.ingest.progress``) and the files queued behind it. ``ProgressBar`` draws
``\\r`` lines on a terminal.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import TextIO

from knowledge.core.model import FileProblem, IndexOptions, IndexProgress, IndexState, IndexStatus
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.ingest.progress import estimate_chunks
from knowledge.ingest.sources import Listing

__all__ = ["IndexingProgress", "ListedSource", "ProgressBar", "ScopeActivity"]


class ListedSource:
    """A source listed once up front (so a progress report knows its total), whose
    ``read`` calls ``on_read(path)`` the first time each document is read.

    What the original listing skipped or found wrong (``Listing.skipped``/``errors``),
    and its counts of the files no pattern selects (``Listing.unread``), are handed on
    unchanged. ``on_read`` may raise to abort the run.
    """

    def __init__(
        self, listing: Iterable[SourceDocument], on_read: Callable[[str], None] | None = None
    ) -> None:
        self._documents = list(listing)
        self._skipped: list[FileProblem] = list(getattr(listing, "skipped", []))
        self._errors: list[FileProblem] = list(getattr(listing, "errors", []))
        self._unread = getattr(listing, "unread", None)
        self.on_read = on_read

    def __len__(self) -> int:
        return len(self._documents)

    @property
    def paths(self) -> list[str]:
        return [document.path for document in self._documents]

    def documents(self, scope: KnowledgeScope, options: IndexOptions) -> Listing[SourceDocument]:
        seen: set[str] = set()

        def produce(listing: Listing[SourceDocument]) -> Iterator[SourceDocument]:
            listing.skipped.extend(self._skipped)
            listing.errors.extend(self._errors)
            if self._unread is not None:
                listing.unread.update(self._unread)
            for document in self._documents:
                yield replace(document, read=self._counting_read(document, seen))

        return Listing(produce)

    def _counting_read(self, document: SourceDocument, seen: set[str]) -> Callable[[], bytes]:
        def read() -> bytes:
            if document.path not in seen and self.on_read is not None:
                seen.add(document.path)
                self.on_read(document.path)
            return document.read()

        return read


class IndexingProgress:
    """The counts of one index run over several scopes, read while it runs.

    ``prepare`` says a run is about to list its folders (from then on ``listing`` is
    true, so a status asked before the totals are known still says the index is under
    way); ``begin`` names every scope of the run and its document total; ``advance``
    counts one document; ``finish_scope`` marks a scope done (its count jumps to its
    total: documents skipped without a read count too); ``end`` closes the run. A scope
    is *pending* from ``begin`` until ``finish_scope`` or ``end``. ``status`` is what the
    status route answers for a scope: ``INDEXING`` while listing or while it is pending.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: dict[KnowledgeScope, int] = {}
        self._done: dict[KnowledgeScope, int] = {}
        self._pending: set[KnowledgeScope] = set()
        self._running = False
        self._listing = False
        self._ended = False

    def prepare(self) -> None:
        with self._lock:
            if not self._running:
                self._running = True
                self._listing = True

    @property
    def listing(self) -> bool:
        """True between ``prepare`` and ``begin``: the run is still listing its folders."""
        with self._lock:
            return self._listing

    def begin(self, totals: Mapping[KnowledgeScope, int]) -> None:
        with self._lock:
            self._totals = dict(totals)
            self._done = dict.fromkeys(totals, 0)
            self._pending = set(totals)
            self._running = True
            self._listing = False

    def advance(self, scope: KnowledgeScope) -> None:
        with self._lock:
            if scope in self._pending:
                self._done[scope] = min(self._done[scope] + 1, self._totals[scope])

    def finish_scope(self, scope: KnowledgeScope) -> None:
        with self._lock:
            if scope in self._pending:
                self._done[scope] = self._totals[scope]
                self._pending.discard(scope)

    def end(self) -> None:
        with self._lock:
            self._pending.clear()
            self._running = False
            self._listing = False
            self._ended = True

    @property
    def running(self) -> bool:
        with self._lock:
            return self._running

    @property
    def ended(self) -> bool:
        """True once a run has ended (finished or abandoned)."""
        with self._lock:
            return self._ended

    def of(self, scope: KnowledgeScope) -> IndexProgress | None:
        """The scope's counts while it is pending, else ``None``."""
        with self._lock:
            if scope not in self._pending:
                return None
            return IndexProgress(self._done[scope], self._totals[scope])

    def overall(self) -> IndexProgress:
        with self._lock:
            return IndexProgress(sum(self._done.values()), sum(self._totals.values()))

    def status(self, scope: KnowledgeScope, status: IndexStatus) -> IndexStatus:
        """The store's ``status`` of ``scope`` as the run sees it: ``INDEXING`` while the
        folders are listed, and with the scope's counts while it is pending."""
        if self.listing:
            return replace(
                status,
                state=IndexState.INDEXING,
                message="start-up index: listing the folders",
                progress=None,
            )
        progress = self.of(scope)
        if progress is None:
            return status
        return replace(
            status,
            state=IndexState.INDEXING,
            message=f"start-up index: {progress.documents_done} of "
            f"{progress.documents_total} documents",
            progress=progress,
        )


class _Running:
    """One scope's job: files done of its total, and the document being written."""

    __slots__ = (
        "chars_done",
        "chunks_done",
        "document",
        "document_bytes",
        "done",
        "text_chars",
        "total",
    )

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.document: str | None = None
        self.document_bytes: int | None = None
        self.text_chars: int | None = None
        self.chunks_done = 0
        self.chars_done = 0

    def estimate(self) -> int | None:
        """About how many chunks the document makes (``estimate_chunks``)."""
        return estimate_chunks(self.chunks_done, self.chars_done, self.text_chars)


class ScopeActivity:
    """What the watcher's jobs are doing per scope (module docstring); thread-safe.

    ``begin(scope, files)`` starts a job of ``files`` changed files, ``file_done`` counts
    one, ``end`` closes it; ``queue(scope, files)`` says how many changed files wait for
    the next job. ``document_progress(scope)`` is what the pipeline reports the document
    being written to (``knowledge.ingest.progress.observing``). ``of(scope)`` is the
    status route's ``IndexProgress``, ``None`` when the scope has nothing under way.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[KnowledgeScope, _Running] = {}
        self._queued: dict[KnowledgeScope, int] = {}

    def queue(self, scope: KnowledgeScope, files: int) -> None:
        with self._lock:
            if files > 0:
                self._queued[scope] = files
            else:
                self._queued.pop(scope, None)

    def begin(self, scope: KnowledgeScope, files: int) -> None:
        with self._lock:
            self._running[scope] = _Running(files)

    def file_done(self, scope: KnowledgeScope) -> None:
        with self._lock:
            running = self._running.get(scope)
            if running is not None:
                running.done = min(running.done + 1, running.total)

    def end(self, scope: KnowledgeScope) -> None:
        with self._lock:
            self._running.pop(scope, None)

    def document_progress(self, scope: KnowledgeScope) -> _DocumentProgress:
        return _DocumentProgress(self, scope)

    def of(self, scope: KnowledgeScope) -> IndexProgress | None:
        with self._lock:
            running = self._running.get(scope)
            queued = self._queued.get(scope, 0)
            if running is None:
                return None if not queued else IndexProgress(0, 0, queued_files=queued)
            return IndexProgress(
                running.done,
                running.total,
                document=running.document,
                document_bytes=running.document_bytes,
                chunks_done=running.chunks_done if running.document is not None else None,
                chunks_estimated=running.estimate() if running.document is not None else None,
                queued_files=queued,
            )

    def status(self, scope: KnowledgeScope, status: IndexStatus) -> IndexStatus:
        """``status`` with the scope's work under way: ``INDEXING`` and its progress."""
        progress = self.of(scope)
        if progress is None:
            return status
        if progress.document is not None:
            about = (
                ""
                if progress.chunks_estimated is None
                else f" of about {progress.chunks_estimated}"
            )
            doing = f"writing {progress.document}: {progress.chunks_done}{about} chunks"
        elif progress.documents_total:
            doing = (
                f"applying changes: {progress.documents_done} of {progress.documents_total} files"
            )
        else:
            doing = "changes waiting to be indexed"
        if progress.queued_files and progress.documents_total:
            files = "file" if progress.queued_files == 1 else "files"
            doing += f"; {progress.queued_files} more changed {files} queued"
        return replace(status, state=IndexState.INDEXING, message=doing, progress=progress)

    # --- the pipeline's reports (knowledge.ingest.progress) ------------------------------

    def _document(
        self, scope: KnowledgeScope, path: str, size: int | None, chars: int | None
    ) -> None:
        with self._lock:
            running = self._running.get(scope)
            if running is not None:
                running.document, running.document_bytes, running.text_chars = path, size, chars
                running.chunks_done = running.chars_done = 0

    def _chunk(self, scope: KnowledgeScope, chars: int) -> None:
        with self._lock:
            running = self._running.get(scope)
            if running is not None:
                running.chunks_done += 1
                running.chars_done += chars

    def _document_end(self, scope: KnowledgeScope) -> None:
        with self._lock:
            running = self._running.get(scope)
            if running is not None:
                running.document = running.document_bytes = running.text_chars = None


class _DocumentProgress:
    """``knowledge.ingest.progress.DocumentProgress`` for one scope of a ``ScopeActivity``."""

    __slots__ = ("_activity", "_scope")

    def __init__(self, activity: ScopeActivity, scope: KnowledgeScope) -> None:
        self._activity = activity
        self._scope = scope

    def begin(self, path: str, size: int | None, text_chars: int | None) -> None:
        self._activity._document(self._scope, path, size, text_chars)

    def chunk(self, chars: int) -> None:
        self._activity._chunk(self._scope, chars)

    def end(self) -> None:
        self._activity._document_end(self._scope)


class ProgressBar:
    """A one-line ``\\r`` progress bar on a terminal; silent when ``enabled`` is false."""

    def __init__(self, total: int, stream: TextIO, *, enabled: bool, label: str = "indexing"):
        self._total = max(total, 0)
        self._stream = stream
        self._enabled = enabled and total > 0
        self._label = label
        self._done = 0
        self._drawn = False

    @property
    def done(self) -> int:
        return self._done

    def advance(self, item: str) -> None:
        """Count one more item (``item`` is shown next to the bar)."""
        self.update(self._done + 1, item)

    def update(self, done: int, item: str = "") -> None:
        """Show ``done`` items of the total (``item`` next to the bar)."""
        self._done = max(0, min(done, self._total))
        if not self._enabled:
            return
        width = shutil.get_terminal_size((80, 20)).columns
        filled = int(20 * self._done / self._total)
        head = f"{self._label} [{'#' * filled}{'.' * (20 - filled)}] {self._done}/{self._total} "
        room = max(width - len(head) - 1, 0)
        shown = item if len(item) <= room else "..." + item[-max(room - 3, 0) :]
        self._stream.write("\r" + (head + shown)[: width - 1].ljust(width - 1))
        self._stream.flush()
        self._drawn = True

    def finish(self) -> None:
        """Clear the bar so that the summary starts on a clean line."""
        if self._drawn:
            width = shutil.get_terminal_size((80, 20)).columns
            self._stream.write("\r" + " " * (width - 1) + "\r")
            self._stream.flush()
            self._drawn = False
