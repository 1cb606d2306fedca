"""Both Lambda handlers end to end on a real OpenSearch node, with moto's S3 and SQS.

Nothing is injected: each handler builds its store, embedder and S3 source from the
environment ``template.yaml`` gives it (``OPENSEARCH_*``, ``EMBEDDING_PROVIDER``,
``DOCUMENTS_BUCKET``, ``INDEX_QUEUE_URL``), exactly as in AWS, except that the endpoint
is the local node (no SigV4) and the embedder is the offline hashing one.
"""

from __future__ import annotations

import contextlib
import json
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import boto3
import pytest
from lambda_support import (
    BUCKET,
    LambdaContext,
    load_event,
    load_handler,
    run_queue_through,
    s3_notification,
    sqs_event,
    use_fake_aws,
)
from moto import mock_aws

from knowledge.core.scope import KnowledgeScope

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]

RUNBOOKS = KnowledgeScope("ops-bot", "runbooks")
DEPLOY = """# Deploy

## Rollback

If a deployment fails, roll back with `helm rollback api 0` and watch the pods.

## Verify

Check `kubectl get pods` until every pod is Ready.
"""
KOREAN = """# 배포 실패 대응

배포가 실패하면 이전 버전으로 롤백하고 알림 채널에 공유한다.
"""


