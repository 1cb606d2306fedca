"""knowledge.reindex_queue.ReindexQueue against moto's S3 and SQS."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from knowledge.errors import StoreUnavailableError
from knowledge.events import REINDEX_EVENT_NAME, ActionKind, parse_sqs_message
from knowledge.model import IndexOptions
from knowledge.reindex_queue import ReindexQueue
from knowledge.scope import KnowledgeScope
from knowledge.sources.s3 import S3DocumentSource

BUCKET = "kb-test-documents"
SCOPE = KnowledgeScope("ops-bot", "runbooks")


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any, str]]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        queue_url = sqs.create_queue(QueueName="document-events")["QueueUrl"]
        yield s3, sqs, queue_url


def drain(sqs: Any, queue_url: str) -> list[str]:
    bodies: list[str] = []
    while True:
        response = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)
        messages = response.get("Messages", [])
        if not messages:
            return bodies
        for message in messages:
            bodies.append(message["Body"])
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])


def test_queues_one_message_per_matching_key_and_per_stale_document(aws):
    s3, sqs, queue_url = aws
    for key in (
        "ops-bot/runbooks/deploy.md",
        "ops-bot/runbooks/장애 대응/배포.md",
        "ops-bot/runbooks/notes.txt",
        "ops-bot/runbooks/image.png",  # not a document under the default patterns
        "ops-bot/runbooks/deploy.md.metadata.json",  # read with its document
        "ops-bot/manuals/other.md",  # another scope
    ):
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"x")
    source = S3DocumentSource(BUCKET, client=s3)
    queue = ReindexQueue(queue_url, source, client=sqs)
    request = queue.enqueue_scope(SCOPE, indexed_paths=["deploy.md", "retired.md"])
    assert (request.documents, request.removals, request.skipped) == (3, 1, 0)
    assert request.to_dict() == {
        "agent": "ops-bot",
        "context": "runbooks",
        "status": "queued",
        "queued": 4,
        "documents": 3,
        "removals": 1,
        "skipped_documents": 0,
    }
    actions = [
        action
        for body in drain(sqs, queue_url)
        for action in parse_sqs_message(body, bucket=BUCKET)
    ]
    assert sorted(a.path for a in actions) == [
        "deploy.md",
        "notes.txt",
        "retired.md",
        "장애 대응/배포.md",
    ]
    assert all(a.kind is ActionKind.UPSERT and a.event_name == REINDEX_EVENT_NAME for a in actions)
    assert all(a.scope == SCOPE and a.version is None for a in actions)


def test_more_than_ten_keys_go_in_several_batches_and_the_limit_is_reported(aws):
    s3, sqs, queue_url = aws
    for i in range(25):
        s3.put_object(Bucket=BUCKET, Key=f"ops-bot/runbooks/doc-{i:02d}.md", Body=b"x")
    calls: list[int] = []

    class CountingSqs:
        def send_message_batch(self, **kwargs: Any) -> Any:
            calls.append(len(kwargs["Entries"]))
            return sqs.send_message_batch(**kwargs)

    queue = ReindexQueue(
        queue_url,
        S3DocumentSource(BUCKET, client=s3),
        options=IndexOptions(max_documents=21),
        client=CountingSqs(),
    )
    request = queue.enqueue_scope(SCOPE)
    assert (request.documents, request.skipped) == (21, 4)
    assert calls == [10, 10, 1]
    queued = sorted(a.path for b in drain(sqs, queue_url) for a in parse_sqs_message(b))
    assert queued == [f"doc-{i:02d}.md" for i in range(21)]


def test_an_empty_scope_queues_nothing(aws):
    s3, sqs, queue_url = aws
    request = ReindexQueue(
        queue_url, S3DocumentSource(BUCKET, client=s3), client=sqs
    ).enqueue_scope(SCOPE)
    assert request.queued == 0
    assert drain(sqs, queue_url) == []


class RefusingSqs:
    def __init__(self, refuse_times: int) -> None:
        self.refuse_times = refuse_times
        self.calls: list[list[str]] = []

    def send_message_batch(self, **kwargs: Any) -> Any:
        ids = [entry["Id"] for entry in kwargs["Entries"]]
        self.calls.append(ids)
        if len(self.calls) <= self.refuse_times:
            return {
                "Successful": [{"Id": i} for i in ids[1:]],
                "Failed": [{"Id": ids[0], "Code": "ThrottlingException", "SenderFault": False}],
            }
        return {"Successful": [{"Id": i} for i in ids], "Failed": []}


def test_refused_entries_are_sent_once_more(aws):
    s3, _, queue_url = aws
    for i in range(3):
        s3.put_object(Bucket=BUCKET, Key=f"ops-bot/runbooks/{i}.md", Body=b"x")
    sqs = RefusingSqs(refuse_times=1)
    request = ReindexQueue(
        queue_url, S3DocumentSource(BUCKET, client=s3), client=sqs
    ).enqueue_scope(SCOPE)
    assert request.queued == 3
    assert sqs.calls == [["0", "1", "2"], ["0"]]


def test_entries_refused_twice_are_an_error_that_says_to_call_again(aws):
    s3, _, queue_url = aws
    s3.put_object(Bucket=BUCKET, Key="ops-bot/runbooks/a.md", Body=b"x")
    queue = ReindexQueue(queue_url, S3DocumentSource(BUCKET, client=s3), client=RefusingSqs(2))
    with pytest.raises(StoreUnavailableError, match=r"ThrottlingException.*call reindex again"):
        queue.enqueue_scope(SCOPE)
