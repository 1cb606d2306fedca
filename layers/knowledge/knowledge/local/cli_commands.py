"""What each ``kb`` command does once its arguments are parsed (``cli_parser``).

One ``cmd_<name>(args) -> exit code`` per command: ``index`` a folder, ``search``,
``context`` (the search as a prompt block),
``status``, ``documents`` (a local store or ``--api-url``), ``reindex`` (a server),
``mcp``, ``serve``, and the write commands ``put``/``rm`` (through the API). Errors
are raised; ``knowledge.local.cli.main`` turns them into one line and an exit code.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from knowledge.client import KnowledgeClient
from knowledge.config import (
    open_reranking,
)
from knowledge.core.documents import format_documents
from knowledge.core.errors import (
    ValidationError,
)
from knowledge.core.model import (
    IndexOptions,
    IndexResult,
    SearchMode,
    SearchQuery,
    SearchResult,
)
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import DocumentSource
from knowledge.embedding.base import prepare_in_background
from knowledge.ingest.pipeline import REASON_UNCHANGED, index_source, reindex_source
from knowledge.local.cli_open import (
    EXIT_FAILED,
    EXIT_OK,
    cli_store_settings,
    open_cli_store,
    open_client,
    open_existing_store,
    open_reader,
    open_served_store,
    scope_of,
)
from knowledge.local.cli_search import print_search, remote_search
from knowledge.local.progress import ListedSource, ProgressBar
from knowledge.ranking import explain
from knowledge.ranking.origin_weights import rank_weights_from_env, ranking_arguments
from knowledge.ranking.vector_side import store_vector_side
from knowledge.service.api import parse_search_request, search_response_body
from knowledge.stores.protocol import ScopeSources

if TYPE_CHECKING:
    from knowledge.reranking.stage import RerankReport

__all__ = [
    "cmd_documents",
    "cmd_index",
    "cmd_mcp",
    "cmd_put",
    "cmd_reindex",
    "cmd_rm",
    "cmd_search",
    "cmd_serve",
    "cmd_status",
]

logger = logging.getLogger("knowledge.local.cli")


def print_json(data: Any, out: TextIO) -> None:
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


def cmd_index(args: argparse.Namespace) -> int:
    import atexit
    import gc

    from knowledge.ingest.sources.folders import LocalDirectorySource  # only for index

    folder = Path(args.dir)
    if not folder.is_dir():
        raise ValidationError("DIR", f"'{folder}' is not a folder")
    # At exit the interpreter collects garbage over everything still loaded (a provider
    # SDK's service models are tens of thousands of objects): about 0.3 s of a short
    # index run. Frozen objects are left out of those collections; the process's memory
    # goes back to the system anyway, and the store is closed before (below).
    atexit.unregister(gc.freeze)  # once per process, however often main() runs
    atexit.register(gc.freeze)
    scope = scope_of(args)
    options = IndexOptions(file_patterns=tuple(args.pattern)) if args.pattern else IndexOptions()
    with closing(open_cli_store(args)) as store:
        # The embedder's client (a remote provider's SDK) is made while the folder is
        # listed and the pipeline starts, not after them, at its first call.
        prepare_in_background(store.embedder)
        listed = ListedSource(LocalDirectorySource(folder).documents(scope, options))
        progress = ProgressBar(len(listed), sys.stderr, enabled=sys.stderr.isatty())
        listed.on_read = progress.advance
        source: DocumentSource = listed
        if isinstance(store, ScopeSources):  # so that kb serve leaves this scope alone
            store.set_scope_source(scope, f"kb index {folder.resolve()}")
        try:
            if args.reindex:
                result = reindex_source(store, scope, source, options)
            else:
                result = index_source(store, scope, source, options)
        finally:
            progress.finish()
    if args.json:
        print_json({"agent": scope.agent, "context": scope.context, **result.to_dict()}, sys.stdout)
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


def _search(
    args: argparse.Namespace,
) -> tuple[
    SearchQuery,
    SearchMode,
    list[SearchResult],
    float,
    RerankReport | None,
    Mapping[str, Any] | None,
    str | None,
]:
    """The search the flags describe (``search`` and ``context`` share them), with the
    trace (``knowledge.ranking.explain``) when ``--explain`` asks for it, and why the
    vector side was not used when it was not (``knowledge.ranking.vector_side``)."""
    scope = scope_of(args)
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
    if args.group_by is not None:
        request["group_by"] = args.group_by
    ranking = ranking_arguments(args.origin_weight, args.lesson_weight)
    remote = bool(getattr(args, "api_url", None))
    # The deployment's weights are the server's: a remote search sends the flags given and
    # nothing else (the query carries no weights, which a client would send whole, every
    # origin and the extra lessons included). A local search takes its base from KB_*.
    if remote:
        query = parse_search_request(request)
    else:
        query = parse_search_request({**request, **ranking}, weights=rank_weights_from_env())
    wanted = bool(getattr(args, "explain", False))
    if remote:  # the deployed API searches, reranks, weighs and explains on its side
        mode, results, took_ms, told, side = remote_search(
            args, scope, query, ranking, with_trace=wanted
        )
        return query, mode, results, took_ms, None, told, side
    reranking = open_reranking(args.rerank_model)
    report = None
    recording = explain.explaining() if wanted else contextlib.nullcontext()
    with recording as recorded, closing(open_existing_store(args)) as local:
        started = time.perf_counter()
        if reranking is not None:
            results, report = reranking.search(local, scope, query)
        else:
            results = local.search(scope, query)
        took_ms = (time.perf_counter() - started) * 1000.0
        mode = query.mode or local.default_mode
        side = store_vector_side(local, query)
    trace = None if recorded is None else recorded.to_dict(results)
    return query, mode, results, took_ms, report, trace, side


def cmd_search(args: argparse.Namespace) -> int:
    query, mode, results, took_ms, report, trace, side = _search(args)
    scope = scope_of(args)  # its context unused across contexts (query.cross_context)
    body = search_response_body(
        query, mode, results, took_ms, report, scope=scope, vector_side=side
    )
    if trace is not None:
        body["explain"] = trace
    print_search(args, body, results)
    return EXIT_OK


def cmd_context(args: argparse.Namespace) -> int:
    """The search's prompt block (``knowledge.agent_tools.prompt_context``), as the route's."""
    from knowledge.agent_tools.prompt_context import (
        build_prompt_context,
        context_trace,
        parse_max_tokens,
    )
    from knowledge.agent_tools.tool import passage_contexts

    max_tokens = parse_max_tokens(args.max_tokens)
    query, mode, results, took_ms, _, trace, side = _search(args)
    contexts = passage_contexts(scope_of(args), query.cross_context)
    block = build_prompt_context(results, max_tokens, context_of=contexts)
    told = None if trace is None else context_trace(trace, results, block)
    if args.json:
        body = {"query": query.text, "mode": mode.value, **block.to_dict()}
        if side is not None:  # as the context route says it
            body["vector_side"] = side
        body["took_ms"] = round(took_ms, 1)
        print_json(body if told is None else {**body, "explain": told}, sys.stdout)
        return EXIT_OK
    if block.text:
        print(block.text)
    if told is not None:  # stdout stays the block a host inserts
        print("--- explain ---", file=sys.stderr)
        print(explain.format_trace(told, told["chunks"]), file=sys.stderr)
    dropped = f", {len(block.dropped)} dropped for the budget" if block.dropped else ""
    noun = "passage" if len(block.passages) == 1 else "passages"
    print(
        f"({len(block.passages)} {noun}, {block.tokens_used} of {max_tokens} tokens "
        f"by the estimate{dropped})",
        file=sys.stderr,
    )
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    from knowledge.local.repo_cli import repo_lines, scope_repos

    scope = scope_of(args)
    with closing(open_reader(args)) as store:
        status = store.status(scope)
    repos, repos_error = scope_repos(args, scope)  # with --api-url or --root only
    if args.json:
        body = {"agent": scope.agent, "context": scope.context, **status.to_dict()}
        body.update({} if repos is None else {"repos": repos})
        body.update({} if repos_error is None else {"repos_error": repos_error})
        print_json(body, sys.stdout)
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
    if repos is not None or repos_error is not None:
        print(f"{'repos:':<14}{repos_error or len(repos or [])}")
        for line in repo_lines(repos or []):
            print(f"  {line}")
    return EXIT_OK


def cmd_documents(args: argparse.Namespace) -> int:
    scope = scope_of(args)
    with closing(open_reader(args)) as store:
        page = store.list_documents(scope, limit=args.limit, cursor=args.cursor)
    if args.json:
        print_json({"agent": scope.agent, "context": scope.context, **page.to_dict()}, sys.stdout)
        return EXIT_OK
    print(format_documents(page))
    return EXIT_OK


def cmd_reindex(args: argparse.Namespace) -> int:
    if not args.api_url:
        raise ValidationError(
            "api-url",
            "kb reindex asks a server to re-index a scope; give --api-url "
            "(for a local folder use: kb index DIR --reindex)",
        )
    scope = scope_of(args)
    with closing(open_client(args)) as client:
        answer = client.reindex(scope)
    if args.json:
        print_json(answer, sys.stdout)
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


def cmd_mcp(args: argparse.Namespace) -> int:
    from knowledge.local.mcp_server import serve_mcp

    scope = scope_of(args)
    if args.allow_reindex and not args.api_url:
        raise ValidationError(
            "allow-reindex",
            "the reindex tool asks a server to re-index from its source; give --api-url "
            "(a kb serve or the deployed stack)",
        )
    libraries = _mcp_libraries(args)
    with closing(open_reader(args)) as backend:
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
            # A local store's searches take the KB_* weights as kb search does; a deployed
            # API applies its own.
            weights=None if isinstance(backend, KnowledgeClient) else rank_weights_from_env(),
        )
    return EXIT_OK


def _mcp_libraries(args: argparse.Namespace) -> tuple[KnowledgeScope, ...]:
    """``kb mcp --shared-library CONTEXT``: a local store's grant (a server has its own)."""
    from knowledge.agent_tools.shared import SHARED_AGENT

    if args.shared_library and args.api_url:
        raise ValidationError(
            "shared-library", "with --api-url the server's grant applies (kb serve --shared-grant)"
        )
    return tuple(KnowledgeScope(SHARED_AGENT, c) for c in args.shared_library or ())


