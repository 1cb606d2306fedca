"""``kb``: index a folder, search it, show its status, or serve the HTTP API locally.

::

    kb index DIR --agent A --context C [--pattern GLOB ...] [--reindex] [--json]
    kb search "query" --agent A --context C [--mode M] [-k N] [--min-score X]
              [--offset N] [--max-chunks-per-document N] [--pattern GLOB ...]
              [--meta KEY=VALUE ...] [--filter JSON] [--cross-context] [--json]
    kb status --agent A --context C [--json]
    kb documents --agent A --context C [--limit N] [--cursor C] [--json]
    kb reindex --agent A --context C [--json]
    kb put FILE --agent A --context C --api-url URL [--path P] [--note] [--meta K=V ...]
    kb rm PATH --agent A --context C --api-url URL
    kb serve ROOT [--host 127.0.0.1] [--port 8080] [--poll-interval 1.0] [--allow-writes]
    kb mcp --agent A --context C [--cross-context] [--transport stdio|http] [--allow-reindex]
           [--shared-library CONTEXT ...]

``search``, ``status``, ``documents``, ``reindex`` and ``mcp`` take ``--api-url URL`` to
use a deployed stack (or another ``kb serve``) through ``knowledge.client`` instead of a
local store, with ``--auth sigv4|bearer|none`` (bearer reads the token from
``KB_API_TOKEN``).

Every command takes ``--store``, ``--db``, ``--embedder``, ``--opensearch-url`` (see
``knowledge.config`` for the environment variables and defaults) and ``--debug``.

Exit codes: 0 success; 1 the command ran but failed (a file that could not be
indexed, the backend or provider failed); 2 bad usage or configuration (including an
index built with another embedder); 130 interrupted. An error is one line on stderr,
never a traceback, unless ``--debug`` is given.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, TextIO

from knowledge.api import parse_search_request, search_response_body
from knowledge.client import KnowledgeClient
from knowledge.config import (
    EMBEDDER_NAMES,
    STORE_BUILDERS,
    StoreSettings,
    open_reranking,
    open_store,
)
from knowledge.documents import DEFAULT_DOCUMENTS_LIMIT, MAX_DOCUMENTS_LIMIT, format_documents
from knowledge.errors import (
    AnalysisMismatchError,
    ConfigurationError,
    KnowledgeError,
    ValidationError,
)
from knowledge.indexing import REASON_UNCHANGED
from knowledge.local.progress import ListedSource, ProgressBar
from knowledge.model import (
    DEFAULT_MAX_CHUNKS_PER_DOCUMENT,
    IndexOptions,
    IndexResult,
    SearchMode,
)
from knowledge.scope import KnowledgeScope
from knowledge.source import DocumentSource
from knowledge.store import KnowledgeStore, ScopeSources
from knowledge.tool import format_search_results

__all__ = ["ProgressBar", "build_parser", "main"]

logger = logging.getLogger("knowledge.cli")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _scope(args: argparse.Namespace) -> KnowledgeScope:
    return KnowledgeScope(args.agent, args.context)


def _open_client(args: argparse.Namespace) -> KnowledgeClient:
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


def _open_reader(args: argparse.Namespace) -> KnowledgeStore | KnowledgeClient:
    """The deployed API when ``--api-url`` is given, else the local store."""
    if getattr(args, "api_url", None):
        return _open_client(args)
    return _open_existing_store(args)


def _open_existing_store(args: argparse.Namespace) -> KnowledgeStore:
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
    return _open_store(args)


def _open_store(args: argparse.Namespace) -> KnowledgeStore:
    return open_store(
        args.store,
        db_path=args.db,
        embedder_name=args.embedder,
        opensearch_url=args.opensearch_url,
    )


def _open_served_store(args: argparse.Namespace, err: TextIO) -> KnowledgeStore:
    """``kb serve``'s store. An embedded file whose keyword terms were made by another
    analysis (an older version of this package) is only a copy of the served folder: it
    is moved aside, never deleted, and a new one is built from the folder."""
    try:
        return _open_store(args)
    except AnalysisMismatchError as exc:
        settings = StoreSettings.resolve(args.store, db_path=args.db)
        if settings.kind != "embedded":
            raise
        aside = _move_aside(settings.db_path)
        print(
            f"kb: {exc}\nkb: moved it to {aside}; building a new index from {args.root}",
            file=err,
        )
        return _open_store(args)


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


def _print_json(data: Any, out: TextIO) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2), file=out)


def _summary(scope: KnowledgeScope, result: IndexResult) -> list[str]:
    """A headline, then one line per file that was skipped for a reason worth reading,
    had a warning, or failed. Unchanged files are only counted: a re-run lists them all."""
    unchanged = sum(1 for p in result.skipped if p.reason == REASON_UNCHANGED)
    lines = [
        f"{scope}: indexed {result.indexed_documents} documents "
        f"({result.indexed_chunks} chunks), skipped {result.skipped_documents} "
        f"({unchanged} unchanged), deleted {result.deleted_documents}, "
        f"errors {len(result.errors)} in {result.duration_ms / 1000.0:.1f} s"
    ]
    lines.extend(
        f"  skipped {p.path}: {p.reason}" for p in result.skipped if p.reason != REASON_UNCHANGED
    )
    lines.extend(f"  warning {p.path}: {p.reason}" for p in result.warnings)
    lines.extend(f"  error   {p.path}: {p.reason}" for p in result.errors)
    return lines


def _cmd_index(args: argparse.Namespace) -> int:
    from knowledge.sources.local import LocalDirectorySource  # only for index

    folder = Path(args.dir)
    if not folder.is_dir():
        raise ValidationError("DIR", f"'{folder}' is not a folder")
    scope = _scope(args)
    options = IndexOptions(file_patterns=tuple(args.pattern)) if args.pattern else IndexOptions()
    listed = ListedSource(LocalDirectorySource(folder).documents(scope, options))
    progress = ProgressBar(len(listed), sys.stderr, enabled=sys.stderr.isatty())
    listed.on_read = progress.advance
    source: DocumentSource = listed
    with closing(_open_store(args)) as store:
        if isinstance(store, ScopeSources):  # so that kb serve leaves this scope alone
            store.set_scope_source(scope, f"kb index {folder.resolve()}")
        try:
            if args.reindex:
                result = store.reindex(scope, source, options)
            else:
                result = store.index(scope, source, options)
        finally:
            progress.finish()
    if args.json:
        _print_json(
            {"agent": scope.agent, "context": scope.context, **result.to_dict()}, sys.stdout
        )
    else:
        print("\n".join(_summary(scope, result)))
    return EXIT_OK if result.ok else EXIT_FAILED


def _metadata_filters(pairs: Sequence[str]) -> dict[str, str]:
    filters: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValidationError("metadata", f"'{pair}' is not of the form KEY=VALUE")
        filters[key.strip()] = value
    return filters


def _filter_argument(text: str) -> object:
    """``--filter``: a JSON filter (docs/filters.md); validated by ``parse_search_request``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError("filter", f"is not valid JSON ({exc.msg} at {exc.pos})") from None


