"""Helpers for the Lambda handler tests: load a handler module, sample events, a context
(and one whose remaining time a test's clock drives), the bucket and queue in moto, the
structured logs and EMF metrics Powertools prints, and SQS messages as Lambda sees them."""

from __future__ import annotations

import base64
import contextlib
import copy
import http.server
import importlib.util
import json
import logging
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
EVENTS = REPO_ROOT / "events"
BUCKET = "kb-123456789012-example"  # the bucket the samples in events/ name
REGION = "us-east-1"


@dataclass
class LambdaContext:
    function_name: str = "test-function"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:test-function"
    aws_request_id: str = "52fdfc07-2182-154f-163f-5f0f9a621d72"

    def get_remaining_time_in_millis(self) -> int:
        # A fresh invocation of the indexer (its timeout is 300 s); the search function
        # caps its own budget at the gateway's 29 s whatever this says.
        return 300_000


@dataclass
class Clock:
    """An invocation's clock: a test's slow client advances it, ``BudgetContext`` reads it."""

    elapsed_ms: int = 0


@dataclass
class BudgetContext(LambdaContext):
    """A context whose remaining time is ``budget_ms`` less what the clock says elapsed."""

    clock: Clock = field(default_factory=Clock)
    budget_ms: int = 300_000

    def get_remaining_time_in_millis(self) -> int:
        return self.budget_ms - self.clock.elapsed_ms


def create_bucket_and_queue(s3: Any, sqs: Any, **queue_attributes: str) -> tuple[str, str]:
    """The documents bucket and the ``document-events`` queue (in moto): the queue's URL
    and ARN."""
    s3.create_bucket(Bucket=BUCKET)
    queue_url: str = sqs.create_queue(QueueName="document-events", Attributes=queue_attributes)[
        "QueueUrl"
    ]
    queue_arn: str = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    return queue_url, queue_arn


class _Silent(http.server.BaseHTTPRequestHandler):
    """An AWS endpoint that takes the request and never answers (a hung connection)."""

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_HEAD(self) -> None:
        self.server.release.wait(600)  # type: ignore[attr-defined]

    do_GET = do_POST = do_HEAD


@contextlib.contextmanager
def silent_endpoint() -> Iterator[str]:
    """The URL of a loopback endpoint that hangs every request until the block ends."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Silent)
    server.daemon_threads = True
    server.release = threading.Event()  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.release.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()


def use_fake_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials and region for moto; nothing can reach a real account."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)


class _CurrentStdout:
    """Writes to whatever ``sys.stdout`` is at the time (pytest swaps it between phases)."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


