"""Fair indexing between tenants on the AWS path: one agent's 2,000-file drop must not hold
up another agent's single edit.

The deployed pipeline on moto: S3 notifications on the intake queue, the dispatcher
function over the intake as its event source mapping runs it (batches of
``DispatcherBatchSize``), the indexer function over the express queue (batches of
``IndexerBatchSize``; the batch sizes and thresholds are template.yaml's defaults), with
the memory store (what is indexed is the point here, not how; the same indexer against a
real OpenSearch node is tests/integration/aws/test_handlers_opensearch.py). Then the bulk
lane through moto: its records keep their tenant when retried or handed back, and a
scope reindex runs in it end to end.

Measured constraints shape the harness:

- moto's SQS costs time in proportion to the messages a queue holds, on every send and
  every receive (each recounts the queue): 2,001 messages on one queue take ~45 s here,
  and even one dispatcher batch (100) at a time on the intake makes the 2,000 cost
  ~25 s on this (shared, two-core) machine. So the drop's first 1,950 notifications
  are handed to the dispatcher as the batches its event source mapping forms from the
  intake (``sqs_event``: Lambda's record shape), and the batch that carries the edit
  (the drop's last 50 notifications and the edit) goes through moto's intake queue:
  the edit travels the whole deployed path. Redelivery and the intake's dead-letter
  queue are exercised on moto in test_handlers_dispatcher.py, the one-queue wiring
  with a smaller drop here.
- For the same reason the 2,000 messages the dispatcher forwards to the bulk queue go to
  ``RecordingSqs``, an injected transport that checks and records them (as
  test_reindex_paging.py's ``KeyCollectingSqs`` does for a reindex's keys); the express
  queue is moto's. The bulk lane itself runs through moto with smaller drops.

moto's S3 API costs ~10 ms a request, so the drop's objects are created in moto's
backend directly (set-up only: the code under test reads them through the S3 API).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import boto3
import pytest
from cfn_template import load_template
from lambda_support import (
    BUCKET,
    BudgetContext,
    LambdaContext,
    RecordingSqs,
    create_bucket_and_queue,
    load_handler,
    s3_notification,
    sqs_event,
    sqs_messages_as_event,
    use_fake_aws,
)
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.s3.models import s3_backends

from knowledge.aws.dispatch import Dispatcher, DispatchSettings
from knowledge.aws.event_indexing import EventIndexer
from knowledge.aws.reindex_queue import ReindexQueue, ScopeReindexer
from knowledge.aws.settings import LambdaSettings
from knowledge.core.errors import StoreError
from knowledge.core.model import SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.sources.s3 import S3DocumentSource
from knowledge.stores.memory import MemoryKnowledgeStore

PARAMETERS = load_template()["Parameters"]
DISPATCHER_BATCH = int(PARAMETERS["DispatcherBatchSize"]["Default"])
INDEXER_BATCH = int(PARAMETERS["IndexerBatchSize"]["Default"])
EXPRESS_MAX_EVENTS = int(PARAMETERS["ExpressMaxEvents"]["Default"])

DROP = 2000
DROPPER = KnowledgeScope("drop-bot", "archive")
EDITOR = KnowledgeScope("support-bot", "faq")
EDIT_KEY = "support-bot/faq/refunds.md"
EDIT_TEXT = "# Refunds\n\nA refund reaches the card within five business days."


def notification(key: str, size: int, sequencer: str) -> str:
    body = s3_notification("ObjectCreated:Put", key, sequencer)
    body["Records"][0]["s3"]["object"]["size"] = size
    return json.dumps(body)


@dataclass
class Pipeline:
    """The intake, the two work queues, the dispatcher and the indexer, on moto."""

    s3: Any
    sqs: Any
    store: MemoryKnowledgeStore
    dispatcher: ModuleType
    indexer: ModuleType
    urls: dict[str, str]
    arns: dict[str, str]
    dispatched: list[dict[str, Any]] = field(default_factory=list)
    indexer_invocations: int = 0

    def arrive(self, bodies: list[str]) -> None:
        """Notifications landing on the intake (as S3 sends them)."""
        for start in range(0, len(bodies), 10):
            chunk = bodies[start : start + 10]
            self.sqs.send_message_batch(
                QueueUrl=self.urls["intake"],
                Entries=[{"Id": str(i), "MessageBody": b} for i, b in enumerate(chunk)],
            )

    def receive(self, queue: str, most: int) -> list[dict[str, Any]]:
        """What an event source mapping's poll hands one invocation: up to ``most``."""
        messages: list[dict[str, Any]] = []
        while len(messages) < most:
            got = self.sqs.receive_message(
                QueueUrl=self.urls[queue],
                MaxNumberOfMessages=min(10, most - len(messages)),
                AttributeNames=["All"],
            ).get("Messages", [])
            if not got:
                break
            messages += got
        return messages

    def invoke(
        self, module: ModuleType, queue: str, messages: list[dict[str, Any]], context: Any
    ) -> dict[str, Any]:
        """One invocation by the mapping: the messages it acknowledges are deleted."""
        response: dict[str, Any] = module.lambda_handler(
            sqs_messages_as_event(messages, self.arns[queue]), context
        )
        failed = {item["itemIdentifier"] for item in response["batchItemFailures"]}
        done = [m for m in messages if m["MessageId"] not in failed]
        for start in range(0, len(done), 10):
            self.sqs.delete_message_batch(
                QueueUrl=self.urls[queue],
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(done[start : start + 10])
                ],
            )
        return response

    def dispatch_all(self) -> None:
        """The dispatcher's mapping, until the intake is empty."""
        while messages := self.receive("intake", DISPATCHER_BATCH):
            self.dispatched.append(
                self.invoke(self.dispatcher, "intake", messages, LambdaContext())
            )

    def index(self, queue: str, context: Any = None) -> dict[str, Any] | None:
        """One invocation of the indexer's mapping on ``queue`` (``None``: nothing there)."""
        messages = self.receive(queue, INDEXER_BATCH)
        if not messages:
            return None
        self.indexer_invocations += 1
        return self.invoke(self.indexer, queue, messages, context or LambdaContext())

    def searchable(self, scope: KnowledgeScope, text: str) -> list[str]:
        return [h.document_path for h in self.store.search(scope, SearchQuery(text))]

    def on(self, queue: str) -> list[dict[str, Any]]:
        """The messages on ``queue`` now (received, then made visible again)."""
        messages = self.receive(queue, 1000)
        for message in messages:
            self.sqs.change_message_visibility(
                QueueUrl=self.urls[queue],
                ReceiptHandle=message["ReceiptHandle"],
                VisibilityTimeout=0,
            )
        return messages


