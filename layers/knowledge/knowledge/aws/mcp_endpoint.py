"""The deployed stack as a remote MCP server: streamable HTTP behind API Gateway.

Agent platforms connect to an MCP server by URL with a bearer token. The MCP function
(``functions/mcp/app.py``) answers these routes of the HTTP API (``template.yaml``):

``POST /mcp/agents/{agent}/contexts/{context}``
    The MCP endpoint of one scope: the SDK's streamable HTTP transport in stateless mode
    with JSON responses (``StreamableHTTPSessionManager(stateless=True,
    json_response=True)``), so every JSON-RPC message is one request and one answer and
    no session outlives the invocation: any container may answer any request, and a
    buffered Lambda response (API Gateway streams nothing) carries the whole answer. The
    tools, the prompt and their schemas are ``kb mcp``'s (``knowledge.agent_tools.mcp_server``
    over ``knowledge.agent_tools.scoped_tools``); a server is built for each request.
``GET`` and ``DELETE`` on the same path
    405 with ``Allow: POST``, as the transport's specification asks of a server that
    offers no SSE stream and no session to end (an unrouted method would be API
    Gateway's 404, which a client reads as "session expired").
``GET /.well-known/oauth-protected-resource`` and ``GET .../oauth-protected-resource/mcp/...``
    JWT mode only, unauthenticated: the protected resource metadata (RFC 9728) of the
    API and of each scope's endpoint (the well-known path followed by the endpoint's
    path), which MCP clients look up, the path-suffixed URL first, to find the token
    issuer.

The scope is the URL's, not something the session or a model chooses. A remote client
names it once, in the URL it is configured with, and it is checked by the same policy on
the same literal segments as the HTTP routes: in IAM mode the grant *is* the path
(``AgentSearchPolicy`` covers ``.../POST/mcp/agents/${aws:PrincipalTag/kb-agent}/...``),
so the scope has to be in the path for IAM to see it; in JWT mode the function requires
the path's agent in the token's agents claim (``knowledge.aws.access``). Segments are
taken as sent (a percent-encoded one is refused), and no tool takes an agent, a context
or a cross-context switch, so nothing a model sends can widen the scope.

Each request is authorized as a search of the path's agent (``AccessPolicy.check``):
search, status and documents need exactly what their routes need. ``knowledge_reindex``
is listed only when ``AccessPolicy.grants`` says the caller may reindex the agent: in JWT
mode a token with ``JWT_REINDEX_SCOPE``; never in IAM mode, where reindex is granted on
its own path, which an MCP request does not take (sign ``POST .../reindex`` instead).

A request that reaches the function without verified claims in JWT mode (a route left
without the authorizer) is a 401 whose ``WWW-Authenticate`` names the metadata
(``Bearer resource_metadata="..."``); a token that does not grant the path's agent a 403.
API Gateway's JWT authorizer answers a missing, expired or forged token with its own 401
before the function runs, and an HTTP API cannot add headers to it: clients find the
metadata at the well-known URLs instead (docs/agents.md).

Searches run as the search routes run them (``KnowledgeApi.search_scope``: the agent's
granted shared libraries, reranking, the deployment's weights) within the request's time
budget (``knowledge.core.deadline``). Failures are tool errors with a public message;
anything unexpected is logged with its trace and answered as a JSON-RPC internal error
naming the request id, never the trace, an endpoint URL or an ARN.

The MCP SDK is imported on the first MCP request, not with this module.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from knowledge.aws.access import AccessPolicy, Operation
from knowledge.core.deadline import request_budget, time_budget
from knowledge.core.documents import DEFAULT_DOCUMENTS_LIMIT, DocumentPage
from knowledge.core.errors import AccessDeniedError, ValidationError
from knowledge.core.model import IndexStatus, SearchQuery, SearchResult
from knowledge.core.scope import KnowledgeScope
from knowledge.service.validation import path_segment

if TYPE_CHECKING:
    from knowledge.agent_tools.manage_tool import Reindex
    from knowledge.aws.asgi import AsgiResponse
    from knowledge.service.api import KnowledgeApi

__all__ = [
    "MCP_PATH",
    "MCP_ROUTES",
    "METADATA_PATH",
    "METADATA_ROUTES",
    "ApiBackend",
    "Exchange",
    "McpEndpoint",
    "metadata_url",
    "resource_url",
]

logger = logging.getLogger(__name__)

MCP_PATH = "/mcp/agents/{agent}/contexts/{context}"
METADATA_PATH = "/.well-known/oauth-protected-resource"
MCP_ROUTES: tuple[tuple[str, str], ...] = (
    ("POST", MCP_PATH),
    ("GET", MCP_PATH),
    ("DELETE", MCP_PATH),
)
"""The MCP endpoint's routes (``template.yaml`` routes them to the MCP function)."""
METADATA_ROUTES: tuple[tuple[str, str], ...] = (
    ("GET", METADATA_PATH),
    ("GET", METADATA_PATH + MCP_PATH),
)
"""The protected resource metadata's routes (JWT mode only, unauthenticated)."""

