"""The indexer's SQS batch processing: Powertools' ``BatchProcessor`` with a time budget and
a retry backoff. Imported only by the indexer function (it needs ``aws_lambda_powertools``).

- **Time budget.** Before each record the processor asks the invocation's ``TimeBudget``
  (``knowledge.aws.invocation_time``) whether one more record fits; once it does not, that record
  and every later one are not started, so the invocation ends in time instead of timing
  out (a timeout fails the whole batch, and SQS replays every record after the visibility
  timeout). Records not started are sent to the queue again as new messages (same body
  and attributes) and reported done: waiting behind slow records must not count towards
  the queue's ``maxReceiveCount``, or a busy queue would move records it never tried to
  the dead-letter queue. One that cannot be sent again is reported as a batch item
  failure instead and comes back at once (visibility ``0``). While a record runs, its
  embedding calls must start before the invocation's end less the reserve
  (``TimeBudget.seconds_left``, ``knowledge.embedding.pool.embedding_time_budget``): the
  embedding pool starts no call past it, so a long document fails (and is retried)
  instead of running into the timeout. The same point is the record's deadline
  (``knowledge.core.deadline.time_budget``): the store's requests (OpenSearch writes and
  reads, their retries) end by it, so a hung or throttling node fails the record in
  time too.
- **Backoff.** The queue's visibility timeout is long (six times the function timeout, so
  a slow batch is never delivered twice at once); a failed record would sit out all of it.
  Instead each failed record's visibility is set with ``ChangeMessageVisibility`` to
  ``RetryBackoff.delay(receive count)``: exponential in the record's
  ``ApproximateReceiveCount``, with jitter, capped. Records that were not started come
  back at once (``0``). After ``maxReceiveCount`` deliveries SQS moves a record to the
  dead-letter queue as before. If the visibility cannot be changed (permissions, a
  network error) this is logged and the record simply returns after the queue's
  visibility timeout: slower, never lost.
- **Two queues.** The indexer consumes the express and the bulk work queue
  (``knowledge.aws.dispatch``), so every call is made on the queue the record came from:
  its ``eventSourceARN`` names it (``knowledge.aws.sqs_messages.queue_url_from_arn``;
  a configured URL of the same queue is preferred, ``queue_urls``). A record sent again
  keeps its ``MessageGroupId``: on the bulk queue (a standard queue, so not FIFO) that
  is its tenant, which the fair queue needs to keep the tenant's share bounded. Records
  of a FIFO queue (named ``*.fifo``) are never sent again: a new message would leave its
  group's order.
"""

from __future__ import annotations

import logging
import math
import random
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from knowledge.aws.invocation_time import TimeBudget
from knowledge.aws.sqs_messages import is_fifo_queue_arn, queue_url_from_arn, send_attributes
from knowledge.core.deadline import time_budget
from knowledge.core.errors import KnowledgeError, ValidationError
from knowledge.embedding.pool import embedding_time_budget

__all__ = [
    "MAX_VISIBILITY_SECONDS",
    "OutOfTimeError",
    "RetryBackoff",
    "TimeBudgetBatchProcessor",
    "queue_url_from_arn",
]

logger = logging.getLogger(__name__)

MAX_VISIBILITY_SECONDS = 43_200
"""SQS's limit on a visibility timeout (12 hours)."""


class OutOfTimeError(KnowledgeError):
    """A record was not started: the invocation had too little time left."""


@dataclass(frozen=True, slots=True)
class RetryBackoff:
    """Seconds a failed record stays invisible: ``base * 2**(receive_count - 1)``, capped at
    ``max_seconds``, times a jitter factor in [0.5, 1] (so records that failed together
    do not all return together), rounded up to whole seconds. ``base_seconds=0``: failed
    records come back at once."""

    base_seconds: int = 60
    max_seconds: int = 900

    def __post_init__(self) -> None:
        if self.base_seconds < 0:
            raise ValidationError("base_seconds", f"must be >= 0, got {self.base_seconds}")
        if not self.base_seconds <= self.max_seconds <= MAX_VISIBILITY_SECONDS:
            raise ValidationError(
                "max_seconds",
                f"must be in [base_seconds, {MAX_VISIBILITY_SECONDS}], got {self.max_seconds}",
            )

    def delay(self, receive_count: int, rand: Callable[[], float] = random.random) -> int:
        exponent = min(max(receive_count, 1) - 1, 30)
        ceiling = min(self.max_seconds, self.base_seconds << exponent)
        return math.ceil(ceiling * (0.5 + 0.5 * min(max(rand(), 0.0), 1.0)))


def _receive_count(record: SQSRecord) -> int:
    attributes = record.raw_event.get("attributes") or {}
    try:
        return max(int(attributes.get("ApproximateReceiveCount", 1)), 1)
    except (TypeError, ValueError):
        return 1


def _entry(index: int, record: SQSRecord) -> dict[str, Any]:
    """A ``SendMessageBatch`` entry that sends ``record`` again as it came: body, message
    attributes and, on a fair queue, its tenant (``MessageGroupId``)."""
    entry: dict[str, Any] = {
        "Id": str(index),
        "MessageBody": record.body or "",
        **send_attributes(record.raw_event.get("messageAttributes")),
    }
    group = record.attributes.message_group_id
    if group:
        entry["MessageGroupId"] = group
    return entry


