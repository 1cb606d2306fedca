"""Repositories on ``kb serve``: sync on demand and on an interval, then index at once.

``LocalRepos`` builds the ``RepoService`` of a served folder (registrations in the
folder's ``.kb@repos/``) whose on-demand sync mirrors and then indexes the scope with
the server's own index function, so a search right after ``POST .../sync`` finds the
new files. ``RepoScheduler`` syncs every registered repository whose last attempt is
older than ``interval`` (checked every ``tick`` seconds; a new registration is due at
once) on a background thread; one sync at a time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.repos.registration import RepoRegistration, SyncBounds
from knowledge.ingest.repos.service import RepoService
from knowledge.ingest.repos.state import RepoRegistry
from knowledge.ingest.repos.storage import FolderStorage
from knowledge.ingest.repos.sync import sync_repository

__all__ = ["DEFAULT_SYNC_INTERVAL", "LocalRepos", "RepoScheduler"]

logger = logging.getLogger(__name__)

DEFAULT_SYNC_INTERVAL = 24 * 3600.0

IndexScope = Callable[[KnowledgeScope], Any]


class LocalRepos:
    def __init__(
        self, root: str | Path, index_scope: IndexScope, bounds: SyncBounds | None = None
    ) -> None:
        self.registry = RepoRegistry(FolderStorage(root))
        self._index_scope = index_scope
        self._bounds = bounds
        self._lock = threading.Lock()
        self.service = RepoService(self.registry, self.sync_now)

    def sync_now(
        self, scope: KnowledgeScope, registration: RepoRegistration
    ) -> tuple[int, dict[str, Any]]:
        with self._lock:
            report = sync_repository(self.registry, scope, registration, bounds=self._bounds)
            result = self._index_scope(scope)
        body: dict[str, Any] = report.public()
        if result is not None and hasattr(result, "indexed_documents"):
            body["indexed_documents"] = result.indexed_documents
            body["deleted_documents"] = result.deleted_documents
        if report.ok:
            logger.info(
                "synced repository %s of %s at %s: %d written, %d deleted",
                registration.name,
                scope,
                report.commit,
                report.written,
                report.deleted,
            )
        else:
            logger.warning(
                "sync of repository %s of %s failed: %s",
                registration.name,
                scope,
                (report.error or {}).get("message"),
            )
        return 200, body

    def due(
        self, interval: float, scopes: list[KnowledgeScope]
    ) -> list[tuple[KnowledgeScope, RepoRegistration]]:
        now = datetime.now(UTC)
        due: list[tuple[KnowledgeScope, RepoRegistration]] = []
        for scope in scopes:
            for registration in self.registry.all(scope):
                attempted = self.registry.state(scope, registration.name).attempted_at
                if attempted is None:
                    due.append((scope, registration))
                    continue
                then = datetime.strptime(attempted, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
                if (now - then).total_seconds() >= interval:
                    due.append((scope, registration))
        return due

    def registered_scopes(self) -> list[KnowledgeScope]:
        from knowledge.ingest.repos import REGISTRY_PREFIX

        scopes: set[KnowledgeScope] = set()
        for key in self.registry.storage.keys(REGISTRY_PREFIX.rstrip("/")):
            parts = key.split("/")
            if len(parts) == 4:
                try:
                    scopes.add(KnowledgeScope(parts[1], parts[2]))
                except ValueError:
                    continue
        return sorted(scopes, key=lambda s: (s.agent, s.context))


class RepoScheduler:
    def __init__(self, repos: LocalRepos, interval: float, tick: float = 30.0) -> None:
        self._repos = repos
        self._interval = interval
        self._tick = tick
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kb-repos", daemon=True)
        self._thread.start()

    def run_once(self) -> int:
        """Sync what is due; returns how many syncs ran."""
        ran = 0
        for scope, registration in self._repos.due(self._interval, self._repos.registered_scopes()):
            if self._stop.is_set():
                break
            try:
                self._repos.sync_now(scope, registration)
            except Exception:
                logger.exception("the sync of repository %s of %s failed", registration.name, scope)
            ran += 1
        return ran

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.run_once()
            self._stop.wait(max(0.0, self._tick - (time.monotonic() - started)))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30.0)