def _cmd_search(args: argparse.Namespace) -> int:
    scope = _scope(args)
    request: dict[str, Any] = {
        "query": args.query,
        "max_results": args.k,
        "min_score": args.min_score,
        "offset": args.offset,
        "cross_context": args.cross_context,
    }
    if args.max_chunks_per_document is not None:
        request["max_chunks_per_document"] = args.max_chunks_per_document
    if args.mode is not None:
        request["mode"] = args.mode
    if args.pattern:
        request["file_patterns"] = list(args.pattern)
    if args.meta:
        request["metadata"] = _metadata_filters(args.meta)
    if args.filter is not None:
        request["filter"] = _filter_argument(args.filter)
    query = parse_search_request(request)
    # A deployed API reranks on its side (its own configuration); a local store here.
    reranking = None if getattr(args, "api_url", None) else open_reranking(args.rerank_model)
    report = None
    if reranking is not None:
        with closing(_open_existing_store(args)) as local:
            started = time.perf_counter()
            results, report = reranking.search(local, scope, query)
            took_ms = (time.perf_counter() - started) * 1000.0
            mode = query.mode or local.default_mode
    else:
        with closing(_open_reader(args)) as store:
            started = time.perf_counter()
            results = store.search(scope, query)
            took_ms = (time.perf_counter() - started) * 1000.0
            mode = query.mode or store.default_mode
    if args.json:
        _print_json(search_response_body(query, mode, results, took_ms, report), sys.stdout)
    else:
        print(format_search_results(query.text, results))
    return EXIT_OK