_JSONRPC_INVALID_REQUEST = -32600
_JSONRPC_INTERNAL_ERROR = -32603


class ApiBackend:
    """What the tools call on AWS: searches through ``KnowledgeApi.search_scope`` (the
    agent's shared libraries, reranking), the status and the documents from its store."""

    def __init__(self, api: KnowledgeApi) -> None:
        self._api = api

    def search(
        self, scope: KnowledgeScope, query: SearchQuery, include_shared: bool | None = None
    ) -> list[SearchResult]:
        results, _ = self._api.search_scope(scope, query, include_shared=include_shared)
        return results

    def status(self, scope: KnowledgeScope) -> IndexStatus:
        return self._api.store.status(scope)

    def list_documents(
        self,
        scope: KnowledgeScope,
        *,
        limit: int = DEFAULT_DOCUMENTS_LIMIT,
        cursor: str | None = None,
    ) -> DocumentPage:
        return self._api.store.list_documents(scope, limit=limit, cursor=cursor)


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request's answer (``response``: the API Gateway proxy response) and what the
    handler logs and counts about it: the route kind (``mcp``, ``metadata``, ``refused``),
    the scope, the JSON-RPC method, the tool called and whether it answered an error."""

    response: dict[str, Any]
    kind: str
    agent: str | None = None
    context: str | None = None
    method: str | None = None
    tool: str | None = None
    tool_error: bool | None = None

    @property
    def status(self) -> int:
        return int(self.response["statusCode"])


def _json(
    status: int, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"content-type": "application/json", **dict(headers or {})},
        "body": json.dumps(body, separators=(",", ":")),
        "isBase64Encoded": False,
    }


def _rpc_error(
    status: int, code: int, message: str, headers: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A JSON-RPC error with no request id, as the SDK's transport answers its own refusals."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    return _json(status, body, headers)


def _origin(event: Mapping[str, Any]) -> str:
    """``https://`` and the domain API Gateway received the request on (set by the
    gateway, not by the caller's headers)."""
    domain = str((event.get("requestContext") or {}).get("domainName") or "localhost")
    return f"https://{domain}"


def resource_url(event: Mapping[str, Any], scope: KnowledgeScope | None) -> str:
    """The resource identifier of the MCP endpoint of ``scope`` (``None``: the API's
    origin), as a client connects to it."""
    if scope is None:
        return _origin(event)
    return _origin(event) + MCP_PATH.format(agent=scope.agent, context=scope.context)


def metadata_url(event: Mapping[str, Any], scope: KnowledgeScope) -> str:
    """Where the protected resource metadata of ``scope``'s endpoint is (RFC 9728 section
    3.1: the well-known path, then the resource's path)."""
    return (
        _origin(event) + METADATA_PATH + MCP_PATH.format(agent=scope.agent, context=scope.context)
    )


def _scope_of(path: str) -> KnowledgeScope | None:
    """The scope of ``/mcp/agents/<agent>/contexts/<context>``; ``None`` for another path.
    Raises ``ValidationError`` for a segment that is not a scope name as sent."""
    parts = path.split("/")
    if len(parts) != 6 or parts[0] or parts[1:3] != ["mcp", "agents"] or parts[4] != "contexts":
        return None
    return KnowledgeScope(path_segment("agent", parts[3]), path_segment("context", parts[5]))


def _rpc_summary(body: bytes) -> tuple[str | None, str | None]:
    """The JSON-RPC method of a request body and, for ``tools/call``, the tool's name."""
    try:
        message = json.loads(body)
    except ValueError:
        return None, None
    if not isinstance(message, dict):
        return None, None
    method = message.get("method") if isinstance(message.get("method"), str) else None
    params = message.get("params")
    tool = params.get("name") if method == "tools/call" and isinstance(params, dict) else None
    return method, tool if isinstance(tool, str) else None


def _tool_error(answer: AsgiResponse) -> bool | None:
    """Whether a ``tools/call`` answer is a tool error (``result.isError``)."""
    if not (answer.header("content-type") or "").startswith("application/json"):
        return None
    try:
        message = json.loads(answer.body)
    except ValueError:
        return None
    result = message.get("result") if isinstance(message, dict) else None
    if isinstance(result, dict):
        return bool(result.get("isError", False))
    return True if isinstance(message, dict) and "error" in message else None


