"""The HTTP routes, declared once: both front ends register from ``ROUTES``.

=======  ==============================================  ===========  =========  =======
method   path                                            name         needs      AWS fn
=======  ==============================================  ===========  =========  =======
GET      /v1/health                                      health       (none)     search
POST     /v1/agents/{agent}/search                       agent_search SEARCH     search
POST     /v1/agents/{agent}/contexts/{context}/search    search       SEARCH     search
GET      /v1/agents/{agent}/contexts                     contexts     STATUS     search
GET      /v1/agents/{agent}/shared                       shared       STATUS     search
POST     /v1/agents/{agent}/context                      agent_cont.. SEARCH     search
POST     /v1/agents/{agent}/contexts/{context}/context   context      SEARCH     search
GET      .../contexts/{context}/status                   status       STATUS     search
POST     .../contexts/{context}/reindex                  reindex      REINDEX    search
GET      .../contexts/{context}/documents                documents    DOCUMENTS  search
GET      .../contexts/{context}/documents/{path}         document     DOCUMENTS  search
GET      .../contexts/{context}/documents/{path}/chunks  chunks       DOCUMENTS  search
PUT      .../contexts/{context}/documents/{path}         put_document WRITE      search
DELETE   .../contexts/{context}/documents/{path}         delete_doc.. WRITE      search
POST     .../contexts/{context}/uploads                  upload       WRITE      search
POST     .../contexts/{context}/repos                    repo_add     REINDEX    repos
GET      .../contexts/{context}/repos                    repo_list    STATUS     repos
GET      .../contexts/{context}/repos/{name}             repo_get     STATUS     repos
DELETE   .../contexts/{context}/repos/{name}             repo_remove  REINDEX    repos
POST     .../contexts/{context}/repos/{name}/sync        repo_sync    REINDEX    repos
=======  ==============================================  ===========  =========  =======

A ``Route`` is its method, its path pattern (``{agent}``, ``{context}``, ``{path}``,
``{name}`` are captured segments), its name, the ``Operation`` a caller needs for it
(``None``: anyone), whether it reads a body, which AWS function serves it
(``template.yaml``) and its ``handler``: how a ``Request`` becomes a call of
``KnowledgeApi`` (``knowledge.service.api``). ``kb serve`` routes a raw request with
``resolve`` (``KnowledgeApi.handle``); the Lambda functions register each route of
theirs with Powertools and call ``KnowledgeApi.respond``, so both answer every route
the same way. The permission is checked by the front end that authenticates
(``knowledge.aws.access`` on AWS; the local server has no callers to tell apart).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from knowledge.service.responses import ApiResponse, error_body
from knowledge.service.validation import path_segment

__all__ = [
    "ROUTES",
    "WRITE_ROUTES",
    "Operation",
    "Request",
    "Route",
    "RouteTarget",
    "resolve",
]

Body = bytes | str | Mapping[str, Any] | None


class Operation(Enum):
    """What a route does, for authorization (reindex is granted apart from reading)."""

    SEARCH = "search"
    STATUS = "status"
    DOCUMENTS = "documents"
    REINDEX = "reindex"
    WRITE = "write"


@dataclass(frozen=True, slots=True)
class Request:
    """One request as a route's handler sees it: the captured path segments (as sent),
    the body, the raw query string, the ``Content-Type`` and the request id."""

    params: Mapping[str, str]
    body: Body = None
    query_string: str | None = None
    content_type: str | None = None
    request_id: str | None = None


class RouteTarget(Protocol):
    """What the handlers call: ``knowledge.service.api.KnowledgeApi``."""

    def search(
        self, agent: str, context: str | None, body: Body, *, request_id: str | None = None
    ) -> ApiResponse: ...

    def prompt_context(
        self, agent: str, context: str | None, body: Body, *, request_id: str | None = None
    ) -> ApiResponse: ...

    def status(self, agent: str, context: str, *, request_id: str | None = None) -> ApiResponse: ...

    def reindex(
        self, agent: str, context: str, *, request_id: str | None = None
    ) -> ApiResponse: ...

    def documents(
        self,
        agent: str,
        context: str,
        query_string: str | None = None,
        *,
        request_id: str | None = None,
    ) -> ApiResponse: ...

    def document(
        self, agent: str, context: str, path: str, *, request_id: str | None = None
    ) -> ApiResponse: ...

    def chunks(
        self,
        agent: str,
        context: str,
        path: str,
        query_string: str | None = None,
        *,
        request_id: str | None = None,
    ) -> ApiResponse: ...

    def contexts(self, agent: str, *, request_id: str | None = None) -> ApiResponse: ...

    def shared(self, agent: str, *, request_id: str | None = None) -> ApiResponse: ...

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
    ) -> ApiResponse: ...

    def delete_document(
        self, agent: str, context: str, path: str, *, request_id: str | None = None
    ) -> ApiResponse: ...

    def upload(
        self, agent: str, context: str, body: Body, *, request_id: str | None = None
    ) -> ApiResponse: ...

    def health(self) -> ApiResponse: ...

    def repos(
        self,
        route: str,
        captured: Mapping[str, str],
        body: Body = None,
        *,
        request_id: str | None = None,
    ) -> ApiResponse: ...


Handler = Callable[[RouteTarget, Request], ApiResponse]


@dataclass(frozen=True, slots=True)
class Route:
    """One route (module docstring)."""

    method: str
    path: str
    name: str
    permission: Operation | None
    handler: Handler = field(repr=False)
    body: bool = False
    function: str = "search"

    @property
    def pattern(self) -> tuple[str, ...]:
        """The path's segments; ``{name}`` captures one."""
        return tuple(self.path.strip("/").split("/"))


