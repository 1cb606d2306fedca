"""Keep a store equal to a local bucket folder, as S3 events would, by polling.

The folder is laid out like the bucket: ``ROOT/<agent>/<context>/<path>``. Every poll
takes a snapshot (``mtime_ns`` and size of every regular file) and compares it with the
last one to find the scopes that changed (``knowledge.local.snapshots``; a file whose
mtime is within 2 s of a snapshot is read again by the next poll). Each changed scope is
then *reconciled*: its folder is listed, created or changed documents are upserted, and
every document the store holds that the listing no longer has is deleted. Deletions are
decided against the store's own documents, not against the previous snapshot, so a file
that comes and goes between a snapshot and a listing never leaves a stale document; and a
key the listing saw but the snapshot did not (or whose write failed) is remembered as
*dirty*, so the next poll looks at it again. What the listing leaves out or finds wrong
(an invalid sidecar, a link out of the scope, a name that is not UTF-8) is recorded as a
problem with the reason the start-up index gives it, so the status says the same whether
the entry was there at start-up or appeared later. A problem that nothing in the folder
has any more (the file is gone, also without a delete event; the sidecar was fixed; the
link removed) is cleared by the next reconcile of its scope, and by the start-up index.
After changes stop, one or two polls leave the index equal to the folder.

``synchronize`` is the start-up index: every scope of the folder and every scope the
store already holds (``KnowledgeStore.list_scopes``), so a scope whose folder vanished
while nothing was watching is emptied. Keys outside a valid scope are logged with the
reason and left alone, like the S3 indexer does. Non-regular files (FIFOs, sockets,
devices) are never documents and are never opened.

Polling, not the ``watchdog`` package: it is stdlib only, behaves the same on Linux,
macOS and Windows, and also sees changes on network shares and Docker bind mounts
where inotify/FSEvents notifications do not arrive. A bucket folder holds hundreds of
files, so a ``stat`` of each per second is cheap, and a poll naturally coalesces the
burst of events an editor produces when it saves a file.

Which files are documents (patterns, sidecars, hidden files, links) is the source's
decision: the watcher asks ``source.documents`` for each scope that changed. What it
does with one key (upsert or delete, the outcome, how it is logged) is
``knowledge.local.changes``.

**Fair between scopes.** A poll only finds what changed; each changed scope's reconcile
is a job on a ``knowledge.local.scheduling.FairScheduler`` (when one is given: ``kb
serve``), so a scope busy with a large file never holds another scope's new file back.
Changes a scope gathers while its job waits join that job; changes found while it runs
make its next one. The start-up index runs its scopes the same way. Without a scheduler
every job runs in the polling thread, one after the other (what ``poll_once`` callers
that want the changes applied on return get either way).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Container, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from knowledge.core.errors import KnowledgeError
from knowledge.core.model import FileProblem, IndexOptions, IndexResult
from knowledge.core.scope import KnowledgeScope, parse_object_key
from knowledge.core.source import SIDECAR_SUFFIX, SYNONYMS_FILE, DocumentSource, SourceDocument
from knowledge.ingest.pipeline import (
    index_source,
    listing_problems,
    listing_unread,
)
from knowledge.ingest.progress import observing
from knowledge.ingest.sources import SynonymsFile, under_unlisted_folder
from knowledge.ingest.synonyms_file import apply_synonyms
from knowledge.local.changes import (
    LOG_LEVELS,
    AppliedChange,
    delete_key,
    log_result,
    shown,
    upsert_key,
)
from knowledge.local.progress import IndexingProgress, ListedSource, ScopeActivity
from knowledge.local.scheduling import FairScheduler, ScopeLocks
from knowledge.local.snapshots import (
    DIRTY,
    RACY_WINDOW_NS,
    FileStamp,
    SnapshotDiff,
    check_poll_interval,
    diff_snapshots,
    racy_keys,
    take_snapshot,
)
from knowledge.stores.protocol import IndexWriter, KnowledgeStore

__all__ = [
    "RACY_WINDOW_NS",
    "AppliedChange",
    "BucketWatcher",
    "FileStamp",
    "IndexingStopped",
    "SnapshotDiff",
    "check_poll_interval",
    "diff_snapshots",
    "racy_keys",
    "take_snapshot",
]

logger = logging.getLogger(__name__)


class IndexingStopped(Exception):  # noqa: N818 - a request, not an error
    """Raised inside an index run to abandon it (the server is stopping)."""


Entry = tuple[str, str, bool]
"""A changed key of a scope: (key, path in the scope, deleted)."""


@dataclass(slots=True)
class _Waiting:
    """A scope's reconcile job that has not started: the changes it will apply, those a
    poll named (the rest are looked at again), and the snapshot they were found in."""

    entries: dict[str, Entry]
    named: set[str]
    current: Mapping[str, FileStamp]
    future: Future[list[AppliedChange]] = field(default_factory=Future)


class BucketWatcher:
    """Keeps a store equal to a bucket folder, one poll at a time.

    ``poll_once`` is synchronous (tests call it directly): it returns once the changes it
    found are applied; ``start`` polls every ``poll_interval`` seconds on a daemon thread
    until ``stop``, handing each changed scope's reconcile to ``scheduler`` without
    waiting for it. ``baseline`` is the snapshot the store is already in line with
    (``synchronize`` sets it itself); without one, the folder as it is now. ``locks``
    serialise a scope's writes with its other writers (the server's reindex route, a
    repository sync); ``activity`` shows what each scope's job is doing. A failing poll
    or job is logged; the watcher keeps running.
    """

    def __init__(
        self,
        root: Path,
        store: KnowledgeStore,
        source: DocumentSource,
        *,
        options: IndexOptions | None = None,
        poll_interval: float = 1.0,
        baseline: Mapping[str, FileStamp] | None = None,
        locks: ScopeLocks | None = None,
        scheduler: FairScheduler | None = None,
        activity: ScopeActivity | None = None,
    ) -> None:
        check_poll_interval(poll_interval)
        self._root = root
        self._store = store
        self._source = source
        self._options = options or IndexOptions()
        self._poll_interval = poll_interval
        started = time.time_ns()
        self._snapshot: dict[str, FileStamp] = (
            dict(baseline) if baseline is not None else take_snapshot(root)
        )
        self._racy: set[str] = set() if baseline is not None else racy_keys(self._snapshot, started)
        self._locks = locks or ScopeLocks()
        self._scheduler = scheduler
        self._activity = activity or ScopeActivity()
        self._guard = threading.Lock()  # the snapshot and the waiting jobs
        self._waiting: dict[KnowledgeScope, _Waiting] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failures: dict[str, str] = {}  # key -> last failure, logged once until it changes
        self._unlisted: set[KnowledgeScope] = set()  # scopes with a folder that cannot be listed

    # --- the start-up index --------------------------------------------------------------

    def synchronize(
        self,
        scopes: Iterable[KnowledgeScope],
        *,
        progress: IndexingProgress | None = None,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> dict[KnowledgeScope, IndexResult]:
        """Bring every one of ``scopes`` in line with its folder (``index_source``: new and
        changed documents written, unchanged skipped, the rest deleted; a scope without
        a folder is emptied), then remember the folder so later polls see later changes.

        A file that fails (read, embedding, write) is looked at again by every poll until
        it is indexed, as a failure in a poll is. Every scope is listed first, so
        ``progress`` knows the totals. ``should_stop`` is
        asked between documents; when it says yes the run raises ``IndexingStopped``
        (the scope being written keeps what it had before)."""
        progress = progress or IndexingProgress()
        results: dict[KnowledgeScope, IndexResult] = {}
        try:
            started = time.time_ns()
            baseline = take_snapshot(self._root)  # before listing: later changes show up
            listed = {
                scope: ListedSource(self._source.documents(scope, self._options))
                for scope in scopes
            }
            progress.begin({scope: len(source) for scope, source in listed.items()})

            def index(scope: KnowledgeScope, source: ListedSource) -> IndexResult:
                source.on_read = self._counter(scope, progress, should_stop)
                if should_stop():
                    raise IndexingStopped("stopped before the start-up index finished")
                with self._locks.of(scope):
                    # ``index`` also clears the problems of files it no longer lists.
                    result = index_source(self._store, scope, source, self._options)
                progress.finish_scope(scope)
                log_result(scope, result)
                return result

            futures = {
                scope: self._submit(scope, functools.partial(index, scope, source))
                for scope, source in listed.items()
            }
            failure: BaseException | None = None
            for scope, future in futures.items():
                try:
                    results[scope] = future.result()
                except BaseException as exc:  # every job ends before the first failure is raised
                    failure = failure or exc
            if failure is not None:
                if should_stop():  # jobs not started were cancelled by the stop
                    raise IndexingStopped("stopped before the start-up index finished")
                raise failure
            for scope, source in listed.items():
                for path in source.paths:
                    # Listed but not seen by the snapshot: created meanwhile; look again.
                    baseline.setdefault(f"{scope.key}/{path}", DIRTY)
                for problem in results[scope].errors:
                    # A file that failed (its read, the embedder, the write) is retried by
                    # the polls, as a failure in a poll is: it may not change again.
                    if f"{scope.key}/{problem.path}" in baseline:
                        baseline[f"{scope.key}/{problem.path}"] = DIRTY
        finally:
            progress.end()
        self._snapshot = baseline
        self._racy = racy_keys(baseline, started)
        return results

    @staticmethod
    def _counter(
        scope: KnowledgeScope, progress: IndexingProgress, should_stop: Callable[[], bool]
    ) -> Callable[[str], None]:
        def on_read(path: str) -> None:
            if should_stop():
                raise IndexingStopped("stopped before the start-up index finished")
            progress.advance(scope)

        return on_read

    # --- polls ---------------------------------------------------------------------------

    def poll_once(self) -> list[AppliedChange]:
        """Take a snapshot, reconcile every scope that changed since the last one, and
        return what was done, once it is done. Files the last poll found racy are looked
        at again; that a file the snapshot did not name as changed turned out unchanged or
        ignored is not news (neither returned nor logged)."""
        applied, futures = self._poll()
        for future in futures:
            applied.extend(future.result())
        return applied

    def _poll(self) -> tuple[list[AppliedChange], list[Future[list[AppliedChange]]]]:
        """Find what changed and hand each changed scope's reconcile to the scheduler:
        the keys refused outright, and the jobs' futures."""
        started = time.time_ns()
        current = take_snapshot(self._root)
        with self._guard:
            diff = diff_snapshots(self._snapshot, current)
            self._snapshot = dict(current)
        named = set(diff.changed)
        recheck = {key for key in self._racy if key in current} - named
        if recheck:
            diff = SnapshotDiff(tuple(sorted({*diff.changed, *recheck})), diff.deleted)
        self._racy = racy_keys(current, started)
        rejected: list[AppliedChange] = []
        by_scope: dict[KnowledgeScope, list[Entry]] = {}
        for key, deleted in [(k, False) for k in diff.changed] + [(k, True) for k in diff.deleted]:
            try:
                scoped = parse_object_key(key)
            except KnowledgeError as exc:
                rejected.append(AppliedChange(key, "rejected", str(exc)))
                continue
            by_scope.setdefault(scoped.scope, []).append((key, scoped.path, deleted))
        for change in rejected:
            self._log(change)
        futures = [
            self._queue(scope, entries, named, current) for scope, entries in by_scope.items()
        ]
        return rejected, futures

    def _queue(
        self,
        scope: KnowledgeScope,
        entries: list[Entry],
        named: set[str],
        current: Mapping[str, FileStamp],
    ) -> Future[list[AppliedChange]]:
        """Add a scope's changes to its job that has not started, or start one."""
        with self._guard:
            waiting = self._waiting.get(scope)
            if waiting is not None:  # the latest word on a key wins
                waiting.entries.update((entry[0], entry) for entry in entries)
                waiting.named |= named
                waiting.current = current
                self._activity.queue(scope, _files(waiting.entries.values()))
                return waiting.future
            waiting = _Waiting({entry[0]: entry for entry in entries}, set(named), current)
            self._waiting[scope] = waiting
            self._activity.queue(scope, _files(waiting.entries.values()))
        job = self._submit(scope, lambda: self._reconcile_job(scope, waiting))
        job.add_done_callback(lambda done: _hand_over(done, waiting.future))
        return waiting.future

    def _submit(self, scope: KnowledgeScope, run: Callable[[], object]) -> Future:  # type: ignore[type-arg]
        if self._scheduler is not None:
            return self._scheduler.submit(scope, run)
        future: Future[object] = Future()
        try:
            future.set_result(run())
        except BaseException as exc:
            future.set_exception(exc)
        return future

    def _reconcile_job(self, scope: KnowledgeScope, waiting: _Waiting) -> list[AppliedChange]:
        """A scope's reconcile, as a job: its waiting changes applied under its lock, the
        keys to look at again marked in the snapshot, the news logged."""
        with self._guard:
            if self._waiting.get(scope) is waiting:
                del self._waiting[scope]  # later changes make the next job
            entries = list(waiting.entries.values())
        self._activity.queue(scope, 0)
        self._activity.begin(scope, _files(entries))
        marks: dict[str, FileStamp] = {}
        try:
            with self._locks.of(scope), observing(self._activity.document_progress(scope)):
                applied = self._reconcile(scope, entries, waiting.current, marks)
        finally:
            self._activity.end(scope)
            with self._guard:
                self._snapshot.update(marks)  # DIRTY: the next poll looks at them again
        applied = [
            change
            for change in applied
            if change.key in waiting.named or change.action not in ("unchanged", "ignored")
        ]
        for change in applied:
            self._log(change)
        return applied

    def _log(self, change: AppliedChange) -> None:
        level = LOG_LEVELS[change.action]
        if change.action == "failed":
            # A file that keeps failing is retried every poll; say so once per reason.
            if self._failures.get(change.key) == change.detail:
                level = logging.DEBUG
            self._failures[change.key] = change.detail
        else:
            self._failures.pop(change.key, None)
        detail = f": {change.detail}" if change.detail else ""
        logger.log(level, "%s %s%s", change.action, shown(change.key), detail)

    def _reconcile(
        self,
        scope: KnowledgeScope,
        entries: list[tuple[str, str, bool]],
        current: Mapping[str, FileStamp],
        remembered: dict[str, FileStamp],
    ) -> list[AppliedChange]:
        """Reconcile one scope with its folder (module docstring): the scope listed, the
        listed documents the snapshot missed and the changed entries upserted, what is
        gone deleted, the listing's problems and unread files recorded, the synonyms
        stored. ``remembered`` gets the keys the next poll looks at again (``DIRTY``)."""
        prefix = scope.key + "/"
        try:
            listing = self._source.documents(scope, self._options)
            documents = {d.path: d for d in listing}
            stored = self._stored_paths(scope)
        except (OSError, KnowledgeError) as exc:
            logger.warning("cannot reconcile %s: %s", scope, exc)
            for key, _, _ in entries:
                remembered[key] = DIRTY
            return [
                AppliedChange(key, "failed", f"cannot list the scope: {exc}") for key, *_ in entries
            ]
        upserted: set[str] = set()
        applied = self._upsert_unseen(scope, documents, current, remembered, upserted=upserted)
        applied += self._upsert_entries(
            scope,
            entries,
            listing,
            documents,
            upserted=upserted,
            stored=stored,
            remembered=remembered,
        )
        gone, to_record = self._gone(
            scope, entries, listing, documents, stored=stored, remembered=remembered
        )
        for path in sorted(gone):
            change = delete_key(self._store, prefix + path, scope, path)
            self._activity.file_done(scope)
            if change.action == "failed":
                remembered[prefix + path] = DIRTY
            applied.append(change)
        # After the deletes: an indexed file the listing now leaves out (a link out of its
        # scope, say) is removed and keeps the problem that says why.
        self._record_listing_problems(scope, to_record, entries)
        self._record_unread(scope, listing_unread(listing))
        if any(path == SYNONYMS_FILE for _, path, _ in entries):
            applied.append(self._sync_synonyms(prefix + SYNONYMS_FILE, scope, listing))
        return applied

    def _upsert_unseen(
        self,
        scope: KnowledgeScope,
        documents: Mapping[str, SourceDocument],
        current: Mapping[str, FileStamp],
        remembered: dict[str, FileStamp],
        *,
        upserted: set[str],
    ) -> list[AppliedChange]:
        """The listed documents the snapshot did not see: created since (looked at again
        by the next poll), or reached through a folder link (upserted now)."""
        prefix = scope.key + "/"
        applied: list[AppliedChange] = []
        for path, listed in documents.items():
            if prefix + path in current:
                continue
            if self._walkable(prefix + path):
                remembered[prefix + path] = DIRTY  # created after the snapshot: look again
            else:
                # Reached through a folder link inside the scope, which snapshots do not
                # follow: refreshed whenever its scope changes (unchanged content is skipped).
                upserted.add(path)
                applied.append(self._upsert(prefix + path, scope, listed))
        return applied

    def _upsert_entries(
        self,
        scope: KnowledgeScope,
        entries: list[tuple[str, str, bool]],
        listing: object,
        documents: Mapping[str, SourceDocument],
        *,
        upserted: set[str],
        stored: set[str] | None,
        remembered: dict[str, FileStamp],
    ) -> list[AppliedChange]:
        """Each changed entry's document upserted once (a sidecar's change is a change of
        its document's metadata); an entry that is no document and was never indexed is
        ``ignored``, with the listing's reason."""
        prefix = scope.key + "/"
        applied: list[AppliedChange] = []
        skipped = {p.path: p.reason for p in getattr(listing, "skipped", ())}
        for key, path, deleted in entries:
            target = path.removesuffix(SIDECAR_SUFFIX) if path.endswith(SIDECAR_SUFFIX) else path
            document = documents.get(target)
            if document is not None:
                if target not in upserted:
                    upserted.add(target)
                    change = self._upsert(prefix + target, scope, document)
                    if change.action == "failed":
                        remembered[prefix + target] = DIRTY
                    applied.append(change)
            elif (
                not deleted
                and target == path != SYNONYMS_FILE
                and (stored is None or path not in stored)
            ):
                reason = skipped.get(path, "not a document for these options")
                applied.append(AppliedChange(key, "ignored", reason))
        return applied

    def _gone(
        self,
        scope: KnowledgeScope,
        entries: list[tuple[str, str, bool]],
        listing: object,
        documents: Mapping[str, SourceDocument],
        *,
        stored: set[str] | None,
        remembered: dict[str, FileStamp],
    ) -> tuple[set[str], list[FileProblem]]:
        """The paths to delete, and the listing's problems to record: every stored
        document or recorded problem nothing in the folder has any more, except under a
        folder that could not be listed."""
        if stored is None:  # a store that cannot list its documents: trust the snapshot
            gone = {path for key, path, deleted in entries if deleted and path not in documents}
            return gone, []
        unlisted = self._unlisted_folders(scope, entries, listing, remembered)
        gone = {path for path in stored - documents.keys() if not unlisted(path)}
        # A file that was never indexed may still have a problem recorded (an encrypted
        # PDF, say): its deletion clears the problem, so it is a delete too.
        gone |= {
            path
            for _, path, deleted in entries
            if deleted
            and path not in documents
            and not path.endswith(SIDECAR_SUFFIX)
            and path != SYNONYMS_FILE
            and not unlisted(path)
        }
        skipped_problems, error_problems = listing_problems(listing)
        to_record = [*skipped_problems, *error_problems]
        reported = {problem.path for problem in to_record}
        # A problem of a file gone without a delete event (it went while no snapshot
        # saw it: before the watcher started, between a snapshot and a listing), or of
        # an entry the listing no longer reports (a sidecar fixed, a link removed).
        # The synonyms file's problem is the synonyms' own (_sync_synonyms).
        stale = self._stale_problems(scope, documents.keys() | reported | {SYNONYMS_FILE})
        gone |= {path for path in stale if not unlisted(path)}
        return gone, to_record

    def _unlisted_folders(
        self,
        scope: KnowledgeScope,
        entries: list[tuple[str, str, bool]],
        listing: object,
        remembered: dict[str, FileStamp],
    ) -> Callable[[str], bool]:
        """Whether a path is under a folder the listing could not read: it holds what it
        held, unknown, not gone. The rest of the scope is reconciled; its entries are
        looked at again every poll until it is readable (said once until then)."""
        unlisted = under_unlisted_folder(listing_problems(listing)[1])
        if any(unlisted(path) for _, path, _ in entries) or unlisted("."):
            level = logging.DEBUG if scope in self._unlisted else logging.WARNING
            logger.log(level, "%s: part of the folder cannot be listed; kept as it was", scope)
            self._unlisted.add(scope)
            for key, path, _ in entries:
                if unlisted(path):
                    remembered[key] = DIRTY
        else:
            self._unlisted.discard(scope)
        return unlisted

    def _upsert(self, key: str, scope: KnowledgeScope, document: SourceDocument) -> AppliedChange:
        change = upsert_key(self._store, key, scope, document)
        self._activity.file_done(scope)
        return change

    def _sync_synonyms(self, key: str, scope: KnowledgeScope, listing: object) -> AppliedChange:
        """The scope's synonyms file changed: store it as the listing found it
        (``ingest.synonyms_file``); a bad file is a problem in the status."""
        found = getattr(listing, "synonyms", None)
        if not isinstance(found, SynonymsFile) or not isinstance(self._store, IndexWriter):
            return AppliedChange(key, "ignored", "this source does not read a synonyms file")
        try:
            with self._store.write_session(scope) as session:
                problem = apply_synonyms(session, found)
        except KnowledgeError as exc:
            return AppliedChange(key, "failed", str(exc))
        if problem is not None:
            return AppliedChange(key, "failed", problem.reason)
        if found.data is None:
            return AppliedChange(key, "deleted", "the scope has no synonyms now")
        return AppliedChange(key, "indexed", "the scope's synonyms")

    def _record_unread(self, scope: KnowledgeScope, counts: dict[str, int] | None) -> None:
        """The files no pattern selects, by extension, into the status when they changed
        (``IndexStatus.unread_files``), as the start-up index writes them."""
        if counts is None or not isinstance(self._store, IndexWriter):
            return
        try:
            if dict(self._store.status(scope).unread_files) == counts:
                return
            with self._store.write_session(scope) as session:
                session.record_unread(counts)
        except (OSError, KnowledgeError) as exc:
            logger.warning("cannot record the unread files of %s: %s", scope, exc)

    def _walkable(self, key: str) -> bool:
        """Whether ``take_snapshot`` sees ``key``: no folder on its way is a link."""
        folder = self._root
        for part in key.split("/")[:-1]:
            folder = folder / part
            if folder.is_symlink():
                return False
        return True

    def _record_listing_problems(
        self,
        scope: KnowledgeScope,
        problems: list[FileProblem],
        entries: list[tuple[str, str, bool]],
    ) -> None:
        """Record what the listing left out or found wrong (an invalid sidecar, a link out
        of the scope...) as problems, as the start-up index does (``Indexer.index``): any
        the store does not have (yet, or any more), and those of the changed entries whose
        reason changed (the same problem seen again is neither recorded nor logged)."""
        if not problems or not isinstance(self._store, IndexWriter):
            return
        changed = {path for _, path, _ in entries}
        try:
            known = self._store.problem_paths(scope)
            reasons = {p.path: p.reason for p in self._store.status(scope).problems}
            new = [
                p
                for p in problems
                if p.path not in known or (p.path in changed and reasons.get(p.path) != p.reason)
            ]
            if new:
                with self._store.write_session(scope) as session:
                    for problem in new:
                        session.record_problem(problem.path, problem.reason)
        except (OSError, KnowledgeError) as exc:
            logger.warning("cannot record the problems of %s: %s", scope, exc)
            return
        for problem in new:
            logger.warning("not indexed %s/%s: %s", scope, shown(problem.path), problem.reason)

    def _stale_problems(self, scope: KnowledgeScope, listed: Container[str]) -> set[str]:
        """The paths with a recorded problem that are neither a listed document nor
        reported by the listing: nothing in the folder has that problem any more."""
        try:
            recorded = self._store.problem_paths(scope)
        except (OSError, KnowledgeError) as exc:
            logger.warning("cannot read the problems of %s: %s", scope, exc)
            return set()
        return {path for path in recorded if path not in listed}

    def _stored_paths(self, scope: KnowledgeScope) -> set[str] | None:
        return set(self._store.stored_documents(scope))

    # --- the polling thread --------------------------------------------------------------

    def start(self) -> None:
        """Poll on a daemon thread until ``stop``; calling it twice is an error."""
        if self._thread is not None:
            raise RuntimeError("the watcher is already running")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="kb-watcher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._poll_interval):
            try:
                for future in self._poll()[1]:
                    future.add_done_callback(_log_failure)
            except Exception:
                logger.exception(
                    "polling %s failed; retrying in %.1f s", self._root, self._poll_interval
                )

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop polling and wait for a poll in progress to finish; idempotent."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)


def _hand_over(job: Future, waiting: Future[list[AppliedChange]]) -> None:  # type: ignore[type-arg]
    """Settle a waiting job's future with what its run gave (a cancelled run: nothing)."""
    if waiting.done():
        return
    if job.cancelled():
        waiting.set_result([])
    elif job.exception() is not None:
        waiting.set_exception(job.exception())
    else:
        waiting.set_result(job.result())


def _files(entries: Iterable[Entry]) -> int:
    """How many files the changes are about (a sidecar's change is its document's)."""
    return len({path.removesuffix(SIDECAR_SUFFIX) for _, path, _ in entries})


def _log_failure(future: Future[list[AppliedChange]]) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.error("a reconcile job failed: %s", future.exception())
