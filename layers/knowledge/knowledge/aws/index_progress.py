"""A scope's indexing under way on AWS, for the status route: one DynamoDB item per scope.

Locally the process that indexes also answers the status route (``knowledge.local.progress``).
On AWS the indexer function writes and the search function answers, in other containers,
so what the indexer is doing is kept in the stack's ``IndexProgressTable`` (template.yaml:
on-demand, encrypted, ``expires_at`` as its TTL attribute), one item per scope (``scope`` =
``<agent>/<context>``):

- ``document``, ``document_bytes``, ``chunks_done``, ``chunks_estimated``: the document
  the indexer is writing, its size (read at once) and its chunks done of about how many
  (``knowledge.ingest.progress.estimate_chunks``), written by ``DocumentReporter``, the
  pipeline's ``DocumentProgress``;
- ``queued``: the scope's bucket events on the work queues, not yet applied
  (``queued_events`` of a message body, the one count both sides make): the dispatcher
  adds what it forwards (``ProgressTable.add_queued``), the indexer takes a record's off
  once it is done with it (applied, skipped, rejected; not a record handed back or
  retried). A reindex's messages are not counted (the indexer queues its per-key
  messages itself, past the dispatcher);
- ``document_at``: when the document was last reported; ``updated_at``: when anything
  last changed; ``expires_at``: a day later (TTL).

**Cost.** Only a document still being written ``REPORT_AFTER_S`` after it began is reported,
and then at most once every ``REPORT_EVERY_S``: a large document pays one ``UpdateItem``
per 2 s of its indexing (a 20,000-chunk document: 29 calls in 57 s, so 1.5 % of its time
at the 30 ms a call took against moto on a loaded machine, a quarter of that at
DynamoDB's usual few ms), a small one nothing. The dispatcher pays one
``UpdateItem`` per scope of a batch, the indexer one per record.

**Read.** ``ProgressTable.status`` is the search function's ``StatusOf``: one ``GetItem``
per scope shown; a document not reported for ``STALE_AFTER_S`` (the indexer timed out or
crashed mid-document and never said it ended) is not shown, nor is a count whose scope saw
no change for ``QUEUE_STALE_AFTER_S`` (a record that went to a dead-letter queue is never
taken off). The counts are approximate, as SQS's own are.

Progress is something to look at, never a reason to fail: a failing write is logged and
the indexing goes on; a failing read answers the store's status as it is. ``boto3`` and
the client load on first use.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Final

from knowledge.aws.events import REINDEX_EVENT_NAME, ActionKind, parse_sqs_message
from knowledge.core.model import IndexProgress, IndexState, IndexStatus
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.progress import estimate_chunks, observing

__all__ = [
    "QUEUE_STALE_AFTER_S",
    "REPORT_AFTER_S",
    "REPORT_EVERY_S",
    "STALE_AFTER_S",
    "DocumentReporter",
    "ProgressTable",
    "progress_table",
    "queued_events",
]

logger = logging.getLogger(__name__)

REPORT_AFTER_S: Final = 2.0
"""A document still being written this long after it began is reported."""

REPORT_EVERY_S: Final = 2.0
"""At most one report of a document's chunks in this time."""

STALE_AFTER_S: Final = 120.0
"""A document's report this old is not shown: its writer has gone (the status route's read)."""

QUEUE_STALE_AFTER_S: Final = 900.0
"""A queued count whose scope saw no change for this long is not shown: the longest retry
delay of a failed record (``RETRY_MAX_SECONDS``); what is left after it went to a
dead-letter queue."""

EXPIRES_AFTER_S: Final = 24 * 3600
"""DynamoDB's TTL deletes an item this long after its last change."""

_DOCUMENT: Final = ("document", "document_bytes", "chunks_done", "chunks_estimated", "document_at")