def _health(api: RouteTarget, request: Request) -> ApiResponse:
    return api.health()


def _agent_search(api: RouteTarget, r: Request) -> ApiResponse:
    return api.search(r.params["agent"], None, r.body, request_id=r.request_id)


def _search(api: RouteTarget, r: Request) -> ApiResponse:
    return api.search(r.params["agent"], r.params["context"], r.body, request_id=r.request_id)


def _agent_context(api: RouteTarget, r: Request) -> ApiResponse:
    return api.prompt_context(r.params["agent"], None, r.body, request_id=r.request_id)


def _context(api: RouteTarget, r: Request) -> ApiResponse:
    p = r.params
    return api.prompt_context(p["agent"], p["context"], r.body, request_id=r.request_id)


def _status(api: RouteTarget, r: Request) -> ApiResponse:
    return api.status(r.params["agent"], r.params["context"], request_id=r.request_id)


def _reindex(api: RouteTarget, r: Request) -> ApiResponse:
    return api.reindex(r.params["agent"], r.params["context"], request_id=r.request_id)


def _documents(api: RouteTarget, r: Request) -> ApiResponse:
    return api.documents(
        r.params["agent"], r.params["context"], r.query_string, request_id=r.request_id
    )


def _document(api: RouteTarget, r: Request) -> ApiResponse:
    p = r.params
    return api.document(p["agent"], p["context"], p["path"], request_id=r.request_id)


def _chunks(api: RouteTarget, r: Request) -> ApiResponse:
    p = r.params
    return api.chunks(p["agent"], p["context"], p["path"], r.query_string, request_id=r.request_id)


def _contexts(api: RouteTarget, r: Request) -> ApiResponse:
    return api.contexts(r.params["agent"], request_id=r.request_id)


def _shared(api: RouteTarget, r: Request) -> ApiResponse:
    return api.shared(r.params["agent"], request_id=r.request_id)


def _put_document(api: RouteTarget, r: Request) -> ApiResponse:
    p = r.params
    return api.put_document(
        p["agent"],
        p["context"],
        p["path"],
        r.body if not isinstance(r.body, Mapping) else None,
        content_type=r.content_type,
        query_string=r.query_string,
        request_id=r.request_id,
    )


def _delete_document(api: RouteTarget, r: Request) -> ApiResponse:
    p = r.params
    return api.delete_document(p["agent"], p["context"], p["path"], request_id=r.request_id)


def _upload(api: RouteTarget, r: Request) -> ApiResponse:
    return api.upload(r.params["agent"], r.params["context"], r.body, request_id=r.request_id)


def _repo(name: str) -> Handler:
    def handler(api: RouteTarget, r: Request) -> ApiResponse:
        return api.repos(name, r.params, r.body, request_id=r.request_id)

    return handler


_SCOPE = "/v1/agents/{agent}/contexts/{context}"
_REPOS = _SCOPE + "/repos"

