"""One agent's 2,000-file drop, another agent's edit: searchable through the search API on a
real OpenSearch node within two indexer invocations.

The three functions build everything from the environment ``template.yaml`` gives them
(as tests/integration/aws/test_handlers_opensearch.py does for two): the dispatcher its two
work queues (moto), the indexer its store on the local node with the hashing embedder,
the search function the same. Only the edit is indexed: the drop waits in the bulk lane,
whose 2,000 messages are checked and counted (``RecordingSqs``: moto's SQS is quadratic
in a queue's messages); the drop's first 1,950 notifications are handed to the dispatcher
as the batches its event source mapping forms, and the batch carrying the edit goes
through moto's intake (tests/unit/aws/test_fair_indexing.py says why).
"""

from __future__ import annotations

import contextlib
import json
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from cfn_template import load_template
from lambda_support import (
    BUCKET,
    LambdaContext,
    RecordingSqs,
    load_event,
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

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]

PARAMETERS = load_template()["Parameters"]
DISPATCHER_BATCH = int(PARAMETERS["DispatcherBatchSize"]["Default"])
INDEXER_BATCH = int(PARAMETERS["IndexerBatchSize"]["Default"])
DROP = 2000
EDIT_KEY = "ops-bot/runbooks/refunds.md"  # the scope events/api_search.json searches
EDIT_TEXT = "# Refunds\n\nA refund reaches the card within five business days."


def notification(key: str, size: int, sequencer: str) -> str:
    body = s3_notification("ObjectCreated:Put", key, sequencer)
    body["Records"][0]["s3"]["object"]["size"] = size
    return json.dumps(body)


@pytest.fixture
def aws(opensearch_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    index = f"test_fair_{uuid.uuid4().hex[:12]}"
    use_fake_aws(monkeypatch)
    with mock_aws():
        s3, sqs = boto3.client("s3"), boto3.client("sqs")
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        urls = {
            q: sqs.create_queue(QueueName=f"document-{q}")["QueueUrl"]
            for q in ("events", "express", "bulk")
        }
        arns = {
            q: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
                "QueueArn"
            ]
            for q, url in urls.items()
        }
        for name, value in {
            "OPENSEARCH_URL": opensearch_url,
            "OPENSEARCH_INDEX": index,
            "OPENSEARCH_WAIT_FOR_REFRESH": "true",
            "OPENSEARCH_REFRESH_INTERVAL": "100ms",
            "EMBEDDING_PROVIDER": "hashing",
            "DOCUMENTS_BUCKET": BUCKET,
            "INDEX_QUEUE_URL": urls["events"],  # the search function's reindex requests
            "EXPRESS_QUEUE_URL": urls["express"],
            "BULK_QUEUE_URL": urls["bulk"],
        }.items():
            monkeypatch.setenv(name, value)
        functions = {
            name: load_handler(name, monkeypatch) for name in ("dispatcher", "indexer", "search")
        }
        try:
            yield {"s3": s3, "sqs": sqs, "urls": urls, "arns": arns, **functions}
        finally:
            if functions["indexer"].container.indexer is not None:
                functions["indexer"].container.indexer.store.close()
            if functions["search"].container.api is not None:
                functions["search"].container.api.store.close()
            request = urllib.request.Request(f"{opensearch_url}/{index}", method="DELETE")
            with contextlib.suppress(OSError):
                urllib.request.urlopen(request, timeout=30).close()


def test_another_agents_edit_is_searchable_within_two_indexer_invocations(aws):
    s3, sqs, urls, arns = aws["s3"], aws["sqs"], aws["urls"], aws["arns"]
    recorder = RecordingSqs(sqs, urls["bulk"])
    aws["dispatcher"].container.dispatcher = Dispatcher(
        DispatchSettings.from_env(), client=recorder
    )
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    drop = []
    for i in range(DROP):
        key = f"drop-bot/archive/doc-{i:05d}.md"
        text = f"# Archived report {i}\n\nA refund ledger page {i}.".encode()
        backend.put_object(BUCKET, key, text)
        drop.append(notification(key, len(text), f"{i + 1:08X}"))
    last = DROP - DISPATCHER_BATCH // 2
    for start in range(0, last, DISPATCHER_BATCH):
        batch = sqs_event(*drop[start : min(start + DISPATCHER_BATCH, last)])
        assert aws["dispatcher"].lambda_handler(batch, LambdaContext()) == {"batchItemFailures": []}
    s3.put_object(Bucket=BUCKET, Key=EDIT_KEY, Body=EDIT_TEXT.encode())
    tail = [*drop[last:], notification(EDIT_KEY, len(EDIT_TEXT), "00000001")]
    for start in range(0, len(tail), 10):
        sqs.send_message_batch(
            QueueUrl=urls["events"],
            Entries=[
                {"Id": str(i), "MessageBody": b} for i, b in enumerate(tail[start : start + 10])
            ],
        )
    messages: list[dict[str, Any]] = []
    while got := sqs.receive_message(QueueUrl=urls["events"], MaxNumberOfMessages=10).get(
        "Messages", []
    ):
        messages += got
    assert len(messages) == len(tail)
    event = sqs_messages_as_event(messages, arns["events"])
    assert aws["dispatcher"].lambda_handler(event, LambdaContext()) == {"batchItemFailures": []}

    assert len(recorder.entries) == DROP
    assert {e["MessageGroupId"] for e in recorder.entries} == {"drop-bot"}

    invocations = 0
    while invocations < 2:
        messages = sqs.receive_message(
            QueueUrl=urls["express"], MaxNumberOfMessages=INDEXER_BATCH, AttributeNames=["All"]
        ).get("Messages", [])
        if not messages:
            break
        invocations += 1
        response = aws["indexer"].lambda_handler(
            sqs_messages_as_event(messages, arns["express"]), LambdaContext()
        )
        assert response == {"batchItemFailures": []}
    assert invocations == 1

    search = load_event("api_search.json")
    search["body"] = json.dumps({"query": "refund card business days", "mode": "hybrid"})
    answer = aws["search"].lambda_handler(search, LambdaContext())
    assert answer["statusCode"] == 200, answer
    results = json.loads(answer["body"])["results"]
    assert [r["document_path"] for r in results] == ["refunds.md"]
    agent_wide = load_event("api_search_agent.json")
    agent_wide["body"] = json.dumps({"query": "refund ledger", "mode": "keyword"})
    # The drop's agent has nothing searchable yet: its files wait in the bulk lane.
    agent_wide["rawPath"] = agent_wide["rawPath"].replace("ops-bot", "drop-bot")
    agent_wide["requestContext"]["http"]["path"] = agent_wide["rawPath"]
    answer = aws["search"].lambda_handler(agent_wide, LambdaContext())
    assert answer["statusCode"] == 200, answer
    assert json.loads(answer["body"])["results"] == []
