"""POST .../reindex of a scope larger than one S3 page (issue 8, item 7), through both handlers.

The search route must answer 202 after queueing one message, and the indexer must page
through the whole prefix (2,500 objects: three ``ListObjectsV2`` pages) and through the
whole index for removals, continuing with a continuation message when its invocation
runs short of time. The keys queued for indexing are collected from the queue and
compared with the bucket and the index built here (not with anything the code computes).

moto's S3 API costs ~10 ms a request, so the 2,500 objects are created in moto's
backend directly (test set-up only: the code under test sees the S3 API). moto's SQS is
quadratic in the number of messages a queue holds (1,000 messages take minutes), so the
per-key messages go to ``KeyCollectingSqs``, an injected transport that records them;
the scope steps (the continuation messages) go through moto's queue. Sending in batches,
retries and refusals against moto's SQS are in test_reindex_queue.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from lambda_support import (
    BUCKET,
    BudgetContext,
    Clock,
    LambdaContext,
    create_bucket_and_queue,
    load_event,
    load_handler,
    sqs_messages_as_event,
    use_fake_aws,
)
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.s3.models import s3_backends

from knowledge.aws.event_indexing import EventIndexer
from knowledge.aws.reindex_queue import ReindexQueue, ScopeReindexer
from knowledge.aws.settings import LambdaSettings
from knowledge.core.model import DocumentChunk
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.sources.s3 import S3DocumentSource
from knowledge.service.api import KnowledgeApi
from knowledge.stores.memory import MemoryKnowledgeStore
from knowledge.stores.protocol import DocumentHeader, EmbeddedChunk

RUNBOOKS = KnowledgeScope("ops-bot", "runbooks")
OBJECTS = 2500


class SlowListingS3:
    """An S3 client whose listings take ``ms_per_page`` of the invocation's time each."""

    def __init__(self, client: Any, clock: Clock, ms_per_page: int) -> None:
        self._client = client
        self._clock = clock
        self._ms = ms_per_page
        self.pages = 0

    def _page(self) -> None:
        self.pages += 1
        self._clock.elapsed_ms += self._ms

    def list_objects_v2(self, **kwargs: Any) -> Any:
        self._page()
        return self._client.list_objects_v2(**kwargs)

    def get_paginator(self, name: str) -> Any:
        real = self._client.get_paginator(name)
        outer = self

        class Paginator:
            def paginate(self, **kwargs: Any) -> Iterator[Any]:
                for page in real.paginate(**kwargs):
                    outer._page()
                    yield page

        return Paginator()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class KeyCollectingSqs:
    """SQS for the expander: per-key messages are recorded, scope steps go to moto."""

    def __init__(self, sqs: Any) -> None:
        self._sqs = sqs
        self.keys: list[str] = []

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, str]]) -> Any:
        steps = []
        for entry in Entries:
            body = json.loads(entry["MessageBody"])
            if body["type"] == "knowledge.reindex":
                self.keys.append(body["key"])
            else:
                steps.append(entry)
        if steps:
            self._sqs.send_message_batch(QueueUrl=QueueUrl, Entries=steps)
        return {"Successful": [{"Id": e["Id"]} for e in Entries], "Failed": []}


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any, str, str]]:
    use_fake_aws(monkeypatch)
    with mock_aws():
        s3 = boto3.client("s3")
        sqs = boto3.client("sqs")
        queue_url, queue_arn = create_bucket_and_queue(s3, sqs)
        yield s3, sqs, queue_url, queue_arn


def index_directly(store: MemoryKnowledgeStore, paths: list[str]) -> None:
    with store.write_session(RUNBOOKS) as session:
        for path in paths:
            header = DocumentHeader(path, path, "hash", datetime.now(UTC))
            session.put_document(header, [EmbeddedChunk(DocumentChunk(path, 0, f"text {path}"))])


def test_reindex_of_2500_objects_pages_through_the_scope_and_the_index(aws, monkeypatch):
    s3, sqs, queue_url, queue_arn = aws
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    in_bucket = [f"doc-{i:05d}.md" for i in range(OBJECTS)]
    for path in in_bucket:
        backend.put_object(BUCKET, f"ops-bot/runbooks/{path}", b"# doc")
    for key in ("ops-bot/runbooks/image.png", "ops-bot/runbooks/doc-00007.md.metadata.json"):
        backend.put_object(BUCKET, key, b"{}")
    backend.put_object(BUCKET, "ops-bot/other/doc-00001.md", b"another scope")
    # The index holds some of the bucket's documents and 600 it no longer has, spread
    # over the whole order (before, between and after the bucket's keys).
    gone = [f"doc-{i:05d}-old.md" for i in range(0, 3000, 5)]
    store = MemoryKnowledgeStore()
    index_directly(store, in_bucket[::7] + gone)

    # The route answers at once with one message on the queue.
    monkeypatch.setenv("DOCUMENTS_BUCKET", BUCKET)
    monkeypatch.setenv("INDEX_QUEUE_URL", queue_url)
    search = load_handler("search", monkeypatch)
    search.container.api = KnowledgeApi(store, reindex=search.queue_reindex)
    search.container.reindex_queue = ReindexQueue(queue_url, BUCKET, client=sqs)
    response = search.lambda_handler(load_event("api_reindex.json"), LambdaContext())
    assert response["statusCode"] == 202
    assert json.loads(response["body"])["status"] == "accepted"
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "1"

    # The indexer expands it. Each listed page takes 100 s of a 300 s invocation that
    # keeps 30 s free, so the expansion has to continue in later invocations.
    clock = Clock()
    slow_s3 = SlowListingS3(s3, clock, ms_per_page=100_000)
    indexer = load_handler("indexer", monkeypatch)
    indexer.container.settings = LambdaSettings.from_env()
    source = S3DocumentSource(BUCKET, client=slow_s3)
    collecting = KeyCollectingSqs(sqs)
    indexer.container.indexer = EventIndexer(
        store, source, expander=ScopeReindexer(queue_url, source, client=collecting)
    )
    steps = 0
    for _ in range(100):
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get(
            "Messages", []
        )
        if not messages:
            break
        steps += len(messages)
        clock.elapsed_ms = 0  # a new invocation
        result = indexer.lambda_handler(
            sqs_messages_as_event(messages, queue_arn), BudgetContext(clock=clock)
        )
        assert result == {"batchItemFailures": []}
        for message in messages:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    queued_keys = collecting.keys

    expected = [f"ops-bot/runbooks/{path}" for path in in_bucket + gone]
    assert len(queued_keys) == len(expected), "every key exactly once"
    assert sorted(queued_keys) == sorted(expected)
    assert steps >= 3, "the expansion continued in later invocations"
    assert slow_s3.pages >= 6, "both phases paged through the 2,500 objects"