def load_handler(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A fresh copy of ``functions/<name>/app.py`` (its own container state).

    Powertools loggers are per service name and bind their stream when first created,
    so every copy gets a unique service name and logs to the current (captured) stdout.
    """
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", f"{name}-test-{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "KnowledgeSearchTest")
    path = REPO_ROOT / "functions" / name / "app.py"
    spec = importlib.util.spec_from_file_location(f"{name}_app_{uuid.uuid4().hex[:8]}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    handler = module.logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(_CurrentStdout())  # type: ignore[arg-type]
    return module


def load_event(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return event


def api_event(
    method: str,
    raw_path: str,
    body: bytes | dict[str, Any] | None = None,
    *,
    content_type: str = "application/octet-stream",
    query: str = "",
    claims: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An API Gateway (HTTP API) event for ``method raw_path``, shaped like
    ``events/api_document.json``: a dict body goes as JSON, bytes base64-encoded with
    ``content_type``; ``claims``: the JWT authorizer's claims (JWT mode)."""
    event = copy.deepcopy(load_event("api_document.json"))
    event["rawPath"] = raw_path
    event["rawQueryString"] = query
    event["requestContext"]["http"]["method"] = method
    event["routeKey"] = event["requestContext"]["routeKey"] = f"{method} {raw_path}"
    event.pop("pathParameters", None)
    if isinstance(body, dict):
        event["body"], event["isBase64Encoded"] = json.dumps(body), False
        event["headers"]["content-type"] = "application/json"
    elif body is not None:
        event["body"] = base64.b64encode(body).decode("ascii")
        event["isBase64Encoded"] = True
        event["headers"]["content-type"] = content_type
    if claims is not None:
        event["requestContext"]["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
    return event


def sqs_event(*bodies: str | dict[str, Any]) -> dict[str, Any]:
    """An SQS batch event with one record per body, shaped like the samples."""
    template = load_event("sqs_s3_put.json")["Records"][0]
    records = []
    for body in bodies:
        record = copy.deepcopy(template)
        record["messageId"] = str(uuid.uuid4())
        record["body"] = body if isinstance(body, str) else json.dumps(body)
        records.append(record)
    return {"Records": records}


def s3_notification(
    event_name: str, key: str, sequencer: str, bucket: str = BUCKET
) -> dict[str, Any]:
    """An S3 event notification body for ``key`` (pass the key URL-encoded, as S3 does)."""
    record = copy.deepcopy(json.loads(load_event("sqs_s3_put.json")["Records"][0]["body"]))
    entry = record["Records"][0]
    entry["eventName"] = event_name
    entry["s3"]["bucket"]["name"] = bucket
    entry["s3"]["object"]["key"] = key
    entry["s3"]["object"]["sequencer"] = sequencer
    result: dict[str, Any] = record
    return result


def output_lines(captured: str) -> list[dict[str, Any]]:
    lines = []
    for raw in captured.splitlines():
        line = raw.strip()
        if line.startswith("{"):
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return lines


def emitted_metrics(captured: str) -> dict[str, float]:
    """Metric name -> summed value over the EMF blobs Powertools printed."""
    totals: dict[str, float] = {}
    for blob in output_lines(captured):
        if "_aws" not in blob:
            continue
        for directive in blob["_aws"]["CloudWatchMetrics"]:
            for metric in directive["Metrics"]:
                value = blob[metric["Name"]]
                values = value if isinstance(value, list) else [value]
                totals[metric["Name"]] = totals.get(metric["Name"], 0.0) + sum(values)
    return totals


def log_records(captured: str) -> list[dict[str, Any]]:
    """The structured log lines (Powertools Logger JSON) in the captured output."""
    return [line for line in output_lines(captured) if "level" in line and "message" in line]


def sqs_messages_as_event(messages: list[dict[str, Any]], queue_arn: str) -> dict[str, Any]:
    """What Lambda's SQS event source hands the function for received messages."""
    return {
        "Records": [
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": {
                    key: str(value) for key, value in message.get("Attributes", {}).items()
                },
                "messageAttributes": {},
                "md5OfBody": message["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": REGION,
            }
            for message in messages
        ]
    }


def run_queue_through(
    handler: ModuleType,
    sqs: Any,
    queue_url: str,
    queue_arn: str,
    *,
    context: Any = None,
    max_rounds: int = 10_000,
) -> list[dict[str, Any]]:
    """Do what the SQS event source mapping does until the queue is empty: receive up to
    ten messages, invoke ``handler``, delete the acknowledged ones. Returns the responses.
    Failed records are not received again here (their visibility is the handler's)."""
    responses: list[dict[str, Any]] = []
    for _ in range(max_rounds):
        messages = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]
        ).get("Messages", [])
        if not messages:
            return responses
        response = handler.lambda_handler(
            sqs_messages_as_event(messages, queue_arn), context or LambdaContext()
        )
        responses.append(response)
        failed = {item["itemIdentifier"] for item in response["batchItemFailures"]}
        entries = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
            for i, m in enumerate(messages)
            if m["MessageId"] not in failed
        ]
        if entries:
            sqs.delete_message_batch(QueueUrl=queue_url, Entries=entries)
    raise AssertionError(f"the queue was not empty after {max_rounds} rounds")


class RecordingSqs:
    """moto's SQS, except that what is sent to ``recorded_url`` is checked as SQS checks a
    ``SendMessageBatch`` and recorded (``entries``) instead of queued: moto's SQS costs
    time in proportion to the messages a queue holds on every call, so thousands of
    messages on one queue take minutes."""

    def __init__(self, sqs: Any, recorded_url: str) -> None:
        self._sqs = sqs
        self._recorded_url = recorded_url
        self.entries: list[dict[str, Any]] = []

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> Any:
        if QueueUrl != self._recorded_url:
            return self._sqs.send_message_batch(QueueUrl=QueueUrl, Entries=Entries)
        assert 1 <= len(Entries) <= 10
        assert len({entry["Id"] for entry in Entries}) == len(Entries)
        assert sum(len(entry["MessageBody"]) for entry in Entries) <= 256 * 1024
        self.entries += Entries
        return {
            "Successful": [{"Id": e["Id"], "MessageId": str(uuid.uuid4())} for e in Entries],
            "Failed": [],
        }

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sqs, name)