class McpEndpoint:
    """The routes of the module docstring over one container's API.

    ``api`` builds (once, on the first request that needs it) the ``KnowledgeApi`` the
    search function uses too; ``reindex`` queues a scope's reindex (offered only where
    granted); ``issuer``: the JWT issuer the metadata names (JWT mode).
    """

    def __init__(
        self,
        policy: AccessPolicy,
        api: Callable[[], KnowledgeApi],
        *,
        reindex: Reindex | None = None,
        issuer: str | None = None,
    ) -> None:
        self._policy = policy
        self._api = api
        self._reindex = reindex
        self._issuer = issuer

    def respond(
        self, event: Mapping[str, Any], *, remaining_ms: float, request_id: str | None
    ) -> Exchange:
        """Answer one HTTP API (2.0) event; never raises."""
        try:
            return self._respond(event, remaining_ms)
        except Exception:
            logger.exception("MCP request failed")
            message = "internal error" + (f" (request id {request_id})" if request_id else "")
            return Exchange(_rpc_error(500, _JSONRPC_INTERNAL_ERROR, message), "refused")

    def _respond(self, event: Mapping[str, Any], remaining_ms: float) -> Exchange:
        http = (event.get("requestContext") or {}).get("http") or {}
        method = str(http.get("method") or "").upper()
        path = str(event.get("rawPath") or http.get("path") or "")
        if path == METADATA_PATH or path.startswith(METADATA_PATH + "/"):
            return self._metadata(event, method, path)
        try:
            scope = _scope_of(path)
        except ValidationError as exc:
            return Exchange(_rpc_error(400, _JSONRPC_INVALID_REQUEST, str(exc)), "refused")
        if scope is None:
            return Exchange(_rpc_error(404, _JSONRPC_INVALID_REQUEST, "Not Found"), "refused")
        request_context = event.get("requestContext")
        try:
            self._policy.check(request_context, scope.agent, Operation.SEARCH)
        except AccessDeniedError as exc:
            return self._refused(event, scope, exc)
        if method != "POST":
            response = _rpc_error(
                405,
                _JSONRPC_INVALID_REQUEST,
                "Method Not Allowed: this endpoint is stateless (POST only; no SSE stream, "
                "no session to end)",
                {"allow": "POST"},
            )
            return Exchange(response, "refused", scope.agent, scope.context)
        reindex = (
            self._reindex
            if self._policy.grants(
                request_context, scope.agent, Operation.REINDEX, route=Operation.SEARCH
            )
            else None
        )
        return self._serve(event, scope, reindex, remaining_ms)

    def _refused(
        self, event: Mapping[str, Any], scope: KnowledgeScope, exc: AccessDeniedError
    ) -> Exchange:
        if exc.field == "authorization":  # no verified token reached the function
            challenge = f'Bearer resource_metadata="{metadata_url(event, scope)}"'
            response = _rpc_error(
                401,
                _JSONRPC_INVALID_REQUEST,
                "Unauthorized: send a bearer token",
                {"www-authenticate": challenge},
            )
        else:
            response = _rpc_error(403, _JSONRPC_INVALID_REQUEST, f"Forbidden: {exc.message}")
        return Exchange(response, "refused", scope.agent, scope.context)

    def _metadata(self, event: Mapping[str, Any], method: str, path: str) -> Exchange:
        """The protected resource metadata (RFC 9728) of the API or of one scope's
        endpoint: the resource, the issuer as its authorization server, bearer tokens in
        the ``Authorization`` header."""
        if self._policy.mode != "jwt" or not self._issuer:
            return Exchange(_json(404, {"error": "not found"}), "refused")
        suffix = path[len(METADATA_PATH) :]
        scope = None
        if suffix:
            try:
                scope = _scope_of(suffix)
            except ValidationError:
                scope = None
            if scope is None:
                return Exchange(_json(404, {"error": "not found"}), "refused")
        if method != "GET":
            return Exchange(
                _json(405, {"error": "method not allowed"}, {"allow": "GET"}), "refused"
            )
        name = "knowledge-search" + ("" if scope is None else f": {scope}")
        body = {
            "resource": resource_url(event, scope),
            "authorization_servers": [self._issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": name,
        }
        response = _json(200, body, {"cache-control": "max-age=300"})
        return Exchange(
            response,
            "metadata",
            None if scope is None else scope.agent,
            None if scope is None else scope.context,
        )

    def _serve(
        self,
        event: Mapping[str, Any],
        scope: KnowledgeScope,
        reindex: Reindex | None,
        remaining_ms: float,
    ) -> Exchange:
        import anyio

        from knowledge.agent_tools.scoped_tools import ScopedTools
        from knowledge.aws.asgi import asgi_scope, call_asgi, event_body

        try:
            body = event_body(event)
        except ValueError:
            response = _rpc_error(400, _JSONRPC_INVALID_REQUEST, "the body is not valid base64")
            return Exchange(response, "refused", scope.agent, scope.context)
        rpc_method, tool = _rpc_summary(body)
        api = self._api()
        tools = ScopedTools(ApiBackend(api), scope, reindex=reindex, weights=api.weights)

        async def serve() -> AsgiResponse:
            from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

            from knowledge.agent_tools.mcp_server import mcp_server

            manager = StreamableHTTPSessionManager(
                mcp_server(tools), json_response=True, stateless=True
            )
            async with manager.run():
                return await call_asgi(manager.handle_request, asgi_scope(event), body)

        with time_budget(request_budget(remaining_ms)):
            answer = anyio.run(serve)
        if not answer.complete:  # the transport ended without an answer: a failure of ours
            raise RuntimeError(f"the MCP transport sent no complete answer ({answer.status})")
        return Exchange(
            answer.to_proxy(),
            "mcp",
            scope.agent,
            scope.context,
            rpc_method,
            tool,
            _tool_error(answer) if tool is not None else None,
        )
