"""Each scope's indexing under way on AWS (``knowledge.aws.index_progress``), on moto.

The deployed path: S3 notifications on the intake queue, the dispatcher function (which
counts what it forwards per scope in the progress table), the indexer function (which
reports a large document while it writes it and takes each record's events off once
done) and the search function's status route (which reads the table), all three built
from the environment template.yaml gives them, over one real embedded store whose
embedder a test holds half-way through a large document. Then the reporter's pace and the
template's table and grants.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from cfn_template import Stack, allows, as_list, load_template
from gated_embedding import GatedEmbedder, large_text
from lambda_support import (
    BUCKET,
    LambdaContext,
    api_event,
    create_bucket_and_queue,
    load_handler,
    run_queue_through,
    s3_notification,
    use_fake_aws,
)
from moto import mock_aws

from knowledge.aws.index_progress import (
    QUEUE_STALE_AFTER_S,
    REPORT_AFTER_S,
    REPORT_EVERY_S,
    STALE_AFTER_S,
    DocumentReporter,
    ProgressTable,
    queued_events,
)
from knowledge.core.scope import KnowledgeScope
from knowledge.stores.embedded import EmbeddedKnowledgeStore

TABLE = "kb-index-progress"
DROP = KnowledgeScope("drop-bot", "archive")
MANUALS = KnowledgeScope("ops-bot", "manuals")
QUIET = KnowledgeScope("ops-bot", "runbooks")
MARKER = "zeppelin"


@dataclass
class Stack3:
    """The three functions on moto, over one store and one progress table."""

    s3: Any
    sqs: Any
    dynamodb: Any
    embedder: GatedEmbedder
    dispatcher: ModuleType
    indexer: ModuleType
    search: ModuleType
    urls: dict[str, str]
    arns: dict[str, str]

    def arrive(self, *keys_and_bodies: tuple[str, bytes]) -> None:
        """Objects written to the bucket, their notifications on the intake."""
        for n, (key, body) in enumerate(keys_and_bodies, start=1):
            self.s3.put_object(Bucket=BUCKET, Key=key, Body=body)
            notification = s3_notification("ObjectCreated:Put", key, f"{n:08X}")
            notification["Records"][0]["s3"]["object"]["size"] = len(body)
            self.sqs.send_message(
                QueueUrl=self.urls["intake"], MessageBody=json.dumps(notification)
            )

    def dispatch(self) -> None:
        run_queue_through(self.dispatcher, self.sqs, self.urls["intake"], self.arns["intake"])

    def index(self, lane: str) -> None:
        run_queue_through(self.indexer, self.sqs, self.urls[lane], self.arns[lane])

    def status(self, scope: KnowledgeScope) -> dict[str, Any]:
        route = f"/v1/agents/{scope.agent}/contexts/{scope.context}/status"
        response = self.search.lambda_handler(api_event("GET", route), LambdaContext())
        assert response["statusCode"] == 200, response
        body: dict[str, Any] = json.loads(response["body"])
        return body

    def item(self, scope: KnowledgeScope) -> dict[str, Any]:
        found = self.dynamodb.get_item(TableName=TABLE, Key={"scope": {"S": scope.key}})
        item: dict[str, Any] = found.get("Item", {})
        return item


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Stack3]:
    from knowledge.aws import settings as aws_settings

    use_fake_aws(monkeypatch)
    with mock_aws():
        s3, sqs, dynamodb = boto3.client("s3"), boto3.client("sqs"), boto3.client("dynamodb")
        urls, arns = {}, {}
        urls["intake"], arns["intake"] = create_bucket_and_queue(s3, sqs)
        for lane in ("express", "bulk"):
            urls[lane] = sqs.create_queue(QueueName=f"document-{lane}")["QueueUrl"]
            arns[lane] = sqs.get_queue_attributes(QueueUrl=urls[lane], AttributeNames=["QueueArn"])[
                "Attributes"
            ]["QueueArn"]
        table = load_template()["Resources"]["IndexProgressTable"]["Properties"]
        dynamodb.create_table(
            TableName=TABLE,
            KeySchema=table["KeySchema"],
            AttributeDefinitions=table["AttributeDefinitions"],
            BillingMode=table["BillingMode"],
        )
        for name, value in {
            "DOCUMENTS_BUCKET": BUCKET,
            "INDEX_QUEUE_URL": urls["intake"],
            "EXPRESS_QUEUE_URL": urls["express"],
            "BULK_QUEUE_URL": urls["bulk"],
            "INDEX_PROGRESS_TABLE": TABLE,
            "EMBEDDING_PROVIDER": "hashing",
            "RETRY_BASE_SECONDS": "0",
            "RETRY_MAX_SECONDS": "0",
        }.items():
            monkeypatch.setenv(name, value)
        embedder = GatedEmbedder(MARKER)
        with closing(EmbeddedKnowledgeStore(tmp_path / "kb.db", embedder=embedder)) as store:
            # The store the functions would open on OpenSearch: one real store for both.
            monkeypatch.setattr(aws_settings, "build_store", lambda settings: store)
            dispatcher = load_handler("dispatcher", monkeypatch)
            indexer = load_handler("indexer", monkeypatch)
            search = load_handler("search", monkeypatch)
            # Reported from the first chunk on, so a test can look half-way (the pace: below).
            indexer.container.progress = ProgressTable(TABLE, report_after=0.0, report_every=0.2)
            try:
                yield Stack3(s3, sqs, dynamodb, embedder, dispatcher, indexer, search, urls, arns)
            finally:
                embedder.gate.set()


def test_the_status_shows_each_scopes_queued_events_until_the_indexer_is_done(stack) -> None:
    drop = [
        (f"{DROP.key}/report-{n}.md", f"# Report {n}\n\nnumbers {n}\n".encode()) for n in range(5)
    ]
    stack.arrive(*drop, (f"{QUIET.key}/rollback.md", b"# Rollback\n\nhelm rollback\n"))
    stack.dispatch()

    assert stack.item(DROP)["queued"] == {"N": "5"}
    assert stack.item(QUIET)["queued"] == {"N": "1"}
    status = stack.status(DROP)
    assert status["state"] == "INDEXING"
    assert status["progress"]["queued_files"] == 5
    assert status["progress"]["documents_total"] == 0
    assert "5 events queued" in status["message"]

    stack.index("express")
    stack.index("bulk")

    for scope, documents in ((DROP, 5), (QUIET, 1)):
        status = stack.status(scope)
        assert status["state"] == "READY", status
        assert status["document_count"] == documents
        assert status["progress"] is None
        assert stack.item(scope)["queued"] == {"N": "0"}


def test_the_status_shows_a_large_document_being_written_and_how_far(stack) -> None:
    text = large_text(MARKER)
    stack.arrive((f"{MANUALS.key}/handbook.md", text))
    stack.dispatch()
    attributes = stack.sqs.get_queue_attributes(
        QueueUrl=stack.urls["express"], AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "1"  # one event, under 8 MiB: express
    indexing = threading.Thread(target=stack.index, args=("express",))
    indexing.start()
    try:
        assert stack.embedder.arrived.wait(30), "the embedder was never reached"
        status = stack.status(MANUALS)
        assert status["state"] == "INDEXING", status
        progress = status["progress"]
        assert progress["document"] == "handbook.md"
        assert progress["document_bytes"] == len(text)
        assert progress["chunks_done"] > 0
        assert progress["chunks_estimated"] >= progress["chunks_done"]
        assert progress["queued_files"] == 1
        assert "writing handbook.md" in status["message"]
    finally:
        stack.embedder.gate.set()
        indexing.join(60)

    status = stack.status(MANUALS)
    assert status["state"] == "READY", status
    assert status["document_count"] == 1
    assert status["progress"] is None
    assert "document" not in stack.item(MANUALS)


# --- the reporter's pace, staleness, the count's rule -----------------------------------------


class CountingDynamoDB:
    """moto's DynamoDB client, counting the ``UpdateItem`` calls."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.updates = 0

    def update_item(self, **request: Any) -> Any:
        self.updates += 1
        return self.client.update_item(**request)

    def get_item(self, **request: Any) -> Any:
        return self.client.get_item(**request)


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch) -> Iterator[CountingDynamoDB]:
    use_fake_aws(monkeypatch)
    with mock_aws():
        client = boto3.client("dynamodb")
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "scope", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "scope", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield CountingDynamoDB(client)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_a_small_document_costs_no_write_and_a_large_one_one_every_few_seconds(table) -> None:
    clock = Clock()
    progress = ProgressTable(TABLE, client=table, clock=clock)
    reporter = DocumentReporter(progress, MANUALS, clock=clock)

    reporter.begin("small.md", 2_000, 2_000)
    for _ in range(20):
        clock.now += 0.01
        reporter.chunk(100)
    reporter.end()
    assert table.updates == 0  # written within REPORT_AFTER_S: nothing reported

    reporter.begin("large.md", 50_000_000, 50_000_000)
    seconds = 60.0
    for _ in range(6_000):  # one chunk every 10 ms for a minute
        clock.now += 0.01
        reporter.chunk(1_000)
    assert progress.progress(MANUALS) is not None
    reported = table.updates
    most = (seconds - REPORT_AFTER_S) / REPORT_EVERY_S + 1
    assert 1 <= reported <= most, (reported, most)
    shown = progress.progress(MANUALS)
    assert shown is not None
    assert shown.chunks_done is not None
    assert shown.chunks_done > 5_000
    assert shown.chunks_estimated == 50_000  # 50 MB of text at 1,000 characters a chunk
    reporter.end()
    assert table.updates == reported + 1
    assert progress.progress(MANUALS) is None


