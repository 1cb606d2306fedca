"""The ``kb`` argument parser: every command, its options and their checks.

The options shared by several commands (the store, the scope, the API) are parent
parsers; each command's ``handler`` is its ``knowledge.local.cli_commands`` function.
Every flag is documented in ``knowledge.local.cli``'s docstring and docs/local.md.
"""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, TypeAlias

from knowledge.config import (
    EMBEDDER_NAMES,
    STORE_BUILDERS,
)
from knowledge.core.documents import DEFAULT_DOCUMENTS_LIMIT, MAX_DOCUMENTS_LIMIT
from knowledge.core.model import (
    DEFAULT_MAX_CHUNKS_PER_DOCUMENT,
    DEFAULT_MIN_SCORE,
    GROUP_BY_VALUES,
    SearchMode,
)
from knowledge.local.cli_commands import (
    cmd_context,
    cmd_documents,
    cmd_index,
    cmd_mcp,
    cmd_put,
    cmd_reindex,
    cmd_rm,
    cmd_search,
    cmd_serve,
    cmd_status,
)
from knowledge.local.scheduling import DEFAULT_INDEX_WORKERS
from knowledge.service.write_quotas import (
    DEFAULT_DOCUMENTS_PER_SCOPE,
    DEFAULT_MIB_PER_MINUTE,
    DEFAULT_REQUESTS_PER_MINUTE,
)

__all__ = ["MAX_PORT", "build_parser"]

if TYPE_CHECKING:
    _Commands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]


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


def _limit(text: str) -> int:
    """A write limit: a whole number, 0 for no limit."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (no limit) or more, got {value}")
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


def _search_options() -> argparse.ArgumentParser:
    """The flags of a search (``kb search`` and ``kb context``)."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("query", help="what to search for")
    options.add_argument(
        "--mode",
        choices=[m.value for m in SearchMode],
        help="keyword, vector or hybrid (default: the store's)",
    )
    options.add_argument(
        "-k", "--max-results", dest="k", type=_positive_int, default=5, help="default 5"
    )
    options.add_argument(
        "--min-score",
        type=float,
        default=None,
        help=(
            "the floor every result's absolute score reaches, in [0, 1]; 0 shows every "
            f"candidate (default: nothing when the best result is below {DEFAULT_MIN_SCORE})"
        ),
    )
    options.add_argument(
        "--offset",
        type=int,
        default=0,
        metavar="N",
        help="skip the first N results (the next page: --offset K with -k K); default 0",
    )
    options.add_argument(
        "--max-chunks-per-document",
        type=int,
        metavar="N",
        help="at most N chunks of one document in the results "
        f"(default {DEFAULT_MAX_CHUNKS_PER_DOCUMENT})",
    )
    options.add_argument(
        "--pattern", action="append", metavar="GLOB", help="only documents whose path matches"
    )
    options.add_argument(
        "--meta", action="append", metavar="KEY=VALUE", help="exact-match metadata filter"
    )
    options.add_argument(
        "--filter",
        metavar="JSON",
        help='metadata filter, e.g. \'{"field": "year", "op": "gte", "value": 2024}\' '
        "(docs/filters.md); AND-ed with --meta",
    )
    options.add_argument(
        "--cross-context", action="store_true", help="search every context of the agent"
    )
    options.add_argument(
        "--origin-weight",
        action="append",
        metavar="ORIGIN=WEIGHT",
        help="weigh one origin's results (upload, repo, manual, shared; 0.1-10), e.g. "
        "shared=0.5 (docs/ranking.md)",
    )
    options.add_argument(
        "--lesson-weight", type=float, metavar="W", help="weight of lesson cards (default 1.4)"
    )
    options.add_argument("--rerank-model", metavar="MODEL", help=_RERANK_HELP + " (local store)")
    options.add_argument("--json", action="store_true", help="print the API response as JSON")
    options.add_argument(
        "--group-by",
        choices=list(GROUP_BY_VALUES),
        help="document: one result per document, its best chunk and how many matched",
    )
    return options