def cmd_serve(args: argparse.Namespace) -> int:
    from knowledge.agent_tools.shared import SharedGrants
    from knowledge.local.folder_writes import check_write_exposure
    from knowledge.local.server import LocalServer, serve_until_stopped
    from knowledge.local.workers import default_workers
    from knowledge.service.write_quotas import WriteLimits

    write_limits = WriteLimits.of(
        args.max_writes_per_minute, args.max_write_mib_per_minute, args.max_documents_per_scope
    )
    # Before the store opens: a refused start leaves no index file behind.
    check_write_exposure(
        args.host, allow_writes=args.allow_writes, allow_remote_writes=args.allow_remote_writes
    )
    with closing(open_served_store(args, sys.stderr)) as store:
        server = LocalServer(
            args.root,
            store,
            host=args.host,
            port=args.port,
            poll_interval=args.poll_interval,
            index_workers=args.index_workers,
            reranking=open_reranking(args.rerank_model),
            allow_writes=args.allow_writes,
            allow_remote_writes=args.allow_remote_writes,
            shared_grants=SharedGrants.parse(args.shared_grant),
            repo_sync_interval=args.repo_sync_interval,
            write_limits=write_limits,
            # Every worker opens the same store and reranking as this process did.
            workers=args.workers or default_workers(),
            worker_store=cli_store_settings(args),
            rerank_model=args.rerank_model,
        )
        return serve_until_stopped(server)


def cmd_put(args: argparse.Namespace) -> int:
    import mimetypes

    if not args.api_url:
        raise ValidationError("api-url", "kb put writes through a server; give --api-url")
    source = Path(args.file)
    data = source.read_bytes()
    path = args.path or source.name
    content_type = "text/markdown" if args.note else mimetypes.guess_type(path)[0]
    with closing(open_client(args)) as client:
        answer = client.put_document(
            scope_of(args),
            path,
            data,
            content_type=content_type or "application/octet-stream",
            origin="manual" if args.note else None,
            metadata=_metadata_pairs(args.meta) or None,
        )
    if args.json:
        print_json(answer, sys.stdout)
    else:
        print(f"accepted {answer['path']} ({answer['size']} bytes); state: {answer['document']}")
    return EXIT_OK


def cmd_rm(args: argparse.Namespace) -> int:
    if not args.api_url:
        raise ValidationError("api-url", "kb rm deletes through a server; give --api-url")
    with closing(open_client(args)) as client:
        answer = client.delete_document(scope_of(args), args.path)
    if args.json:
        print_json(answer, sys.stdout)
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
