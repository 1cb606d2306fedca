"""``KnowledgeClient``: the HTTP API of a deployed stack (or ``kb serve``) from Python.

The client speaks the routes of ``knowledge.api`` and returns the package's own value
objects, so code written against a local store reads the same against the deployed API::

    from knowledge.client import KnowledgeClient, SigV4Auth
    from knowledge.model import SearchQuery
    from knowledge.scope import KnowledgeScope

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

- 400 -> ``ValidationError`` (with the ``field`` the server named)
- 401, 403 -> ``AccessDeniedError``
- 404 -> ``NotFoundError``
- 429, 5xx, timeouts, refused connections -> ``ServiceUnavailableError``
  (a ``StoreUnavailableError``: the service cannot answer now)
- any other status -> ``ApiError``

Every error message carries the server's own message and the request id when the server
sent one, never a traceback.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from knowledge.documents import (
    DEFAULT_DOCUMENTS_LIMIT,
    DocumentPage,
    IndexedDocument,
    validate_document_path,
    validate_documents_limit,
)
from knowledge.errors import (
    KnowledgeError,
    NotFoundError,
    StoreUnavailableError,
    ValidationError,
)
from knowledge.model import (
    DEFAULT_MAX_CHUNKS_PER_DOCUMENT,
    FileProblem,
    IndexState,
    IndexStatus,
    SearchMode,
    SearchQuery,
    SearchResult,
)
from knowledge.retry_after import retry_after_seconds
from knowledge.scope import KnowledgeScope
from knowledge.search_filter import filter_to_json

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

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
USER_AGENT = "knowledge-search-client/1"


class ApiError(KnowledgeError):
    """The API answered with an unexpected status. ``status`` is the HTTP status code."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class AccessDeniedError(ApiError):
    """401 or 403: the caller is not authenticated, or not allowed this agent or route."""