@pytest.fixture
def pipeline(monkeypatch: pytest.MonkeyPatch) -> Iterator[Pipeline]:
    use_fake_aws(monkeypatch)
    with mock_aws():
        s3, sqs = boto3.client("s3"), boto3.client("sqs")
        urls, arns = {}, {}
        urls["intake"], arns["intake"] = create_bucket_and_queue(s3, sqs)
        for lane in ("express", "bulk"):
            urls[lane] = sqs.create_queue(QueueName=f"document-{lane}")["QueueUrl"]
            arns[lane] = sqs.get_queue_attributes(QueueUrl=urls[lane], AttributeNames=["QueueArn"])[
                "Attributes"
            ]["QueueArn"]
        # The environment template.yaml gives the two functions.
        for name, value in {
            "DOCUMENTS_BUCKET": BUCKET,
            # The search function's; an indexer that is given it too must still act on
            # the queue each record came from.
            "INDEX_QUEUE_URL": urls["intake"],
            "EXPRESS_QUEUE_URL": urls["express"],
            "BULK_QUEUE_URL": urls["bulk"],
            "EXPRESS_MAX_EVENTS": str(EXPRESS_MAX_EVENTS),
            "RETRY_BASE_SECONDS": "0",  # a failed record is back at once here
            "RETRY_MAX_SECONDS": "0",
        }.items():
            monkeypatch.setenv(name, value)
        dispatcher = load_handler("dispatcher", monkeypatch)
        indexer = load_handler("indexer", monkeypatch)
        store = MemoryKnowledgeStore()
        settings = LambdaSettings.from_env()
        source = S3DocumentSource(BUCKET, client=s3)
        indexer.container.settings = settings
        assert settings.reindex_queue_url == urls["bulk"]
        indexer.container.indexer = EventIndexer(
            store,
            source,
            settings.index_options,
            expander=ScopeReindexer(settings.reindex_queue_url, source, client=sqs),
        )
        yield Pipeline(s3, sqs, store, dispatcher, indexer, urls, arns)