def test_a_report_whose_writer_went_away_is_not_shown(table) -> None:
    clock = Clock()
    progress = ProgressTable(TABLE, client=table, clock=clock)
    progress.report_document(MANUALS, "large.md", 10, 5, 50)
    progress.add_queued({MANUALS: 3})
    shown = progress.progress(MANUALS)
    assert shown is not None
    assert shown.document == "large.md"
    clock.now += STALE_AFTER_S + 1  # the indexer timed out and never said it ended
    progress.add_queued({MANUALS: 1})  # the scope's events still come and go
    shown = progress.progress(MANUALS)
    assert shown is not None
    assert shown.document is None
    assert shown.queued_files == 4
    clock.now += QUEUE_STALE_AFTER_S + 1  # nothing changed since: what is left is lost
    assert progress.progress(MANUALS) is None


def test_a_count_never_shows_below_zero_and_a_failing_table_never_fails_the_indexing(
    table,
) -> None:
    progress = ProgressTable(TABLE, client=table)
    progress.add_queued({QUIET: -2})  # taken off, never counted (a lost forward)
    assert progress.progress(QUIET) is None
    missing = ProgressTable("no-such-table", client=table)
    missing.report_document(QUIET, "a.md", 1, 1, 1)  # logged, not raised
    assert missing.progress(QUIET) is None