@dataclass
class Stack:
    """The two handlers wired to one index, one bucket and one queue."""

    indexer: ModuleType
    search: ModuleType
    s3: Any
    sqs: Any
    queue_url: str
    queue_arn: str
    index: str

    def put(self, key: str, text: str) -> None:
        self.s3.put_object(Bucket=BUCKET, Key=key, Body=text.encode("utf-8"))

    def index_events(self, event: dict[str, Any]) -> dict[str, Any]:
        response: dict[str, Any] = self.indexer.lambda_handler(event, LambdaContext())
        return response

    def call(self, sample: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        event = load_event(sample)
        if body is not None:
            event["body"] = json.dumps(body, ensure_ascii=False)
            event["isBase64Encoded"] = False
        response = self.search.lambda_handler(event, LambdaContext())
        return response["statusCode"], json.loads(response["body"])

    def search_paths(self, query: str, mode: str = "keyword") -> list[str]:
        status, body = self.call("api_search.json", {"query": query, "mode": mode})
        assert status == 200, body
        return [r["document_path"] for r in body["results"]]


@pytest.fixture
def stack(opensearch_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    index = f"test_handlers_{uuid.uuid4().hex[:12]}"
    use_fake_aws(monkeypatch)
    with mock_aws():
        s3 = boto3.client("s3")
        sqs = boto3.client("sqs")
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        queue_url = sqs.create_queue(QueueName="document-events")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        # The write routes count each agent's writes there, as the deployed stack does.
        boto3.client("dynamodb").create_table(
            TableName="write-quotas",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        for name, value in {
            "OPENSEARCH_URL": opensearch_url,
            "OPENSEARCH_INDEX": index,
            "OPENSEARCH_DEFAULT_MODE": "hybrid",
            # The tests search right after indexing; deployed, a write is searchable
            # within the index's refresh interval (1 s) instead.
            "OPENSEARCH_WAIT_FOR_REFRESH": "true",
            # ...and each write's wait is one refresh: a short one keeps the suite quick.
            "OPENSEARCH_REFRESH_INTERVAL": "100ms",
            "EMBEDDING_PROVIDER": "hashing",
            "DOCUMENTS_BUCKET": BUCKET,
            "INDEX_QUEUE_URL": queue_url,
            "WRITE_QUOTA_TABLE": "write-quotas",
        }.items():
            monkeypatch.setenv(name, value)
        indexer = load_handler("indexer", monkeypatch)
        search = load_handler("search", monkeypatch)
        try:
            yield Stack(indexer, search, s3, sqs, queue_url, queue_arn, index)
        finally:
            for module in (indexer, search):
                built = module.container.indexer if module is indexer else module.container.api
                if built is not None:
                    built.store.close()
            request = urllib.request.Request(f"{opensearch_url}/{index}", method="DELETE")
            with contextlib.suppress(OSError):  # the test may not have created it
                urllib.request.urlopen(request, timeout=30).close()


def test_put_events_make_documents_searchable_in_every_mode(stack):
    stack.put("ops-bot/runbooks/deploy.md", DEPLOY)
    stack.put("ops-bot/runbooks/장애 대응/배포 실패 대응.md", KOREAN)
    assert stack.index_events(load_event("sqs_s3_put.json")) == {"batchItemFailures": []}
    assert stack.index_events(load_event("sqs_s3_korean_key.json")) == {"batchItemFailures": []}

    status, body = stack.call("api_search.json")  # keyword, "rollback a failed deployment"
    assert status == 200
    assert body["mode"] == "keyword"
    assert body["results"][0]["document_path"] == "deploy.md"
    assert body["results"][0]["metadata"]["heading_path"][-1] == "Rollback"
    assert all(0.0 <= r["score"] <= 1.0 for r in body["results"])

    status, body = stack.call("api_search.json", {"query": "roll back a failed deployment"})
    assert status == 200
    assert body["mode"] == "hybrid", "the deployment's default mode"
    top = body["results"][0]
    assert top["document_path"] == "deploy.md"
    assert top["keyword_score"] is not None
    assert top["vector_score"] is not None
    assert all(0.0 <= r["score"] <= 1.0 for r in body["results"])

    assert stack.search_paths("롤백") == ["장애 대응/배포 실패 대응.md"]

    status, body = stack.call("api_status.json")
    assert status == 200
    assert (body["document_count"], body["state"]) == (2, "READY")


def test_delete_overwrite_duplicate_and_stale_events(stack):
    key = "ops-bot/runbooks/deploy.md"
    stack.put(key, DEPLOY)
    stack.index_events(load_event("sqs_s3_put.json"))  # sequencer ...F7
    _, before = stack.call("api_status.json")

    # Duplicate delivery: nothing changes.
    assert stack.index_events(load_event("sqs_s3_put.json")) == {"batchItemFailures": []}
    _, after = stack.call("api_status.json")
    assert after["chunk_count"] == before["chunk_count"]

    # Overwrite with a shorter document: every old chunk goes (no stale tail).
    stack.put(key, "# Deploy\n\nDeployments are frozen this week.")
    newer = sqs_event(s3_notification("ObjectCreated:Put", key, "0065F2A1B3C4D5E6F8"))
    assert stack.index_events(newer) == {"batchItemFailures": []}
    _, overwritten = stack.call("api_status.json")
    assert overwritten["chunk_count"] == 1
    assert stack.search_paths("helm rollback pods") == []
    assert stack.search_paths("frozen") == ["deploy.md"]

    # A late, older event changes nothing (and is not even read).
    stack.put(key, "# Deploy\n\nthis text must never be indexed")
    older = sqs_event(s3_notification("ObjectCreated:Put", key, "0065F2A1B3C4D5E6F7"))
    assert stack.index_events(older) == {"batchItemFailures": []}
    assert stack.search_paths("never indexed") == []

    # Delete: the delete marker, then its event.
    stack.s3.delete_object(Bucket=BUCKET, Key=key)
    assert stack.index_events(load_event("sqs_s3_delete_marker.json")) == {"batchItemFailures": []}
    assert stack.search_paths("frozen") == []
    _, gone = stack.call("api_status.json")
    assert gone["document_count"] == 0


def test_object_deleted_before_its_create_event_is_processed(stack):
    stack.put("ops-bot/runbooks/deploy.md", DEPLOY)
    stack.s3.delete_object(Bucket=BUCKET, Key="ops-bot/runbooks/deploy.md")
    assert stack.index_events(load_event("sqs_s3_put.json")) == {"batchItemFailures": []}
    assert stack.search_paths("rollback") == []


def test_reindex_route_queues_keys_and_the_indexer_syncs_the_scope(stack):
    stack.put("ops-bot/runbooks/deploy.md", DEPLOY)
    stack.put("ops-bot/runbooks/retired.md", "# Retired\n\nold pager rotation")
    for name, seq in (("deploy.md", "01"), ("retired.md", "02")):
        stack.index_events(
            sqs_event(s3_notification("ObjectCreated:Put", f"ops-bot/runbooks/{name}", seq))
        )
    # Changes whose events were lost: one object removed, one added.
    stack.s3.delete_object(Bucket=BUCKET, Key="ops-bot/runbooks/retired.md")
    stack.put("ops-bot/runbooks/scale.md", "# Scale\n\nkubectl scale deployment api")

    status, body = stack.call("api_reindex.json")
    assert status == 202
    assert body == {"agent": "ops-bot", "context": "runbooks", "status": "accepted"}

    # The indexer expands the scope step into one message per key, then indexes them.
    responses = run_queue_through(stack.indexer, stack.sqs, stack.queue_url, stack.queue_arn)
    assert len(responses) == 2
    assert all(r == {"batchItemFailures": []} for r in responses)
    assert stack.search_paths("scale") == ["scale.md"]
    assert stack.search_paths("pager rotation") == []
    _, status_body = stack.call("api_status.json")
    assert status_body["document_count"] == 2


def test_agent_wide_search_stays_inside_the_agent(stack):
    for key, seq in (
        ("ops-bot/runbooks/deploy.md", "01"),
        ("ops-bot/manuals/helm.md", "02"),
        ("other-bot/runbooks/deploy.md", "03"),
    ):
        stack.put(key, "# Helm\n\nhelm rollback restores the previous release.")
        stack.index_events(sqs_event(s3_notification("ObjectCreated:Put", key, seq)))
    status, body = stack.call(
        "api_search_agent.json", {"query": "helm rollback", "mode": "keyword"}
    )
    assert status == 200
    sources = sorted(r["metadata"]["source_key"] for r in body["results"])
    assert sources == ["ops-bot/manuals/helm.md", "ops-bot/runbooks/deploy.md"]


def test_reindex_removals_cover_every_page_of_the_index(stack, opensearch_url):
    """The removals phase reads the scope's documents from the index: more than one page
    of the store's listing (500) must all be seen, or stale documents stay searchable."""
    from datetime import UTC, datetime

    from knowledge.aws.events import ReindexPhase, ReindexTask
    from knowledge.aws.invocation_time import TimeBudget
    from knowledge.aws.reindex_queue import ScopeReindexer
    from knowledge.core.model import DocumentChunk
    from knowledge.ingest.sources.s3 import S3DocumentSource
    from knowledge.stores.opensearch import OpenSearchConfig, OpenSearchKnowledgeStore
    from knowledge.stores.protocol import DocumentHeader, EmbeddedChunk

    stack.put("ops-bot/runbooks/kept-0001.md", DEPLOY)
    config = OpenSearchConfig(
        url=opensearch_url, index_name=stack.index, number_of_shards=1, number_of_replicas=0
    )
    store = OpenSearchKnowledgeStore(config)
    stale = [f"stale-{i:04d}.md" for i in range(1200)]
    with store.write_session(RUNBOOKS) as session:
        for path in [*stale, "kept-0001.md"]:
            header = DocumentHeader(path, path, "hash", datetime.now(UTC))
            session.put_document(header, [EmbeddedChunk(DocumentChunk(path, 0, f"text {path}"))])
    urllib.request.urlopen(
        urllib.request.Request(f"{opensearch_url}/{stack.index}/_refresh", method="POST"),
        timeout=30,
    ).close()

    queued: list[str] = []

    class CollectingSqs:  # 1,200 messages would take moto's SQS minutes
        def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, str]]) -> Any:
            queued.extend(json.loads(entry["MessageBody"])["key"] for entry in Entries)
            return {"Successful": [{"Id": e["Id"]} for e in Entries], "Failed": []}

    reindexer = ScopeReindexer(
        stack.queue_url, S3DocumentSource(BUCKET, client=stack.s3), client=CollectingSqs()
    )
    task = ReindexTask(BUCKET, RUNBOOKS, ReindexPhase.REMOVALS)
    report = reindexer.expand(task, store, TimeBudget.unlimited())
    store.close()
    assert report.removals == 1200
    assert sorted(queued) == [f"ops-bot/runbooks/{path}" for path in stale]


