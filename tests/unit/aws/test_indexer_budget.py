"""The indexer's time budget, retry backoff and document size cap (issue 8, item 6).

moto's S3 and SQS with the indexer handler. The Lambda context's remaining time is driven
by a clock that the test's S3 client advances on every document it reads (a slow read), so
"running out of time" is deterministic; the visibility of failed records is observed on
moto's queue with real (short) waits.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from lambda_support import (
    BUCKET,
    BudgetContext,
    Clock,
    LambdaContext,
    create_bucket_and_queue,
    emitted_metrics,
    load_handler,
    s3_notification,
    sqs_messages_as_event,
    use_fake_aws,
)
from moto import mock_aws

from knowledge.aws.event_indexing import EventIndexer
from knowledge.aws.settings import LambdaSettings
from knowledge.core.errors import StoreError
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SIDECAR_SUFFIX
from knowledge.embedding.pool import embedding_deadline
from knowledge.ingest.sources.s3 import S3DocumentSource
from knowledge.stores.memory import MemoryKnowledgeStore

RUNBOOKS = KnowledgeScope("ops-bot", "runbooks")


class SlowReadS3:
    """An S3 client whose read of a document (``get_object``; not of a metadata sidecar)
    takes ``ms`` of the invocation's time. Heads are free: the indexer heads an object
    before and after it indexes it."""

    def __init__(self, client: Any, clock: Clock, ms: int) -> None:
        self._client = client
        self._clock = clock
        self._ms = ms

    def get_object(self, **kwargs: Any) -> Any:
        if not str(kwargs.get("Key", "")).endswith(SIDECAR_SUFFIX):
            self._clock.elapsed_ms += self._ms
        return self._client.get_object(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class FailingStore(MemoryKnowledgeStore):
    """Fails every write of ``broken.md``, as an unavailable index would."""

    def stored_document(self, scope: KnowledgeScope, path: str) -> Any:
        if path == "broken.md":  # the pipeline's first read of a write
            raise StoreError("the index is unavailable")
        return super().stored_document(scope, path)


@dataclass
class Harness:
    module: Any
    store: MemoryKnowledgeStore
    s3: Any
    sqs: Any
    queue_url: str
    queue_arn: str
    clock: Clock

    def send(self, *names: str) -> None:
        for i, name in enumerate(names):
            key = f"ops-bot/runbooks/{name}"
            self.s3.put_object(Bucket=BUCKET, Key=key, Body=f"# {name}\n\ntext".encode())
            body = s3_notification("ObjectCreated:Put", key, f"{i:04d}")
            self.sqs.send_message(QueueUrl=self.queue_url, MessageBody=json.dumps(body))

    def receive(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self.sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]
        ).get("Messages", [])
        return messages

    def invoke(self, messages: list[dict[str, Any]], context: Any = None) -> dict[str, Any]:
        self.clock.elapsed_ms = 0
        event = sqs_messages_as_event(messages, self.queue_arn)
        response: dict[str, Any] = self.module.lambda_handler(
            event, context or BudgetContext(clock=self.clock)
        )
        failed = {item["itemIdentifier"] for item in response["batchItemFailures"]}
        for message in messages:
            if message["MessageId"] not in failed:
                self.sqs.delete_message(
                    QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )
        return response

    def paths(self) -> list[str]:
        return sorted(self.store.stored_documents(RUNBOOKS))


def make_harness(
    monkeypatch: pytest.MonkeyPatch,
    store: MemoryKnowledgeStore,
    *,
    read_ms: int = 0,
    **env: str,
) -> Harness:
    sqs = boto3.client("sqs")
    s3 = boto3.client("s3")
    # As in template.yaml: a long visibility timeout (six times the function timeout).
    queue_url, queue_arn = create_bucket_and_queue(s3, sqs, VisibilityTimeout="1800")
    monkeypatch.setenv("DOCUMENTS_BUCKET", BUCKET)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    module = load_handler("indexer", monkeypatch)
    settings = LambdaSettings.from_env()
    module.container.settings = settings
    clock = Clock()
    module.container.indexer = EventIndexer(
        store,
        S3DocumentSource(BUCKET, client=SlowReadS3(s3, clock, read_ms)),
        settings.index_options,
    )
    return Harness(module, store, s3, sqs, queue_url, queue_arn, clock)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    use_fake_aws(monkeypatch)
    with mock_aws():
        yield


def test_an_indexer_short_of_time_hands_back_the_records_it_cannot_finish(aws, monkeypatch, capsys):
    # Each record takes 40 s of a 300 s invocation; 60 s are kept free. Before record n
    # the remaining time is 300 - 40 (n - 1) s, and a record is started only if 40 s
    # more still leave 60 s: records 1-6 are (the 6th leaves exactly 60 s), 7-10 not.
    harness = make_harness(
        monkeypatch, MemoryKnowledgeStore(), read_ms=40_000, TIME_RESERVE_SECONDS="60"
    )
    names = [f"doc-{i:02d}.md" for i in range(1, 11)]
    harness.send(*names)
    messages = harness.receive()
    assert len(messages) == 10
    response = harness.invoke(messages)

    # Records 7-10 were not started: sent again as new messages (count 1), not failures.
    assert response == {"batchItemFailures": []}
    assert harness.paths() == names[:6]
    again = harness.receive()
    keys = sorted(json.loads(m["Body"])["Records"][0]["s3"]["object"]["key"] for m in again)
    assert keys == [f"ops-bot/runbooks/{name}" for name in names[6:]]
    assert not {m["MessageId"] for m in again} & {m["MessageId"] for m in messages}
    assert all(m["Attributes"]["ApproximateReceiveCount"] == "1" for m in again)
    assert emitted_metrics(capsys.readouterr().out)["DocumentsIndexed"] == 6

    # The next invocation (a fresh budget) indexes them.
    assert harness.invoke(again) == {"batchItemFailures": []}
    assert harness.paths() == names


def test_a_failed_record_comes_back_after_a_backoff_not_the_visibility_timeout(aws, monkeypatch):
    # a backoff of 2-3 s (3 s, jittered down to half at the least, whole seconds): the
    # look right after the invocation only has to come within 2 s, however loaded the
    # machine; the record is then waited for (long poll), not slept for
    harness = make_harness(
        monkeypatch, FailingStore(), RETRY_BASE_SECONDS="3", RETRY_MAX_SECONDS="3"
    )
    harness.send("broken.md", "fine.md")
    first = harness.receive()
    response = harness.invoke(first)
    assert len(response["batchItemFailures"]) == 1
    assert harness.paths() == ["fine.md"]
    assert harness.receive() == [], "not straight back: it waits for its backoff"
    # back within the 20 s of one long poll, far below the queue's 1,800 s visibility timeout
    (again,) = harness.sqs.receive_message(
        QueueUrl=harness.queue_url, AttributeNames=["All"], WaitTimeSeconds=20
    )["Messages"]
    assert json.loads(again["Body"])["Records"][0]["s3"]["object"]["key"].endswith("broken.md")
    assert again["Attributes"]["ApproximateReceiveCount"] == "2"


@pytest.mark.parametrize(
    ("receive_count", "rand", "expected"),
    [
        (1, 1.0, 60),  # base
        (1, 0.0, 30),  # half of it at the least (jitter)
        (2, 1.0, 120),
        (3, 1.0, 240),
        (4, 1.0, 480),
        (5, 1.0, 900),  # capped
        (40, 0.5, 675),
        (0, 1.0, 60),  # a missing count counts as the first delivery
    ],
)
def test_retry_backoff_is_exponential_in_the_receive_count(receive_count, rand, expected):
    from knowledge.aws.sqs_batch import RetryBackoff

    assert RetryBackoff(60, 900).delay(receive_count, rand=lambda: rand) == expected


def test_max_document_mib_skips_larger_documents(aws, monkeypatch, capsys):
    harness = make_harness(monkeypatch, MemoryKnowledgeStore(), MAX_DOCUMENT_MIB="1")
    big = "# Big\n\n" + ("lorem ipsum dolor sit amet " * 60_000)  # ~1.6 MiB of text
    harness.s3.put_object(Bucket=BUCKET, Key="ops-bot/runbooks/big.md", Body=big.encode())
    harness.s3.put_object(Bucket=BUCKET, Key="ops-bot/runbooks/small.md", Body=b"# Small\n\nok")
    for i, name in enumerate(("big.md", "small.md")):
        body = s3_notification("ObjectCreated:Put", f"ops-bot/runbooks/{name}", f"{i:04d}")
        harness.sqs.send_message(QueueUrl=harness.queue_url, MessageBody=json.dumps(body))
    response = harness.invoke(harness.receive(), LambdaContext())
    assert response == {"batchItemFailures": []}, "too large is a skip, not a retry"
    assert harness.paths() == ["small.md"]
    out = capsys.readouterr().out
    assert "over max_document_bytes (1048576)" in out
    assert emitted_metrics(out)["DocumentsSkipped"] == 1


class DeadlineRecordingStore(MemoryKnowledgeStore):
    """Remembers the embedding deadline each document was indexed under: what the
    embedding pool reads to start no call past it."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds_left: list[float | None] = []

    def stored_document(self, scope: KnowledgeScope, path: str) -> Any:
        # The pipeline's first read of an upsert: under the record's deadline.
        deadline = embedding_deadline()
        self.seconds_left.append(None if deadline is None else deadline.remaining())
        return super().stored_document(scope, path)