def _cmd_status(args: argparse.Namespace) -> int:
    scope = _scope(args)
    with closing(_open_reader(args)) as store:
        status = store.status(scope)
    if args.json:
        _print_json(
            {"agent": scope.agent, "context": scope.context, **status.to_dict()}, sys.stdout
        )
        return EXIT_OK
    last = "never" if status.last_indexed_at is None else status.last_indexed_at.isoformat()
    rows = [
        ("scope", str(scope)),
        ("state", status.state.value),
        ("documents", str(status.document_count)),
        ("chunks", str(status.chunk_count)),
        ("vectors", f"{status.embedded_chunks} embedded, {status.reused_chunks} reused"),
        ("last indexed", last),
    ]
    if status.message:
        rows.append(("message", status.message))
    unread = status.unread_summary()
    if unread:
        rows.append(("unread", unread))
    rows.append(("problems", str(len(status.problems))))
    for name, value in rows:
        print(f"{name + ':':<14}{value}")
    for problem in status.problems:
        print(f"  {problem.path}: {problem.reason}")
    return EXIT_OK


def _cmd_documents(args: argparse.Namespace) -> int:
    scope = _scope(args)
    with closing(_open_reader(args)) as store:
        page = store.list_documents(scope, limit=args.limit, cursor=args.cursor)
    if args.json:
        _print_json({"agent": scope.agent, "context": scope.context, **page.to_dict()}, sys.stdout)
        return EXIT_OK
    print(format_documents(page))
    return EXIT_OK


def _cmd_reindex(args: argparse.Namespace) -> int:
    if not args.api_url:
        raise ValidationError(
            "api-url",
            "kb reindex asks a server to re-index a scope; give --api-url "
            "(for a local folder use: kb index DIR --reindex)",
        )
    scope = _scope(args)
    with closing(_open_client(args)) as client:
        answer = client.reindex(scope)
    if args.json:
        _print_json(answer, sys.stdout)
    else:
        print(
            f"{scope}: "
            + ", ".join(
                f"{k} {v}"
                for k, v in answer.items()
                if k not in ("agent", "context", "skipped", "errors", "warnings")
            )
        )
    return EXIT_OK


def _cmd_mcp(args: argparse.Namespace) -> int:
    from knowledge.mcp_server import serve_mcp

    scope = _scope(args)
    if args.allow_reindex and not args.api_url:
        raise ValidationError(
            "allow-reindex",
            "the reindex tool asks a server to re-index from its source; give --api-url "
            "(a kb serve or the deployed stack)",
        )
    libraries = _mcp_libraries(args)
    with closing(_open_reader(args)) as backend:
        reindex = None
        if args.allow_reindex and isinstance(backend, KnowledgeClient):
            reindex = backend.reindex
        serve_mcp(
            backend,
            scope,
            cross_context=args.cross_context,
            mode=SearchMode.parse(args.mode) if args.mode else None,
            transport=args.transport,
            host=args.host,
            port=args.port,
            reindex=reindex,
            shared_libraries=libraries,
        )
    return EXIT_OK


def _mcp_libraries(args: argparse.Namespace) -> tuple[KnowledgeScope, ...]:
    """``kb mcp --shared-library CONTEXT``: a local store's grant (a server has its own)."""
    from knowledge.shared import SHARED_AGENT

    if args.shared_library and args.api_url:
        raise ValidationError(
            "shared-library", "with --api-url the server's grant applies (kb serve --shared-grant)"
        )
    return tuple(KnowledgeScope(SHARED_AGENT, c) for c in args.shared_library or ())


def _cmd_serve(args: argparse.Namespace) -> int:
    from knowledge.local.server import LocalServer, serve_until_stopped
    from knowledge.shared import SharedGrants

    with closing(_open_served_store(args, sys.stderr)) as store:
        server = LocalServer(
            args.root,
            store,
            host=args.host,
            port=args.port,
            poll_interval=args.poll_interval,
            reranking=open_reranking(args.rerank_model),
            allow_writes=args.allow_writes,
            shared_grants=SharedGrants.parse(args.shared_grant),
            repo_sync_interval=args.repo_sync_interval,
        )
        return serve_until_stopped(server)


