"""A worker process of ``kb serve --workers N``: more processes answering searches.

One Python process runs its Python code on one core at a time (the GIL), whatever its
threads. A worker is another process serving the same port: it accepts on the primary's listening
socket (inherited), runs the same HTTP layer (``knowledge.local.http_handler``: the same
header checks, body limits, refusal of other sites' pages and error shapes), and
answers the read-only routes (``LOCAL_ROUTES``: health, the searches and prompt
contexts, the document listings and a document's chunks) from its own connection to
the same store. Every other route needs the primary's state (the start-up index's
progress, the write quotas, the watcher, the repositories), so it is forwarded to the
primary unchanged (``knowledge.local.forwarding``).

The primary (``knowledge.local.workers``) starts it as ``python -m knowledge.local.worker``
with the listening socket's descriptor and sends its ``WorkerSetup`` as one JSON line on
stdin. The worker prints ``ready`` once it serves, and stops on SIGTERM or when its
stdin ends (the primary is gone, even killed: no worker outlives it; then it also
removes the primary's forwarding socket, which a killed primary could not). SIGINT is left to
the primary, which stops its workers itself (Ctrl-C reaches the whole process group).

**Freshness.** The store's in-process caches (cached vectors, term counts) are stamped
with the write generation of each agent read inside every search's own snapshot of the
file (``knowledge.stores.embedded``), so a worker's search sees what the primary
committed, as a ``kb search`` beside the server does.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
import sys
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from knowledge.agent_tools.shared import SharedGrants
from knowledge.config import StoreSettings, open_reranking, open_store
from knowledge.core.model import SearchMode
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.sources.folders import BucketFolderSource
from knowledge.local.forwarding import Forwarder, remove_abandoned
from knowledge.local.http_handler import ApiHttpServer
from knowledge.service.api import KnowledgeApi
from knowledge.service.responses import ApiResponse
from knowledge.service.routes import resolve

__all__ = ["LOCAL_ROUTES", "WorkerApi", "WorkerSetup", "main"]

logger = logging.getLogger("knowledge.local.server")

LOCAL_ROUTES = frozenset(
    {
        "health",
        "agent_search",
        "search",
        "agent_context",
        "context",
        "documents",
        "document",
        "chunks",
    }
)
"""The routes a worker answers itself (``knowledge.service.routes``): they read the store
and nothing of the primary's."""

LOG_FORMAT = "%(asctime)s %(levelname)s worker {number}: %(message)s"
"""A worker's log line: ``kb serve``'s (``knowledge.local.cli``) with the worker's number."""


@dataclass(frozen=True, slots=True)
class WorkerSetup:
    """What a worker needs to answer as the primary would: how to open the same store and
    reranking, the primary's search settings and limits, where to forward."""

    store: StoreSettings
    root: str
    forward_address: str
    listening_fd: int
    number: int
    default_mode: SearchMode | None = None
    reranks: bool = False
    rerank_model: str | None = None
    shared_grants: dict[str, tuple[str, ...]] = field(default_factory=dict)
    body_timeout: float = 5.0
    writes_enabled: bool = False
    max_put_bytes: int | None = None
    log_level: int = logging.WARNING

    def to_json(self) -> str:
        data = asdict(self)
        data["store"]["db_path"] = str(self.store.db_path)
        data["store"]["default_mode"] = _mode_value(self.store.default_mode)
        data["default_mode"] = _mode_value(self.default_mode)
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> WorkerSetup:
        data: dict[str, Any] = json.loads(text)
        store = data.pop("store")
        store["db_path"] = Path(store["db_path"])
        store["default_mode"] = _mode(store["default_mode"])
        grants = data.pop("shared_grants")
        return cls(
            store=StoreSettings(**store),
            default_mode=_mode(data.pop("default_mode")),
            shared_grants={agent: tuple(names) for agent, names in grants.items()},
            **data,
        )


def _mode_value(mode: SearchMode | None) -> str | None:
    return None if mode is None else mode.value


def _mode(value: str | None) -> SearchMode | None:
    return None if value is None else SearchMode(value)


