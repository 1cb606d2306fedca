"""functions/dispatcher/app.py against moto's SQS: the intake's records forwarded unchanged
to the express or the bulk work queue, and a record that could not be forwarded reported
as a batch item failure (then, after ``maxReceiveCount`` deliveries, in the intake's
dead-letter queue), never dropped.

The function builds its dispatcher from the environment ``template.yaml`` gives it
(``EXPRESS_QUEUE_URL``, ``BULK_QUEUE_URL``, the thresholds), as in AWS.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import boto3
import pytest
from lambda_support import (
    BUCKET,
    REPO_ROOT,
    LambdaContext,
    emitted_metrics,
    load_event,
    load_handler,
    log_records,
    s3_notification,
    sqs_event,
    sqs_messages_as_event,
    use_fake_aws,
)
from moto import mock_aws

from knowledge.aws.events import ReindexTask
from knowledge.core.scope import KnowledgeScope


@dataclass
class Queues:
    sqs: Any
    intake: str
    intake_arn: str
    intake_dlq: str
    express: str
    bulk: str

    def drain(self, url: str) -> list[dict[str, Any]]:
        """Every message on ``url`` (received and deleted), in the order received."""
        messages: list[dict[str, Any]] = []
        while True:
            got = self.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]
            ).get("Messages", [])
            if not got:
                return messages
            messages += got
            self.sqs.delete_message_batch(
                QueueUrl=url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)
                ],
            )


def group(message: dict[str, Any]) -> str | None:
    group_id: str | None = message.get("Attributes", {}).get("MessageGroupId")
    return group_id


@pytest.fixture
def queues(monkeypatch: pytest.MonkeyPatch) -> Iterator[Queues]:
    use_fake_aws(monkeypatch)
    with mock_aws():
        sqs = boto3.client("sqs")

        def create(name: str, **attributes: str) -> str:
            url: str = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
            return url

        def arn(url: str) -> str:
            value: str = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
                "Attributes"
            ]["QueueArn"]
            return value

        dlq = create("document-events-dlq")
        # As template.yaml, with a visibility of 0 so that a failed record is received
        # again at once here (deployed: after the intake's 180 s).
        redrive = json.dumps({"deadLetterTargetArn": arn(dlq), "maxReceiveCount": "2"})
        intake = create("document-events", VisibilityTimeout="0", RedrivePolicy=redrive)
        express, bulk = create("document-express"), create("document-bulk")
        monkeypatch.setenv("EXPRESS_QUEUE_URL", express)
        monkeypatch.setenv("BULK_QUEUE_URL", bulk)
        yield Queues(sqs, intake, arn(intake), dlq, express, bulk)


def put(key: str, size: int = 120) -> dict[str, Any]:
    body = s3_notification("ObjectCreated:Put", key, "0001")
    body["Records"][0]["s3"]["object"]["size"] = size
    return body


def invoke(module: ModuleType, event: dict[str, Any]) -> dict[str, Any]:
    response: dict[str, Any] = module.lambda_handler(event, LambdaContext())
    return response


def test_each_record_is_forwarded_unchanged_to_its_lane(queues, monkeypatch, capsys):
    dispatcher = load_handler("dispatcher", monkeypatch)
    busy = [put(f"drop-bot/archive/doc-{i:02d}.md") for i in range(12)]
    quiet = put("support-bot/faq/refunds.md")
    (test_event,) = load_event("sqs_s3_test_event.json")["Records"]
    event = sqs_event(*busy[:6], quiet, *busy[6:], test_event["body"])

    assert invoke(dispatcher, event) == {"batchItemFailures": []}

    express = queues.drain(queues.express)
    bulk = queues.drain(queues.bulk)
    assert [m["Body"] for m in express] == [json.dumps(quiet), test_event["body"]]
    assert [group(m) for m in express] == ["support-bot", None]
    assert [m["Body"] for m in bulk] == [json.dumps(b) for b in busy], "unchanged, in order"
    assert {group(m) for m in bulk} == {"drop-bot"}
    out = capsys.readouterr().out
    metrics = emitted_metrics(out)
    assert (metrics["ForwardedExpress"], metrics["ForwardedBulk"]) == (2, 12)
    assert metrics["ForwardFailures"] == 0
    (line,) = [r for r in log_records(out) if r["message"] == "intake batch dispatched"]
    assert line["bulk_agents"] == {"drop-bot": 12}
    assert line["express_agents"] == {"support-bot": 1}
    assert line["reasons"] == {
        "many events of the agent": 12,
        "few events of the agent": 1,
        "not an S3 notification": 1,
    }


def test_message_attributes_are_forwarded_with_the_body(queues, monkeypatch):
    dispatcher = load_handler("dispatcher", monkeypatch)
    event = sqs_event(put("support-bot/faq/refunds.md"))
    event["Records"][0]["messageAttributes"] = {
        "origin": {"stringValue": "upload", "dataType": "String"}
    }
    assert invoke(dispatcher, event) == {"batchItemFailures": []}
    (message,) = queues.sqs.receive_message(QueueUrl=queues.express, MessageAttributeNames=["All"])[
        "Messages"
    ]
    assert message["MessageAttributes"] == {
        "origin": {"StringValue": "upload", "DataType": "String"}
    }


def test_a_record_that_could_not_be_forwarded_is_a_batch_item_failure(queues, monkeypatch, capsys):
    dispatcher = load_handler("dispatcher", monkeypatch)
    reindex = ReindexTask(BUCKET, KnowledgeScope("drop-bot", "archive")).to_body()
    event = sqs_event(put("support-bot/faq/refunds.md"), reindex)
    queues.sqs.delete_queue(QueueUrl=queues.bulk)  # every send to it fails

    response = invoke(dispatcher, event)

    reindex_id = event["Records"][1]["messageId"]
    assert response == {"batchItemFailures": [{"itemIdentifier": reindex_id}]}
    (forwarded,) = queues.drain(queues.express)
    assert json.loads(forwarded["Body"])["Records"][0]["s3"]["object"]["key"].endswith("refunds.md")
    out = capsys.readouterr().out
    assert emitted_metrics(out)["ForwardFailures"] == 1
    warnings = [r for r in log_records(out) if r["level"] == "WARNING"]
    assert any("cannot forward records" in r["message"] for r in warnings)


def test_an_entry_the_queue_refuses_fails_alone_not_its_whole_batch(queues, monkeypatch):
    """SQS refuses a SendMessageBatch whole for one entry it cannot take (here a body
    over the work queue's size limit): the batch is sent again one entry at a time, so
    only that record comes back."""
    dispatcher = load_handler("dispatcher", monkeypatch)
    queues.sqs.delete_queue(QueueUrl=queues.express)
    queues.express = queues.sqs.create_queue(
        QueueName="document-express", Attributes={"MaximumMessageSize": "1024"}
    )["QueueUrl"]
    long = put("b/faq/long.md")
    long["Records"][0]["s3"]["object"]["eTag"] = "x" * 2000
    event = sqs_event(put("a/faq/1.md"), long, put("c/faq/3.md"))
    response = invoke(dispatcher, event)
    assert response == {"batchItemFailures": [{"itemIdentifier": event["Records"][1]["messageId"]}]}
    forwarded = [json.loads(m["Body"]) for m in queues.drain(queues.express)]
    assert [b["Records"][0]["s3"]["object"]["key"] for b in forwarded] == [
        "a/faq/1.md",
        "c/faq/3.md",
    ]


class RefusingSqs:
    """moto's SQS, except that the first ``refusals`` sends refuse their first entry as
    SQS does under throttling (moto never refuses single entries)."""

    def __init__(self, sqs: Any, refusals: int) -> None:
        self._sqs = sqs
        self.refusals = refusals
        self.calls: list[list[str]] = []

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> Any:
        self.calls.append([entry["Id"] for entry in Entries])
        if len(self.calls) > self.refusals:
            return self._sqs.send_message_batch(QueueUrl=QueueUrl, Entries=Entries)
        first, rest = Entries[0], Entries[1:]
        response = (
            self._sqs.send_message_batch(QueueUrl=QueueUrl, Entries=rest)
            if rest
            else {"Successful": []}
        )
        failed = {"Id": first["Id"], "Code": "ThrottlingException", "SenderFault": False}
        return {"Successful": response.get("Successful", []), "Failed": [failed]}


@pytest.mark.parametrize(("refusals", "failures"), [(1, 0), (2, 1)])
def test_a_refused_entry_gets_one_more_try_then_is_a_batch_item_failure(
    queues, monkeypatch, refusals, failures
):
    from knowledge.aws.dispatch import Dispatcher, DispatchSettings

    dispatcher = load_handler("dispatcher", monkeypatch)
    client = RefusingSqs(queues.sqs, refusals)
    dispatcher.container.dispatcher = Dispatcher(DispatchSettings.from_env(), client=client)
    event = sqs_event(put("a/faq/1.md"), put("b/faq/2.md"))
    response = invoke(dispatcher, event)
    assert client.calls[:2] == [["0", "1"], ["0"]]
    expected = [{"itemIdentifier": event["Records"][0]["messageId"]}][:failures]
    assert response == {"batchItemFailures": expected}
    assert len(queues.drain(queues.express)) == 2 - failures


def test_a_record_failing_every_delivery_ends_in_the_intakes_dead_letter_queue(queues, monkeypatch):
    """What the event source mapping does: receive, invoke, delete what was forwarded; a
    failed record is received again, and after maxReceiveCount (2) SQS moves it."""
    dispatcher = load_handler("dispatcher", monkeypatch)
    reindex = ReindexTask(BUCKET, KnowledgeScope("drop-bot", "archive")).to_body()
    quiet = json.dumps(put("support-bot/faq/refunds.md"))
    for body in (quiet, reindex):
        queues.sqs.send_message(QueueUrl=queues.intake, MessageBody=body)
    queues.sqs.delete_queue(QueueUrl=queues.bulk)

    failures = 0
    for _ in range(5):
        messages = queues.sqs.receive_message(
            QueueUrl=queues.intake, MaxNumberOfMessages=10, AttributeNames=["All"]
        ).get("Messages", [])
        if not messages:
            break
        response = invoke(dispatcher, sqs_messages_as_event(messages, queues.intake_arn))
        failed = {item["itemIdentifier"] for item in response["batchItemFailures"]}
        failures += len(failed)
        for message in messages:
            if message["MessageId"] not in failed:
                queues.sqs.delete_message(
                    QueueUrl=queues.intake, ReceiptHandle=message["ReceiptHandle"]
                )

    assert failures == 2, "the reindex step failed on each of its two deliveries"
    assert [m["Body"] for m in queues.drain(queues.express)] == [quiet]
    (dead,) = queues.drain(queues.intake_dlq)
    assert dead["Body"] == reindex, "kept unchanged for a redrive"


def test_an_agent_pacing_its_events_under_the_threshold_is_sent_bulk(queues, monkeypatch):
    """The container remembers each agent's express events for a window: two events a
    batch, three allowed, so the second batch of the same agent goes bulk."""
    monkeypatch.setenv("EXPRESS_MAX_EVENTS", "3")
    dispatcher = load_handler("dispatcher", monkeypatch)
    for batch in range(3):
        event = sqs_event(*(put(f"pacer/faq/{batch}-{i}.md") for i in range(2)))
        assert invoke(dispatcher, event) == {"batchItemFailures": []}
    assert len(queues.drain(queues.express)) == 2
    assert len(queues.drain(queues.bulk)) == 4


def test_cold_start_loads_no_store_no_embedder_and_no_sdk_before_the_first_forward():
    code = f"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location(
    "app", {str(REPO_ROOT / "functions/dispatcher/app.py")!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
heavy = ("boto3", "botocore.session", "opensearchpy", "openai", "numpy",
         "knowledge.stores.opensearch", "knowledge.stores.memory", "knowledge.embedding.pool",
         "knowledge.embedding.openai", "knowledge.embedding.bedrock", "knowledge.ingest.pipeline",
         "knowledge.extraction", "knowledge.aws.settings", "knowledge.aws.sqs_batch",
         "aws_xray_sdk")
print(sorted(m for m in heavy if m in sys.modules))
"""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"POWERTOOLS_METRICS_NAMESPACE": "Test", "PATH": ""},
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"
