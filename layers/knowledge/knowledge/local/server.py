"""``kb serve``: the HTTP API on localhost over a folder laid out like the bucket.

On start the server binds its port (failing fast if it is taken) and serves at once;
the start-up index runs on a background thread: every valid scope under
``ROOT/<agent>/<context>/`` and every scope the store already holds (a scope whose
folder vanished while the server was down is emptied). Meanwhile the status route says
``INDEXING`` with ``progress`` (documents done / total) for each scope not yet done, and
searches see what is committed. Then a ``BucketWatcher`` applies later changes like S3
events would. A start-up index that fails on the configuration (the store refuses every
write: an index built with vectors opened without an embedder, say) starts no watcher
that would fail every file every poll: ``startup_error`` holds the reason, every status
says ``ERROR`` with it, and ``kb serve`` exits with it. Every request goes through
``KnowledgeApi.handle``: the same code the Lambda search function runs. Stdlib only
(``http.server.ThreadingHTTPServer``); the HTTP layer,
which answers every request in the API's JSON shape and refuses other sites' pages, is
``knowledge.local.http_handler``.

**Workers.** With ``workers`` above 1, ``workers - 1`` more processes
(``knowledge.local.workers``, ``knowledge.local.worker``) accept on the same listening
socket and answer the read-only routes (searches, prompt contexts, document listings,
health) from their own connection to the same store, so searches use every core; they
forward every other request to this process, which stays the only one that indexes,
watches, writes, syncs repositories and knows the start-up index's progress. With 1
(the default here; ``kb serve`` defaults to the cores) nothing else runs.

**Idle maintenance.** When the server has been idle for ``maintain_after`` seconds (no
request, no indexing), what a large delete or swap left for the store to give back (free
pages, a WAL a search kept from being cut) is given back (``knowledge.local.idle_maintenance``).

The server never closes the store: whoever opened it does (the CLI, a test).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from knowledge.agent_tools.shared import SharedGrants
from knowledge.config import ENV_RERANK_MODEL, StoreSettings
from knowledge.core.errors import (
    ConfigurationError,
    InvalidScopeError,
    NotFoundError,
)
from knowledge.core.model import (
    IndexOptions,
    IndexResult,
    IndexState,
    IndexStatus,
    SearchMode,
)
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.pipeline import index_source, reindex_source
from knowledge.ingest.sources.folders import SYMLINK_OUTSIDE_SCOPE, BucketFolderSource
from knowledge.local.folder_writes import check_write_exposure
from knowledge.local.forwarding import ForwardServer
from knowledge.local.http_handler import (
    DEFAULT_BODY_TIMEOUT,
    LISTEN_BACKLOG,
    ApiHttpServer,
    HttpApi,
)
from knowledge.local.idle_maintenance import DEFAULT_IDLE_SECONDS, IdleMaintenance, MaintainedStore
from knowledge.local.progress import IndexingProgress, ProgressBar, ScopeActivity
from knowledge.local.scheduling import DEFAULT_INDEX_WORKERS, FairScheduler, ScopeLocks
from knowledge.local.watcher import BucketWatcher, IndexingStopped, check_poll_interval
from knowledge.local.worker import WorkerSetup
from knowledge.local.workers import WorkerPool
from knowledge.local.write_quotas import local_write_quota
from knowledge.reranking import RerankingStage
from knowledge.service.api import (
    KnowledgeApi,
)
from knowledge.service.write_quotas import DEFAULT_WRITE_LIMITS, Clock, WriteLimits
from knowledge.stores.protocol import KnowledgeStore, ScopeSources

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "LISTEN_BACKLOG",
    "LocalServer",
    "serve_until_stopped",
]

logger = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
WORKERS_READY_TIMEOUT = 60.0
"""Seconds ``wait_until_ready`` waits at most for the workers to serve (each opens the store)."""


def _folder_storage(root: Path, max_document_bytes: int) -> Any:
    from knowledge.local.folder_writes import FolderStorage

    return FolderStorage(root, max_document_bytes=max_document_bytes)


class LocalServer:
    """The local stack: the HTTP API, a start-up index in the background, a folder watcher.

    Requests are served from the moment the port is bound (``port=0`` picks a free
    port; ``url`` says which); the start-up index and then the watcher run on a
    background thread. ``start`` waits for that index unless ``wait=False``
    (``wait_until_ready`` waits later; ``progress`` counts it). ``reranking`` reranks
    every search's top candidates (``knowledge.reranking``). With ``allow_writes``, each
    agent's writes are held to ``write_limits`` (``knowledge.service.write_quotas``; the
    windows follow ``quota_clock``, ``time.time`` by default). ``stop`` is idempotent,
    abandons an unfinished start-up index (the scope being written keeps what it had)
    and leaves the store open.

    ``workers`` above 1 starts that many processes in all (module docstring): each
    worker opens the store with ``worker_store`` (the settings ``store`` was opened with:
    required then) and its reranking with ``knowledge.config.open_reranking(rerank_model)``.
    A store no other process can open (in memory) is served by this process alone.

    ``maintain_after``: seconds of idleness after which the store's unfinished maintenance
    is done (``knowledge.local.idle_maintenance``; ``None``: never).
    """

    def __init__(
        self,
        root: str | Path,
        store: KnowledgeStore,
        *,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        poll_interval: float = 1.0,
        options: IndexOptions | None = None,
        default_mode: SearchMode | None = None,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
        reranking: RerankingStage | None = None,
        allow_writes: bool = False,
        allow_remote_writes: bool = False,
        shared_grants: SharedGrants | None = None,
        repo_sync_interval: float | None = None,
        index_workers: int = DEFAULT_INDEX_WORKERS,
        write_limits: WriteLimits = DEFAULT_WRITE_LIMITS,
        quota_clock: Clock | None = None,
        workers: int = 1,
        worker_store: StoreSettings | None = None,
        rerank_model: str | None = None,
        maintain_after: float | None = DEFAULT_IDLE_SECONDS,
    ) -> None:
        self._root = Path(root)
        self._source_name = f"kb serve {self._root.resolve()}"
        if not self._root.is_dir():
            raise ConfigurationError(f"the folder to serve does not exist: {self._root}")
        check_poll_interval(poll_interval)
        check_write_exposure(
            host, allow_writes=allow_writes, allow_remote_writes=allow_remote_writes
        )
        if body_timeout <= 0:
            raise ValueError(f"body_timeout must be positive, got {body_timeout}")
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        if workers > 1 and worker_store is None:
            raise ValueError("workers above 1 need worker_store: how they open the store")
        if workers > 1 and reranking is not None and not _reranking_named(rerank_model):
            raise ValueError("workers above 1 rerank with rerank_model (or KB_RERANK_MODEL)")
        if workers > 1 and worker_store is not None and not _shareable(worker_store):
            logger.warning("the store is in memory: one process serves it (not %d)", workers)
            workers = 1
        self._workers = workers
        self._worker_store = worker_store
        self._rerank_model = rerank_model
        self._reranks = reranking is not None
        self._default_mode = default_mode
        self._shared_grants = shared_grants
        self._store = store
        self._host = host
        self._port = port
        self._poll_interval = poll_interval
        self._options = options or IndexOptions()
        self._body_timeout = body_timeout
        self._source = BucketFolderSource(self._root)
        self._locks = ScopeLocks()
        self.progress = IndexingProgress()
        # Scopes' indexing work, fairly (knowledge.local.scheduling); what each is doing.
        self._scheduler = FairScheduler(index_workers)
        self.activity = ScopeActivity()
        # Git repository sources (knowledge.ingest.repos.kb_serve): synced into the folder, indexed.
        from knowledge.ingest.repos.kb_serve import LocalRepos, RepoScheduler

        self.repos = LocalRepos(self._root, self._index_synced_scope)
        self._repo_scheduler = (
            None if repo_sync_interval is None else RepoScheduler(self.repos, repo_sync_interval)
        )
        self.api = KnowledgeApi(
            store,
            reindex=self._reindex_scope,
            default_mode=default_mode,
            status=self._status,  # INDEXING while the start-up index runs
            reranking=reranking,
            # A PUT takes no more than the indexer indexes (self._options).
            writes=(
                _folder_storage(self._root, self._options.max_document_bytes)
                if allow_writes
                else None
            ),
            shared=shared_grants,
            repos=self.repos.service,
            # Each agent's writes a minute and each scope's documents, counted in this process.
            write_quota=(
                local_write_quota(write_limits, clock=quota_clock) if allow_writes else None
            ),
        )
        self._http: ApiHttpServer | None = None
        self._http_thread: threading.Thread | None = None
        self._forward: ForwardServer | None = None
        self._pool: WorkerPool | None = None
        self._startup_thread: threading.Thread | None = None
        self._watcher: BucketWatcher | None = None
        self._lifecycle = threading.Lock()
        self._stopping = threading.Event()
        self._ready = threading.Event()
        self._startup_error: ConfigurationError | None = None
        self.maintenance = (
            IdleMaintenance(
                store,
                writes_idle_for=self._scheduler.idle_for,
                ready=self._ready.is_set,
                idle_seconds=maintain_after,
            )
            if maintain_after is not None and isinstance(store, MaintainedStore)
            else None
        )

    @property
    def root(self) -> Path:
        return self._root

    @property
    def watcher(self) -> BucketWatcher | None:
        return self._watcher

    @property
    def url(self) -> str:
        """``http://host:port`` of the bound socket; only valid after ``start``."""
        if self._http is None:
            raise RuntimeError("the server is not started")
        host, port = self._http.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}"

    @property
    def workers(self) -> int:
        """The processes serving requests: this one and its workers."""
        return self._workers

    def worker_pids(self) -> list[int]:
        """The worker processes' ids (none with ``workers=1`` or before ``start``)."""
        pool = self._pool
        return [] if pool is None else pool.pids()

    @property
    def ready(self) -> bool:
        """True once the start-up index is done and the watcher runs."""
        return self._ready.is_set()

    @property
    def startup_error(self) -> ConfigurationError | None:
        """Why the start-up index could never write (the store refuses every write, e.g.
        an index built with vectors opened without an embedder), else ``None``. Then
        nothing is indexed or watched, and every status says ``ERROR`` with the reason."""
        return self._startup_error

    def wait_until_ready(self, timeout: float | None = None) -> bool:
        """Wait for the start-up index, and for the workers to serve (at most
        ``WORKERS_READY_TIMEOUT`` seconds: without them the primary answers everything);
        ``False`` if ``timeout`` passed first, the server was stopped before the index
        was done, or it failed (``startup_error``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._ready.wait(0.1):
            if self._stopping.is_set() or self._startup_error is not None:
                return False
            if deadline is not None and time.monotonic() >= deadline:
                return False
        pool = self._pool
        if pool is not None:
            left = WORKERS_READY_TIMEOUT if deadline is None else deadline - time.monotonic()
            if not pool.wait_ready(min(left, WORKERS_READY_TIMEOUT)):
                logger.warning("not every worker serves yet; the primary answers meanwhile")
        return True

    def scopes(self) -> list[KnowledgeScope]:
        """The valid scopes under the root (what the playground page offers)."""
        return list(self._source.iter_scopes())

    def scopes_to_sync(self) -> list[KnowledgeScope]:
        """The folder's scopes, the store's scopes (an orphan is emptied), and scope
        folders that are links (indexed empty, so their status says why), sorted."""
        listing = self._source.iter_scopes()
        scopes = set(listing)
        for problem in [*listing.skipped, *listing.errors]:
            logger.warning("ignored %s: %s", problem.path, problem.reason)
            if problem.reason == SYMLINK_OUTSIDE_SCOPE and problem.path.count("/") == 1:
                agent, context = problem.path.split("/")
                with contextlib.suppress(InvalidScopeError):
                    scopes.add(KnowledgeScope(agent, context))
        try:
            indexed = self._store.list_scopes()
        except Exception as exc:  # the backend is down: index what the folder has
            logger.warning("cannot list the indexed scopes: %s", exc)
            indexed = []
        for scope in indexed:
            if scope in scopes:
                continue
            elsewhere = self._indexed_elsewhere(scope)
            if elsewhere is None:
                scopes.add(scope)  # its folder is gone: emptied by the start-up index
            else:
                logger.info("left %s as it is: indexed by %s, not from here", scope, elsewhere)
        return sorted(scopes, key=lambda scope: (scope.agent, scope.context))

    @property
    def source_name(self) -> str:
        """What this server records as the source of the scopes it indexes
        (``knowledge.stores.protocol.ScopeSources``): its root, resolved once when it was made."""
        return self._source_name

    def _indexed_elsewhere(self, scope: KnowledgeScope) -> str | None:
        """The recorded source of ``scope`` when it is not this server (``kb index`` into
        the same file, say), else ``None``."""
        if not isinstance(self._store, ScopeSources):
            return None
        try:
            source = self._store.scope_source(scope)
        except Exception as exc:
            logger.warning("cannot read where %s was indexed from: %s", scope, exc)
            return None
        return None if source is None or source == self.source_name else source

    def _claim(self, scopes: list[KnowledgeScope]) -> None:
        """Record this server as the source of the scopes it is about to index."""
        if not isinstance(self._store, ScopeSources):
            return
        for scope in scopes:
            try:
                self._store.set_scope_source(scope, self.source_name)
            except Exception as exc:
                logger.warning("cannot record where %s is indexed from: %s", scope, exc)

    def start(self, *, wait: bool = True) -> None:
        """Bind and serve in the background; the start-up index runs on its own thread.

        Requests are answered from the moment the port is bound. ``wait`` (the default,
        for code that searches right after starting) returns once the start-up index is
        done; ``kb serve`` passes ``wait=False`` and shows the progress instead.
        """
        self._start()
        if wait:
            self.wait_until_ready()

    def _start(self) -> None:
        with self._lifecycle:
            if self._http is not None:
                raise RuntimeError("the server is already started")
            try:
                self._http = ApiHttpServer(
                    (self._host, self._port), self._served_api(), self._body_timeout, self.scopes
                )
            except (OSError, OverflowError) as exc:  # OverflowError: a port over 65535
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise ConfigurationError(
                    f"cannot listen on {self._host}:{self._port}: {reason}"
                ) from exc
            self._stopping.clear()
            if self._workers > 1:
                self._start_workers(self._http)
            self._http_thread = threading.Thread(
                target=self._http.serve_forever,
                kwargs={"poll_interval": 0.2},
                name="kb-http",
                daemon=True,
            )
            self._http_thread.start()
            self.progress.prepare()  # a status asked from now on says the index is under way
            self._startup_thread = threading.Thread(
                target=self._start_up, name="kb-startup", daemon=True
            )
            self._startup_thread.start()

    def _start_workers(self, http: ApiHttpServer) -> None:
        """The forwarding socket, then the workers on ``http``'s listening socket. Nobody
        blocks in ``accept``: the socket is non-blocking in every process (they share it),
        so a process that another beat to a connection goes back to waiting."""
        assert self._worker_store is not None
        http.socket.setblocking(False)
        self._forward = ForwardServer(self._served_api())
        setup = WorkerSetup(
            store=self._worker_store,
            root=str(self._root.resolve()),
            forward_address=self._forward.address,
            listening_fd=http.socket.fileno(),
            number=0,
            default_mode=self._default_mode,
            reranks=self._reranks,
            rerank_model=self._rerank_model,
            shared_grants=dict(self._shared_grants.grants) if self._shared_grants else {},
            body_timeout=self._body_timeout,
            writes_enabled=self.api.writes_enabled,
            max_put_bytes=self.api.max_put_bytes,
            log_level=logging.getLogger("knowledge").getEffectiveLevel(),
        )
        self._pool = WorkerPool(setup, self._workers - 1)
        self._pool.start()
        logger.info("serving with %d worker process(es) beside this one", self._workers - 1)

    def _start_up(self) -> None:
        watcher = BucketWatcher(
            self._root,
            self._store,
            self._source,
            options=self._options,
            poll_interval=self._poll_interval,
            baseline={},  # until synchronize succeeds, the first poll looks at everything
            locks=self._locks,
            scheduler=self._scheduler,
            activity=self.activity,
        )
        started = time.monotonic()
        try:
            scopes = self.scopes_to_sync()
            self._claim(scopes)
            results = watcher.synchronize(
                scopes, progress=self.progress, should_stop=self._stopping.is_set
            )
            documents = sum(r.indexed_documents + r.skipped_documents for r in results.values())
            logger.info(
                "start-up index done: %d scopes, %d documents in %.1f s",
                len(results),
                documents,
                time.monotonic() - started,
            )
        except IndexingStopped:
            return
        except ConfigurationError as exc:  # no retry can succeed: say so, watch nothing
            logger.error("the start-up index failed: %s", exc)
            self._startup_error = exc
            return
        except Exception as exc:
            logger.exception(
                "the start-up index failed (%s); the watcher retries every scope",
                str(exc) or type(exc).__name__,
            )
        finally:
            self.progress.end()  # idempotent; also when the run failed before listing
        with self._lifecycle:
            if self._stopping.is_set():
                return
            self._watcher = watcher
            watcher.start()
            if self._repo_scheduler is not None:
                self._repo_scheduler.start()
            if self.maintenance is not None:
                self.maintenance.start()
        self._ready.set()

    def stop(self) -> None:
        """Stop serving, indexing and watching; idempotent. The store stays open."""
        self._stopping.set()
        with self._lifecycle:
            watcher, self._watcher = self._watcher, None
            startup, self._startup_thread = self._startup_thread, None
            http, self._http = self._http, None
            http_thread, self._http_thread = self._http_thread, None
            pool, self._pool = self._pool, None
            forward, self._forward = self._forward, None
        if pool is not None:
            pool.stop()
        if forward is not None:
            forward.close()
        if watcher is not None:
            watcher.stop()
        if self.maintenance is not None:
            self.maintenance.stop()
        self._scheduler.stop()
        if self._repo_scheduler is not None:
            self._repo_scheduler.stop()
        if startup is not None:
            startup.join(30.0)
        if http is not None:
            if http_thread is not None:
                http.shutdown()
                http_thread.join(10.0)
            http.server_close()

    def _served_api(self) -> HttpApi:
        """The API the HTTP server and the forwarding socket call: with idle maintenance,
        every request counted as activity."""
        return self.api if self.maintenance is None else self.maintenance.observe(self.api)

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _status(self, scope: KnowledgeScope, status: IndexStatus) -> IndexStatus:
        if self._startup_error is not None:
            return replace(
                status,
                state=IndexState.ERROR,
                message=f"the start-up index failed: {self._startup_error}",
                progress=None,
            )
        if self.progress.running:
            return self.progress.status(scope, status)
        return self.activity.status(scope, status)

    def _index_synced_scope(self, scope: KnowledgeScope) -> IndexResult:
        """Index a scope a repository sync just wrote (the watcher would, a poll later)."""
        with self._locks.of(scope):
            return index_source(self._store, scope, self._source, self._options)

    def _reindex_scope(self, scope: KnowledgeScope) -> IndexResult:
        """Reindex from the folder; a scope whose folder vanished is emptied. A scope with
        neither a folder nor indexed documents is a 404 (no server path in the message)."""
        folder = self._source.scope_folder(scope)
        if not folder.is_dir() and scope not in self._store.list_scopes():
            raise NotFoundError(f"no folder and no index for scope {scope}")
        with self._locks.of(scope):
            return reindex_source(self._store, scope, self._source, self._options)


def _reranking_named(model: str | None) -> bool:
    """Whether a worker can open the reranking: ``model`` or ``KB_RERANK_MODEL`` names it."""
    return bool((model or "").strip() or os.environ.get(ENV_RERANK_MODEL, "").strip())


def _shareable(settings: StoreSettings) -> bool:
    """Whether another process can open the store ``settings`` describe (not in memory)."""
    if settings.kind == "memory":
        return False
    return not (settings.kind == "embedded" and str(settings.db_path) == ":memory:")


class _TerminalProgress:
    """The start-up index on the terminal: a ``\r`` bar on a TTY, else a line a second."""

    def __init__(self, progress: IndexingProgress, stream: TextIO) -> None:
        self._progress = progress
        self._stream = stream
        self._tty = stream.isatty()
        self._bar: ProgressBar | None = None
        self._last_line = 0.0
        self._last_done = -1
        self._finished = False

    def update(self) -> None:
        if self._finished:
            return
        counts = self._progress.overall()
        if self._progress.ended:
            if self._bar is not None:
                self._bar.finish()
            print(
                f"indexed {counts.documents_done}/{counts.documents_total} documents",
                file=self._stream,
                flush=True,
            )
            self._finished = True
            return
        if not self._progress.running:
            return
        if self._tty:
            if self._bar is None:
                self._bar = ProgressBar(counts.documents_total, self._stream, enabled=True)
            self._bar.update(counts.documents_done)
            return
        now = time.monotonic()
        if counts.documents_done != self._last_done and now - self._last_line >= 1.0:
            print(
                f"indexing {counts.documents_done}/{counts.documents_total} documents",
                file=self._stream,
                flush=True,
            )
            self._last_line, self._last_done = now, counts.documents_done


def serve_until_stopped(
    server: LocalServer, *, out: TextIO | None = None, progress_out: TextIO | None = None
) -> int:
    """Start ``server``, print its URL, show the start-up index's progress, block until
    Ctrl-C or SIGTERM, then stop it. Returns the process exit code (0 on a requested stop).

    The signal handlers only record the signal (no lock, no I/O: a second signal that
    lands while the first is handled can never deadlock); the main loop polls the record.
    """
    stream = out or sys.stdout
    requested: list[int] = []

    def request_stop(signum: int, frame: FrameType | None) -> None:
        requested.append(signum)  # one C-level append: safe at any point of the main thread

    previous: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, request_stop)
    terminal = _TerminalProgress(server.progress, progress_out or sys.stderr)
    try:
        server.start(wait=False)
        print(f"Serving {server.root} on {server.url} (Ctrl-C to stop)", file=stream, flush=True)
        while not requested:
            terminal.update()
            if server.startup_error is not None:
                raise server.startup_error  # kb: error: <the reason>, exit code 2
            time.sleep(0.1)  # a signal cuts the sleep short (PEP 475 then resumes it)
        print("Stopping...", file=stream, flush=True)
        return 0
    finally:
        server.stop()
        terminal.update()  # the start-up index has ended by now: its last line, once
        for signum, handler in previous.items():
            signal.signal(signum, handler)
