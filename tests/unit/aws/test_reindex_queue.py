"""knowledge.aws.reindex_queue (ReindexQueue, ScopeReindexer) against moto's S3 and SQS.

The paging of a large scope through the handlers, with the time budget, is in
test_reindex_paging.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from knowledge.aws.events import (
    REINDEX_EVENT_NAME,
    ActionKind,
    ReindexPhase,
    ReindexTask,
    parse_sqs_message,
)
from knowledge.aws.invocation_time import TimeBudget
from knowledge.aws.reindex_queue import ReindexQueue, ScopeReindexer
from knowledge.core.errors import StoreUnavailableError
from knowledge.core.model import IndexOptions
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.ingest.pipeline import upsert_document
from knowledge.ingest.sources.s3 import S3DocumentSource
from knowledge.stores.memory import MemoryKnowledgeStore

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


def index_paths(store: MemoryKnowledgeStore, *paths: str) -> None:
    for path in paths:
        data = f"# {path}".encode()
        upsert_document(
            store, SCOPE, SourceDocument(path=path, size=len(data), read=lambda d=data: d)
        )


def expand(queue_url: str, s3: Any, sqs: Any, store: Any, **options: Any) -> Any:
    reindexer = ScopeReindexer(
        queue_url,
        S3DocumentSource(BUCKET, client=s3),
        options=IndexOptions(**options) if options else None,
        client=sqs,
    )
    return reindexer.expand(ReindexTask(BUCKET, SCOPE), store, TimeBudget.unlimited())


def test_request_scope_queues_one_scope_message(aws):
    _, sqs, queue_url = aws
    request = ReindexQueue(queue_url, BUCKET, client=sqs).request_scope(SCOPE)
    assert request.to_dict() == {"agent": "ops-bot", "context": "runbooks", "status": "accepted"}
    (body,) = drain(sqs, queue_url)
    (action,) = parse_sqs_message(body, bucket=BUCKET)
    assert action.kind is ActionKind.REINDEX_SCOPE
    assert action.task == ReindexTask(BUCKET, SCOPE, ReindexPhase.OBJECTS, None)
    assert parse_sqs_message(body, bucket="another-bucket")[0].kind is ActionKind.REJECT


def test_expand_queues_each_matching_key_and_each_document_gone_from_the_bucket(aws):
    s3, sqs, queue_url = aws
    for key in (
        "ops-bot/runbooks/deploy.md",
        "ops-bot/runbooks/장애 대응/배포.md",
        "ops-bot/runbooks/notes.txt",
        "ops-bot/runbooks/image.png",  # not a document under the default patterns
        "ops-bot/runbooks/deploy.md.metadata.json",  # read with its document
        "ops-bot/runbooks/.hidden.md",
        "ops-bot/manuals/other.md",  # another scope
    ):
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"x")
    store = MemoryKnowledgeStore()
    index_paths(store, "deploy.md", "retired.md", "zz-last.md")
    report = expand(queue_url, s3, sqs, store)
    assert (report.documents, report.removals, report.continued) == (3, 2, None)
    actions = [
        action
        for body in drain(sqs, queue_url)
        for action in parse_sqs_message(body, bucket=BUCKET)
    ]
    assert sorted(a.path for a in actions) == [
        "deploy.md",
        "notes.txt",
        "retired.md",
        "zz-last.md",
        "장애 대응/배포.md",
    ]
    assert all(a.kind is ActionKind.UPSERT and a.event_name == REINDEX_EVENT_NAME for a in actions)
    assert all(a.scope == SCOPE and a.version is None for a in actions)


def test_more_than_ten_keys_go_in_several_batches_and_max_documents_does_not_cut(aws):
    s3, sqs, queue_url = aws
    for i in range(25):
        s3.put_object(Bucket=BUCKET, Key=f"ops-bot/runbooks/doc-{i:02d}.md", Body=b"x")
    calls: list[int] = []

    class CountingSqs:
        def send_message_batch(self, **kwargs: Any) -> Any:
            calls.append(len(kwargs["Entries"]))
            return sqs.send_message_batch(**kwargs)

    report = expand(queue_url, s3, CountingSqs(), MemoryKnowledgeStore(), max_documents=21)
    assert report.documents == 25
    assert calls == [10, 10, 5]
    queued = sorted(a.path for b in drain(sqs, queue_url) for a in parse_sqs_message(b))
    assert queued == [f"doc-{i:02d}.md" for i in range(25)]


def test_an_empty_scope_queues_nothing(aws):
    s3, sqs, queue_url = aws
    report = expand(queue_url, s3, sqs, MemoryKnowledgeStore())
    assert (report.documents, report.removals) == (0, 0)
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
    assert expand(queue_url, s3, sqs, MemoryKnowledgeStore()).documents == 3
    assert sqs.calls == [["0", "1", "2"], ["0"]]


def test_entries_refused_twice_are_an_error_so_the_step_is_retried(aws):
    s3, _, queue_url = aws
    s3.put_object(Bucket=BUCKET, Key="ops-bot/runbooks/a.md", Body=b"x")
    with pytest.raises(StoreUnavailableError, match=r"ThrottlingException"):
        expand(queue_url, s3, RefusingSqs(2), MemoryKnowledgeStore())
    with pytest.raises(StoreUnavailableError, match=r"ThrottlingException"):
        ReindexQueue(queue_url, BUCKET, client=RefusingSqs(2)).request_scope(SCOPE)


def test_a_step_moves_at_least_one_page_even_without_time(aws):
    """With no time left a step still lists one page before it hands over, so a reindex
    always ends instead of queueing continuations that do nothing."""
    s3, sqs, queue_url = aws
    for i in range(5):
        s3.put_object(Bucket=BUCKET, Key=f"ops-bot/runbooks/doc-{i}.md", Body=b"x")
    source = S3DocumentSource(BUCKET, client=s3)
    reindexer = ScopeReindexer(queue_url, source, client=sqs, list_page_size=2)
    no_time = TimeBudget(lambda: 0, reserve_ms=30_000)
    task = ReindexTask(BUCKET, SCOPE)
    keys: list[str] = []
    for _ in range(10):
        report = reindexer.expand(task, MemoryKnowledgeStore(), no_time)
        bodies = drain(sqs, queue_url)
        keys += [json.loads(b)["key"] for b in bodies if '"knowledge.reindex"' in b]
        if report.continued is None:
            break
        task = report.continued
    assert report.continued is None
    assert sorted(keys) == [f"ops-bot/runbooks/doc-{i}.md" for i in range(5)]


def test_keys_no_pattern_selects_are_counted_across_steps_into_the_status(aws):
    """A paged reindex counts the keys it does not queue by extension, carries the counts
    in its continuation messages, and writes them to the status when the listing ends:
    a count per extension, never silence and never one problem per image."""
    s3, sqs, queue_url = aws
    keys = [
        *(f"ops-bot/runbooks/img/shot-{i}.png" for i in range(5)),
        "ops-bot/runbooks/bin/tool.exe",
        "ops-bot/runbooks/bin/run",
        "ops-bot/runbooks/deploy.md",
        "ops-bot/runbooks/deploy.md.metadata.json",  # read with its document, not counted
        "ops-bot/runbooks/.git/config",  # hidden: never read, not counted
    ]
    for key in keys:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"x")
    store = MemoryKnowledgeStore()
    index_paths(store, "deploy.md")
    reindexer = ScopeReindexer(
        queue_url, S3DocumentSource(BUCKET, client=s3), client=sqs, list_page_size=2
    )
    no_time = TimeBudget(lambda: 0, reserve_ms=30_000)
    task = ReindexTask(BUCKET, SCOPE)
    carried: list[dict[str, int] | None] = []
    for _ in range(20):
        report = reindexer.expand(task, store, no_time)
        drain(sqs, queue_url)
        if report.continued is None:
            break
        # The continuation goes through the queue as a message body and back.
        (action,) = parse_sqs_message(report.continued.to_body(), bucket=BUCKET)
        assert action.task == report.continued
        task = report.continued
        carried.append(None if task.unread is None else dict(task.unread))
    assert report.continued is None
    assert any(counts for counts in carried)  # carried from step to step
    assert dict(store.status(SCOPE).unread_files) == {".png": 5, ".exe": 1, "(none)": 1}


@pytest.mark.parametrize("unread", [[".png"], {".png": "5"}, {".png": -1}, {".png": True}])
def test_a_reindex_step_with_bad_unread_counts_is_rejected(unread: object) -> None:
    body = json.loads(ReindexTask(BUCKET, SCOPE).to_body())
    body["unread"] = unread
    (action,) = parse_sqs_message(json.dumps(body), bucket=BUCKET)
    assert (action.kind, action.field) == (ActionKind.REJECT, "unread")


def test_every_message_of_a_scope_reindex_carries_its_agent_as_message_group(aws):
    """Keys, removals and continuation steps alike: on the bulk queue (a fair queue) the
    whole reindex is one tenant, whose backlog does not delay the other agents'."""
    s3, sqs, queue_url = aws
    for i in range(3):
        s3.put_object(Bucket=BUCKET, Key=f"ops-bot/runbooks/doc-{i}.md", Body=b"x")
    store = MemoryKnowledgeStore()
    index_paths(store, "gone.md")
    reindexer = ScopeReindexer(
        queue_url, S3DocumentSource(BUCKET, client=s3), client=sqs, list_page_size=2
    )
    no_time = TimeBudget(lambda: 0, reserve_ms=30_000)
    task: ReindexTask | None = ReindexTask(BUCKET, SCOPE)
    groups: dict[str, set[str]] = {}
    while task is not None:
        task = reindexer.expand(task, store, no_time).continued
        while messages := sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]
        ).get("Messages", []):
            for message in messages:
                kind = json.loads(message["Body"])["type"]
                groups.setdefault(kind, set()).add(message["Attributes"]["MessageGroupId"])
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    assert groups == {"knowledge.reindex": {"ops-bot"}, "knowledge.reindex_scope": {"ops-bot"}}


def test_the_indexer_queues_reindex_messages_on_the_bulk_queue_when_it_has_one() -> None:
    from knowledge.aws.settings import LambdaSettings

    intake = "https://sqs.us-east-1.amazonaws.com/123456789012/intake"
    bulk = "https://sqs.us-east-1.amazonaws.com/123456789012/bulk"
    both = LambdaSettings.from_env({"INDEX_QUEUE_URL": intake, "BULK_QUEUE_URL": bulk})
    assert both.reindex_queue_url == bulk
    assert LambdaSettings.from_env({"INDEX_QUEUE_URL": intake}).reindex_queue_url == intake
    assert LambdaSettings.from_env({}).reindex_queue_url is None