def _cmd_put(args: argparse.Namespace) -> int:
    import mimetypes

    if not args.api_url:
        raise ValidationError("api-url", "kb put writes through a server; give --api-url")
    source = Path(args.file)
    data = source.read_bytes()
    path = args.path or source.name
    content_type = "text/markdown" if args.note else mimetypes.guess_type(path)[0]
    with closing(_open_client(args)) as client:
        answer = client.put_document(
            _scope(args),
            path,
            data,
            content_type=content_type or "application/octet-stream",
            origin="manual" if args.note else None,
            metadata=_metadata_pairs(args.meta) or None,
        )
    if args.json:
        _print_json(answer, sys.stdout)
    else:
        print(f"accepted {answer['path']} ({answer['size']} bytes); state: {answer['document']}")
    return EXIT_OK


def _cmd_rm(args: argparse.Namespace) -> int:
    if not args.api_url:
        raise ValidationError("api-url", "kb rm deletes through a server; give --api-url")
    with closing(_open_client(args)) as client:
        answer = client.delete_document(_scope(args), args.path)
    if args.json:
        _print_json(answer, sys.stdout)
    else:
        print(f"deleted {answer['path']}")
    return EXIT_OK


def _metadata_pairs(pairs: Sequence[str] | None) -> dict[str, str]:
    metadata: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValidationError("meta", f"'{pair}' is not KEY=VALUE")
        metadata[key] = value
    return metadata


def _store_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("store")
    group.add_argument(
        "--store",
        metavar="KIND",
        help=f"index backend: {', '.join(sorted(STORE_BUILDERS))} (env KB_STORE; default embedded)",
    )
    group.add_argument(
        "--db", metavar="PATH", help="embedded store file (env KB_DB; default .kb/knowledge.db)"
    )
    group.add_argument(
        "--embedder",
        metavar="NAME",
        help=f"embedding provider: {', '.join(EMBEDDER_NAMES)} (env KB_EMBEDDER; default hashing)",
    )
    group.add_argument(
        "--opensearch-url", metavar="URL", help="OpenSearch endpoint (env KB_OPENSEARCH_URL)"
    )
    common.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    return common


def _api_options() -> argparse.ArgumentParser:
    remote = argparse.ArgumentParser(add_help=False)
    group = remote.add_argument_group("deployed API (instead of a local store)")
    group.add_argument(
        "--api-url", metavar="URL", help="base URL of a deployed stack or of another kb serve"
    )
    group.add_argument(
        "--auth",
        choices=["sigv4", "bearer", "none"],
        help="sigv4 (AWS credentials; default for https), bearer (KB_API_TOKEN), none",
    )
    return remote


def _scope_options() -> argparse.ArgumentParser:
    scoped = argparse.ArgumentParser(add_help=False)
    scoped.add_argument("--agent", required=True, help="agent name (scope segment)")
    scoped.add_argument("--context", required=True, help="context name (scope segment)")
    return scoped


_RERANK_HELP = (
    "Bedrock rerank model for the top candidates, e.g. amazon.rerank-v1:0 "
    "(env KB_RERANK_MODEL, KB_RERANK_TOP_N; default: no reranking)"
)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


