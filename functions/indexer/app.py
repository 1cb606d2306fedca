"""Indexer function: S3 notifications (and reindex requests) from SQS -> the knowledge index.

It consumes two work queues the dispatcher function fills (``knowledge.aws.dispatch``):
express (few events of an agent) and bulk (busy agents, large objects, reindexes; a fair
queue), each with its own concurrency cap; a record's retries and visibility changes go
to the queue it came from.

A thin adapter: ``knowledge.aws.events`` parses each SQS record into actions,
``knowledge.aws.event_indexing.EventIndexer`` applies them (reading objects through
``knowledge.ingest.sources.s3.S3DocumentSource``; expanding scope reindex steps through
``knowledge.aws.reindex_queue.ScopeReindexer``). Records go through
``knowledge.aws.sqs_batch.TimeBudgetBatchProcessor``: a record that raises is reported as a
batch item failure and comes back after an exponential backoff, records that no longer
fit in the invocation's time are handed back unstarted, and after ``maxReceiveCount``
deliveries a record moves to the dead-letter queue; the object stays in S3. Rejected
events (a key outside ``<agent>/<context>/<path>``, or not valid Unicode) are logged
with their reason and acknowledged: retrying cannot make them valid.

The store, source, embedder and processor are created once per container, on first use.
Logs are Powertools JSON, the ``knowledge`` package's loggers included; the Powertools
``Tracer`` adds subsegments for the S3/OpenSearch/embedding calls when
``KB_DETAILED_TRACING`` is true, created on the first invocation: the X-Ray SDK import
(it loads ``botocore.session``) was two thirds of the handler's cold import, and Lambda's
active tracing records every invocation without it.
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from knowledge.aws.event_indexing import EventIndexer, EventOutcome, EventStatus
from knowledge.aws.events import parse_sqs_message
from knowledge.aws.index_progress import ProgressTable
from knowledge.aws.index_progress import progress_table as index_progress_table
from knowledge.aws.reindex_queue import ScopeReindexer
from knowledge.aws.settings import LambdaSettings, build_store
from knowledge.aws.sqs_batch import RetryBackoff, TimeBudgetBatchProcessor
from knowledge.ingest.sources.s3 import S3DocumentSource

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

__all__ = ["Container", "container", "lambda_handler", "record_handler"]

logger = Logger()
metrics = Metrics()
copy_config_to_registered_loggers(source_logger=logger, include={"knowledge"})


class Container:
    """What this container creates on first use and reuses across invocations."""

    settings: LambdaSettings | None = None
    indexer: EventIndexer | None = None
    processor: TimeBudgetBatchProcessor | None = None
    progress: ProgressTable | None = None
    tracer: Tracer | None = None


container = Container()

_METRIC_BY_STATUS = {
    EventStatus.INDEXED: "DocumentsIndexed",
    EventStatus.DELETED: "DocumentsDeleted",
    EventStatus.UNCHANGED: "DocumentsUnchanged",
    EventStatus.STALE: "StaleEvents",
    EventStatus.SKIPPED: "DocumentsSkipped",
    EventStatus.NOT_INDEXED: "DeletesWithoutDocument",
    EventStatus.KEPT: "DeletesOfExistingObjects",
    EventStatus.EXPANDED: "ReindexStepsExpanded",
    EventStatus.IGNORED: "IgnoredEvents",
    EventStatus.REJECTED: "RejectedEvents",
}


def settings() -> LambdaSettings:
    if container.settings is None:
        container.settings = LambdaSettings.from_env()
    return container.settings


def event_indexer() -> EventIndexer:
    """The container's indexer (store, S3 source, options), created on first use."""
    if container.indexer is None:
        config = settings()
        source = S3DocumentSource(config.require_bucket())
        # Scope reindex steps and their per-key messages go to the bulk work queue.
        reindex_queue = config.reindex_queue_url
        expander = (
            ScopeReindexer(reindex_queue, source, options=config.index_options)
            if reindex_queue
            else None
        )
        container.indexer = EventIndexer(
            build_store(config), source, config.index_options, expander=expander
        )
    return container.indexer