def test_a_record_runs_under_the_invocation_deadline_less_the_reserve(aws, monkeypatch):
    store = DeadlineRecordingStore()
    harness = make_harness(monkeypatch, store, read_ms=10_000, TIME_RESERVE_SECONDS="60")
    harness.send("a.md", "b.md")
    assert harness.invoke(harness.receive()) == {"batchItemFailures": []}
    # 300 s left less 60 kept free: 240 s for the first record, 230 for the second
    # (its predecessor took 10 s of the invocation's clock)
    first, second = store.seconds_left
    assert first is not None
    assert second is not None
    assert 235 < first <= 240
    assert 225 < second <= 230


def test_records_handed_back_unstarted_never_reach_the_dead_letter_queue(aws, monkeypatch):
    """A record handed back because the invocation ran out of time was never tried: it goes
    back as a new message, so waiting behind slow records never counts towards the queue's
    maxReceiveCount (else a busy queue would park records in the dead-letter queue unread)."""
    # Each record takes 200 s of a 300 s invocation with 60 s kept free: one per invocation.
    harness = make_harness(
        monkeypatch, MemoryKnowledgeStore(), read_ms=200_000, TIME_RESERVE_SECONDS="60"
    )
    dlq_url = harness.sqs.create_queue(QueueName="document-events-dlq")["QueueUrl"]
    dlq_arn = harness.sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    policy = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "2"}
    harness.sqs.set_queue_attributes(
        QueueUrl=harness.queue_url, Attributes={"RedrivePolicy": json.dumps(policy)}
    )
    names = [f"doc-{i}.md" for i in range(1, 6)]
    harness.send(*names)
    for _ in range(3 * len(names)):  # one record per invocation; a bound, not a timing
        messages = harness.receive()
        if not messages:
            break
        harness.invoke(messages)
    assert harness.paths() == names
    assert (
        harness.sqs.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=10).get("Messages", [])
        == []
    )
