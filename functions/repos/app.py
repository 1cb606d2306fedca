"""Repos function: the repository routes and the repository syncs (docs/sources.md).

Two kinds of event, one thin adapter each:

- API Gateway (HTTP API v2): ``POST|GET .../repos``, ``GET|DELETE .../repos/{name}``,
  ``POST .../repos/{name}/sync`` (the table's ``repos`` routes, ``knowledge.service.routes``),
  answered by ``knowledge.service.api.repo_route`` over the AWS
  ``RepoService`` (``knowledge.ingest.repos.aws``): registrations in the bucket under
  ``.kb@repos/``, a sync request queued (202). Authorization as on the search routes
  (``knowledge.aws.access``): reading like status, managing like reindex (JWT: its scope).
- SQS (the repo sync queue, fed by the route and by EventBridge Scheduler):
  ``knowledge.ingest.repos.aws.handle_sync_message`` per record, with partial batch failures;
  a sync mirrors the repository into ``<agent>/<context>/_repos/<name>/`` of the bucket
  and the bucket's notifications index it.

Cold start: Powertools and the light core; boto3 and dulwich load on first use.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.utilities.typing import LambdaContext

from knowledge.aws.access import AccessPolicy
from knowledge.service.api import (
    ApiResponse,
    error_response,
    path_segment,
    repo_route,
    request_body,
)
from knowledge.service.routes import ROUTES, Operation, Route

__all__ = ["Container", "app", "container", "lambda_handler"]

logger = Logger()
app = APIGatewayHttpResolver()
copy_config_to_registered_loggers(source_logger=logger, include={"knowledge"})


class Container:
    """What this container creates on first use and reuses across invocations."""

    access: AccessPolicy | None = None
    s3: Any = None
    sqs: Any = None
    secrets: Any = None
    service: Any = None
    queue: Any = None


container = Container()


def _clients() -> None:
    if container.s3 is None:
        import boto3

        container.s3 = boto3.client("s3")
        container.sqs = boto3.client("sqs")
        container.secrets = boto3.client("secretsmanager")


def _queue() -> Any:
    if container.queue is None:
        from knowledge.ingest.repos.aws import RepoSyncQueue

        _clients()
        container.queue = RepoSyncQueue(container.sqs, os.environ["REPO_SYNC_QUEUE_URL"])
    return container.queue


def _service() -> Any:
    if container.service is None:
        from knowledge.ingest.repos.aws import aws_repo_service

        _clients()
        container.service = aws_repo_service(container.s3, os.environ["DOCUMENTS_BUCKET"], _queue())
    return container.service


def _http(response: ApiResponse) -> Response[str]:
    return Response(
        status_code=response.status,
        content_type="application/json",
        body=response.to_json().decode("utf-8"),
        headers=dict(response.headers),
    )


def _route(route: str, captured: dict[str, str], operation: Operation) -> Response[str]:
    event = app.current_event
    path_segment("agent", captured["agent"])
    if container.access is None:
        container.access = AccessPolicy.from_env()
    container.access.check(event.raw_event.get("requestContext"), captured["agent"], operation)
    body = request_body(event.body, base64_encoded=event.is_base64_encoded)
    response = repo_route(
        _service(), route, captured, body, request_id=event.request_context.request_id
    )
    where = {"agent": captured["agent"], "context": captured["context"]}
    if "name" in captured:
        where["repo"] = captured["name"]  # "name" is a LogRecord attribute
    logger.info("repo route", extra={"route": route, "status": response.status, **where})
    return _http(response)


def _endpoint(route: Route) -> Callable[..., Response[str]]:
    def endpoint(**captured: str) -> Response[str]:
        assert route.permission is not None  # every repository route is authorized
        return _route(route.name, captured, route.permission)

    endpoint.__name__ = route.name
    return endpoint


# The table's repository routes (knowledge.service.routes; template.yaml sends them here).
for served in ROUTES:
    if served.function == "repos":
        rule = served.path.replace("{", "<").replace("}", ">")
        app.route(rule, method=served.method)(_endpoint(served))


@app.exception_handler(Exception)  # type: ignore[untyped-decorator]
def handle_error(exc: Exception) -> Response[str]:
    return _http(error_response(exc, app.current_event.request_context.request_id))


def _sync_batch(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    from knowledge.ingest.repos.aws import handle_sync_message, secret_reader

    service = _service()
    failures: list[dict[str, str]] = []
    for record in event["Records"]:
        try:
            body = json.loads(record["body"])
            reports = handle_sync_message(
                body,
                service.registry,
                _queue(),
                read_secret=secret_reader(container.secrets),
                remaining_seconds=lambda: context.get_remaining_time_in_millis() / 1000.0,
            )
            for report in reports:
                summary = report.public()
                summary["repo"] = summary.pop("name")  # "name" is a LogRecord attribute
                logger.info("repository synced", extra=summary)
        except Exception as exc:  # retried by SQS, then parked in the dead-letter queue
            logger.exception(
                "repository sync message failed",
                extra={"error_type": type(exc).__name__, "message_id": record.get("messageId")},
            )
            failures.append({"itemIdentifier": record["messageId"]})
    return {"batchItemFailures": failures}


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if "Records" in event:
        return _sync_batch(event, context)
    result: dict[str, Any] = app.resolve(event, context)
    return result
