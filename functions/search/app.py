"""Search function: the HTTP API (DESIGN.md section 3) on API Gateway (IAM or JWT auth).

A thin adapter over ``knowledge.api.KnowledgeApi``, the code the local server runs too:
the routes take the scope from the path, hand the body to the API, and turn its
``ApiResponse`` into an HTTP response. Every error becomes a response in one place,
``knowledge.api.error_response`` (bad input 400 with the field, never a 500 with a
trace; a 5xx carries a plain message and the request id, its details are logged). ``POST
.../context`` answers a search as a prompt block (``knowledge.prompt_context``),
authorized as a search. ``POST .../reindex`` queues one scope reindex message for the
indexer function, which pages through the scope (``knowledge.reindex_queue``), and
answers 202 at once. The write routes (``PUT``/``DELETE .../documents/{path}``, ``POST
.../uploads``) put, delete or presign objects in the documents bucket
(``knowledge.writes_s3``) and answer 202; the event pipeline indexes them. A granted
agent's searches include its shared libraries (``KB_SHARED_GRANTS``,
``knowledge.shared``).

Path segments are used as sent (``rawPath``; ``knowledge.api.path_segment`` refuses a
percent-encoded one), and ``knowledge.access.AccessPolicy`` decides whether the caller
may use the path's agent (JWT mode: the token's ``agents`` claim; reindex needs its own
scope). The body is decoded by ``knowledge.api.request_body`` (any bytes may arrive
base64-encoded: non-UTF-8 is a 400, not a 500).

Logs: Powertools JSON with the API Gateway request id as correlation id, and the
``knowledge`` package's own loggers write through the same handler and level.
X-Ray: the function is traced by Lambda (``Tracing: Active``); detailed subsegments
(OpenSearch and AWS calls) come from a Powertools ``Tracer`` created on the first
request when ``KB_DETAILED_TRACING`` is true, because the X-Ray SDK import (it loads
``botocore.session``) would otherwise be paid by every cold start.

Cold start: only Powertools and the light ``knowledge`` core are imported here. The
store (``opensearchpy``), the embedding SDK (``openai``, on the first vector search
only) and ``boto3`` (reindex) load on first use, and are created once per container.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError as RouteNotFoundError
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from knowledge.access import AccessPolicy, Operation
from knowledge.api import ApiResponse, KnowledgeApi, error_response, path_segment, request_body
from knowledge.deadline import request_budget, time_budget
from knowledge.scope import KnowledgeScope

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

    from knowledge.lambda_config import LambdaSettings
    from knowledge.reindex_queue import ReindexQueue

__all__ = ["Container", "app", "container", "lambda_handler"]

logger = Logger()
metrics = Metrics()
app = APIGatewayHttpResolver()
# The package's loggers (knowledge.api, knowledge.stores...) log JSON through this
# logger's handler, at its level, with its correlation id.
copy_config_to_registered_loggers(source_logger=logger, include={"knowledge"})


class Container:
    """What this container creates on first use and reuses across invocations."""

    settings: LambdaSettings | None = None
    access: AccessPolicy | None = None
    api: KnowledgeApi | None = None
    reindex_queue: ReindexQueue | None = None
    tracer: Tracer | None = None


container = Container()


def settings() -> LambdaSettings:
    if container.settings is None:
        from knowledge.lambda_config import LambdaSettings

        container.settings = LambdaSettings.from_env()
    return container.settings


def access_policy() -> AccessPolicy:
    if container.access is None:
        container.access = AccessPolicy.from_env()
    return container.access


def _request_id() -> str | None:
    request_id: str | None = app.current_event.request_context.request_id
    return request_id


def _authorize(agent: str, operation: Operation) -> None:
    path_segment("agent", agent)  # a 400 for an encoded or invalid name comes first
    access_policy().check(app.current_event.raw_event.get("requestContext"), agent, operation)


def knowledge_api() -> KnowledgeApi:
    """The container's API over its store, created on the first request."""
    if container.api is None:
        from knowledge.lambda_config import build_reranking, build_store
        from knowledge.shared import SharedGrants
        from knowledge.writes_s3 import S3Storage

        config = settings()
        writes = S3Storage(config.documents_bucket) if config.documents_bucket else None
        container.api = KnowledgeApi(
            build_store(config),
            reranking=build_reranking(config),
            writes=writes,
            # Which agents search which shared libraries: configuration only (template).
            shared=SharedGrants.parse(os.environ.get("KB_SHARED_GRANTS", "")),
        )
    return container.api


