"""MCP function: the deployed stack as a remote MCP server (streamable HTTP, stateless).

A thin adapter over ``knowledge.aws.mcp_endpoint.McpEndpoint``, which answers the MCP
routes of the HTTP API (``POST /mcp/agents/{agent}/contexts/{context}``, 405 for ``GET``
and ``DELETE`` there) and, in JWT mode, the protected resource metadata at
``/.well-known/oauth-protected-resource[/mcp/...]``. The scope is the URL's, authorized by
``knowledge.aws.access.AccessPolicy`` exactly as the search routes are; the tools and the
prompt are ``kb mcp``'s; searches go through the same ``KnowledgeApi`` as the search
function's (shared libraries, reranking, the deployment's weights). Reindex is offered
as a tool only to a caller the policy grants it, and queues one message for the indexer
(``knowledge.aws.reindex_queue``), as ``POST .../reindex`` does. There is no write tool.

Logs: Powertools JSON with the API Gateway request id as correlation id (one line per
request: scope, JSON-RPC method, tool, status); the ``knowledge`` package's loggers
write through the same handler. Metrics: ``McpRequests``, ``McpToolCalls``,
``McpToolErrors``, ``MetadataRequests``, ``ClientErrors``, ``ServerErrors``.

Cold start: only Powertools and the light ``knowledge`` core are imported here. The MCP
SDK (with pydantic and Starlette), the store and the embedder load on the first MCP
request and are kept for the container; the metadata and the 405s never load them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from knowledge.aws.access import AccessPolicy
from knowledge.aws.mcp_endpoint import Exchange, McpEndpoint
from knowledge.core.scope import KnowledgeScope

if TYPE_CHECKING:
    from knowledge.aws.reindex_queue import ReindexQueue, ReindexRequest
    from knowledge.aws.settings import LambdaSettings
    from knowledge.service.api import KnowledgeApi

__all__ = ["Container", "container", "endpoint", "lambda_handler", "queue_reindex"]

logger = Logger()
metrics = Metrics()
copy_config_to_registered_loggers(source_logger=logger, include={"knowledge"})


class Container:
    """What this container creates on first use and reuses across invocations."""

    settings: LambdaSettings | None = None
    api: KnowledgeApi | None = None
    reindex_queue: ReindexQueue | None = None
    endpoint: McpEndpoint | None = None


container = Container()


def settings() -> LambdaSettings:
    if container.settings is None:
        from knowledge.aws.settings import LambdaSettings

        container.settings = LambdaSettings.from_env()
    return container.settings


def knowledge_api() -> KnowledgeApi:
    """The search routes' API over the deployment's store (reads only: no writes, no
    repository routes), created on the first MCP request."""
    if container.api is None:
        from knowledge.agent_tools.shared import SharedGrants
        from knowledge.aws.settings import build_reranking, build_store
        from knowledge.service.api import KnowledgeApi

        config = settings()
        container.api = KnowledgeApi(
            build_store(config),
            reranking=build_reranking(config),
            shared=SharedGrants.parse(os.environ.get("KB_SHARED_GRANTS", "")),
        )
    return container.api


def queue_reindex(scope: KnowledgeScope) -> ReindexRequest:
    """The reindex tool on AWS: one message for the indexer, as ``POST .../reindex``."""
    if container.reindex_queue is None:
        from knowledge.aws.reindex_queue import ReindexQueue  # imports boto3 lazily

        config = settings()
        container.reindex_queue = ReindexQueue(config.require_queue_url(), config.require_bucket())
    return container.reindex_queue.request_scope(scope)


def endpoint() -> McpEndpoint:
    if container.endpoint is None:
        container.endpoint = McpEndpoint(
            AccessPolicy.from_env(),
            knowledge_api,
            reindex=queue_reindex,
            issuer=os.environ.get("JWT_ISSUER", "").strip() or None,
        )
    return container.endpoint


def _observe(exchange: Exchange) -> None:
    status = exchange.status
    if exchange.kind == "mcp":
        metrics.add_metric(name="McpRequests", unit=MetricUnit.Count, value=1)
    elif exchange.kind == "metadata":
        metrics.add_metric(name="MetadataRequests", unit=MetricUnit.Count, value=1)
    if exchange.tool is not None:
        metrics.add_metric(name="McpToolCalls", unit=MetricUnit.Count, value=1)
        if exchange.tool_error:
            metrics.add_metric(name="McpToolErrors", unit=MetricUnit.Count, value=1)
    if status >= 500:
        metrics.add_metric(name="ServerErrors", unit=MetricUnit.Count, value=1)
    elif status >= 400:
        metrics.add_metric(name="ClientErrors", unit=MetricUnit.Count, value=1)
    logger.info(
        "mcp" if exchange.kind == "mcp" else f"mcp {exchange.kind}",
        extra={
            "status": status,
            "agent": exchange.agent,
            "context": exchange.context,
            "rpc_method": exchange.method,
            "tool": exchange.tool,
            "tool_error": exchange.tool_error,
        },
    )


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request_id = (event.get("requestContext") or {}).get("requestId")
    exchange = endpoint().respond(
        event, remaining_ms=context.get_remaining_time_in_millis(), request_id=request_id
    )
    _observe(exchange)
    return exchange.response
