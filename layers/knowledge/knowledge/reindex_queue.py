"""``POST .../reindex`` in AWS: queue one indexing request per document of the scope.

The search function does not index (it has 29 seconds and no business embedding a
scope): it lists the scope's objects and sends one reindex message per key
(``knowledge.events.reindex_message_body``) to the queue the S3 notifications use, so
the indexer treats each like an event. Each document is then its own retriable unit,
with partial-batch failures and the dead-letter queue, and a scope of any size never
has to fit in one invocation.

Keys queued: the scope's objects that match the file patterns (sorted by path; all of
them unless ``max_documents`` is set, and then the rest are reported as skipped), plus
every document the index holds that is no longer in the bucket (the indexer finds the
object gone and removes the document). The result is a sync, not a rebuild: unchanged
documents are skipped by the indexer; a new embedding model gets a new index
(``IndexName``) instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from knowledge.errors import StoreUnavailableError
from knowledge.events import reindex_message_body
from knowledge.filters import matches_file_patterns
from knowledge.model import IndexOptions
from knowledge.scope import KnowledgeScope
from knowledge.sources.s3 import S3DocumentSource

__all__ = ["SQS_BATCH_SIZE", "ReindexQueue", "ReindexRequest"]

SQS_BATCH_SIZE = 10
"""Most entries one ``SendMessageBatch`` call takes."""


@dataclass(frozen=True, slots=True)
class ReindexRequest:
    """What was queued for one scope: documents to index, and removals of documents that
    are indexed but gone from the bucket; ``skipped`` documents were over the limit."""

    scope: KnowledgeScope
    documents: int
    removals: int
    skipped: int

    @property
    def queued(self) -> int:
        return self.documents + self.removals

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.scope.agent,
            "context": self.scope.context,
            "status": "queued",
            "queued": self.queued,
            "documents": self.documents,
            "removals": self.removals,
            "skipped_documents": self.skipped,
        }


class ReindexQueue:
    """Queues reindex messages for the scopes of ``source``'s bucket on ``queue_url``.

    ``client`` is an SQS client (default: a boto3 client created on first use).
    """

    def __init__(
        self,
        queue_url: str,
        source: S3DocumentSource,
        *,
        options: IndexOptions | None = None,
        client: Any | None = None,
    ) -> None:
        self._queue_url = queue_url
        self._source = source
        self._options = options or IndexOptions()
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3  # only when a reindex is requested

            self._client = boto3.client("sqs")
        return self._client

    def enqueue_scope(
        self, scope: KnowledgeScope, indexed_paths: Iterable[str] = ()
    ) -> ReindexRequest:
        """Queue the scope's keys (module docstring); ``indexed_paths`` are the paths the
        index holds for the scope. Raises ``StoreUnavailableError`` if messages could not
        be queued (calling again is safe: indexing a key twice changes nothing)."""
        prefix = self._source.prefix(scope)
        matching = sorted(
            item.path
            for item in self._source.object_keys(scope)
            if matches_file_patterns(item.path, self._options.file_patterns)
        )
        documents = matching[: self._options.max_documents]
        listed = set(matching)
        removals = sorted(set(indexed_paths) - listed)
        bodies = [
            reindex_message_body(self._source.bucket, prefix + path)
            for path in (*documents, *removals)
        ]
        self._send(bodies)
        return ReindexRequest(
            scope=scope,
            documents=len(documents),
            removals=len(removals),
            skipped=len(matching) - len(documents),
        )

    def _send(self, bodies: Sequence[str]) -> None:
        for start in range(0, len(bodies), SQS_BATCH_SIZE):
            batch = bodies[start : start + SQS_BATCH_SIZE]
            entries = [{"Id": str(i), "MessageBody": body} for i, body in enumerate(batch)]
            response = self.client.send_message_batch(QueueUrl=self._queue_url, Entries=entries)
            failed = response.get("Failed") or []
            if failed:
                # One more try for the entries SQS refused (throttling, a hiccup).
                retry_ids = {entry["Id"] for entry in failed}
                again = [entry for entry in entries if entry["Id"] in retry_ids]
                response = self.client.send_message_batch(QueueUrl=self._queue_url, Entries=again)
                still_failed = response.get("Failed") or []
                if still_failed:
                    code = still_failed[0].get("Code", "error")
                    raise StoreUnavailableError(
                        f"{len(still_failed)} reindex messages could not be queued ({code}); "
                        f"{start} were queued before them; call reindex again"
                    )
