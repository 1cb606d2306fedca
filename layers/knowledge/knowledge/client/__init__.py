"""``KnowledgeClient``: the HTTP API of a deployed stack (or ``kb serve``) from Python.

The client speaks the routes of ``knowledge.service.api`` and returns the package's own value
objects, so code written against a local store reads the same against the deployed API::

    from knowledge.client import KnowledgeClient, SigV4Auth
    from knowledge.core.model import SearchQuery
    from knowledge.core.scope import KnowledgeScope

    client = KnowledgeClient("https://abc123.execute-api.eu-west-1.amazonaws.com",
                             auth=SigV4Auth())
    results = client.search(KnowledgeScope("ops-bot", "runbooks"), SearchQuery("rollback"))

Authentication is pluggable: ``SigV4Auth`` signs each attempt for ``execute-api`` with the
caller's AWS credentials through botocore (refreshable credentials are re-read before every
signature, so an assumed role's rotation is followed); ``BearerAuth`` sends a JWT for the
stack's JWT mode; ``None`` for a local server.

Failures: HTTP 429 and 5xx, and connection errors, are retried ``retries`` times with
exponential backoff (``Retry-After`` is honoured, capped at ``max_backoff``), except a 5xx
whose body says ``"retryable": false`` (the server's backend refuses its role: a setting
to fix, raised at once with the server's advice). Then:

- 400 -> ``ValidationError`` (with the ``field`` the server named); 413 (a document
  over the server's size limit) -> ``TooLargeError``, a ``ValidationError`` too
- 401, 403 -> ``AccessDeniedError``
- 404 -> ``NotFoundError``
- 429, 5xx, timeouts, refused connections -> ``ServiceUnavailableError``
  (a ``StoreUnavailableError``: the service cannot answer now)
- any other status -> ``ApiError``

Every error message carries the server's own message and the request id when the server
sent one, never a traceback.

The client's methods are here; the HTTP exchange and its retries are ``transport``, the
credentials ``auth``, the errors ``errors``, and the JSON each route sends and answers
``answers``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from knowledge.client.answers import (
    ranking_fields,
    result_of,
    scope_path,
    search_body,
    segment,
    status_of,
)
from knowledge.client.auth import Auth, BearerAuth, SigV4Auth
from knowledge.client.errors import AccessDeniedError, ApiError, ServiceUnavailableError
from knowledge.client.transport import Reply, Transport
from knowledge.core.documents import (
    DEFAULT_DOCUMENTS_LIMIT,
    DocumentPage,
    IndexedDocument,
    validate_document_path,
    validate_documents_limit,
)
from knowledge.core.errors import (
    NotFoundError,
    TooLargeError,
    ValidationError,
)
from knowledge.core.model import (
    IndexStatus,
    SearchMode,
    SearchQuery,
    SearchResult,
)
from knowledge.core.scope import KnowledgeScope

if TYPE_CHECKING:
    from knowledge.agent_tools.prompt_context import PromptContext

__all__ = [
    "AccessDeniedError",
    "ApiError",
    "Auth",
    "BearerAuth",
    "KnowledgeClient",
    "SearchResponse",
    "ServiceUnavailableError",
    "SigV4Auth",
]


@dataclass(frozen=True, slots=True)
class SearchResponse:
    """One search answer: the results and what the server says it did."""

    query: str
    mode: SearchMode
    results: tuple[SearchResult, ...]
    took_ms: float
    explain: Mapping[str, Any] | None = None
    """The trace (``explain=True``; ``knowledge.ranking.explain``)."""
    vector_side: str | None = None
    """Why a vector or hybrid search ran on the keyword side alone
    (``knowledge.ranking.vector_side``); ``None`` when it did not."""


class KnowledgeClient:
    """The HTTP API of one deployment. Thread-safe; holds no connection between calls.

    ``search`` and ``status`` take the same arguments as ``KnowledgeStore``'s, so the client
    can stand in for a store wherever only reading is needed (the ``KnowledgeSearch`` tool,
    ``kb mcp``).
    """

    name = "api"

    def __init__(
        self,
        base_url: str,
        *,
        auth: Auth | None = None,
        timeout: float = 10.0,
        retries: int = 2,
        backoff: float = 0.25,
        max_backoff: float = 5.0,
    ) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValidationError("base_url", f"must be an http(s) URL, got {base_url!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValidationError("retries", "must be an integer >= 0")
        if not timeout > 0:
            raise ValidationError("timeout", "must be a positive number of seconds")
        self._base = base_url.rstrip("/")
        self._transport = Transport(
            self._base,
            auth,
            timeout=float(timeout),
            retries=retries,
            backoff=float(backoff),
            max_backoff=float(max_backoff),
        )

    @property
    def base_url(self) -> str:
        return self._base

    @property
    def default_mode(self) -> SearchMode:
        """What the server uses when a query names no mode is the server's business; a query
        sent without ``mode`` lets the server decide. This value is only a label."""
        return SearchMode.HYBRID

    # --- routes ----------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/v1/health").body

    def search(
        self, scope: KnowledgeScope, query: SearchQuery, *, include_shared: bool | None = None
    ) -> list[SearchResult]:
        """Search one scope (or, with ``query.cross_context``, every context of its agent).
        ``include_shared``: ``False`` leaves the agent's granted shared libraries out,
        ``None`` (default) follows the server's grant; ``True`` for an agent without a
        grant is a ``ValidationError`` (the grant is the server's, never the caller's)."""
        return list(self.search_response(scope, query, include_shared=include_shared).results)

    def search_response(
        self,
        scope: KnowledgeScope,
        query: SearchQuery,
        *,
        include_shared: bool | None = None,
        explain: bool = False,
        origin_weights: Mapping[str, float] | None = None,
        lesson_weight: float | None = None,
    ) -> SearchResponse:
        """``search`` with what the server says it did; ``explain`` asks for the trace
        (``SearchResponse.explain``), ``origin_weights`` / ``lesson_weight`` override the
        deployment's ranking weights for this search (docs/ranking.md)."""
        if query.shared_libraries:  # the server builds the set from its grant
            raise ValidationError(
                "shared_libraries", "is the server's (its grant); pass include_shared instead"
            )
        agent = segment(scope.agent)
        if query.cross_context:
            path = f"/v1/agents/{agent}/search"
        else:
            path = f"/v1/agents/{agent}/contexts/{segment(scope.context)}/search"
        body = search_body(query)
        if include_shared is not None:
            body["include_shared"] = bool(include_shared)
        body.update(ranking_fields(explain, origin_weights, lesson_weight))
        reply = self._call("POST", path, body)
        try:
            data = reply.body
            return SearchResponse(
                query=str(data["query"]),
                mode=SearchMode.parse(data["mode"]),
                results=tuple(result_of(item) for item in data["results"]),
                took_ms=float(data.get("took_ms", 0.0)),
                explain=data.get("explain"),
                vector_side=None if data.get("vector_side") is None else str(data["vector_side"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(reply.status, f"unexpected search response: {exc}") from None

    def context(
        self,
        scope: KnowledgeScope,
        query: SearchQuery,
        *,
        max_tokens: int | None = None,
        include_shared: bool | None = None,
        explain: bool = False,
        origin_weights: Mapping[str, float] | None = None,
        lesson_weight: float | None = None,
    ) -> PromptContext:
        """The prompt block of a search (``POST .../context``,
        ``knowledge.agent_tools.prompt_context``): passages with their citations within
        ``max_tokens`` (``None``: the server's default), what the budget dropped, and the
        tokens used. ``explain``: the trace in ``PromptContext.explain`` (the search's,
        with the budget's drops); the weights as ``search_response`` takes them."""
        from knowledge.agent_tools.prompt_context import PromptContext

        agent = segment(scope.agent)
        if query.cross_context:
            path = f"/v1/agents/{agent}/context"
        else:
            path = f"/v1/agents/{agent}/contexts/{segment(scope.context)}/context"
        body = search_body(query)
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if include_shared is not None:
            body["include_shared"] = bool(include_shared)
        body.update(ranking_fields(explain, origin_weights, lesson_weight))
        reply = self._call("POST", path, body)
        try:
            return PromptContext.from_dict(reply.body)
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(reply.status, f"unexpected context response: {exc}") from None

    def status(self, scope: KnowledgeScope) -> IndexStatus:
        path = f"/v1/agents/{segment(scope.agent)}/contexts/{segment(scope.context)}/status"
        reply = self._call("GET", path)
        try:
            return status_of(reply.body)
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(reply.status, f"unexpected status response: {exc}") from None

    def list_documents(
        self,
        scope: KnowledgeScope,
        *,
        limit: int = DEFAULT_DOCUMENTS_LIMIT,
        cursor: str | None = None,
    ) -> DocumentPage:
        """One page of the scope's documents (``GET .../documents``); pass a page's
        ``next_cursor`` for the next one."""
        parameters: dict[str, str | int] = {"limit": validate_documents_limit(limit)}
        if cursor is not None:
            parameters["cursor"] = cursor
        query = urllib.parse.urlencode(parameters)
        path = f"{scope_path(scope)}/documents?{query}"
        reply = self._call("GET", path)
        try:
            return DocumentPage.from_dict(reply.body)
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(reply.status, f"unexpected documents response: {exc}") from None

    def get_document(self, scope: KnowledgeScope, path: str) -> IndexedDocument | None:
        """One document of the scope (``GET .../documents/{path}``, the path URL-encoded
        as one segment); ``None`` when the server has no record of it (a 404)."""
        encoded = urllib.parse.quote(validate_document_path(path), safe="")
        try:
            reply = self._call("GET", f"{scope_path(scope)}/documents/{encoded}")
        except NotFoundError:
            return None
        try:
            return IndexedDocument.from_dict(reply.body)
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(reply.status, f"unexpected document response: {exc}") from None

    def reindex(self, scope: KnowledgeScope) -> dict[str, Any]:
        """Ask the server to re-index the scope from its source; the server's answer as is
        (a summary of what was done locally, or an accepted job on AWS)."""
        path = f"/v1/agents/{segment(scope.agent)}/contexts/{segment(scope.context)}/reindex"
        return self._call("POST", path, {}).body

    # --- writes (knowledge.ingest.api_writes): 202 answers; the document route shows when indexed

    def put_document(
        self,
        scope: KnowledgeScope,
        path: str,
        data: bytes,
        *,
        content_type: str = "application/octet-stream",
        origin: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Write one document (``origin="manual"`` with Markdown for a note); the
        server's 202 answer (``path``, ``content_hash``, ``document``). A file over
        the servers' limit is refused here, before it is sent (use ``create_upload``)."""
        from knowledge.ingest.api_writes import MAX_DOCUMENT_BYTES

        if len(data) > MAX_DOCUMENT_BYTES:
            raise TooLargeError(
                "body",
                f"is {len(data)} bytes, over {MAX_DOCUMENT_BYTES}; use create_upload instead",
            )
        query = {
            k: v
            for k, v in (
                ("origin", origin),
                ("metadata", None if not metadata else json.dumps(dict(metadata))),
            )
            if v is not None
        }
        route = f"{scope_path(scope)}/documents/{urllib.parse.quote(path, safe='')}"
        if query:
            route += "?" + urllib.parse.urlencode(query)
        return self._call("PUT", route, data=data, content_type=content_type).body

    def delete_document(self, scope: KnowledgeScope, path: str) -> dict[str, Any]:
        """Delete one document and its sidecar (``NotFoundError`` when there is none)."""
        route = f"{scope_path(scope)}/documents/{urllib.parse.quote(path, safe='')}"
        return self._call("DELETE", route).body

    def create_upload(
        self, scope: KnowledgeScope, path: str, *, size: int | None = None
    ) -> dict[str, Any]:
        """A presigned upload of one large document: ``{"url", "fields", "max_bytes", ...}``
        (POST the file as a multipart form with ``fields`` to ``url``)."""
        payload: dict[str, Any] = {"path": path}
        if size is not None:
            payload["size"] = size
        return self._call("POST", f"{scope_path(scope)}/uploads", payload).body

    # --- Git repository sources (docs/sources.md) -----------------------------------------

    def _repos_path(self, scope: KnowledgeScope, name: str | None = None) -> str:
        path = f"/v1/agents/{segment(scope.agent)}/contexts/{segment(scope.context)}/repos"
        return path if name is None else f"{path}/{segment(name)}"

    def add_repo(self, scope: KnowledgeScope, registration: Mapping[str, Any]) -> dict[str, Any]:
        """Register (or update) a repository: ``{"name", "url", "branch", "paths",
        "credential" (a reference), "username", "known_hosts"}``; the server's answer."""
        return self._call("POST", self._repos_path(scope), registration).body

    def list_repos(self, scope: KnowledgeScope) -> list[dict[str, Any]]:
        return list(self._call("GET", self._repos_path(scope)).body["repos"])

    def get_repo(self, scope: KnowledgeScope, name: str) -> dict[str, Any]:
        return self._call("GET", self._repos_path(scope, name)).body

    def remove_repo(self, scope: KnowledgeScope, name: str) -> dict[str, Any]:
        return self._call("DELETE", self._repos_path(scope, name)).body

    def sync_repo(self, scope: KnowledgeScope, name: str) -> dict[str, Any]:
        """Sync now: the report locally (200), an accepted sync on AWS (202)."""
        return self._call("POST", self._repos_path(scope, name) + "/sync", {}).body

    def close(self) -> None:
        """Nothing to release (no pooled connections); kept so a client reads like a store."""

    # --- transport (knowledge.client.transport) ----------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        payload: Mapping[str, Any] | None = None,
        *,
        data: bytes | None = None,
        content_type: str = "application/json",
    ) -> Reply:
        return self._transport.call(method, path, payload, data=data, content_type=content_type)