MAX_PORT = 65535


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
    if not 0 <= value <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"must be from 0 to {MAX_PORT}, got {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not 0 < value < math.inf:  # also NaN
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The ``kb`` argument parser (exposed for tests and documentation)."""
    parser = argparse.ArgumentParser(
        prog="kb", description="Scoped knowledge search for AI agents, locally."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    store, scoped, remote = _store_options(), _scope_options(), _api_options()

    index = commands.add_parser(
        "index", parents=[store, scoped], help="index a folder into one scope"
    )
    index.add_argument("dir", metavar="DIR", help="folder whose files are the scope's documents")
    index.add_argument(
        "--pattern",
        action="append",
        metavar="GLOB",
        help="file pattern to index (repeatable; default: every supported type)",
    )
    index.add_argument(
        "--reindex", action="store_true", help="drop the scope's index and index everything"
    )
    index.add_argument("--json", action="store_true", help="print the result as JSON")
    index.set_defaults(handler=_cmd_index)

    search = commands.add_parser("search", parents=[store, scoped, remote], help="search one scope")
    search.add_argument("query", help="what to search for")
    search.add_argument(
        "--mode",
        choices=[m.value for m in SearchMode],
        help="keyword, vector or hybrid (default: the store's)",
    )
    search.add_argument(
        "-k", "--max-results", dest="k", type=_positive_int, default=5, help="default 5"
    )
    search.add_argument("--min-score", type=float, default=0.0, help="in [0, 1]; default 0")
    search.add_argument(
        "--offset",
        type=int,
        default=0,
        metavar="N",
        help="skip the first N results (the next page: --offset K with -k K); default 0",
    )
    search.add_argument(
        "--max-chunks-per-document",
        type=int,
        metavar="N",
        help="at most N chunks of one document in the results "
        f"(default {DEFAULT_MAX_CHUNKS_PER_DOCUMENT})",
    )
    search.add_argument(
        "--pattern", action="append", metavar="GLOB", help="only documents whose path matches"
    )
    search.add_argument(
        "--meta", action="append", metavar="KEY=VALUE", help="exact-match metadata filter"
    )
    search.add_argument(
        "--filter",
        metavar="JSON",
        help='metadata filter, e.g. \'{"field": "year", "op": "gte", "value": 2024}\' '
        "(docs/filters.md); AND-ed with --meta",
    )
    search.add_argument(
        "--cross-context", action="store_true", help="search every context of the agent"
    )
    search.add_argument("--rerank-model", metavar="MODEL", help=_RERANK_HELP + " (local store)")
    search.add_argument("--json", action="store_true", help="print the API response as JSON")
    search.set_defaults(handler=_cmd_search)

    status = commands.add_parser(
        "status", parents=[store, scoped, remote], help="index status of a scope"
    )
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(handler=_cmd_status)

    documents = commands.add_parser(
        "documents",
        parents=[store, scoped, remote],
        help="the documents of a scope as the index records them (paged)",
    )
    documents.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_DOCUMENTS_LIMIT,
        help=f"documents per page, 1-{MAX_DOCUMENTS_LIMIT} (default {DEFAULT_DOCUMENTS_LIMIT})",
    )
    documents.add_argument("--cursor", help="the cursor a previous page printed")
    documents.add_argument("--json", action="store_true", help="print JSON")
    documents.set_defaults(handler=_cmd_documents)

    reindex = commands.add_parser(
        "reindex", parents=[store, scoped, remote], help="ask a server to re-index a scope"
    )
    reindex.add_argument("--json", action="store_true", help="print the answer as JSON")
    reindex.set_defaults(handler=_cmd_reindex)

    mcp = commands.add_parser(
        "mcp",
        parents=[store, scoped, remote],
        help="serve the knowledge_search tool to MCP clients (scope fixed at start)",
    )
    mcp.add_argument(
        "--cross-context", action="store_true", help="search every context of the agent"
    )
    mcp.add_argument(
        "--mode", choices=[m.value for m in SearchMode], help="search mode (default: the store's)"
    )
    mcp.add_argument(
        "--transport", choices=["stdio", "http"], default="stdio", help="default stdio"
    )
    mcp.add_argument("--host", default="127.0.0.1", help="http transport: default 127.0.0.1")
    mcp.add_argument("--port", type=_port, default=8765, help="http transport: default 8765")
    mcp.add_argument(
        "--allow-reindex",
        action="store_true",
        help="also offer the knowledge_reindex tool (needs --api-url); off by default",
    )
    mcp.add_argument(
        "--shared-library",
        action="append",
        metavar="CONTEXT",
        help="local store: the search also covers the shared library _shared/CONTEXT",
    )
    mcp.set_defaults(handler=_cmd_mcp)

    serve = commands.add_parser(
        "serve", parents=[store], help="watch a bucket-like folder and serve the HTTP API"
    )
    serve.add_argument("root", metavar="ROOT", help="folder laid out as <agent>/<context>/<path>")
    serve.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1 (local only)")
    serve.add_argument("--port", type=_port, default=8080, help="default 8080; 0 picks a free port")
    serve.add_argument(
        "--poll-interval", type=_seconds, default=1.0, help="seconds between folder scans"
    )
    serve.add_argument("--rerank-model", metavar="MODEL", help=_RERANK_HELP)
    serve.add_argument(
        "--allow-writes",
        action="store_true",
        help="answer the write routes (PUT/DELETE documents) by writing ROOT; off by default",
    )
    serve.add_argument(
        "--shared-grant",
        action="append",
        metavar="AGENT=CONTEXT[,CONTEXT]",
        help="let AGENT's searches include the shared library ROOT/_shared/CONTEXT",
    )
    serve.add_argument(
        "--repo-sync-interval",
        type=_seconds,
        default=24 * 3600.0,
        metavar="SECONDS",
        help="seconds between syncs of each registered Git repository (default 86400)",
    )
    serve.set_defaults(handler=_cmd_serve)
    # Git repository sources: `kb repo add|list|remove|sync` (knowledge.repos.cli).
    from knowledge.repos.cli import add_repo_commands

    add_repo_commands(commands, store, scoped)

    put = commands.add_parser(
        "put", parents=[store, scoped, remote], help="write a document (or a note) via the API"
    )
    put.add_argument("file", metavar="FILE", help="the file to send")
    put.add_argument("--path", help="its path inside the scope (default: the file's name)")
    put.add_argument("--note", action="store_true", help="a Markdown note (origin manual)")
    put.add_argument("--meta", action="append", metavar="KEY=VALUE", help="sidecar metadata")
    put.add_argument("--json", action="store_true", help="print the answer as JSON")
    put.set_defaults(handler=_cmd_put)

    rm = commands.add_parser(
        "rm", parents=[store, scoped, remote], help="delete a document via the API"
    )
    rm.add_argument("path", metavar="PATH", help="the document's path inside the scope")
    rm.add_argument("--json", action="store_true", help="print the answer as JSON")
    rm.set_defaults(handler=_cmd_rm)
    return parser


class _NoTracebackFormatter(logging.Formatter):
    """Log lines without tracebacks: the CLI promises one line per problem."""

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info or record.exc_text or record.stack_info:
            record = logging.makeLogRecord(record.__dict__)
            record.exc_info = None
            record.exc_text = None
            record.stack_info = None
        return super().format(record)


@contextmanager
def _cli_logging(args: argparse.Namespace) -> Iterator[None]:
    """Send the package's logs to stderr for the duration of one command, then restore."""
    level = (
        logging.DEBUG
        if args.debug
        else logging.INFO
        if args.command == "serve"
        else logging.WARNING
    )
    handler = logging.StreamHandler(sys.stderr)
    fmt = "%(asctime)s %(levelname)s %(message)s"
    handler.setFormatter(logging.Formatter(fmt) if args.debug else _NoTracebackFormatter(fmt))
    package = logging.getLogger("knowledge")
    saved = (package.handlers[:], package.level, package.propagate)
    package.handlers = [handler]
    package.setLevel(level)
    package.propagate = False
    try:
        yield
    finally:
        package.handlers, package.propagate = saved[0], saved[2]
        package.setLevel(saved[1])