def test_filters_the_domain_refuses_as_expensive_are_a_clear_400(stack, no_expensive_queries):
    """A domain with ``search.allow_expensive_queries: false`` refuses wildcard, prefix,
    regexp and keyword-range queries: each search that needs one is a 400 naming the field
    and the problem (never a 500), in every mode, and what the domain accepts still works."""
    stack.put("ops-bot/runbooks/deploy.md", DEPLOY)
    stack.s3.put_object(
        Bucket=BUCKET,
        Key="ops-bot/runbooks/deploy.md.metadata.json",
        Body=json.dumps({"metadataAttributes": {"team": "platform", "tier": 2}}).encode(),
    )
    assert stack.index_events(load_event("sqs_s3_put.json")) == {"batchItemFailures": []}
    refused = {
        "filter": [
            {"field": "team", "op": "starts_with", "value": "plat"},
            {"field": "team", "op": "contains", "value": "latf"},
            {"field": "tier", "op": "gte", "value": 1},
            {"field": "document_path", "op": "gt", "value": "a"},
        ],
        "file_patterns": ["*.md", "[a-z]*.md"],
    }
    for mode in ("keyword", "vector", "hybrid"):
        for field_name, values in refused.items():
            for value in values:
                body = {"query": "rollback", "mode": mode, field_name: value}
                status, answer = stack.call("api_search.json", body)
                assert status == 400, (mode, value, answer)
                assert answer["field"] == field_name, (mode, value, answer)
                assert "search.allow_expensive_queries" in answer["error"]
                text = json.dumps(answer)
                assert stack.index not in text
                assert "127.0.0.1" not in text
        accepted = {
            "and": [
                {"field": "team", "op": "eq", "value": "platform"},
                {"field": "tier", "op": "in", "value": [2, 3]},
                {"field": "indexed_at", "op": "gte", "value": "2000-01-01T00:00:00Z"},
            ]
        }
        for body in (
            {"filter": accepted},
            {"file_patterns": ["deploy.md"]},
            {"metadata": {"team": "platform"}},
        ):
            status, answer = stack.call(
                "api_search.json", {"query": "rollback", "mode": mode, **body}
            )
            assert status == 200, (body, answer)
            assert [r["document_path"] for r in answer["results"]][:1] == ["deploy.md"]