def reindex_queue() -> ReindexQueue:
    if container.reindex_queue is None:
        from knowledge.reindex_queue import ReindexQueue  # imports boto3 lazily

        config = settings()
        container.reindex_queue = ReindexQueue(config.require_queue_url(), config.require_bucket())
    return container.reindex_queue


def _http(response: ApiResponse) -> Response[str]:
    """The only place an ``ApiResponse`` becomes an API Gateway response."""
    if response.status >= 500:
        metrics.add_metric(name="ServerErrors", unit=MetricUnit.Count, value=1)
    elif response.status >= 400:
        metrics.add_metric(name="ClientErrors", unit=MetricUnit.Count, value=1)
        logger.info(
            "request refused",
            extra={
                "status": response.status,
                "error": response.body.get("error"),
                "field": response.body.get("field"),
            },
        )
    return Response(
        status_code=response.status,
        content_type="application/json",
        body=response.to_json().decode("utf-8"),
        headers=dict(response.headers),
    )


def _search(agent: str, context: str | None) -> Response[str]:
    _authorize(agent, Operation.SEARCH)
    event = app.current_event
    body = request_body(event.body, base64_encoded=event.is_base64_encoded)
    # Every call of the search (OpenSearch, the query embedding) ends before the gateway's.
    with time_budget(request_budget(app.lambda_context.get_remaining_time_in_millis())):
        response = knowledge_api().search(agent, context, body, request_id=_request_id())
    if response.status == 200:
        body = response.body
        results = len(body["results"])
        logger.info(
            "search",
            extra={
                "agent": agent,
                "context": context if context is not None else "*",
                "mode": body["mode"],
                "results": results,
                "took_ms": body["took_ms"],
                "query_chars": len(body["query"]),
            },
        )
        metrics.add_metric(name="Searches", unit=MetricUnit.Count, value=1)
        metrics.add_metric(name="SearchResults", unit=MetricUnit.Count, value=results)
        metrics.add_metric(
            name="SearchLatency", unit=MetricUnit.Milliseconds, value=float(body["took_ms"])
        )
    return _http(response)


@app.post("/v1/agents/<agent>/contexts/<context>/search")
def search_scope(agent: str, context: str) -> Response[str]:
    return _search(agent, context)


@app.post("/v1/agents/<agent>/search")
def search_agent(agent: str) -> Response[str]:
    return _search(agent, None)


def _context(agent: str, context: str | None) -> Response[str]:
    # A search answered as a prompt block (knowledge.prompt_context): a search's rights.
    _authorize(agent, Operation.SEARCH)
    event = app.current_event
    body = request_body(event.body, base64_encoded=event.is_base64_encoded)
    with time_budget(request_budget(app.lambda_context.get_remaining_time_in_millis())):
        response = knowledge_api().prompt_context(agent, context, body, request_id=_request_id())
    if response.status == 200:
        tokens = response.body["tokens"]
        logger.info(
            "context",
            extra={
                "agent": agent,
                "context": context if context is not None else "*",
                "passages": len(response.body["passages"]),
                "dropped": len(response.body["dropped"]),
                "tokens": tokens["used"],
                "max_tokens": tokens["max_tokens"],
                "took_ms": response.body["took_ms"],
            },
        )
        metrics.add_metric(name="ContextRequests", unit=MetricUnit.Count, value=1)
    return _http(response)


@app.post("/v1/agents/<agent>/contexts/<context>/context")
def context_scope(agent: str, context: str) -> Response[str]:
    return _context(agent, context)


@app.post("/v1/agents/<agent>/context")
def context_agent(agent: str) -> Response[str]:
    return _context(agent, None)


@app.get("/v1/agents/<agent>/contexts/<context>/status")
def status(agent: str, context: str) -> Response[str]:
    _authorize(agent, Operation.STATUS)
    response = knowledge_api().status(agent, context, request_id=_request_id())
    if response.status == 200:
        logger.info(
            "status",
            extra={
                "agent": agent,
                "context": context,
                "state": response.body["state"],
                "documents": response.body["document_count"],
            },
        )
        metrics.add_metric(name="StatusRequests", unit=MetricUnit.Count, value=1)
    return _http(response)


@app.get("/v1/agents/<agent>/contexts/<context>/documents")
def documents(agent: str, context: str) -> Response[str]:
    _authorize(agent, Operation.DOCUMENTS)
    query_string = app.current_event.raw_event.get("rawQueryString")
    response = knowledge_api().documents(agent, context, query_string, request_id=_request_id())
    if response.status == 200:
        listed = len(response.body["documents"])
        logger.info("documents", extra={"agent": agent, "context": context, "listed": listed})
        metrics.add_metric(name="DocumentsRequests", unit=MetricUnit.Count, value=1)
    return _http(response)