def queued_events(body: str | None) -> Counter[KnowledgeScope]:
    """The bucket events per scope a work queue message carries (what ``queued`` counts):
    its upserts and deletes that name a scope, not a reindex's."""
    counts: Counter[KnowledgeScope] = Counter()
    for action in parse_sqs_message(body):
        if (
            action.kind in (ActionKind.UPSERT, ActionKind.DELETE)
            and action.scope is not None
            and action.event_name != REINDEX_EVENT_NAME
        ):
            counts[action.scope] += 1
    return counts


def progress_table(name: str | None) -> ProgressTable | None:
    """The table named (``INDEX_PROGRESS_TABLE``), ``None`` when none is."""
    return ProgressTable(name) if name else None


def _number(item: dict[str, Any], name: str) -> int | None:
    value = item.get(name, {}).get("N")
    return None if value is None else int(float(value))


class ProgressTable:
    """The ``INDEX_PROGRESS_TABLE``; ``client`` for tests (default: a bounded boto3
    client, made on first use); ``clock`` the epoch seconds (``time.time``);
    ``report_after`` and ``report_every`` the ``DocumentReporter``'s pace."""

    def __init__(
        self,
        table: str,
        client: Any | None = None,
        clock: Callable[[], float] = time.time,
        *,
        report_after: float = REPORT_AFTER_S,
        report_every: float = REPORT_EVERY_S,
    ) -> None:
        self._table = table
        self._client = client
        self._clock = clock
        self.report_after = report_after
        self.report_every = report_every

    @property
    def client(self) -> Any:
        if self._client is None:
            from knowledge.core.aws_clients import bounded_client

            self._client = bounded_client("dynamodb")
        return self._client

    # --- writes: the indexer and the dispatcher ---------------------------------------------

    def report_document(
        self,
        scope: KnowledgeScope,
        path: str,
        size: int | None,
        chunks_done: int,
        chunks_estimated: int | None,
    ) -> None:
        """The document ``scope``'s indexer is writing, and how far it has got."""
        values: dict[str, Any] = {
            ":document": {"S": path},
            ":done": {"N": str(chunks_done)},
        }
        sets = ["document = :document", "chunks_done = :done", "document_at = :now"]
        removes = []
        for name, key, value in (
            ("document_bytes", ":bytes", size),
            ("chunks_estimated", ":estimated", chunks_estimated),
        ):
            if value is None:
                removes.append(name)
            else:
                sets.append(f"{name} = {key}")
                values[key] = {"N": str(value)}
        self._update(scope, sets, values, removes)

    def end_document(self, scope: KnowledgeScope) -> None:
        """The reported document is written (or given up)."""
        self._update(scope, [], {}, list(_DOCUMENT))

    def add_queued(self, counts: Mapping[KnowledgeScope, int]) -> None:
        """Add each scope's count (negative: taken off) to what it has queued."""
        for scope, count in counts.items():
            if count:
                self._update(scope, [], {":count": {"N": str(count)}}, [], add="queued :count")

    def done_with(self, body: str | None) -> None:
        """The indexer is done with a message: its events are no longer queued."""
        self.add_queued({scope: -count for scope, count in queued_events(body).items()})

    @contextmanager
    def reporting(self, scope: KnowledgeScope | None) -> Iterator[None]:
        """The documents indexed in this block reported as ``scope``'s (``DocumentReporter``);
        nothing is reported for an action without a scope."""
        if scope is None:
            yield
            return
        with observing(DocumentReporter(self, scope)):
            yield

    def _update(
        self,
        scope: KnowledgeScope,
        sets: list[str],
        values: dict[str, Any],
        removes: Iterable[str],
        *,
        add: str | None = None,
    ) -> None:
        now = self._clock()
        values = {
            **values,
            ":now": {"N": f"{now:.3f}"},
            ":expires": {"N": str(int(now + EXPIRES_AFTER_S))},
        }
        expression = "SET " + ", ".join([*sets, "updated_at = :now", "expires_at = :expires"])
        if add is not None:
            expression += f" ADD {add}"
        removed = list(removes)
        if removed:
            expression += " REMOVE " + ", ".join(removed)
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.update_item(
                TableName=self._table,
                Key={"scope": {"S": scope.key}},
                UpdateExpression=expression,
                ExpressionAttributeValues=values,
            )
        except (BotoCoreError, ClientError) as exc:
            logger.warning("index progress of %s not recorded: %s", scope, exc)

    # --- the read: the search function's status route ---------------------------------------

    def progress(self, scope: KnowledgeScope) -> IndexProgress | None:
        """What ``scope`` has under way (module docstring), ``None`` when nothing (or the
        read failed: logged)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer = self.client.get_item(TableName=self._table, Key={"scope": {"S": scope.key}})
        except (BotoCoreError, ClientError) as exc:
            logger.warning("index progress of %s not read: %s", scope, exc)
            return None
        item = answer.get("Item")
        if not item:
            return None
        now = self._clock()
        updated = float(item.get("updated_at", {}).get("N", "0"))
        queued = max(_number(item, "queued") or 0, 0) if now - updated <= QUEUE_STALE_AFTER_S else 0
        document = item.get("document", {}).get("S")
        if now - float(item.get("document_at", {}).get("N", "0")) > STALE_AFTER_S:
            document = None
        if document is None:
            return None if not queued else IndexProgress(0, 0, queued_files=queued)
        return IndexProgress(
            0,
            1,
            document=document,
            document_bytes=_number(item, "document_bytes"),
            chunks_done=_number(item, "chunks_done"),
            chunks_estimated=_number(item, "chunks_estimated"),
            queued_files=queued,
        )

    def status(self, scope: KnowledgeScope, status: IndexStatus) -> IndexStatus:
        """``status`` with ``scope``'s work under way: ``INDEXING`` and its progress (the
        API's ``StatusOf``); as it is when nothing is under way."""
        progress = self.progress(scope)
        if progress is None:
            return status
        if progress.document is not None:
            estimated = progress.chunks_estimated
            about = "" if estimated is None else f" of about {estimated}"
            doing = f"writing {progress.document}: {progress.chunks_done}{about} chunks"
            if progress.queued_files:
                doing += f"; {progress.queued_files} more events queued"
        else:
            doing = f"{progress.queued_files} events queued to be indexed"
        return replace(status, state=IndexState.INDEXING, message=doing, progress=progress)