def test_what_is_counted_is_a_messages_bucket_events_not_a_reindexs() -> None:
    body = s3_notification("ObjectCreated:Put", f"{DROP.key}/a.md", "01")
    body["Records"].append(
        s3_notification("ObjectRemoved:Delete", f"{DROP.key}/b.md", "02")["Records"][0]
    )
    assert queued_events(json.dumps(body)) == {DROP: 2}
    reindex_key = json.dumps({"type": "reindex", "bucket": BUCKET, "key": f"{DROP.key}/a.md"})
    assert queued_events(reindex_key) == {}
    assert queued_events("not json") == {}


# --- template.yaml: the table and who may touch it ------------------------------------------

CREATED = {"CreateDomain": "true", "EmbeddingProvider": "hashing"}
PROGRESS = "IndexProgressTable.Arn"
GRANTED = {
    "DispatcherFunction": {"dynamodb:UpdateItem"},
    "IndexerFunction": {"dynamodb:UpdateItem"},
    "SearchFunction": {"dynamodb:GetItem"},
}
DYNAMODB = ("GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "DeleteTable")


def test_the_progress_table_is_on_demand_encrypted_and_expires_its_items() -> None:
    table = Stack(load_template(), CREATED).resources()["IndexProgressTable"]["Properties"]
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert table["KeySchema"] == [{"AttributeName": "scope", "KeyType": "HASH"}]
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert table["SSESpecification"] == {"SSEEnabled": True}


def test_each_function_may_do_only_its_part_on_the_progress_table() -> None:
    template = load_template()
    stack = Stack(template, CREATED)
    for function, resource in template["Resources"].items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        statements = stack.statements(function)
        allowed = {
            f"dynamodb:{a}" for a in DYNAMODB if allows(statements, f"dynamodb:{a}", PROGRESS)
        }
        assert allowed == GRANTED.get(function, set()), function
        if function in GRANTED:
            variables = stack.evaluate(resource["Properties"]["Environment"]["Variables"])
            assert str(variables["INDEX_PROGRESS_TABLE"]) == "IndexProgressTable.Ref", function
            granted = [s for s in statements if PROGRESS in as_list(s["Resource"])]
            assert all(as_list(s["Resource"]) == [PROGRESS] for s in granted), function