def drop(count: int, agent: str = DROPPER.agent) -> list[str]:
    """``count`` small objects of ``agent``, and the notifications S3 sends for them."""
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    bodies = []
    for i in range(count):
        key = f"{agent}/archive/doc-{i:05d}.md"
        text = f"# Archived report {i}\n\nQuarterly numbers, page {i}.".encode()
        backend.put_object(BUCKET, key, text)
        bodies.append(notification(key, len(text), f"{i + 1:08X}"))
    return bodies


def edit(pipeline: Pipeline) -> str:
    pipeline.s3.put_object(Bucket=BUCKET, Key=EDIT_KEY, Body=EDIT_TEXT.encode())
    return notification(EDIT_KEY, len(EDIT_TEXT), "00000001")


def test_another_agents_edit_is_searchable_within_two_indexer_invocations(pipeline):
    recorder = RecordingSqs(pipeline.sqs, pipeline.urls["bulk"])
    pipeline.dispatcher.container.dispatcher = Dispatcher(
        DispatchSettings.from_env(), client=recorder
    )
    bodies = drop(DROP)
    # The drop lands while the dispatcher's mapping polls: batches of DispatcherBatchSize;
    # the edit lands right after it, in the same batch as the drop's last notifications.
    last = DROP - DISPATCHER_BATCH // 2
    for start in range(0, last, DISPATCHER_BATCH):
        batch = sqs_event(*bodies[start : min(start + DISPATCHER_BATCH, last)])
        pipeline.dispatched.append(pipeline.dispatcher.lambda_handler(batch, LambdaContext()))
    pipeline.arrive([*bodies[last:], edit(pipeline)])
    pipeline.dispatch_all()

    assert all(r == {"batchItemFailures": []} for r in pipeline.dispatched)
    assert len(pipeline.dispatched) == DROP // DISPATCHER_BATCH + 1
    assert pipeline.on("intake") == []
    # The drop is queued in the bulk lane, its agent as every message's group; nothing of
    # it is in the express lane, which holds the edit alone.
    assert len(recorder.entries) == DROP
    assert {entry.get("MessageGroupId") for entry in recorder.entries} == {DROPPER.agent}
    assert sorted(e["MessageBody"] for e in recorder.entries) == sorted(bodies)
    (express,) = pipeline.on("express")
    assert json.loads(express["Body"])["Records"][0]["s3"]["object"]["key"] == EDIT_KEY
    assert express["Attributes"]["MessageGroupId"] == EDITOR.agent

    while pipeline.indexer_invocations < 2 and pipeline.index("express") is not None:
        pass
    assert pipeline.searchable(EDITOR, "refund card") == ["refunds.md"]
    assert pipeline.indexer_invocations == 1
    assert pipeline.store.stored_documents(DROPPER) == {}, "the drop waits in its own lane"


def test_on_one_queue_the_edit_waits_behind_the_whole_drop(pipeline):
    """The wiring the dispatcher replaces: the indexer reads the queue the notifications
    land on, so after two invocations it has indexed twenty of the drop and not the edit.
    (A drop of 100: moto's queue is quadratic; the edit waits behind all of it.)"""
    count = 100
    pipeline.arrive([*drop(count), edit(pipeline)])
    for _ in range(2):
        pipeline.index("intake")
    assert pipeline.searchable(EDITOR, "refund card") == []
    assert len(pipeline.store.stored_documents(DROPPER)) == 2 * INDEXER_BATCH
    while pipeline.index("intake") is not None:
        pass
    assert pipeline.searchable(EDITOR, "refund card") == ["refunds.md"]
    assert pipeline.indexer_invocations == (count + 1 + INDEXER_BATCH - 1) // INDEXER_BATCH