class WorkerApi:
    """The API as a worker's HTTP layer sees it: ``LOCAL_ROUTES`` (and every request no
    route takes: a 404, a 405, a bad segment) answered by ``api``, the others forwarded."""

    def __init__(
        self,
        api: KnowledgeApi,
        forwarder: Forwarder,
        *,
        writes_enabled: bool,
        max_put_bytes: int | None,
    ) -> None:
        self._api = api
        self._forwarder = forwarder
        self._writes_enabled = writes_enabled
        self._max_put_bytes = max_put_bytes

    @property
    def writes_enabled(self) -> bool:
        return self._writes_enabled

    @property
    def max_put_bytes(self) -> int | None:
        return self._max_put_bytes

    def handle(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        content_type: str | None = None,
    ) -> ApiResponse:
        try:
            resolved = resolve(method, path)
        except Exception:  # a bad segment: the API's own answer says which
            resolved = None
        if isinstance(resolved, tuple) and resolved[0].name not in LOCAL_ROUTES:
            return self._forwarder.forward(method, path, body, content_type)
        return self._api.handle(method, path, body, content_type=content_type)


def _log_to_stderr(setup: WorkerSetup) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT.format(number=setup.number)))
    package = logging.getLogger("knowledge")
    package.handlers = [handler]
    package.setLevel(setup.log_level)
    package.propagate = False


def _open_store(settings: StoreSettings) -> Any:
    return open_store(
        settings.kind,
        db_path=settings.db_path,
        embedder_name=settings.embedder_name,
        opensearch_url=settings.opensearch_url,
        default_mode=settings.default_mode,
        environ={"KB_ISOLATION": settings.isolation},
    )


def serve(setup: WorkerSetup, stop: threading.Event) -> None:
    """Serve until ``stop`` is set: open the store, accept on the inherited socket."""
    store = _open_store(setup.store)
    forwarder = Forwarder(setup.forward_address)
    try:
        api = KnowledgeApi(
            store,
            default_mode=setup.default_mode,
            reranking=open_reranking(setup.rerank_model) if setup.reranks else None,
            shared=SharedGrants(setup.shared_grants),
        )
        source = BucketFolderSource(Path(setup.root))

        def scopes() -> list[KnowledgeScope]:
            return list(source.iter_scopes())

        listening = socket.socket(fileno=setup.listening_fd)
        host = listening.getsockname()[0]
        http = ApiHttpServer(
            (str(host), 0),
            WorkerApi(
                api,
                forwarder,
                writes_enabled=setup.writes_enabled,
                max_put_bytes=setup.max_put_bytes,
            ),
            setup.body_timeout,
            scopes,
            listening=listening,
        )
        thread = threading.Thread(
            target=http.serve_forever, kwargs={"poll_interval": 0.2}, name="kb-http", daemon=True
        )
        thread.start()
        print("ready", flush=True)
        logger.info("serving")
        stop.wait()
        http.shutdown()
        thread.join(10.0)
        http.server_close()
    finally:
        forwarder.close()
        store.close()


def main() -> int:
    """``python -m knowledge.local.worker``: one ``WorkerSetup`` line on stdin, then serve
    until SIGTERM or the end of stdin."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the primary stops its workers
    setup = WorkerSetup.from_json(sys.stdin.readline())
    _log_to_stderr(setup)
    stop = threading.Event()
    stopped = threading.Event()  # by the primary (SIGTERM), not by its end
    gone = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stopped.set()
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)

    def watch_primary() -> None:
        sys.stdin.read()  # returns when the primary closes the pipe or is gone
        gone.set()
        stop.set()

    threading.Thread(target=watch_primary, name="kb-primary-watch", daemon=True).start()
    try:
        serve(setup, stop)
    except Exception as exc:
        logger.error("cannot serve: %s", exc)
        return 1
    finally:
        if gone.is_set() and not stopped.is_set():
            remove_abandoned(setup.forward_address)
    return 0


if __name__ == "__main__":
    sys.exit(main())