ROUTES: tuple[Route, ...] = (
    Route("GET", "/v1/health", "health", None, _health),
    Route(
        "POST", "/v1/agents/{agent}/search", "agent_search", Operation.SEARCH, _agent_search, True
    ),
    Route("POST", _SCOPE + "/search", "search", Operation.SEARCH, _search, True),
    # What an agent holds: its contexts, and the shared libraries granted to it (read-only).
    Route("GET", "/v1/agents/{agent}/contexts", "contexts", Operation.STATUS, _contexts),
    Route("GET", "/v1/agents/{agent}/shared", "shared", Operation.STATUS, _shared),
    # The prompt context (knowledge.agent_tools.prompt_context): a search as a prompt block.
    Route(
        "POST",
        "/v1/agents/{agent}/context",
        "agent_context",
        Operation.SEARCH,
        _agent_context,
        True,
    ),
    Route("POST", _SCOPE + "/context", "context", Operation.SEARCH, _context, True),
    Route("GET", _SCOPE + "/status", "status", Operation.STATUS, _status),
    Route("POST", _SCOPE + "/reindex", "reindex", Operation.REINDEX, _reindex),
    Route("GET", _SCOPE + "/documents", "documents", Operation.DOCUMENTS, _documents),
    Route("GET", _SCOPE + "/documents/{path}", "document", Operation.DOCUMENTS, _document),
    Route("GET", _SCOPE + "/documents/{path}/chunks", "chunks", Operation.DOCUMENTS, _chunks),
    # Writes (knowledge.ingest.api_writes): authorized apart from reads on every front end.
    Route(
        "PUT", _SCOPE + "/documents/{path}", "put_document", Operation.WRITE, _put_document, True
    ),
    Route(
        "DELETE", _SCOPE + "/documents/{path}", "delete_document", Operation.WRITE, _delete_document
    ),
    Route("POST", _SCOPE + "/uploads", "upload", Operation.WRITE, _upload, True),
    # Git repository sources (knowledge.ingest.repos.service), the repos function on AWS.
    Route("POST", _REPOS, "repo_add", Operation.REINDEX, _repo("repo_add"), True, "repos"),
    Route("GET", _REPOS, "repo_list", Operation.STATUS, _repo("repo_list"), False, "repos"),
    Route(
        "GET", _REPOS + "/{name}", "repo_get", Operation.STATUS, _repo("repo_get"), False, "repos"
    ),
    Route(
        "DELETE",
        _REPOS + "/{name}",
        "repo_remove",
        Operation.REINDEX,
        _repo("repo_remove"),
        False,
        "repos",
    ),
    Route(
        "POST",
        _REPOS + "/{name}/sync",
        "repo_sync",
        Operation.REINDEX,
        _repo("repo_sync"),
        True,
        "repos",
    ),
)
WRITE_ROUTES = frozenset(r.name for r in ROUTES if r.permission is Operation.WRITE)


def _match(pattern: Sequence[str], segments: Sequence[str]) -> dict[str, str] | None:
    if len(pattern) != len(segments):
        return None
    pairs = list(zip(pattern, segments, strict=True))
    if any(not expected.startswith("{") and expected != actual for expected, actual in pairs):
        return None
    return {
        # A document path is decoded and checked by the route itself (``document``).
        expected.strip("{}"): (
            actual if expected == "{path}" else path_segment(expected.strip("{}"), actual)
        )
        for expected, actual in pairs
        if expected.startswith("{")
    }


def resolve(method: str, path: str) -> tuple[Route, dict[str, str], str] | ApiResponse:
    """The route of a raw request, its captured segments and its query string; or the
    answer when there is none: 404 for an unknown path, 405 (with ``Allow``) for a known
    path and another method. ``path`` may carry a query string; a trailing ``/`` is
    ignored; a percent-encoded agent or context segment raises ``ValidationError``."""
    route_path, _, query_string = path.partition("?")
    if len(route_path) > 1:
        route_path = route_path.rstrip("/")
    segments = route_path.lstrip("/").split("/")
    method = method.upper()
    matched = [(r, c) for r in ROUTES if (c := _match(r.pattern, segments)) is not None]
    if not matched:
        return error_body(404, f"no route for {route_path}")
    for route, captured in matched:
        if route.method == method:
            return route, captured, query_string
    allowed = ", ".join(sorted({r.method for r, _ in matched}))
    return ApiResponse(
        405,
        {
            "error": f"method {method} is not allowed on {route_path} (allowed: {allowed})",
            "field": None,
        },
        {"Allow": allowed},
    )
