"""What a ``kb`` command opens: the local store, the deployed API, or the served file.

``open_reader`` is the deployed API (``knowledge.client``) when ``--api-url`` is given,
else the local store a command only reads (a missing embedded file is an error, not a
new empty index); ``open_served_store`` is ``kb serve``'s (a file made by another
analysis is moved aside and rebuilt). The exit codes every command returns are here too.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, TextIO

from knowledge.client import KnowledgeClient
from knowledge.config import (
    EMBEDDER_NAMES,
    StoreSettings,
    open_store,
)
from knowledge.core.errors import (
    AnalysisMismatchError,
    ConfigurationError,
    ValidationError,
)
from knowledge.core.scope import KnowledgeScope
from knowledge.stores.protocol import KnowledgeStore

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "cli_store_settings",
    "open_cli_store",
    "open_client",
    "open_existing_store",
    "open_reader",
    "open_served_store",
    "scope_of",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def scope_of(args: argparse.Namespace) -> KnowledgeScope:
    return KnowledgeScope(args.agent, args.context)


def open_client(args: argparse.Namespace) -> KnowledgeClient:
    from knowledge.client import BearerAuth, KnowledgeClient, SigV4Auth

    auth_name = args.auth or ("none" if args.api_url.startswith("http://") else "sigv4")
    auth: Any = None
    if auth_name == "sigv4":
        auth = SigV4Auth()
    elif auth_name == "bearer":
        token = os.environ.get("KB_API_TOKEN", "").strip()
        if not token:
            raise ConfigurationError("--auth bearer needs the token in KB_API_TOKEN")
        auth = BearerAuth(token)
    return KnowledgeClient(args.api_url, auth=auth)


def open_reader(args: argparse.Namespace) -> KnowledgeStore | KnowledgeClient:
    """The deployed API when ``--api-url`` is given, else the local store."""
    if getattr(args, "api_url", None):
        return open_client(args)
    return open_existing_store(args)


def open_existing_store(args: argparse.Namespace) -> KnowledgeStore:
    """The local store a command only reads (search, status, documents, mcp). An embedded
    file that does not exist is an error, not a new empty index that answers "nothing
    found" (a typo in ``--db``, the default file while ``make run`` wrote another, or a
    relative ``--db`` that ``kb mcp`` resolves from its MCP client's own folder: a model
    cannot tell that empty index from an empty scope). The path is shown absolute."""
    settings = StoreSettings.resolve(args.store, db_path=args.db, embedder_name=args.embedder)
    missing = (
        settings.kind == "embedded"
        and settings.embedder_name in EMBEDDER_NAMES  # else open_store names the embedder
        and str(settings.db_path) != ":memory:"
        and not settings.db_path.exists()
    )
    if missing:
        raise ValidationError(
            "db",
            f"no index file at {settings.db_path.absolute()}; build one with `kb index DIR` or "
            "`kb serve ROOT` (make run writes .kb/local.db), or point --db (or KB_DB) at it",
        )
    return open_cli_store(args, create=False)


def open_cli_store(args: argparse.Namespace, *, create: bool = True) -> KnowledgeStore:
    """The store the flags name; an embedded file is made when missing unless ``create``
    is false (the commands that write an index, ``kb index``, ``kb serve`` and the
    repository commands, make it; readers go through ``open_existing_store``)."""
    return open_store(
        args.store,
        db_path=args.db,
        embedder_name=args.embedder,
        opensearch_url=args.opensearch_url,
        create=create,
    )


def cli_store_settings(args: argparse.Namespace) -> StoreSettings:
    """The store the flags name (and the environment, where a flag is not given), as
    ``open_cli_store`` opens it: what ``kb serve``'s worker processes open again."""
    return StoreSettings.resolve(
        args.store,
        db_path=args.db,
        embedder_name=args.embedder,
        opensearch_url=args.opensearch_url,
    )


def open_served_store(args: argparse.Namespace, err: TextIO) -> KnowledgeStore:
    """``kb serve``'s store. An embedded file whose keyword terms were made by another
    analysis (an older version of this package) is only a copy of the served folder: it
    is moved aside, never deleted, and a new one is built from the folder."""
    try:
        return open_cli_store(args)
    except AnalysisMismatchError as exc:
        settings = cli_store_settings(args)
        if settings.kind != "embedded":
            raise
        aside = _move_aside(settings.db_path)
        print(
            f"kb: {exc}\nkb: moved it to {aside}; building a new index from {args.root}",
            file=err,
        )
        return open_cli_store(args)


def _move_aside(path: Path) -> Path:
    """Rename a SQLite file (and its ``-wal``/``-shm``) to a free ``<name>.old[N]``."""
    n = 0
    while True:
        aside = path.with_name(f"{path.name}.old{n or ''}")
        if not any(Path(f"{aside}{suffix}").exists() for suffix in ("", "-wal", "-shm")):
            break
        n += 1
    for suffix in ("", "-wal", "-shm"):
        source = Path(f"{path}{suffix}")
        if source.exists():
            source.rename(Path(f"{aside}{suffix}"))
    return aside
