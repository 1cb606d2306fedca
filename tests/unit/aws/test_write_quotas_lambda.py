"""Write quotas through functions/search/app.py with API Gateway HTTP API (v2) events, moto's
S3 as the documents bucket and moto's DynamoDB as the write quota table: the 429 reaches
the client with ``Retry-After`` in the Lambda response's headers, two containers (two
copies of the handler, each with its own API and client) share one agent's count, reads
are never counted, and the function builds its quota from the template's settings."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import boto3
import pytest
from lambda_support import (
    BUCKET,
    REGION,
    LambdaContext,
    api_event,
    emitted_metrics,
    load_handler,
    use_fake_aws,
)
from moto import mock_aws

from knowledge.aws.bucket_writes import S3Storage
from knowledge.aws.write_quotas import DynamoDBCounter
from knowledge.service.api import KnowledgeApi
from knowledge.service.write_quotas import REQUESTS_LIMIT, WINDOW_SECONDS, WriteLimits, WriteQuota
from knowledge.stores.memory import MemoryKnowledgeStore

SCOPE_PATH = "/v1/agents/ops-bot/contexts/runbooks"
TABLE = "kb-test-WriteQuotaTable"
START = 1_800_000_000.0


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Aws:
    s3: Any
    dynamodb: Any

    def objects(self) -> list[str]:
        listed = self.s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])
        return sorted(item["Key"] for item in listed)

    def count(self, agent: str, window: float) -> int:
        found = self.dynamodb.get_item(
            TableName=TABLE, Key={"id": {"S": f"{agent}#{int(window)}"}}
        ).get("Item", {})
        return int(found.get("requests", {}).get("N", 0))


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    use_fake_aws(monkeypatch)
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET)
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        dynamodb.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield Aws(s3, dynamodb)


def container(
    monkeypatch: pytest.MonkeyPatch, limits: WriteLimits, clock: Clock, store: Any = None
) -> ModuleType:
    """One search function container: its own module, API, S3 and DynamoDB clients."""
    module = load_handler("search", monkeypatch)
    module.container.api = KnowledgeApi(
        store or MemoryKnowledgeStore(),
        writes=S3Storage(BUCKET, boto3.client("s3", region_name=REGION)),
        write_quota=WriteQuota(
            limits,
            DynamoDBCounter(TABLE, boto3.client("dynamodb", region_name=REGION)),
            clock=clock,
        ),
    )
    return module


def invoke(module: ModuleType, event: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
    response = module.lambda_handler(event, LambdaContext())
    return response["statusCode"], json.loads(response["body"]), response.get("headers", {})


def put(path: str, text: str = "# Note\n\nhelm rollback\n") -> dict[str, Any]:
    return api_event(
        "PUT", f"{SCOPE_PATH}/documents/{path}", text.encode(), content_type="text/markdown"
    )


def leaks(body: dict[str, Any]) -> list[str]:
    text = json.dumps(body)
    return [w for w in ("Traceback", "arn:", BUCKET, TABLE, "amazonaws.com") if w in text]


def test_over_the_limit_the_lambda_answers_429_with_retry_after_and_writes_nothing(
    aws: Aws, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = Clock(START + 20.5)
    search = container(monkeypatch, WriteLimits(2, 0, 0), clock)
    assert invoke(search, put("a.md"))[0] == 202
    assert invoke(search, put("b.md"))[0] == 202
    status, body, headers = invoke(search, put("c.md"))
    assert status == 429, body
    assert headers["Retry-After"] == "40"
    assert headers["Content-Type"] == "application/json"
    assert (body["limit"], body["limit_value"], body["retry_after"]) == (REQUESTS_LIMIT, 2, 40)
    assert "retry in 40 s" in body["error"]
    assert leaks(body) == [], body
    upload = api_event("POST", f"{SCOPE_PATH}/uploads", {"path": "big.pdf", "size": 100})
    assert invoke(search, upload)[0] == 429
    delete = api_event("DELETE", f"{SCOPE_PATH}/documents/a.md")
    assert invoke(search, delete)[0] == 429
    assert "ops-bot/runbooks/c.md" not in aws.objects()
    assert aws.objects() == sorted(
        f"ops-bot/runbooks/{name}"
        for name in ("a.md", "a.md.metadata.json", "b.md", "b.md.metadata.json")
    )
    # Reads are never counted.
    search_event = api_event("POST", f"{SCOPE_PATH}/search", {"query": "helm"})
    assert invoke(search, search_event)[0] == 200
    assert invoke(search, api_event("GET", f"{SCOPE_PATH}/status"))[0] == 200
    metrics = emitted_metrics(capsys.readouterr().out)
    assert metrics["WritesLimited"] == 3
    clock.now = START + WINDOW_SECONDS
    assert invoke(search, put("c.md"))[0] == 202


def test_two_containers_share_one_agents_count(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(START + 1)
    limits = WriteLimits(3, 0, 0)
    first, second = container(monkeypatch, limits, clock), container(monkeypatch, limits, clock)
    assert first.container.api is not second.container.api
    assert invoke(first, put("a.md"))[0] == 202
    assert invoke(second, put("b.md"))[0] == 202
    assert invoke(first, put("c.md"))[0] == 202
    for search in (second, first):
        status, body, headers = invoke(search, put("d.md"))
        assert (status, headers["Retry-After"]) == (429, "59"), body
    other = api_event(
        "PUT",
        "/v1/agents/support-bot/contexts/faq/documents/a.md",
        b"# A\n\nrefunds\n",
        content_type="text/markdown",
    )
    assert invoke(second, other)[0] == 202  # another agent at the same moment
    assert aws.count("ops-bot", START) == 3
    assert aws.count("support-bot", START) == 1


def test_the_function_builds_its_quota_from_the_settings_the_template_gives_it(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No quota injected: the container's API counts in WRITE_QUOTA_TABLE with the limits
    of WRITE_REQUESTS_PER_MINUTE, WRITE_MIB_PER_MINUTE and MAX_DOCUMENTS_PER_SCOPE."""
    from knowledge.aws import settings as aws_settings

    for name, value in {
        "DOCUMENTS_BUCKET": BUCKET,
        "WRITE_QUOTA_TABLE": TABLE,
        "WRITE_REQUESTS_PER_MINUTE": "7",
        "WRITE_MIB_PER_MINUTE": "3",
        "MAX_DOCUMENTS_PER_SCOPE": "50",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(aws_settings, "build_store", lambda settings: MemoryKnowledgeStore())
    search = load_handler("search", monkeypatch)
    assert invoke(search, put("a.md"))[0] == 202
    quota = search.container.api.write_quota
    assert quota is not None
    assert quota.limits == WriteLimits.of(7, 3, 50)
    windows = aws.dynamodb.scan(TableName=TABLE)["Items"]
    assert [(w["id"]["S"].split("#")[0], w["requests"]["N"]) for w in windows] == [("ops-bot", "1")]
    assert "ops-bot/runbooks/a.md" in aws.objects()


def test_the_quota_client_is_not_made_at_cold_start_nor_for_reads(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    from knowledge.aws import settings as aws_settings

    monkeypatch.setenv("DOCUMENTS_BUCKET", BUCKET)
    monkeypatch.setenv("WRITE_QUOTA_TABLE", TABLE)
    monkeypatch.setattr(aws_settings, "build_store", lambda settings: MemoryKnowledgeStore())
    search = load_handler("search", monkeypatch)
    assert invoke(search, api_event("POST", f"{SCOPE_PATH}/search", {"query": "helm"}))[0] == 200
    counter = search.container.api.write_quota._counter
    assert isinstance(counter, DynamoDBCounter)
    assert counter._client is None  # boto3's DynamoDB client waits for the first write
    assert invoke(search, put("a.md"))[0] == 202
    assert counter._client is not None
