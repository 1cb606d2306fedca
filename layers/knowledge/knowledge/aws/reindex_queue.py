"""``POST .../reindex`` in AWS: one message for the scope, expanded by the indexer page by page.

The search function has 29 seconds and a scope may hold 100,000 objects, so it lists
nothing: ``ReindexQueue.request_scope`` sends one scope reindex message
(``knowledge.aws.events.ReindexTask``) to the queue the S3 notifications use, and the route
answers 202 at once. The indexer expands that message (``ScopeReindexer.expand``):

1. phase ``objects``: page through the scope's prefix (``ListObjectsV2``, 1,000 keys a
   page, from the task's continuation token) and queue one reindex message per document
   key that matches the file patterns (``knowledge.aws.events.reindex_message_body``); the
   other keys are counted by extension, the counts carried in the task from step to step
   and written to the scope's status when the listing ends (``IndexStatus.unread_files``);
2. phase ``removals``: walk the documents the index holds for the scope
   (``IndexWriter.stored_documents``), sorted by path, beside a second listing of the
   prefix in the same order (a merge), and queue a reindex message for each document
   the bucket no longer has: the indexer finds the object gone and removes it.

Before each page it asks the invocation's ``TimeBudget``; when time runs short it queues
the next step (same phase, the cursor where it stopped) and returns, so a scope of any
size is done in as many invocations as it needs. Each key is then its own retriable
unit, with partial-batch failures and the dead-letter queue. A step that fails is
retried as a whole: keys queued twice are harmless (indexing an unchanged key changes
nothing). The result is a sync, not a rebuild: unchanged documents are skipped by the
indexer; a new embedding model gets a new index (``IndexName``) instead.

Deployed, the indexer queues the steps and the per-key messages on the bulk work queue
(``BULK_QUEUE_URL``, ``knowledge.aws.dispatch``), each with the scope's agent as its
``MessageGroupId``: the bulk queue is a fair queue, so a 100,000-key reindex of one agent
is one tenant there, and the other agents' bulk work keeps its turn. The bulk lane's
concurrency is capped apart from the express lane's, so a reindex never takes the
capacity the other tenants' single edits need either.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from knowledge.aws.event_indexing import ExpansionReport
from knowledge.aws.events import ReindexPhase, ReindexTask, reindex_message_body
from knowledge.aws.invocation_time import TimeBudget
from knowledge.core.errors import StoreUnavailableError
from knowledge.core.model import IndexOptions, capped_unread, unread_extension
from knowledge.core.path_filters import matches_file_patterns
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.sources.s3 import S3DocumentSource, S3Object
from knowledge.stores.protocol import IndexWriter, KnowledgeStore

__all__ = [
    "LIST_PAGE_SIZE",
    "REMOVALS_PAGE_SIZE",
    "SQS_BATCH_SIZE",
    "ReindexQueue",
    "ReindexRequest",
    "ScopeReindexer",
]

SQS_BATCH_SIZE = 10
"""Most entries one ``SendMessageBatch`` call takes."""

LIST_PAGE_SIZE = 1000
"""Keys per ``ListObjectsV2`` page (S3's maximum): one unit of the ``objects`` phase."""

REMOVALS_PAGE_SIZE = 1000
"""Indexed documents checked per unit of the ``removals`` phase."""


def _client(client: Any | None) -> Any:
    if client is not None:
        return client
    from knowledge.core.aws_clients import bounded_client  # boto3 only when a reindex is requested

    return bounded_client("sqs")


class _Sender:
    """Sends message bodies to one queue in batches of ten, retrying refused entries once;
    each with ``group`` as its ``MessageGroupId`` when one is given (the tenant, on a fair
    queue)."""

    def __init__(self, queue_url: str, client: Any | None) -> None:
        self.queue_url = queue_url
        self._client = client

    @property
    def client(self) -> Any:
        self._client = _client(self._client)
        return self._client

    def send(self, bodies: Sequence[str], *, group: str | None = None) -> None:
        """Raises ``StoreUnavailableError`` if some could not be queued (sending again is
        safe: a key queued twice is indexed once in effect)."""
        grouped = {"MessageGroupId": group} if group else {}
        for start in range(0, len(bodies), SQS_BATCH_SIZE):
            batch = bodies[start : start + SQS_BATCH_SIZE]
            entries = [
                {"Id": str(i), "MessageBody": body, **grouped} for i, body in enumerate(batch)
            ]
            response = self.client.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
            failed = response.get("Failed") or []
            if failed:
                # One more try for the entries SQS refused (throttling, a hiccup).
                retry_ids = {entry["Id"] for entry in failed}
                again = [entry for entry in entries if entry["Id"] in retry_ids]
                response = self.client.send_message_batch(QueueUrl=self.queue_url, Entries=again)
                still_failed = response.get("Failed") or []
                if still_failed:
                    code = still_failed[0].get("Code", "error")
                    raise StoreUnavailableError(
                        f"{len(still_failed)} reindex messages could not be queued ({code}); "
                        f"{start} were queued before them"
                    )


@dataclass(frozen=True, slots=True)
class ReindexRequest:
    """A scope reindex that was accepted: its first step is on the queue."""

    scope: KnowledgeScope

    def to_dict(self) -> dict[str, Any]:
        return {"agent": self.scope.agent, "context": self.scope.context, "status": "accepted"}


class ReindexQueue:
    """The search function's side: queues the first step of a scope reindex.

    ``client`` is an SQS client (default: a boto3 client created on first use).
    """

    def __init__(self, queue_url: str, bucket: str, *, client: Any | None = None) -> None:
        self._sender = _Sender(queue_url, client)
        self._bucket = bucket

    def request_scope(self, scope: KnowledgeScope) -> ReindexRequest:
        """Queue one scope reindex message; no listing here (module docstring). Raises
        ``StoreUnavailableError`` if it could not be queued."""
        self._sender.send([ReindexTask(self._bucket, scope).to_body()])
        return ReindexRequest(scope)


class ScopeReindexer:
    """The indexer's side: expands scope reindex steps into per-key messages on
    ``queue_url``, listing ``source``'s bucket (module docstring). Every message it
    queues, steps included, carries the scope's agent as its ``MessageGroupId``."""

    def __init__(
        self,
        queue_url: str,
        source: S3DocumentSource,
        *,
        options: IndexOptions | None = None,
        client: Any | None = None,
        list_page_size: int = LIST_PAGE_SIZE,
        removals_page_size: int = REMOVALS_PAGE_SIZE,
    ) -> None:
        self._sender = _Sender(queue_url, client)
        self._source = source
        self._options = options or IndexOptions()
        self._list_page_size = list_page_size
        self._removals_page_size = removals_page_size

    def expand(
        self, task: ReindexTask, store: KnowledgeStore, budget: TimeBudget
    ) -> ExpansionReport:
        """Queue what ``task`` covers until done or out of time; then the next step.

        Every call moves the cursor at least one page, whatever the budget says, so a
        reindex always ends (the budget's reserve covers that one page)."""
        documents = removals = 0
        progressed = False
        cursor = task.cursor
        if task.phase is ReindexPhase.OBJECTS:
            unread: Counter[str] = Counter(task.unread or {})
            while True:
                if progressed and not budget.can_start():
                    return self._continue(
                        task,
                        ReindexPhase.OBJECTS,
                        cursor,
                        documents,
                        0,
                        unread=capped_unread(unread),
                    )
                with budget.unit():
                    queued, cursor = self._objects_page(task.scope, cursor, unread)
                documents += queued
                progressed = True
                if cursor is None:
                    break
            self._record_unread(task.scope, store, capped_unread(unread))
            cursor = None  # the removals phase starts from the first indexed path
        if progressed and not budget.can_start():
            return self._continue(task, ReindexPhase.REMOVALS, cursor, documents, 0)
        with budget.unit():
            # Paths in Python's str order = code point order = UTF-8 byte order = S3's order.
            stored = store.stored_documents(task.scope)
            indexed = sorted(path for path in stored if cursor is None or path > cursor)
        listing = _SortedListing(self._source.objects_after(task.scope, cursor))
        prefix = self._source.prefix(task.scope)
        for start in range(0, len(indexed), self._removals_page_size):
            if progressed and not budget.can_start():
                return self._continue(task, ReindexPhase.REMOVALS, cursor, documents, removals)
            page = indexed[start : start + self._removals_page_size]
            with budget.unit():
                gone = [path for path in page if not listing.holds(path)]
                self._sender.send(
                    [reindex_message_body(self._source.bucket, prefix + path) for path in gone],
                    group=task.scope.agent,
                )
            removals += len(gone)
            cursor = page[-1]
            progressed = True
        return ExpansionReport(documents, removals)

    def _objects_page(
        self, scope: KnowledgeScope, cursor: str | None, unread: Counter[str]
    ) -> tuple[int, str | None]:
        items, next_cursor = self._source.object_page(scope, cursor, max_keys=self._list_page_size)
        bodies: list[str] = []
        for item in items:
            if not self._source.is_document(item):
                continue
            if matches_file_patterns(item.path, self._options.file_patterns):
                bodies.append(reindex_message_body(self._source.bucket, item.key))
            else:
                unread[unread_extension(item.path)] += 1
        self._sender.send(bodies, group=scope.agent)
        return len(bodies), next_cursor

    @staticmethod
    def _record_unread(
        scope: KnowledgeScope, store: KnowledgeStore, counts: dict[str, int]
    ) -> None:
        """The complete listing's counts of unread keys, into the scope's status."""
        if isinstance(store, IndexWriter):
            with store.write_session(scope) as session:
                session.record_unread(counts)

    def _continue(
        self,
        task: ReindexTask,
        phase: ReindexPhase,
        cursor: str | None,
        documents: int,
        removals: int,
        *,
        unread: dict[str, int] | None = None,
    ) -> ExpansionReport:
        following = ReindexTask(task.bucket, task.scope, phase, cursor, unread)
        self._sender.send([following.to_body()], group=task.scope.agent)
        return ExpansionReport(documents, removals, following)


class _SortedListing:
    """A listing in the bucket's order that can be asked, for increasing paths, whether it
    holds each (a merge: one pass over the listing for all the questions)."""

    def __init__(self, items: Iterator[S3Object]) -> None:
        self._items = items
        self._head = next(items, None)

    def holds(self, path: str) -> bool:
        while self._head is not None and self._head.path < path:
            self._head = next(self._items, None)
        return self._head is not None and self._head.path == path
