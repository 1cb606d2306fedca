"""Dispatcher function: the document events queue (intake) -> the express or the bulk work
queue, so one tenant's large drop cannot hold up another tenant's edit.

A thin adapter over ``knowledge.aws.dispatch.Dispatcher``: the batch's records are routed
(``route_facts``: an agent with few events and no large object -> express; a busy agent,
a large object or a reindex -> bulk; what names no agent -> express as it is) and each
record's body is forwarded unchanged, with its agent as ``MessageGroupId`` (fair queues).
A record whose forward failed is reported as a batch item failure
(``ReportBatchItemFailures``): SQS delivers it again, and after ``maxReceiveCount``
deliveries moves it to the intake's dead-letter queue; nothing is dropped.

Cold start: Powertools' logger and metrics and the light ``knowledge`` core only; no
store, no embedder, no tracer (the function is traced by Lambda, ``Tracing: Active``).
boto3's SQS client is made at the first forward and kept for the container, as is the
dispatcher (its memory of the agents' recent express events spans invocations).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from knowledge.aws.dispatch import Dispatcher, DispatchSettings, Lane

__all__ = ["Container", "container", "lambda_handler"]

logger = Logger()
metrics = Metrics()
copy_config_to_registered_loggers(source_logger=logger, include={"knowledge"})


class Container:
    """What this container creates on first use and reuses across invocations."""

    dispatcher: Dispatcher | None = None


container = Container()


def dispatcher() -> Dispatcher:
    """The container's dispatcher (settings from the environment), created on first use."""
    if container.dispatcher is None:
        container.dispatcher = Dispatcher(DispatchSettings.from_env())
    return container.dispatcher


@logger.inject_lambda_context
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    records = event.get("Records") or []
    metrics.add_metric(name="RecordsReceived", unit=MetricUnit.Count, value=len(records))
    report = dispatcher().dispatch(records)
    for name, count in (
        ("ForwardedExpress", report.forwarded.get(Lane.EXPRESS, 0)),
        ("ForwardedBulk", report.forwarded.get(Lane.BULK, 0)),
        ("ForwardFailures", len(report.failed)),
    ):
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=count)
    if report.failed:
        logger.warning("intake batch dispatched with failures", extra=report.log_fields())
    else:
        logger.info("intake batch dispatched", extra=report.log_fields())
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in report.failed]}