class DocumentReporter:
    """The pipeline's ``DocumentProgress`` (``knowledge.ingest.progress.observing``) for
    one scope in the indexer function: reports to ``table`` only a document still being
    written ``table.report_after`` seconds after it began, then at most every
    ``table.report_every`` (module docstring). ``clock``: monotonic seconds."""

    def __init__(
        self,
        table: ProgressTable,
        scope: KnowledgeScope,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._table = table
        self._scope = scope
        self._clock = clock
        self._path: str | None = None
        self._size: int | None = None
        self._text_chars: int | None = None
        self._chunks = 0
        self._chars = 0
        self._next_report = 0.0
        self._reported = False

    @property
    def reported(self) -> bool:
        """Whether the document under way has been reported."""
        return self._reported

    def begin(self, path: str, size: int | None, text_chars: int | None) -> None:
        self._path, self._size, self._text_chars = path, size, text_chars
        self._chunks = self._chars = 0
        self._reported = False
        self._next_report = self._clock() + self._table.report_after

    def chunk(self, chars: int) -> None:
        self._chunks += 1
        self._chars += chars
        if self._path is None:
            return
        now = self._clock()
        if now < self._next_report:
            return
        self._next_report = now + self._table.report_every
        estimate = estimate_chunks(self._chunks, self._chars, self._text_chars)
        self._table.report_document(self._scope, self._path, self._size, self._chunks, estimate)
        self._reported = True

    def end(self) -> None:
        if self._reported:
            self._table.end_document(self._scope)
        self._path = None
        self._reported = False