@app.get("/v1/agents/<agent>/contexts/<context>/documents/<path>")
def document(agent: str, context: str, path: str) -> Response[str]:
    # ``path`` is the raw segment (``docs%2Fguide.md``); the API decodes and checks it.
    _authorize(agent, Operation.DOCUMENTS)
    response = knowledge_api().document(agent, context, path, request_id=_request_id())
    if response.status == 200:
        metrics.add_metric(name="DocumentsRequests", unit=MetricUnit.Count, value=1)
    return _http(response)


@app.post("/v1/agents/<agent>/contexts/<context>/reindex")
def reindex(agent: str, context: str) -> Response[str]:
    _authorize(agent, Operation.REINDEX)
    scope = KnowledgeScope(path_segment("agent", agent), path_segment("context", context))
    # One message; the indexer lists the scope (and the index, for removals) page by page.
    request = reindex_queue().request_scope(scope)
    logger.info("reindex accepted", extra=request.to_dict())
    metrics.add_metric(name="ReindexRequests", unit=MetricUnit.Count, value=1)
    return _http(ApiResponse(202, request.to_dict()))


# Writes: their own routes (IAM grants them apart); a write is an S3 put/delete that the
# event pipeline indexes, answered 202 (knowledge.writes).
@app.put("/v1/agents/<agent>/contexts/<context>/documents/<path>")
def put_document(agent: str, context: str, path: str) -> Response[str]:
    _authorize(agent, Operation.WRITE)
    event = app.current_event
    body = request_body(event.body, base64_encoded=event.is_base64_encoded)
    response = knowledge_api().put_document(
        agent,
        context,
        path,
        body,
        content_type=event.headers.get("content-type"),
        query_string=event.raw_event.get("rawQueryString"),
        request_id=_request_id(),
    )
    if response.status == 202:
        logger.info(
            "document written",
            extra={"agent": agent, "context": context, "size": response.body["size"]},
        )
        metrics.add_metric(name="DocumentWrites", unit=MetricUnit.Count, value=1)
    return _http(response)


@app.delete("/v1/agents/<agent>/contexts/<context>/documents/<path>")
def delete_document(agent: str, context: str, path: str) -> Response[str]:
    _authorize(agent, Operation.WRITE)
    response = knowledge_api().delete_document(agent, context, path, request_id=_request_id())
    if response.status == 202:
        metrics.add_metric(name="DocumentDeletes", unit=MetricUnit.Count, value=1)
    return _http(response)


@app.post("/v1/agents/<agent>/contexts/<context>/uploads")
def upload(agent: str, context: str) -> Response[str]:
    _authorize(agent, Operation.WRITE)
    event = app.current_event
    body = request_body(event.body, base64_encoded=event.is_base64_encoded)
    response = knowledge_api().upload(agent, context, body, request_id=_request_id())
    if response.status == 200:
        metrics.add_metric(name="UploadGrants", unit=MetricUnit.Count, value=1)
    return _http(response)


@app.get("/v1/health")
def health() -> Response[str]:
    metrics.add_metric(name="HealthChecks", unit=MetricUnit.Count, value=1)
    return _http(knowledge_api().health())


@app.not_found
def route_not_found(exc: RouteNotFoundError) -> Response[str]:
    event = app.current_event
    return _http(
        ApiResponse(404, {"error": f"no route for {event.http_method} {event.path}", "field": None})
    )


@app.exception_handler(Exception)  # type: ignore[untyped-decorator]
def handle_error(exc: Exception) -> Response[str]:
    # knowledge.api.error_response decides status and body; unexpected errors are logged
    # there with their traceback and answered with a plain "internal error".
    return _http(error_response(exc, _request_id()))


def tracer() -> Tracer | None:
    """The Powertools tracer, created on the first request when ``KB_DETAILED_TRACING``
    is true (module docstring); ``None`` otherwise."""
    if container.tracer is None and os.environ.get("KB_DETAILED_TRACING", "").lower() == "true":
        from aws_lambda_powertools import Tracer

        # botocore (S3, SQS, Secrets Manager, Bedrock) and http.client (OpenSearch, OpenAI).
        container.tracer = Tracer(patch_modules=("botocore", "httplib"))
    return container.tracer


def _resolve(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    traced = tracer()
    if traced is None:
        return _resolve(event, context)
    result: dict[str, Any] = traced.capture_lambda_handler(_resolve)(event, context)
    return result
