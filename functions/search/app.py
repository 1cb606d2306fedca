"""Search function: the HTTP API (docs/architecture.md, "HTTP API") on API Gateway (IAM or
JWT auth).

A thin adapter over ``knowledge.service.api.KnowledgeApi``, the code the local server runs too:
each route of the table ``knowledge.service.routes.ROUTES`` that this function serves is
registered with Powertools; its view authorizes the path's agent for the route's
permission, hands the request to ``KnowledgeApi.respond``, logs and counts, and turns the
``ApiResponse`` into an HTTP response. Every error becomes a response in one place,
``knowledge.service.responses.error_response`` (bad input 400 with the field, never a 500
with a trace; a 5xx carries a plain message and the request id, its details are logged).
The AWS behaviours plug in behind the API: ``POST .../reindex`` goes through
``KnowledgeApi.reindex`` to ``queue_reindex``, which queues one scope reindex message for
the indexer function (it pages through the scope, ``knowledge.aws.reindex_queue``), and
answers 202 at once. The write routes (``PUT``/``DELETE .../documents/{path}``, ``POST
.../uploads``) put, delete or presign objects in the documents bucket
(``knowledge.aws.bucket_writes``, the API's ``writes``) and answer 202; the event pipeline
indexes them. Each agent's writes are limited (``knowledge.service.write_quotas``: write
requests and bytes a minute, documents a scope), counted in the DynamoDB table
``WRITE_QUOTA_TABLE`` that every container shares (``knowledge.aws.write_quotas``); over a
limit is a 429 with ``Retry-After``. A granted agent's searches include its shared libraries
(``KB_SHARED_GRANTS``, ``knowledge.agent_tools.shared``). The status route and the contexts
listing show each scope's indexing under way (the document being written, how far, what is
queued) from ``INDEX_PROGRESS_TABLE`` (``knowledge.aws.index_progress``).

Path segments are used as sent (``rawPath``; ``knowledge.service.api.path_segment`` refuses a
percent-encoded one), and ``knowledge.aws.access.AccessPolicy`` decides whether the caller
may use the path's agent (JWT mode: the token's ``agents`` claim; reindex needs its own
scope). The body is decoded by ``knowledge.service.api.request_body`` (any bytes may arrive
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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError as RouteNotFoundError
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from knowledge.aws.access import AccessPolicy
from knowledge.core.deadline import request_budget, time_budget
from knowledge.core.scope import KnowledgeScope
from knowledge.service.api import (
    ApiResponse,
    KnowledgeApi,
    error_response,
    path_segment,
    request_body,
)
from knowledge.service.routes import ROUTES, Operation, Request, Route

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

    from knowledge.aws.reindex_queue import ReindexQueue, ReindexRequest
    from knowledge.aws.settings import LambdaSettings

__all__ = ["Container", "app", "container", "lambda_handler", "queue_reindex"]

logger = Logger()
metrics = Metrics()
app = APIGatewayHttpResolver()
# The package's loggers (knowledge.service.api, knowledge.stores...) log JSON through this
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
        from knowledge.aws.settings import LambdaSettings

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
        from knowledge.agent_tools.shared import SharedGrants
        from knowledge.aws.bucket_writes import S3Storage
        from knowledge.aws.index_progress import progress_table
        from knowledge.aws.settings import build_reranking, build_store

        config = settings()
        writes = (
            # An upload grant admits what the indexer indexes (MAX_DOCUMENT_MIB), no more.
            S3Storage(config.documents_bucket, max_upload_bytes=config.max_document_mib << 20)
            if config.documents_bucket
            else None
        )
        write_quota = None
        if writes is not None:
            from knowledge.aws.write_quotas import DynamoDBCounter  # its boto3 on first write
            from knowledge.service.write_quotas import WriteQuota

            # Counted in one table for every container (an agent's limit is not per container).
            write_quota = WriteQuota(config.write_limits, DynamoDBCounter(config.write_quota_table))
        # The indexing under way per scope, as the indexer and the dispatcher record it.
        progress = progress_table(config.index_progress_table)
        container.api = KnowledgeApi(
            build_store(config),
            reindex=queue_reindex,
            reranking=build_reranking(config),
            writes=writes,
            # Which agents search which shared libraries: configuration only (template).
            shared=SharedGrants.parse(os.environ.get("KB_SHARED_GRANTS", "")),
            repo_statuses=repo_statuses(),
            write_quota=write_quota,
            status=None if progress is None else progress.status,
        )
    return container.api


def repo_statuses() -> Callable[[KnowledgeScope], list[dict[str, Any]]] | None:
    """The status route's ``repos``: each repository's last sync, read from the sync
    summaries the repos function writes under ``.kb@repos/`` (the only keys of the bucket
    this function may read: template.yaml); ``None`` without a documents bucket."""
    bucket = settings().documents_bucket
    if not bucket:
        return None
    import boto3

    # The registry and its storage only (not the sync, dulwich or the routes' service).
    from knowledge.ingest.repos.state import RepoRegistry
    from knowledge.ingest.repos.storage import S3Storage

    return RepoRegistry(S3Storage(boto3.client("s3"), bucket)).statuses


def reindex_queue() -> ReindexQueue:
    if container.reindex_queue is None:
        from knowledge.aws.reindex_queue import ReindexQueue  # imports boto3 lazily

        config = settings()
        container.reindex_queue = ReindexQueue(config.require_queue_url(), config.require_bucket())
    return container.reindex_queue


def queue_reindex(scope: KnowledgeScope) -> ReindexRequest:
    """The reindex route on AWS, behind ``KnowledgeApi.reindex``: one message for the
    indexer, which lists the scope (and the index, for removals) page by page; the route
    answers 202 at once."""
    return reindex_queue().request_scope(scope)


def _http(response: ApiResponse) -> Response[str]:
    """The only place an ``ApiResponse`` becomes an API Gateway response."""
    if response.status >= 500:
        metrics.add_metric(name="ServerErrors", unit=MetricUnit.Count, value=1)
    elif response.status >= 400:
        metrics.add_metric(name="ClientErrors", unit=MetricUnit.Count, value=1)
        if response.status == 429:  # over a write limit (knowledge.service.write_quotas)
            metrics.add_metric(name="WritesLimited", unit=MetricUnit.Count, value=1)
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


def _log_search(params: dict[str, str], response: ApiResponse) -> None:
    body = response.body
    results = len(body["results"])
    logger.info(
        "search",
        extra={
            "agent": params["agent"],
            "context": params.get("context", "*"),
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


def _log_context(params: dict[str, str], response: ApiResponse) -> None:
    body = response.body
    logger.info(
        "context",
        extra={
            "agent": params["agent"],
            "context": params.get("context", "*"),
            "passages": len(body["passages"]),
            "dropped": len(body["dropped"]),
            "tokens": body["tokens"]["used"],
            "max_tokens": body["tokens"]["max_tokens"],
            "took_ms": body["took_ms"],
        },
    )
    metrics.add_metric(name="ContextRequests", unit=MetricUnit.Count, value=1)


def _log_status(params: dict[str, str], response: ApiResponse) -> None:
    logger.info(
        "status",
        extra={
            **params,
            "state": response.body["state"],
            "documents": response.body["document_count"],
        },
    )
    metrics.add_metric(name="StatusRequests", unit=MetricUnit.Count, value=1)


def _log_documents(params: dict[str, str], response: ApiResponse) -> None:
    listed = len(response.body["documents"])
    logger.info("documents", extra={**params, "listed": listed})
    metrics.add_metric(name="DocumentsRequests", unit=MetricUnit.Count, value=1)


def _log_reindex(params: dict[str, str], response: ApiResponse) -> None:
    logger.info("reindex accepted", extra=response.body)
    metrics.add_metric(name="ReindexRequests", unit=MetricUnit.Count, value=1)


def _log_write(params: dict[str, str], response: ApiResponse) -> None:
    logger.info(
        "document written",
        extra={
            "agent": params["agent"],
            "context": params["context"],
            "size": response.body["size"],
        },
    )
    metrics.add_metric(name="DocumentWrites", unit=MetricUnit.Count, value=1)


def _count(metric: str) -> Callable[[dict[str, str], ApiResponse], None]:
    def observe(params: dict[str, str], response: ApiResponse) -> None:
        metrics.add_metric(name=metric, unit=MetricUnit.Count, value=1)

    return observe


# What each route logs and counts once it succeeded: (the success status, the observer).
_OBSERVED: dict[str, tuple[int, Callable[[dict[str, str], ApiResponse], None]]] = {
    "search": (200, _log_search),
    "agent_search": (200, _log_search),
    "context": (200, _log_context),
    "agent_context": (200, _log_context),
    "status": (200, _log_status),
    "documents": (200, _log_documents),
    "document": (200, _count("DocumentsRequests")),
    "chunks": (200, _count("DocumentsRequests")),
    "contexts": (200, _count("StatusRequests")),
    "shared": (200, _count("StatusRequests")),
    "reindex": (202, _log_reindex),
    "put_document": (202, _log_write),
    "delete_document": (202, _count("DocumentDeletes")),
    "upload": (200, _count("UploadGrants")),
}
_BUDGETED = frozenset({"search", "agent_search", "context", "agent_context"})
"""Routes whose every call (OpenSearch, the query embedding) ends before the gateway's."""