class ServiceUnavailableError(StoreUnavailableError):
    """The API could not answer after the retries (429, 5xx, timeout, connection refused)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Auth(Protocol):
    """Adds credentials to one request. Called again for every attempt (fresh signature)."""

    def apply(self, method: str, url: str, headers: dict[str, str], body: bytes) -> None: ...


class BearerAuth:
    """``Authorization: Bearer <token>``; ``token`` may be a callable returning a fresh one."""

    def __init__(self, token: str | Callable[[], str]) -> None:
        if isinstance(token, str) and not token.strip():
            raise ValidationError("token", "must be a non-blank string")
        self._token = token

    def apply(self, method: str, url: str, headers: dict[str, str], body: bytes) -> None:
        token = self._token() if callable(self._token) else self._token
        headers["Authorization"] = f"Bearer {token}"


class SigV4Auth:
    """AWS Signature Version 4 for API Gateway (``execute-api``), through botocore.

    ``region``: from the URL (``<id>.execute-api.<region>.amazonaws.com``) when not given,
    else the botocore session's region. ``session``: a ``botocore.session.Session``
    (default: a new one, which reads the usual environment, profile and role chain).
    """

    def __init__(
        self,
        region: str | None = None,
        *,
        session: Any = None,
        service: str = "execute-api",
    ) -> None:
        self._region = region
        self._session = session
        self._service = service
        self._credentials: Any = None

    def _resolve_credentials(self) -> Any:
        if self._credentials is None:
            session = self._session
            if session is None:
                import botocore.session

                session = self._session = botocore.session.Session()
            credentials = session.get_credentials()
            if credentials is None:
                raise AccessDeniedError(
                    401, "no AWS credentials found for SigV4 signing (set a profile or role)"
                )
            self._credentials = credentials
        return self._credentials

    def region_for(self, url: str) -> str:
        if self._region:
            return self._region
        host = urllib.parse.urlsplit(url).hostname or ""
        parts = host.split(".")
        if "execute-api" in parts:
            index = parts.index("execute-api")
            if index + 1 < len(parts):
                return parts[index + 1]
        region = self._session.get_config_variable("region") if self._session else None
        if not region:
            raise ValidationError(
                "region", "cannot tell the AWS region from the URL; pass SigV4Auth(region=...)"
            )
        return str(region)

    def apply(self, method: str, url: str, headers: dict[str, str], body: bytes) -> None:
        from botocore.auth import SigV4Auth as BotocoreSigV4
        from botocore.awsrequest import AWSRequest

        # get_frozen_credentials() refreshes refreshable (role) credentials when they expire.
        frozen = self._resolve_credentials().get_frozen_credentials()
        request = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
        BotocoreSigV4(frozen, self._service, self.region_for(url)).add_auth(request)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            value = request.headers.get(name)
            if value is not None:
                headers[name] = value


@dataclass(frozen=True, slots=True)
class SearchResponse:
    """One search answer: the results and what the server says it did."""

    query: str
    mode: SearchMode
    results: tuple[SearchResult, ...]
    took_ms: float


@dataclass(frozen=True, slots=True)
class _Reply:
    status: int
    body: dict[str, Any]
    request_id: str | None


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
        self._auth = auth
        self._timeout = float(timeout)
        self._retries = retries
        self._backoff = float(backoff)
        self._max_backoff = float(max_backoff)

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
        self, scope: KnowledgeScope, query: SearchQuery, *, include_shared: bool | None = None
    ) -> SearchResponse:
        if query.shared_libraries:  # the server builds the set from its grant
            raise ValidationError(
                "shared_libraries", "is the server's (its grant); pass include_shared instead"
            )
        agent = _segment(scope.agent)
        if query.cross_context:
            path = f"/v1/agents/{agent}/search"
        else:
            path = f"/v1/agents/{agent}/contexts/{_segment(scope.context)}/search"
        body = _search_body(query)
        if include_shared is not None:
            body["include_shared"] = bool(include_shared)
        reply = self._call("POST", path, body)
        try:
            data = reply.body
            return SearchResponse(
                query=str(data["query"]),
                mode=SearchMode.parse(data["mode"]),
                results=tuple(_result(item) for item in data["results"]),
                took_ms=float(data.get("took_ms", 0.0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(reply.status, f"unexpected search response: {exc}") from None

    def status(self, scope: KnowledgeScope) -> IndexStatus:
        path = f"/v1/agents/{_segment(scope.agent)}/contexts/{_segment(scope.context)}/status"
        reply = self._call("GET", path)
        try:
            return _status(reply.body)
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
        path = f"{_scope_path(scope)}/documents?{query}"
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
            reply = self._call("GET", f"{_scope_path(scope)}/documents/{encoded}")
        except NotFoundError:
            return None
        try:
            return IndexedDocument.from_dict(reply.body)
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(reply.status, f"unexpected document response: {exc}") from None

    def reindex(self, scope: KnowledgeScope) -> dict[str, Any]:
        """Ask the server to re-index the scope from its source; the server's answer as is
        (a summary of what was done locally, or an accepted job on AWS)."""
        path = f"/v1/agents/{_segment(scope.agent)}/contexts/{_segment(scope.context)}/reindex"
        return self._call("POST", path, {}).body

    # --- writes (knowledge.writes): 202 answers; the document route shows when indexed --

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
        from knowledge.writes import MAX_DOCUMENT_BYTES

        if len(data) > MAX_DOCUMENT_BYTES:
            raise ValidationError(
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
        route = f"{_scope_path(scope)}/documents/{urllib.parse.quote(path, safe='')}"
        if query:
            route += "?" + urllib.parse.urlencode(query)
        return self._call("PUT", route, data=data, content_type=content_type).body

    def delete_document(self, scope: KnowledgeScope, path: str) -> dict[str, Any]:
        """Delete one document and its sidecar (``NotFoundError`` when there is none)."""
        route = f"{_scope_path(scope)}/documents/{urllib.parse.quote(path, safe='')}"
        return self._call("DELETE", route).body

    def create_upload(
        self, scope: KnowledgeScope, path: str, *, size: int | None = None
    ) -> dict[str, Any]:
        """A presigned upload of one large document: ``{"url", "fields", "max_bytes", ...}``
        (POST the file as a multipart form with ``fields`` to ``url``)."""
        payload: dict[str, Any] = {"path": path}
        if size is not None:
            payload["size"] = size
        return self._call("POST", f"{_scope_path(scope)}/uploads", payload).body

    # --- Git repository sources (issue 24; docs/sources.md) --------------------------------

    def _repos_path(self, scope: KnowledgeScope, name: str | None = None) -> str:
        path = f"/v1/agents/{_segment(scope.agent)}/contexts/{_segment(scope.context)}/repos"
        return path if name is None else f"{path}/{_segment(name)}"

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

    # --- transport -------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        payload: Mapping[str, Any] | None = None,
        *,
        data: bytes | None = None,
        content_type: str = "application/json",
    ) -> _Reply:
        url = self._base + path
        body = (
            data if data is not None else b"" if payload is None else json.dumps(payload).encode()
        )
        attempt = 0
        while True:
            try:
                reply = self._send(method, url, body, content_type)
            except _TransientError as exc:
                if attempt >= self._retries:
                    raise ServiceUnavailableError(
                        f"{method} {path}: the API did not answer after {attempt + 1} "
                        f"attempt(s): {exc.reason}",
                        exc.status,
                    ) from None
                time.sleep(self._delay(attempt, exc.retry_after))
                attempt += 1
                continue
            return _checked(method, path, reply)

    def _send(
        self, method: str, url: str, body: bytes, content_type: str = "application/json"
    ) -> _Reply:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if body:
            headers["Content-Type"] = content_type
        if self._auth is not None:
            self._auth.apply(method, url, headers, body)
        request = urllib.request.Request(  # noqa: S310 - the scheme is checked in __init__
            url, data=body if body else None, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:  # noqa: S310
                return _Reply(response.status, _json(response.read()), _request_id(response))
        except urllib.error.HTTPError as error:
            with error:
                raw = error.read()
                request_id = _request_id(error)
            if error.code in RETRY_STATUSES and _json(raw).get("retryable") is not False:
                raise _TransientError(
                    f"HTTP {error.code}{_detail(_json(raw), request_id)}",
                    error.code,
                    retry_after_seconds(error.headers.get("Retry-After")),
                ) from None
            return _Reply(error.code, _json(raw), request_id)
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            reason = getattr(exc, "reason", exc)
            raise _TransientError(str(reason) or type(exc).__name__, None, None) from None

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        delay: float = self._backoff * (2**attempt)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, self._max_backoff)


class _TransientError(Exception):
    def __init__(self, reason: str, status: int | None, retry_after: float | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.retry_after = retry_after


def _scope_path(scope: KnowledgeScope) -> str:
    return f"/v1/agents/{_segment(scope.agent)}/contexts/{_segment(scope.context)}"


def _segment(value: str) -> str:
    # Scope segments are [A-Za-z0-9._-] (validated by KnowledgeScope): nothing to escape.
    return urllib.parse.quote(value, safe="")


def _search_body(query: SearchQuery) -> dict[str, Any]:
    body: dict[str, Any] = {"query": query.text, "max_results": query.max_results}
    if query.mode is not None:
        body["mode"] = query.mode.value
    if query.min_score:
        body["min_score"] = query.min_score
    if query.file_patterns:
        body["file_patterns"] = list(query.file_patterns)
    if query.metadata:
        body["metadata"] = dict(query.metadata)
    if query.filter is not None:
        body["filter"] = filter_to_json(query.filter)
    if query.offset:
        body["offset"] = query.offset
    if query.max_chunks_per_document != DEFAULT_MAX_CHUNKS_PER_DOCUMENT:
        body["max_chunks_per_document"] = query.max_chunks_per_document
    return body


def _json(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw.decode("utf-8")) if raw else {}
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {"error": "the server answered with a body that is not JSON"}
    return data if isinstance(data, dict) else {"value": data}


def _request_id(response: Any) -> str | None:
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name in ("x-amzn-requestid", "apigw-requestid", "x-request-id"):
        value = headers.get(name)
        if value:
            return str(value)
    return None


def _detail(body: Mapping[str, Any], request_id: str | None) -> str:
    message = body.get("error") or body.get("message")
    text = f": {message}" if message else ""
    if request_id is None and isinstance(body.get("request_id"), str):
        request_id = body["request_id"]
    return text + (f" (request id {request_id})" if request_id else "")


def _checked(method: str, path: str, reply: _Reply) -> _Reply:
    if 200 <= reply.status < 300:
        return reply
    body = reply.body
    message = str(body.get("error") or body.get("message") or f"HTTP {reply.status}")
    detail = _detail(body, reply.request_id)
    if reply.status == 400:
        field_name = body.get("field")
        raise ValidationError(field_name if isinstance(field_name, str) else "request", message)
    if reply.status in (401, 403):
        raise AccessDeniedError(reply.status, f"{method} {path}: access denied{detail}")
    if reply.status == 404:
        raise NotFoundError(f"{method} {path}: not found{detail}")
    if reply.status in RETRY_STATUSES:  # a 5xx the server says retrying cannot cure
        raise ServiceUnavailableError(f"{method} {path}: HTTP {reply.status}{detail}", reply.status)
    raise ApiError(reply.status, f"{method} {path}: HTTP {reply.status}{detail}")


def _result(item: Mapping[str, Any]) -> SearchResult:
    def optional(name: str) -> float | None:
        value = item.get(name)
        return None if value is None else float(value)

    metadata = item.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise TypeError("metadata is not an object")
    return SearchResult(
        document_path=str(item["document_path"]),
        chunk_index=int(item["chunk_index"]),
        content=str(item["content"]),
        score=float(item["score"]),
        keyword_score=optional("keyword_score"),
        vector_score=optional("vector_score"),
        metadata=metadata,
        rerank_score=optional("rerank_score"),
        search_score=optional("search_score"),
    )


def _status(data: Mapping[str, Any]) -> IndexStatus:
    last = data.get("last_indexed_at")
    problems: Sequence[Mapping[str, Any]] = data.get("problems") or ()
    return IndexStatus(
        document_count=int(data["document_count"]),
        chunk_count=int(data["chunk_count"]),
        last_indexed_at=None if last is None else datetime.fromisoformat(str(last)),
        state=IndexState(str(data["state"])),
        message=data.get("message"),
        problems=tuple(FileProblem(str(p["document_path"]), str(p["reason"])) for p in problems),
        # Absent from an API older than these counts.
        embedded_chunks=int(data.get("embedded_chunks") or 0),
        reused_chunks=int(data.get("reused_chunks") or 0),
        unread_files=_unread_files(data.get("unread_files")),
    )


def _unread_files(value: object) -> dict[str, int]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): int(v) for k, v in value.items() if isinstance(v, int)}