def _silence_stdout() -> None:
    # Python would report the broken pipe again when it flushes stdout at exit.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _fail(message: str, code: int) -> int:
    print(f"kb: error: {message}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kb`` with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    args = build_parser().parse_args(argv)
    try:
        with _cli_logging(args):
            code: int = args.handler(args)
    except KeyboardInterrupt:
        print("kb: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`kb search ... | head`): not an error worth a message.
        _silence_stdout()
        return EXIT_FAILED
    except Exception as exc:
        if args.debug:
            raise
        if isinstance(exc, ValidationError):
            return _fail(str(exc), EXIT_USAGE)
        if isinstance(exc, ConfigurationError):  # EmbeddingMismatchError too
            return _fail(str(exc), EXIT_USAGE)
        if isinstance(exc, KnowledgeError):
            return _fail(str(exc), EXIT_FAILED)
        if isinstance(exc, OSError):
            where = f": {exc.filename}" if exc.filename else ""
            return _fail(f"{exc.strerror or exc}{where}", EXIT_FAILED)
        return _fail(
            f"unexpected {type(exc).__name__}: {exc} (run with --debug for the traceback)",
            EXIT_FAILED,
        )
    return code


if __name__ == "__main__":  # `python -m knowledge.cli ...`, as MCP client configs may run it
    sys.exit(main())
