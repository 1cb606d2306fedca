"""``KnowledgeApi``: every route's behaviour over one store, independent of any HTTP framework.

The routes are declared once in ``knowledge.service.routes`` (method, path, the
permission a caller needs, the handler); ``kb serve`` (``knowledge.local.server``)
routes raw requests through ``KnowledgeApi.handle`` and the AWS Lambda functions
register each route with Powertools and call ``KnowledgeApi.respond``, so both answer
the same routes with the same bodies. What differs between the two stacks plugs in
behind the API as collaborators: ``reindex`` (``kb serve`` re-indexes the folder now
and answers 200 with the result; the search Lambda queues one SQS message for the
indexer and answers 202), ``writes`` (the folder, or S3 puts), ``write_quota`` (each
agent's write limits, ``knowledge.service.write_quotas``: counted in the process, or in
DynamoDB), ``status`` (the start-up index's progress), ``repos`` (the Git repository
service) and ``reranking``.

Requests are checked by ``knowledge.service.validation`` (bodies, path segments, query
strings) and every error becomes a response in one place,
``knowledge.service.responses.error_response``. The names of both modules that callers
use are re-exported here.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from knowledge.agent_tools.shared import SharedGrants, SharedLibraryStore
from knowledge.core.errors import (
    AccessDeniedError,
    ConfigurationError,
    NotFoundError,
    StoreError,
    ValidationError,
)
from knowledge.core.model import (
    IndexResult,
    IndexState,
    IndexStatus,
    SearchMode,
    SearchQuery,
    SearchResult,
    evidence_of,
)
from knowledge.core.scope import KnowledgeScope
from knowledge.core.scope_set import SHARED_AGENT
from knowledge.core.scope_summary import ScopeSummary
from knowledge.ingest.api_writes import (
    MAX_DOCUMENT_BYTES,
    DocumentStorage,
    accepted_body,
    check_writable_scope,
    check_write_path,
    parse_upload_request,
    parse_write,
    put_limit,
)
from knowledge.ranking import explain
from knowledge.ranking.origin_weights import RankWeights, rank_weights_from_env
from knowledge.ranking.vector_side import vector_side_note
from knowledge.service.responses import ApiResponse, error_response, new_request_id
from knowledge.service.routes import ROUTES, WRITE_ROUTES, Request, Route, resolve
from knowledge.service.validation import (
    AGENT_WIDE_CONTEXT,
    CONTEXT_FIELDS,
    DOCUMENTS_PARAMETERS,
    MAX_BODY_BYTES,
    SEARCH_FIELDS,
    decode_body,
    document_path_segment,
    parse_chunks_query,
    parse_documents_query,
    parse_search_request,
    path_segment,
    query_from,
    request_body,
    search_response_body,
)
from knowledge.service.write_quotas import WriteQuota
from knowledge.stores.protocol import KnowledgeStore

if TYPE_CHECKING:  # the stage is built by whoever configures it; no import at cold start
    from knowledge.ingest.repos.service import RepoService
    from knowledge.reranking.stage import RerankingStage, RerankReport

__all__ = [
    "AGENT_WIDE_CONTEXT",
    "CONTEXT_FIELDS",
    "DOCUMENTS_PARAMETERS",
    "MAX_BODY_BYTES",
    "MAX_DOCUMENT_BYTES",
    "ROUTES",
    "SEARCH_FIELDS",
    "WRITE_ROUTES",
    "ApiResponse",
    "KnowledgeApi",
    "QueuedReindex",
    "ReindexScope",
    "RepoStatuses",
    "StatusOf",
    "document_path_segment",
    "error_response",
    "new_request_id",
    "parse_documents_query",
    "parse_search_request",
    "path_segment",
    "repo_route",
    "request_body",
    "search_response_body",
]


logger = logging.getLogger("knowledge.service.api")  # the name operators filter on


class QueuedReindex(Protocol):
    """A reindex accepted for later (the search Lambda's: one message on the indexer's
    queue); the route answers 202 with ``to_dict()``."""

    def to_dict(self) -> dict[str, Any]: ...


ReindexScope = Callable[[KnowledgeScope], IndexResult | QueuedReindex]
"""Re-indexes one scope from its source (the local folder: an ``IndexResult``, answered
200), or queues it (the S3 prefix: a ``QueuedReindex``, answered 202)."""
StatusOf = Callable[[KnowledgeScope, IndexStatus], IndexStatus]
RepoStatuses = Callable[[KnowledgeScope], list[dict[str, Any]]]
"""What the status route answers for a scope, given the store's status (``kb serve``
adds the progress of its start-up index)."""


def repo_route(
    service: RepoService | None,
    route: str,
    captured: Mapping[str, str],
    body: bytes | str | Mapping[str, Any] | None = None,
    *,
    request_id: str | None = None,
) -> ApiResponse:
    """One repository route (``repo_add``, ``repo_list``, ``repo_get``, ``repo_remove``,
    ``repo_sync``) over ``service`` (``knowledge.ingest.repos.service``); the local server and
    the AWS repos function share it. Never raises."""
    try:
        scope = KnowledgeScope(
            path_segment("agent", captured["agent"]), path_segment("context", captured["context"])
        )
        if service is None:
            raise ConfigurationError("repository sources are not configured on this server")
        name = captured.get("name", "")
        if route == "repo_add":
            status, answer = service.add(scope, decode_body(body))
        elif route == "repo_list":
            status, answer = service.list(scope)
        elif route == "repo_get":
            status, answer = service.get(scope, name)
        elif route == "repo_remove":
            status, answer = service.remove(scope, name)
        else:
            data = decode_body(body) if body not in (None, b"", "") else {}
            status, answer = service.sync(scope, name, data)
        return ApiResponse(status, {"agent": scope.agent, "context": scope.context, **answer})
    except Exception as exc:
        return error_response(exc, request_id)


class KnowledgeApi:
    """The routes over one store; the repository routes go to ``repos``
    (``knowledge.ingest.repos.service``; without it they answer 503, not configured), the write
    routes to ``writes`` (a ``knowledge.ingest.api_writes.DocumentStorage``; without it, 403),
    each within ``write_quota`` (``knowledge.service.write_quotas``: an agent's writes a
    minute and a scope's documents; without it, unlimited).

    ``reindex`` re-indexes a scope from wherever its documents live; without it the
    reindex route answers 503 (not configured). ``default_mode`` is the mode used when
    a request names none (``None``: the store's default). ``status``, if given, turns the
    store's status of a scope into what the status route answers; ``repo_statuses``
    gives the status its ``repos`` (each repository's last sync) where the repository
    routes are another function's (AWS; default: ``repos``'). ``reranking`` reranks
    every search's top candidates (``knowledge.reranking``; off when ``None``). Every
    method returns an ``ApiResponse`` and never raises.
    """

    def __init__(
        self,
        store: KnowledgeStore,
        *,
        reindex: ReindexScope | None = None,
        default_mode: SearchMode | None = None,
        status: StatusOf | None = None,
        reranking: RerankingStage | None = None,
        writes: DocumentStorage | None = None,
        shared: SharedGrants | None = None,
        repos: RepoService | None = None,
        weights: RankWeights | None = None,
        repo_statuses: RepoStatuses | None = None,
        write_quota: WriteQuota | None = None,
    ) -> None:
        # The deployment's origin and lesson weights (knowledge.ranking.origin_weights).
        self._weights = rank_weights_from_env() if weights is None else weights
        self._repos = repos
        self._repo_statuses = repo_statuses or (None if repos is None else repos.statuses)
        self._store = store
        self._writes = writes
        self._write_quota = write_quota
        self._shared = shared or SharedGrants({})
        self._reindex = reindex
        self._default_mode = default_mode
        self._status_of = status
        self._reranking = reranking

    @property
    def store(self) -> KnowledgeStore:
        return self._store

    @property
    def weights(self) -> RankWeights:
        """The deployment's origin and lesson weights, the defaults of every search."""
        return self._weights

    def search_scope(
        self, scope: KnowledgeScope, query: SearchQuery, *, include_shared: bool | None = None
    ) -> tuple[list[SearchResult], RerankReport | None]:
        """One search as the search routes run it, for a front end that built the query
        itself (the remote MCP endpoint's tools, ``knowledge.aws.mcp_endpoint``): the
        agent's granted shared libraries unless ``include_shared`` is false (asking for
        them without a grant is a ``ValidationError``), reranked when configured. Raises
        what the store raises."""
        store = self._searched_store(scope.agent, include_shared)
        if self._reranking is None:
            return store.search(scope, query), None
        return self._reranking.search(store, scope, query)  # type: ignore[arg-type]

    def search(
        self,
        agent: str,
        context: str | None,
        body: bytes | str | Mapping[str, Any] | None,
        *,
        request_id: str | None = None,
    ) -> ApiResponse:
        """Search one scope, or every context of ``agent`` when ``context`` is ``None``.

        ``agent``/``context`` are path segments as sent (``path_segment``)."""
        try:
            data = decode_body(body)
            query, mode, results, took_ms, report, recorded = self._search(agent, context, data)
            scope = KnowledgeScope(agent, AGENT_WIDE_CONTEXT if context is None else context)
            answer = search_response_body(
                query,
                mode,
                results,
                took_ms,
                report,
                scope=scope,
                vector_side=self._vector_side(query, mode),
            )
            if recorded is not None:  # "explain": true (knowledge.ranking.explain)
                answer["explain"] = recorded.to_dict(results)
            return ApiResponse(200, answer)
        except Exception as exc:
            return error_response(exc, request_id)

    def prompt_context(
        self,
        agent: str,
        context: str | None,
        body: bytes | str | Mapping[str, Any] | None,
        *,
        request_id: str | None = None,
    ) -> ApiResponse:
        """The search's results as a block for a prompt, within the body's ``max_tokens``
        (``knowledge.agent_tools.prompt_context``): ``{"query", "mode", "context", "passages",
        "dropped", "tokens", "took_ms"}``, and ``explain`` (``context_trace``: the search's
        trace with the budget's drops) when asked. Same scope rules and body as ``search``;
        each passage names where it came from as a search result does (``hit_fields``), and
        an agent-wide block's source lines name their context."""
        try:
            from knowledge.agent_tools.hits import hit_fields
            from knowledge.agent_tools.prompt_context import (
                build_prompt_context,
                context_trace,
                parse_max_tokens,
            )
            from knowledge.agent_tools.tool import passage_contexts

            data = decode_body(body)
            max_tokens = parse_max_tokens(data.get("max_tokens"))
            query, mode, results, took_ms, _, recorded = self._search(
                agent, context, data, CONTEXT_FIELDS
            )
            scope = KnowledgeScope(agent, AGENT_WIDE_CONTEXT if context is None else context)
            contexts = passage_contexts(scope, query.cross_context)
            block = build_prompt_context(results, max_tokens, context_of=contexts)
            answer = {"query": query.text, "mode": mode.value, **block.to_dict()}
            for item, kept in zip(answer["passages"], block.passages, strict=True):
                item.update(hit_fields(kept.passage, scope, query.cross_context))
            # An empty block says why: nothing passed the floor, or nothing fit the budget.
            answer["min_score"] = query.evidence_floor
            answer["evidence"] = evidence_of(results)
            if not results:
                answer["note"] = f"No relevant documents found for: {query.text}"
            vector_side = self._vector_side(query, mode)
            if vector_side is not None:
                answer["vector_side"] = vector_side
            answer["took_ms"] = round(took_ms, 1)
            if recorded is not None:
                answer["explain"] = context_trace(recorded.to_dict(results), results, block)
            return ApiResponse(200, answer)
        except Exception as exc:
            return error_response(exc, request_id)

    def _search(
        self,
        agent: str,
        context: str | None,
        data: Mapping[str, Any],
        fields: Sequence[str] = SEARCH_FIELDS,
    ) -> tuple[
        SearchQuery,
        SearchMode,
        list[SearchResult],
        float,
        RerankReport | None,
        explain.Explanation | None,
    ]:
        """The search of a body with ``fields``: the query (parsed with the deployment's
        weights), the mode, the results, the time, the reranker's report, and the trace
        when the body asks for one (``explain``)."""
        path_segment("agent", agent)
        if context is not None:
            path_segment("context", context)
        query = query_from(data, self._default_mode, self._weights, fields)
        trace = "explain" in fields and explain.requested(data)
        if context is None:
            if data.get("cross_context") is False:
                raise ValidationError(
                    "cross_context",
                    "the agent-wide route always searches every context; "
                    "use /v1/agents/{agent}/contexts/{context}/search for one context",
                )
            query = replace(query, cross_context=True)
        scope = KnowledgeScope(agent, AGENT_WIDE_CONTEXT if context is None else context)
        include = data.get("include_shared")  # checked by _searched_store
        started = time.perf_counter()
        with explain.explaining() if trace else contextlib.nullcontext() as recorded:
            results, report = self.search_scope(scope, query, include_shared=include)
        took_ms = (time.perf_counter() - started) * 1000.0
        mode = query.mode or self._store.default_mode
        return query, mode, results, took_ms, report, recorded

    def _vector_side(self, query: SearchQuery, mode: SearchMode) -> str | None:
        """Why a vector or hybrid search ran on the keyword side alone, as the store
        decided it (``ranking.vector_side``); ``None`` when it did not."""
        embedder = self._store.embedder
        return vector_side_note(mode, None if embedder is None else embedder.name, query.text)

    def _searched_store(self, agent: str, include: object) -> KnowledgeStore | SharedLibraryStore:
        """The store, widened to the agent's granted shared libraries
        (``knowledge.agent_tools.shared``) unless ``include_shared`` is false; the grant is
        configuration, never the request."""
        if include is not None and not isinstance(include, bool):
            raise ValidationError("include_shared", "must be true or false")
        libraries = self._shared.scopes_of(agent)
        if include is True and not libraries:
            raise ValidationError("include_shared", f"agent '{agent}' has no shared library")
        if include is False or not libraries:
            return self._store
        return SharedLibraryStore(self._store, libraries)

    def status(self, agent: str, context: str, *, request_id: str | None = None) -> ApiResponse:
        """Index status of one scope: ``{"agent", "context", **IndexStatus.to_dict()}``."""
        try:
            scope = KnowledgeScope(path_segment("agent", agent), path_segment("context", context))
            status = self._store.status(scope)
            if self._status_of is not None:
                status = self._status_of(scope, status)
            body = {"agent": agent, "context": context, **status.to_dict()}
            if self._repo_statuses is not None:  # each repository's last sync
                body["repos"] = self._repo_statuses(scope)
            return ApiResponse(200, body)
        except Exception as exc:
            return error_response(exc, request_id)

    def reindex(self, agent: str, context: str, *, request_id: str | None = None) -> ApiResponse:
        """Re-index one scope from its source: ``{"agent", "context", **IndexResult.to_dict()}``."""
        try:
            scope = KnowledgeScope(path_segment("agent", agent), path_segment("context", context))
            if self._reindex is None:
                raise ConfigurationError("re-indexing is not configured on this server")
            result = self._reindex(scope)
            if not isinstance(result, IndexResult):  # queued: the indexer does it later
                return ApiResponse(202, result.to_dict())
            return ApiResponse(200, {"agent": agent, "context": context, **result.to_dict()})
        except Exception as exc:
            return error_response(exc, request_id)

    def documents(
        self,
        agent: str,
        context: str,
        query_string: str | None = None,
        *,
        request_id: str | None = None,
    ) -> ApiResponse:
        """One page of the scope's documents: ``{"agent", "context", "documents",
        "next_cursor"}`` (``knowledge.core.documents``); ``query_string`` as sent."""
        try:
            scope = KnowledgeScope(path_segment("agent", agent), path_segment("context", context))
            limit, cursor = parse_documents_query(query_string)
            page = self._store.list_documents(scope, limit=limit, cursor=cursor)
            return ApiResponse(200, {"agent": agent, "context": context, **page.to_dict()})
        except Exception as exc:
            return error_response(exc, request_id)

    def document(
        self, agent: str, context: str, path: str, *, request_id: str | None = None
    ) -> ApiResponse:
        """One document of the scope: ``{"agent", "context", **IndexedDocument.to_dict()}``,
        404 when the scope has no record of it. ``path`` is the URL-encoded segment."""
        try:
            scope = KnowledgeScope(path_segment("agent", agent), path_segment("context", context))
            document_path = document_path_segment(path)
            found = self._store.get_document(scope, document_path)
            if found is None:
                shown = document_path if len(document_path) <= 200 else document_path[:197] + "..."
                raise NotFoundError(f"no document '{shown}' in {scope}")
            return ApiResponse(200, {"agent": agent, "context": context, **found.to_dict()})
        except Exception as exc:
            return error_response(exc, request_id)

    def chunks(
        self,
        agent: str,
        context: str,
        path: str,
        query_string: str | None = None,
        *,
        request_id: str | None = None,
    ) -> ApiResponse:
        """One page of the chunks of one document as indexed: ``{"agent", "context",
        "path", "chunks", "next_cursor"}`` (``knowledge.core.chunk_listing``); 404, as the
        document route, when the scope holds no indexed version of it."""
        try:
            scope = KnowledgeScope(path_segment("agent", agent), path_segment("context", context))
            document_path = document_path_segment(path)
            limit, cursor = parse_chunks_query(query_string)
            page = self._store.list_chunks(scope, document_path, limit=limit, cursor=cursor)
            if page is None:
                shown = document_path if len(document_path) <= 200 else document_path[:197] + "..."
                raise NotFoundError(f"no indexed document '{shown}' in {scope}")
            body = {"agent": agent, "context": context, "path": document_path, **page.to_dict()}
            return ApiResponse(200, body)
        except Exception as exc:
            return error_response(exc, request_id)

    def contexts(self, agent: str, *, request_id: str | None = None) -> ApiResponse:
        """The agent's contexts: ``{"agent", "contexts": [ScopeSummary.to_dict() +
        "progress"]}``, each with the state the status route gives it (``status``)."""
        try:
            path_segment("agent", agent)
            listed = [self._summary(agent, s) for s in self._store.agent_scopes(agent)]
            return ApiResponse(200, {"agent": agent, "contexts": listed})
        except Exception as exc:
            return error_response(exc, request_id)

    def shared(self, agent: str, *, request_id: str | None = None) -> ApiResponse:
        """The shared libraries granted to ``agent`` (``knowledge.agent_tools.shared``: the
        server's configuration, read-only) with each library's counts and state:
        ``{"agent", "libraries": [...]}``, each a ``contexts`` entry plus its ``scope``
        (``_shared/<library>``); empty for an agent without a grant."""
        try:
            path_segment("agent", agent)
            granted = self._shared.scopes_of(agent)
            indexed: dict[str, ScopeSummary] = {}
            if granted:
                indexed = {s.context: s for s in self._store.agent_scopes(SHARED_AGENT)}
            libraries = [
                {
                    "scope": library.key,
                    **self._summary(
                        SHARED_AGENT,
                        indexed.get(library.context)
                        or ScopeSummary(library.context, 0, 0, 0, None, IndexState.EMPTY),
                    ),
                }
                for library in granted
            ]
            return ApiResponse(200, {"agent": agent, "libraries": libraries})
        except Exception as exc:
            return error_response(exc, request_id)

    def _summary(self, agent: str, summary: ScopeSummary) -> dict[str, Any]:
        """One context of a listing, its state as the status route gives it (``kb serve``:
        the start-up index's progress)."""
        answer = summary.to_dict()
        progress = None
        if self._status_of is not None:
            status = self._status_of(
                KnowledgeScope(agent, summary.context),
                IndexStatus(
                    summary.document_count,
                    summary.chunk_count,
                    summary.last_indexed_at,
                    summary.state,
                ),
            )
            answer["state"] = status.state.value
            progress = None if status.progress is None else status.progress.to_dict()
        answer["progress"] = progress
        return answer

    # -- writes (knowledge.ingest.api_writes); off (403) unless a storage is given ---------------

    @property
    def writes_enabled(self) -> bool:
        return self._writes is not None

    @property
    def max_put_bytes(self) -> int | None:
        """The largest body a document ``PUT`` takes (``knowledge.ingest.api_writes.put_limit``
        of the storage's indexer limit); ``None`` when writes are off."""
        return None if self._writes is None else put_limit(self._writes.max_upload_bytes)

    @property
    def write_quota(self) -> WriteQuota | None:
        """The writes' limits and their counter; ``None``: unlimited."""
        return self._write_quota

    def _admit_write(
        self, scope: KnowledgeScope, size: int, *, new_path: str | None = None, field: str = "body"
    ) -> None:
        """Raise unless the write fits the quota (``knowledge.service.write_quotas``); called
        once the request is valid and before the storage is touched, so a refused write
        stores nothing. ``new_path``: the document a ``PUT`` or upload may add, checked
        against the scope's document limit first (an indexed path is an overwrite), so a
        write the scope refuses is not counted either. An index that cannot answer skips
        that check (logged): the bucket or folder takes writes without the index, and the
        per-minute limits still hold."""
        quota = self._write_quota
        if quota is None:
            return
        if new_path is not None and quota.limits.documents_per_scope:
            try:
                found = self._store.get_document(scope, new_path)
                overwrite = found is not None and found.indexed
                indexed = None if overwrite else self._store.status(scope).document_count
            except (StoreError, ConfigurationError) as exc:
                logger.warning(
                    "the documents limit of %s was not checked: the index did not answer (%s)",
                    scope,
                    type(exc).__name__,
                )
                indexed = None
            if indexed is not None:
                quota.check_documents(scope, indexed)
        quota.charge(scope.agent, size, field=field)

    def _write_scope(self, agent: str, context: str) -> tuple[KnowledgeScope, DocumentStorage]:
        scope = KnowledgeScope(path_segment("agent", agent), path_segment("context", context))
        check_writable_scope(scope)
        if self._writes is None:
            raise AccessDeniedError("operation", "writes are off on this server")
        return scope, self._writes

    def put_document(
        self,
        agent: str,
        context: str,
        path: str,
        body: bytes | str | None,
        *,
        content_type: str | None = None,
        query_string: str | None = None,
        request_id: str | None = None,
    ) -> ApiResponse:
        """Store a document (202 ``knowledge.ingest.api_writes.accepted_body``); the source's
        indexing makes it searchable. ``path`` is the URL-encoded segment."""
        try:
            scope, storage = self._write_scope(agent, context)
            data = body.encode("utf-8") if isinstance(body, str) else (body or b"")
            write = parse_write(
                scope,
                document_path_segment(path),
                data,
                content_type=content_type,
                query_string=query_string,
                indexed_bytes=storage.max_upload_bytes,
            )
            self._admit_write(scope, len(write.data), new_path=write.path)
            storage.put(scope, write.path, write.data, write.sidecar)
            return ApiResponse(202, accepted_body(write))
        except Exception as exc:
            return error_response(exc, request_id)

    def delete_document(
        self, agent: str, context: str, path: str, *, request_id: str | None = None
    ) -> ApiResponse:
        """Remove a document and its sidecar: 202, or 404 when the storage knows there
        was none (the folder; S3 deletes are idempotent and always 202)."""
        try:
            scope, storage = self._write_scope(agent, context)
            document_path = document_path_segment(path)
            check_write_path(document_path)
            self._admit_write(scope, 0)
            if storage.delete(scope, document_path) is False:
                raise NotFoundError(f"no document '{document_path[:200]}' in {scope}")
            return ApiResponse(
                202, {"agent": agent, "context": context, "path": document_path, "deleted": True}
            )
        except Exception as exc:
            return error_response(exc, request_id)

    def upload(
        self,
        agent: str,
        context: str,
        body: bytes | str | Mapping[str, Any] | None,
        *,
        request_id: str | None = None,
    ) -> ApiResponse:
        """A presigned upload of one document (``{"path", "size"?, "expires_in"?}``)."""
        try:
            scope, storage = self._write_scope(agent, context)
            if body is None or (isinstance(body, bytes | str) and not body.strip()):
                raise ValidationError("body", "a JSON object with a 'path' field is required")
            path, size, expires = parse_upload_request(decode_body(body), storage.max_upload_bytes)
            # The bytes go straight to S3: the grant's largest size is what is counted.
            self._admit_write(scope, size, new_path=path, field="size")
            grant = storage.presign_upload(scope, path, size, expires)
            return ApiResponse(
                200,
                {
                    "agent": agent,
                    "context": context,
                    "path": path,
                    "max_bytes": size,
                    "expires_in": expires,
                    "method": "POST",
                    **grant,
                },
            )
        except Exception as exc:
            return error_response(exc, request_id)

    def health(self) -> ApiResponse:
        return ApiResponse(200, {"status": "ok", "store": self._store.name})

    def repos(
        self,
        route: str,
        captured: Mapping[str, str],
        body: bytes | str | Mapping[str, Any] | None = None,
        *,
        request_id: str | None = None,
    ) -> ApiResponse:
        """The repository routes (``repo_route``); 503 when not configured."""
        return repo_route(self._repos, route, captured, body, request_id=request_id)

    def respond(self, route: Route, request: Request) -> ApiResponse:
        """Answer one request of ``route`` (``knowledge.service.routes``): how the Lambda
        functions call the API once Powertools has matched the route. Never raises."""
        try:
            return route.handler(self, request)
        except Exception as exc:
            return error_response(exc, request.request_id)

    def handle(
        self,
        method: str,
        path: str,
        body: bytes | str | Mapping[str, Any] | None = None,
        *,
        request_id: str | None = None,
        content_type: str | None = None,
    ) -> ApiResponse:
        """Route one raw request (``knowledge.service.routes.resolve``). Unknown path ->
        404; known path, wrong method -> 405.

        ``path`` is the raw request path and may carry a query string; a
        percent-encoded agent or context segment is a 400 (``path_segment``).
        ``request_id`` goes into 5xx bodies (a new one when not given).
        """
        try:
            resolved = resolve(method, path)
            if isinstance(resolved, ApiResponse):
                return resolved
            route, captured, query_string = resolved
            request = Request(captured, body, query_string, content_type, request_id)
            return self.respond(route, request)
        except Exception as exc:
            return error_response(exc, request_id)