def progress_table() -> ProgressTable | None:
    """The container's progress table (``INDEX_PROGRESS_TABLE``), ``None`` without one."""
    if container.progress is None:
        container.progress = index_progress_table(settings().index_progress_table)
    return container.progress


def batch_processor() -> TimeBudgetBatchProcessor:
    """The container's batch processor (time reserve and retry backoff from the settings)."""
    if container.processor is None:
        config = settings()
        # The response lists every failed record even when all fail (no exception):
        # same retry, fewer error alarms.
        container.processor = TimeBudgetBatchProcessor(
            reserve_ms=config.time_reserve_seconds * 1000,
            backoff=RetryBackoff(config.retry_base_seconds, config.retry_max_seconds),
            queue_urls=(config.bulk_queue_url, config.queue_url),
        )
    return container.processor


def _record(outcome: EventOutcome, message_id: str) -> None:
    fields = {"message_id": message_id, **outcome.log_fields()}
    if outcome.status is EventStatus.REJECTED:
        logger.warning("object event rejected", extra=fields)
    elif outcome.status in (EventStatus.SKIPPED, EventStatus.IGNORED):
        logger.info("object event not indexed", extra=fields)
    else:
        logger.info("object event applied", extra=fields)
    metrics.add_metric(name=_METRIC_BY_STATUS[outcome.status], unit=MetricUnit.Count, value=1)
    if outcome.expansion is not None:
        queued = outcome.expansion.documents + outcome.expansion.removals
        metrics.add_metric(name="ReindexMessagesQueued", unit=MetricUnit.Count, value=queued)
    if outcome.result is not None and outcome.result.embedding_tokens:
        metrics.add_metric(
            name="EmbeddingTokens", unit=MetricUnit.Count, value=outcome.result.embedding_tokens
        )
    if outcome.result is not None:
        for name, count in (
            ("ChunksEmbedded", outcome.result.embedded_chunks),
            ("ChunksReused", outcome.result.reused_chunks),
        ):
            if count:
                metrics.add_metric(name=name, unit=MetricUnit.Count, value=count)


def record_handler(record: SQSRecord) -> None:
    """Apply every action of one SQS record; raise to have the record retried. With a
    progress table, a large document's progress is reported while it is written, and the
    record's events are no longer queued once it is done (``knowledge.aws.index_progress``)."""
    actions = parse_sqs_message(record.body, bucket=settings().documents_bucket)
    progress = progress_table()
    for action in actions:
        reporting = nullcontext() if progress is None else progress.reporting(action.scope)
        try:
            with reporting:
                outcome = event_indexer().apply(action, batch_processor().budget)
        except Exception:
            metrics.add_metric(name="FailedEvents", unit=MetricUnit.Count, value=1)
            logger.exception(
                "object event failed; the record will be retried",
                extra={"message_id": record.message_id, **action.log_fields()},
            )
            raise
        _record(outcome, record.message_id)
    if progress is not None:
        progress.done_with(record.body)


def tracer() -> Tracer | None:
    """The Powertools tracer, created on the first invocation when ``KB_DETAILED_TRACING``
    is true (module docstring); ``None`` otherwise."""
    if container.tracer is None and os.environ.get("KB_DETAILED_TRACING", "").lower() == "true":
        from aws_lambda_powertools import Tracer

        container.tracer = Tracer()
    return container.tracer


@logger.inject_lambda_context
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    traced = tracer()
    if traced is None:
        return _process(event, context)
    result: dict[str, Any] = traced.capture_lambda_handler(_process)(event, context)
    return result


def _process(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    metrics.add_metric(
        name="RecordsReceived", unit=MetricUnit.Count, value=len(event.get("Records", ()))
    )
    return dict(
        process_partial_response(
            event=event,
            record_handler=record_handler,
            processor=batch_processor(),
            context=context,
        )
    )
