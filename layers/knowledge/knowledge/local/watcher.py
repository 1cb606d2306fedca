"""Poll a local bucket folder and apply its changes to a store, as S3 events would.

The folder is laid out like the bucket: ``ROOT/<agent>/<context>/<path>``. Every poll
takes a snapshot (``mtime_ns`` and size of every file) and compares it with the last
one: a created or changed document is upserted, a deleted one is deleted, a changed or
deleted sidecar ``<path>.metadata.json`` re-indexes its document. Keys outside a valid
scope are logged with the reason and left alone, like the S3 indexer does.

Polling, not the ``watchdog`` package: it is stdlib only, behaves the same on Linux,
macOS and Windows, and also sees changes on network shares and Docker bind mounts
where inotify/FSEvents notifications do not arrive. A bucket folder holds hundreds of
files, so a ``stat`` of each per second is cheap, and a poll naturally coalesces the
burst of events an editor produces when it saves a file.

Which files are documents (patterns, sidecars, hidden files) is the source's decision:
the watcher asks ``BucketFolderSource.documents`` for each scope that changed.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from knowledge.errors import KnowledgeError
from knowledge.model import IndexOptions
from knowledge.scope import KnowledgeScope, parse_object_key
from knowledge.source import SIDECAR_SUFFIX, DocumentSource, SourceDocument
from knowledge.store import KnowledgeStore

__all__ = [
    "AppliedChange",
    "BucketWatcher",
    "FileStamp",
    "SnapshotDiff",
    "diff_snapshots",
    "take_snapshot",
]

logger = logging.getLogger(__name__)

ChangeAction = Literal["indexed", "unchanged", "deleted", "ignored", "rejected", "failed"]

_LOG_LEVELS: dict[str, int] = {
    "indexed": logging.INFO,
    "deleted": logging.INFO,
    "unchanged": logging.INFO,
    "ignored": logging.DEBUG,  # not a document (a .pdf without a pattern, say): no news
    "rejected": logging.WARNING,
    "failed": logging.WARNING,
}


@dataclass(frozen=True, slots=True)
class FileStamp:
    """What a poll remembers of a file: a change of either means the file changed."""

    mtime_ns: int
    size: int


@dataclass(frozen=True, slots=True)
class SnapshotDiff:
    """Keys (``agent/context/path``) created or changed, and keys deleted, sorted."""

    changed: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.changed or self.deleted)


@dataclass(frozen=True, slots=True)
class AppliedChange:
    """What the watcher did with one key, and why."""

    key: str
    action: ChangeAction
    detail: str = ""


def take_snapshot(root: Path) -> dict[str, FileStamp]:
    """``{key: FileStamp}`` for every regular, non-hidden file under ``root``.

    Keys are ``/``-separated paths relative to ``root``.
    Symbolic links to folders are not followed (no loops, nothing outside ``root``).
    Files that vanish while the snapshot is taken are left out.
    """
    snapshot: dict[str, FileStamp] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        # Hidden entries are never documents (the sources skip them too); pruning them
        # keeps a .git folder or an editor's swap files from costing a stat per poll.
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for filename in filenames:
            if filename.startswith("."):
                continue
            full = os.path.join(dirpath, filename)
            try:
                stat = os.stat(full)
            except OSError:
                continue
            if not os.path.isfile(full):
                continue
            key = Path(os.path.relpath(full, root)).as_posix()
            snapshot[key] = FileStamp(stat.st_mtime_ns, stat.st_size)
    return snapshot


def diff_snapshots(before: Mapping[str, FileStamp], after: Mapping[str, FileStamp]) -> SnapshotDiff:
    """Keys that are new or whose stamp changed, and keys that are gone."""
    changed = sorted(key for key, stamp in after.items() if before.get(key) != stamp)
    deleted = sorted(key for key in before if key not in after)
    return SnapshotDiff(tuple(changed), tuple(deleted))


class BucketWatcher:
    """Applies the changes of a bucket folder to a store, one poll at a time.

    ``poll_once`` is synchronous (tests call it directly); ``start`` runs it every
    ``poll_interval`` seconds on a daemon thread until ``stop``. ``baseline`` is the
    snapshot the store is already in line with (taken before the initial indexing, so
    that nothing written during it is missed). ``write_lock`` serialises store writes
    with other writers (the server's reindex route). A failing poll is logged; the
    watcher keeps running.
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
        write_lock: threading.Lock | None = None,
    ) -> None:
        if poll_interval <= 0:
            raise ValueError(f"poll_interval must be positive, got {poll_interval}")
        self._root = root
        self._store = store
        self._source = source
        self._options = options or IndexOptions()
        self._poll_interval = poll_interval
        self._snapshot: dict[str, FileStamp] = (
            dict(baseline) if baseline is not None else take_snapshot(root)
        )
        self._write_lock = write_lock or threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def poll_once(self) -> list[AppliedChange]:
        """Take a snapshot, apply what changed since the last one, return what was done."""
        current = take_snapshot(self._root)
        diff = diff_snapshots(self._snapshot, current)
        self._snapshot = current
        if not diff:
            return []
        with self._write_lock:
            applied = self._apply(diff)
        for change in applied:
            level = _LOG_LEVELS[change.action]
            detail = f": {change.detail}" if change.detail else ""
            logger.log(level, "%s %s%s", change.action, change.key, detail)
        return applied

    def _apply(self, diff: SnapshotDiff) -> list[AppliedChange]:
        applied: list[AppliedChange] = []
        by_scope: dict[KnowledgeScope, list[tuple[str, str, bool]]] = {}
        for key, deleted in [(k, False) for k in diff.changed] + [(k, True) for k in diff.deleted]:
            try:
                scoped = parse_object_key(key)
            except KnowledgeError as exc:
                applied.append(AppliedChange(key, "rejected", str(exc)))
                continue
            by_scope.setdefault(scoped.scope, []).append((key, scoped.path, deleted))
        for scope, entries in by_scope.items():
            applied.extend(self._apply_scope(scope, entries))
        return applied

    def _apply_scope(
        self, scope: KnowledgeScope, entries: Iterable[tuple[str, str, bool]]
    ) -> list[AppliedChange]:
        try:
            documents = {d.path: d for d in self._source.documents(scope, self._options)}
        except OSError as exc:
            logger.warning("cannot list %s: %s", scope, exc)
            return [
                AppliedChange(key, "failed", f"cannot list the scope: {exc}")
                for key, _, _ in entries
            ]
        applied: list[AppliedChange] = []
        upserted: set[str] = set()
        for key, path, deleted in entries:
            # A sidecar's change is a change of its document's metadata.
            target = path.removesuffix(SIDECAR_SUFFIX) if path.endswith(SIDECAR_SUFFIX) else path
            target_key = key[: len(key) - len(path)] + target
            document = documents.get(target)
            if document is not None:
                if target not in upserted:
                    upserted.add(target)
                    applied.append(self._upsert(target_key, scope, document))
            elif deleted and target == path:
                applied.append(self._delete(key, scope, path))
            elif not deleted and target == path:
                applied.append(AppliedChange(key, "ignored", "not a document for these options"))
        return applied

    def _upsert(self, key: str, scope: KnowledgeScope, document: SourceDocument) -> AppliedChange:
        try:
            result = self._store.upsert_document(scope, document)
        except Exception as exc:
            logger.debug("upsert of %s failed", key, exc_info=exc)
            return AppliedChange(key, "failed", str(exc) or type(exc).__name__)
        if result.errors:
            return AppliedChange(key, "failed", "; ".join(p.reason for p in result.errors))
        if result.indexed_documents:
            return AppliedChange(key, "indexed", f"{result.indexed_chunks} chunks")
        reason = "; ".join(p.reason for p in result.skipped) or "unchanged"
        return AppliedChange(key, "unchanged", reason)

    def _delete(self, key: str, scope: KnowledgeScope, path: str) -> AppliedChange:
        try:
            removed = self._store.delete_document(scope, path)
        except Exception as exc:
            logger.debug("delete of %s failed", key, exc_info=exc)
            return AppliedChange(key, "failed", str(exc) or type(exc).__name__)
        return AppliedChange(
            key, "deleted" if removed else "ignored", "" if removed else "not indexed"
        )

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
                self.poll_once()
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