def build_parser() -> argparse.ArgumentParser:
    """The ``kb`` argument parser (exposed for tests and documentation); its commands in
    the order ``kb --help`` lists them."""
    parser = argparse.ArgumentParser(
        prog="kb", description="Scoped knowledge search for AI agents, locally."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    store, scoped, remote = _store_options(), _scope_options(), _api_options()
    searching = _search_options()
    _index_command(commands, [store, scoped])
    _search_command(commands, [store, scoped, remote, searching])
    _context_command(commands, [store, scoped, remote, searching])
    _status_command(commands, [store, scoped, remote])
    _documents_command(commands, [store, scoped, remote])
    _reindex_command(commands, [store, scoped, remote])
    _mcp_command(commands, [store, scoped, remote])
    _serve_command(commands, [store])
    # Git repository sources: `kb repo add|list|remove|sync` (knowledge.local.repo_cli).
    from knowledge.local.repo_cli import add_repo_commands

    add_repo_commands(commands, store, scoped, remote)
    _put_command(commands, [store, scoped, remote])
    _rm_command(commands, [store, scoped, remote])
    return parser


def _index_command(commands: _Commands, parents: list[argparse.ArgumentParser]) -> None:
    """``kb index DIR``: index a folder into one scope."""
    index = commands.add_parser("index", parents=parents, help="index a folder into one scope")
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
    index.set_defaults(handler=cmd_index)


def _search_command(commands: _Commands, parents: list[argparse.ArgumentParser]) -> None:
    """``kb search QUERY``: the search flags, and ``--explain``."""
    search = commands.add_parser("search", parents=parents, help="search one scope")
    search.add_argument(
        "--explain", action="store_true", help="show how every score was made (docs/ranking.md)"
    )
    search.set_defaults(handler=cmd_search)


def _context_command(commands: _Commands, parents: list[argparse.ArgumentParser]) -> None:
    """``kb context QUERY``: a search as a prompt block, within a token budget."""
    context = commands.add_parser(
        "context",
        parents=parents,
        help="a search as a block to insert into a prompt, within a token budget",
    )
    context.add_argument(
        "--max-tokens",
        type=int,
        metavar="N",
        help="the block's budget in estimated tokens (default 4000)",
    )
    context.add_argument(
        "--explain",
        action="store_true",
        help="show how every score was made and what the budget dropped (on stderr; "
        "in the JSON with --json)",
    )
    context.set_defaults(handler=cmd_context)


def _status_command(commands: _Commands, parents: list[argparse.ArgumentParser]) -> None:
    """``kb status``: a scope's index status."""
    status = commands.add_parser("status", parents=parents, help="index status of a scope")
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.add_argument(
        "--root", metavar="ROOT", help="the folder kb serve serves: list its repositories too"
    )
    status.set_defaults(handler=cmd_status)


def _documents_command(commands: _Commands, parents: list[argparse.ArgumentParser]) -> None:
    """``kb documents``: a scope's documents, paged."""
    documents = commands.add_parser(
        "documents",
        parents=parents,
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
    documents.set_defaults(handler=cmd_documents)


def _reindex_command(commands: _Commands, parents: list[argparse.ArgumentParser]) -> None:
    """``kb reindex``: ask a server to re-index a scope."""
    reindex = commands.add_parser(
        "reindex", parents=parents, help="ask a server to re-index a scope"
    )
    reindex.add_argument("--json", action="store_true", help="print the answer as JSON")
    reindex.set_defaults(handler=cmd_reindex)


def _mcp_command(commands: _Commands, parents: list[argparse.ArgumentParser]) -> None:
    """``kb mcp``: the MCP server of one scope."""
    mcp = commands.add_parser(
        "mcp",
        parents=parents,
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
    mcp.set_defaults(handler=cmd_mcp)


def _serve_command(commands: _Commands, parents: list[argparse.ArgumentParser]) -> None:
    """``kb serve ROOT``: watch a bucket-like folder and serve the HTTP API; its write
    options and each agent's write quota."""
    serve = commands.add_parser(
        "serve", parents=parents, help="watch a bucket-like folder and serve the HTTP API"
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
        "--allow-remote-writes",
        action="store_true",
        help="with --allow-writes on a --host other than loopback: the server has no "
        "authentication, so only with something else guarding that address",
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
    serve.add_argument(
        "--index-workers",
        type=_positive_int,
        default=DEFAULT_INDEX_WORKERS,
        metavar="N",
        help="threads indexing changed scopes side by side; no agent takes more than N-1 "
        f"of them, so one agent's big upload never stalls another's edit (default "
        f"{DEFAULT_INDEX_WORKERS})",
    )
    serve.add_argument(
        "--workers",
        type=_positive_int,
        default=None,
        metavar="N",
        help="processes answering requests: this one (which also indexes, watches and "
        "writes) and N-1 workers answering searches on the same port "
        "(default: the number of cores this process may run on; 1: one process)",
    )
    # Each agent's write quota (knowledge.service.write_quotas); 0 is no limit.
    serve.add_argument(
        "--max-writes-per-minute",
        type=_limit,
        default=DEFAULT_REQUESTS_PER_MINUTE,
        metavar="N",
        help="with --allow-writes: write requests one agent may send a minute "
        f"(default {DEFAULT_REQUESTS_PER_MINUTE}; 0: no limit)",
    )
    serve.add_argument(
        "--max-write-mib-per-minute",
        type=_limit,
        default=DEFAULT_MIB_PER_MINUTE,
        metavar="MIB",
        help="with --allow-writes: MiB of documents one agent may write a minute "
        f"(default {DEFAULT_MIB_PER_MINUTE}; 0: no limit)",
    )
    serve.add_argument(
        "--max-documents-per-scope",
        type=_limit,
        default=DEFAULT_DOCUMENTS_PER_SCOPE,
        metavar="N",
        help="with --allow-writes: a write of a new path into a scope holding N documents "
        f"is refused (default {DEFAULT_DOCUMENTS_PER_SCOPE}; 0: no limit)",
    )
    serve.set_defaults(handler=cmd_serve)


def _put_command(commands: _Commands, parents: list[argparse.ArgumentParser]) -> None:
    """``kb put FILE``: write a document (or a note) via the API."""
    put = commands.add_parser(
        "put", parents=parents, help="write a document (or a note) via the API"
    )
    put.add_argument("file", metavar="FILE", help="the file to send")
    put.add_argument("--path", help="its path inside the scope (default: the file's name)")
    put.add_argument("--note", action="store_true", help="a Markdown note (origin manual)")
    put.add_argument("--meta", action="append", metavar="KEY=VALUE", help="sidecar metadata")
    put.add_argument("--json", action="store_true", help="print the answer as JSON")
    put.set_defaults(handler=cmd_put)


def _rm_command(commands: _Commands, parents: list[argparse.ArgumentParser]) -> None:
    """``kb rm PATH``: delete a document via the API."""
    rm = commands.add_parser("rm", parents=parents, help="delete a document via the API")
    rm.add_argument("path", metavar="PATH", help="the document's path inside the scope")
    rm.add_argument("--json", action="store_true", help="print the answer as JSON")
    rm.set_defaults(handler=cmd_rm)