class FailingStore(MemoryKnowledgeStore):
    """Fails every write of ``broken.md``, as an unavailable index would."""

    def stored_document(self, scope: KnowledgeScope, path: str) -> Any:
        if path == "broken.md":
            raise StoreError("the index is unavailable")
        return super().stored_document(scope, path)


def test_the_bulk_lane_retries_on_its_own_queue_and_keeps_the_tenant(pipeline):
    """A busy agent's events reach the bulk queue through moto with their agent as
    ``MessageGroupId``; the indexer changes a failed record's visibility on that queue
    (not on the express or the intake queue) and sends records it had no time to start
    back to it with their group, so the fair queue still knows whose they are."""
    bodies = drop(EXPRESS_MAX_EVENTS + 4)
    broken = "drop-bot/archive/broken.md"
    s3_backends[DEFAULT_ACCOUNT_ID]["aws"].put_object(BUCKET, broken, b"# broken")
    pipeline.arrive([*bodies, notification(broken, 8, "FFFFFFFF")])
    pipeline.dispatch_all()
    queued = pipeline.on("bulk")
    assert len(queued) == len(bodies) + 1
    assert {m["Attributes"]["MessageGroupId"] for m in queued} == {DROPPER.agent}
    assert pipeline.on("express") == []

    # Too little time for any record: every one goes back to the bulk queue, grouped.
    short = BudgetContext(budget_ms=10_000)  # less than the 30 s kept free
    assert pipeline.index("bulk", short) == {"batchItemFailures": []}
    again = pipeline.on("bulk")
    assert len(again) == len(queued)
    assert {m["Attributes"]["MessageGroupId"] for m in again} == {DROPPER.agent}
    assert pipeline.store.stored_documents(DROPPER) == {}

    # A record that fails comes back on the bulk queue (retry delay 0 here), still grouped.
    pipeline.indexer.container.indexer = EventIndexer(
        FailingStore(), S3DocumentSource(BUCKET, client=pipeline.s3)
    )

    def key(message: dict[str, Any]) -> str:
        return str(json.loads(message["Body"])["Records"][0]["s3"]["object"]["key"])

    (failing,) = [m for m in pipeline.receive("bulk", 100) if key(m) == broken]
    response = pipeline.invoke(pipeline.indexer, "bulk", [failing], LambdaContext())
    assert response == {"batchItemFailures": [{"itemIdentifier": failing["MessageId"]}]}
    (back,) = [m for m in pipeline.receive("bulk", 100) if key(m) == broken]
    assert back["MessageId"] == failing["MessageId"]
    count = int(failing["Attributes"]["ApproximateReceiveCount"])
    assert back["Attributes"]["ApproximateReceiveCount"] == str(count + 1)
    assert back["Attributes"]["MessageGroupId"] == DROPPER.agent
    assert pipeline.on("express") == []
    assert pipeline.on("intake") == []


def test_a_scope_reindex_runs_in_the_bulk_lane_under_its_agents_group(pipeline):
    """POST .../reindex queues one message on the intake (the search function's
    ``ReindexQueue``); the dispatcher sends it to the bulk lane, where the indexer expands
    it into per-key messages and indexes them, all under the agent's group; the express
    lane never sees any of it."""
    bodies = drop(5)
    ReindexQueue(pipeline.urls["intake"], BUCKET, client=pipeline.sqs).request_scope(DROPPER)
    pipeline.dispatch_all()
    seen: list[dict[str, Any]] = []
    while True:
        on_bulk = pipeline.on("bulk")
        if not on_bulk:
            break
        seen += on_bulk
        assert pipeline.index("bulk") == {"batchItemFailures": []}
    kinds = sorted(json.loads(m["Body"])["type"] for m in seen)
    assert kinds == ["knowledge.reindex"] * len(bodies) + ["knowledge.reindex_scope"]
    assert {m["Attributes"]["MessageGroupId"] for m in seen} == {DROPPER.agent}
    assert len(pipeline.store.stored_documents(DROPPER)) == len(bodies)
    assert pipeline.on("express") == []