class TimeBudgetBatchProcessor(BatchProcessor):
    """``BatchProcessor`` for SQS with a time budget and retry backoff (module docstring).

    ``reserve_ms`` is the time kept free at the end of the invocation; ``queue_urls``
    the URLs of the queues the function consumes, if known (a record's queue is the one
    of these whose account and name its ``eventSourceARN`` names, else the URL built from
    that ARN); ``client`` an SQS client (default: boto3, created on first use).
    """

    def __init__(
        self,
        *,
        reserve_ms: int,
        backoff: RetryBackoff | None = None,
        queue_urls: Iterable[str | None] = (),
        client: Any | None = None,
    ) -> None:
        super().__init__(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        self._reserve_ms = reserve_ms
        self._backoff = backoff or RetryBackoff()
        self._known_urls = {
            tuple(url.rstrip("/").rsplit("/", 2)[-2:]): url for url in queue_urls if url
        }
        self._client = client
        self._budget = TimeBudget.unlimited()
        self._not_started: set[str] = set()

    @property
    def budget(self) -> TimeBudget:
        """The current invocation's budget (record handlers pass it on to long steps)."""
        return self._budget

    def queue_url(self, record: SQSRecord) -> str | None:
        """The URL of the queue ``record`` came from (``None``: its ARN names no queue)."""
        arn = record.event_source_arn or ""
        parts = arn.split(":")
        if len(parts) == 6:
            known = self._known_urls.get((parts[4], parts[5]))
            if known is not None:
                return known
        return queue_url_from_arn(arn)

    @property
    def client(self) -> Any:
        if self._client is None:
            from knowledge.core.aws_clients import bounded_client  # boto3 only when a record failed

            self._client = bounded_client("sqs")
        return self._client

    def _prepare(self) -> None:
        super()._prepare()  # type: ignore[no-untyped-call]
        self._not_started.clear()
        context = getattr(self, "lambda_context", None)
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        self._budget = (
            TimeBudget(remaining, self._reserve_ms)
            if callable(remaining)
            else TimeBudget.unlimited()
        )

    def _process_record(self, record: dict[str, Any]) -> Any:
        if self._not_started or not self._budget.can_start():
            self._not_started.add(str(record.get("messageId")))
            error = OutOfTimeError(
                f"not started: {self._budget.remaining_ms()} ms left, the longest record took "
                f"{self._budget.longest_ms} ms and {self._budget.reserve_ms} ms are kept free"
            )
            return self.failure_handler(
                record=self._to_batch_type(record, event_type=self.event_type, model=self.model),
                exception=(OutOfTimeError, error, None),
            )
        # The record's calls (embedding, OpenSearch) end before only the reserve is left.
        seconds = self._budget.seconds_left()
        with self._budget.unit(), time_budget(seconds), embedding_time_budget(seconds):
            return super()._process_record(record)

    def _clean(self) -> None:
        if self._not_started:
            try:
                self._requeue_not_started()
            except Exception:  # the response must go out whatever happens here
                logger.warning(
                    "cannot queue the records not started again; they are handed back",
                    exc_info=True,
                )
        super()._clean()  # type: ignore[no-untyped-call]
        if not self.fail_messages:
            return
        try:
            self._delay_failed(self.fail_messages)
        except Exception:  # the response must go out whatever happens here
            logger.warning(
                "cannot shorten the visibility of failed records; they return after the "
                "queue's visibility timeout",
                exc_info=True,
            )

    def _requeue_not_started(self) -> None:
        """Send each record not started to its queue again as a new message (module
        docstring) and drop it from the failures; one that is not sent stays a failure."""
        by_queue: dict[str, list[SQSRecord]] = {}
        for record in self.fail_messages:
            if not isinstance(record, SQSRecord) or record.message_id not in self._not_started:
                continue
            if is_fifo_queue_arn(record.event_source_arn or ""):
                continue  # a new message would leave its group's order
            url = self.queue_url(record)
            if url is not None:
                by_queue.setdefault(url, []).append(record)
        requeued: set[str] = set()
        for url, records in by_queue.items():
            for start in range(0, len(records), 10):
                batch = records[start : start + 10]
                entries = [_entry(i, r) for i, r in enumerate(batch)]
                try:
                    response = self.client.send_message_batch(QueueUrl=url, Entries=entries)
                except Exception:
                    logger.warning(
                        "cannot queue the records not started again; they are handed back",
                        exc_info=sys.exc_info(),
                        extra={"records": len(batch)},
                    )
                    continue
                for entry in response.get("Successful") or []:
                    requeued.add(batch[int(entry["Id"])].message_id)
        if requeued:
            self.fail_messages = [
                r for r in self.fail_messages if getattr(r, "message_id", None) not in requeued
            ]
            self._not_started -= requeued

    def _delay_failed(self, records: list[Any]) -> None:
        by_queue: dict[str, list[dict[str, Any]]] = {}
        for index, record in enumerate(records):
            if not isinstance(record, SQSRecord):
                continue
            url = self.queue_url(record)
            if url is None:
                continue
            if record.message_id in self._not_started:
                timeout = 0
            else:
                timeout = self._backoff.delay(_receive_count(record))
            by_queue.setdefault(url, []).append(
                {
                    "Id": str(index),
                    "ReceiptHandle": record.receipt_handle,
                    "VisibilityTimeout": timeout,
                }
            )
        for url, entries in by_queue.items():
            for start in range(0, len(entries), 10):
                batch = entries[start : start + 10]
                try:
                    response = self.client.change_message_visibility_batch(
                        QueueUrl=url, Entries=batch
                    )
                except Exception:
                    logger.warning(
                        "cannot shorten the visibility of failed records; they return after "
                        "the queue's visibility timeout",
                        exc_info=sys.exc_info(),
                        extra={"records": len(batch)},
                    )
                    continue
                failed = response.get("Failed") or []
                if failed:
                    logger.warning(
                        "the visibility of some failed records was not changed",
                        extra={"failed": [entry.get("Code") for entry in failed]},
                    )