def test_a_new_object_version_that_cannot_be_indexed_keeps_the_old_one_on_the_node(stack):
    """S3 event -> indexer -> OpenSearch: an encrypted PDF over an indexed one is a problem
    (no retry), the old text is still found and the document route says ``stale``; the
    delete marker's event removes it."""
    import document_files as files

    key = "ops-bot/runbooks/handbook.pdf"
    stack.s3.put_object(Bucket=BUCKET, Key=key, Body=files.pdf(["the wombatpager procedure"]))
    first = sqs_event(s3_notification("ObjectCreated:Put", key, "0A"))
    assert stack.index_events(first) == {"batchItemFailures": []}
    stack.s3.put_object(Bucket=BUCKET, Key=key, Body=files.pdf(["x"], password="pw"))
    second = sqs_event(s3_notification("ObjectCreated:Put", key, "0B"))
    assert stack.index_events(second) == {"batchItemFailures": []}
    assert stack.search_paths("wombatpager") == ["handbook.pdf"]

    event = load_event("api_document.json")
    event["rawPath"] = "/v1/agents/ops-bot/contexts/runbooks/documents/handbook.pdf"
    event["pathParameters"] = {"agent": "ops-bot", "context": "runbooks", "path": "handbook.pdf"}
    response = stack.search.lambda_handler(event, LambdaContext())
    found = json.loads(response["body"])
    assert (response["statusCode"], found["indexed"], found["stale"], found["version"]) == (
        200,
        True,
        True,
        "0A",
    )
    assert found["problem"].startswith("encrypted PDF; version 0B is not indexed")
    status, body = stack.call("api_status.json")
    assert (status, body["document_count"]) == (200, 1)
    assert "still searched" in body["problems"][0]["reason"]

    stack.s3.delete_object(Bucket=BUCKET, Key=key)
    removed = sqs_event(s3_notification("ObjectRemoved:DeleteMarkerCreated", key, "0C"))
    assert stack.index_events(removed) == {"batchItemFailures": []}
    assert stack.search_paths("wombatpager") == []
    _, gone = stack.call("api_status.json")
    assert (gone["document_count"], gone["problems"]) == (0, [])