def _endpoint(route: Route) -> Callable[..., Response[str]]:
    """The Powertools view of one route of the table: authorize the path's agent for the
    route's permission, hand the request to ``KnowledgeApi.respond``, log and count."""

    def endpoint(**params: str) -> Response[str]:
        if route.name == "health":
            metrics.add_metric(name="HealthChecks", unit=MetricUnit.Count, value=1)
        if route.permission is not None:
            _authorize(params["agent"], route.permission)
        event = app.current_event
        request = Request(
            params,
            body=request_body(event.body, base64_encoded=event.is_base64_encoded)
            if route.body
            else None,
            query_string=event.raw_event.get("rawQueryString"),
            content_type=event.headers.get("content-type"),
            request_id=_request_id(),
        )
        api = knowledge_api()
        if route.name in _BUDGETED:
            remaining = app.lambda_context.get_remaining_time_in_millis()
            with time_budget(request_budget(remaining)):
                response = api.respond(route, request)
        else:
            response = api.respond(route, request)
        observed = _OBSERVED.get(route.name)
        if observed is not None and response.status == observed[0]:
            observed[1](params, response)
        return _http(response)

    endpoint.__name__ = route.name
    return endpoint


# The search function serves the table's routes of its own (template.yaml routes the
# repository routes to the repos function); writes are S3 puts/deletes that the event
# pipeline indexes, answered 202 (knowledge.ingest.api_writes).
for served in ROUTES:
    if served.function == "search":
        rule = served.path.replace("{", "<").replace("}", ">")
        app.route(rule, method=served.method)(_endpoint(served))


@app.not_found
def route_not_found(exc: RouteNotFoundError) -> Response[str]:
    event = app.current_event
    return _http(
        ApiResponse(404, {"error": f"no route for {event.http_method} {event.path}", "field": None})
    )


@app.exception_handler(Exception)  # type: ignore[untyped-decorator]
def handle_error(exc: Exception) -> Response[str]:
    # knowledge.service.api.error_response decides status and body; unexpected errors are logged
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
