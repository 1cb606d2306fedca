"""Per-agent write quotas (knowledge.service.write_quotas): the window arithmetic, the
decision, the in-process counter ``kb serve`` uses (under threads), the DynamoDB counter
the search function uses (moto), and ``KnowledgeApi``'s write routes over them: a 429 with
``Retry-After`` naming the limit, nothing stored when refused, reads never counted.

Time is a clock the tests move: no test sleeps for a window to pass."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from lambda_support import REGION, use_fake_aws
from moto import mock_aws

from knowledge.aws.write_quotas import DynamoDBCounter
from knowledge.core.errors import (
    ConfigurationError,
    RateLimitedError,
    StoreUnavailableError,
    TooLargeError,
)
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.ingest.pipeline import upsert_document
from knowledge.local.write_quotas import InProcessCounter, local_write_quota
from knowledge.service.api import KnowledgeApi, error_response
from knowledge.service.write_quotas import (
    BYTES_LIMIT,
    DEFAULT_WRITE_LIMITS,
    DOCUMENTS_LIMIT,
    MIB,
    NO_WRITE_LIMITS,
    REQUESTS_LIMIT,
    WINDOW_SECONDS,
    WindowUsage,
    WriteLimits,
    WriteQuota,
    refused_by,
    seconds_left,
    window_start,
)
from knowledge.stores.memory import MemoryKnowledgeStore

OPS = KnowledgeScope("ops-bot", "runbooks")
START = 1_800_000_000.0  # a window's first second (a multiple of 60)
TABLE = "kb-write-quotas"


class Clock:
    """The time a test says it is."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# --- the window arithmetic and the decision ------------------------------------------------


def test_windows_are_minutes_aligned_to_the_epoch() -> None:
    assert START % WINDOW_SECONDS == 0
    assert window_start(START) == START
    assert window_start(START + 59.999) == START
    assert window_start(START + 60) == START + 60
    assert window_start(START - 0.001) == START - 60


@pytest.mark.parametrize(
    ("offset", "left"),
    [(0.0, 60), (0.4, 60), (1.0, 59), (42.3, 18), (59.2, 1), (59.999, 1)],
)
def test_retry_after_is_the_whole_seconds_until_the_window_ends(offset: float, left: int) -> None:
    # Rounded up: a client that waits that long always lands in the next window.
    assert seconds_left(START + offset) == left
    assert window_start(START + offset + seconds_left(START + offset)) == START + WINDOW_SECONDS


def test_the_decision_names_the_first_limit_a_request_would_pass() -> None:
    limits = WriteLimits(requests_per_minute=3, bytes_per_minute=100, documents_per_scope=0)
    assert refused_by(WindowUsage(0, 0), 100, limits) is None
    assert refused_by(WindowUsage(2, 0), 0, limits) is None
    assert refused_by(WindowUsage(3, 0), 0, limits) == REQUESTS_LIMIT
    assert refused_by(WindowUsage(2, 60), 40, limits) is None  # exactly the limit passes
    assert refused_by(WindowUsage(2, 60), 41, limits) == BYTES_LIMIT
    assert refused_by(WindowUsage(3, 100), 1, limits) == REQUESTS_LIMIT  # requests named first
    unlimited = WriteLimits(0, 0, 0)
    assert refused_by(WindowUsage(10**9, 10**12), 10**9, unlimited) is None


def test_limits_are_whole_numbers_zero_meaning_none() -> None:
    assert WriteLimits(120, 256 * MIB, 10_000) == DEFAULT_WRITE_LIMITS
    assert WriteLimits.of(30, 8, 500) == WriteLimits(30, 8 * MIB, 500)
    assert not NO_WRITE_LIMITS.per_minute
    assert WriteLimits(0, 1, 0).per_minute
    for bad in (-1, 1.5, True, "10"):
        with pytest.raises(ConfigurationError, match="0 for no limit"):
            WriteLimits(requests_per_minute=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        WriteLimits.of(1, 0.5, 1)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="needs a counter"):
        WriteQuota(WriteLimits(1, 0, 0), None)
    WriteQuota(WriteLimits(0, 0, 5), None).charge("ops-bot", 10**12)  # no counter asked


# --- the quota over the in-process counter --------------------------------------------------


def test_one_agent_over_its_requests_is_refused_until_the_window_ends() -> None:
    clock = Clock(START + 42.3)
    quota = local_write_quota(WriteLimits(3, 0, 0), clock=clock)
    for _ in range(3):
        quota.charge("ops-bot")
    with pytest.raises(RateLimitedError) as refused:
        quota.charge("ops-bot")
    error = refused.value
    assert (error.limit, error.value, error.retry_after, error.retryable) == (
        REQUESTS_LIMIT,
        3,
        18,
        True,
    )
    assert "ops-bot" in error.message
    assert "write_requests_per_minute: 3" in error.message
    assert "retry in 18 s" in error.message
    quota.charge("support-bot")  # another agent's window is its own
    clock.now = START + 59.9
    with pytest.raises(RateLimitedError) as again:
        quota.charge("ops-bot")
    assert again.value.retry_after == 1
    clock.now = START + WINDOW_SECONDS  # the next window: a full allowance again
    for _ in range(3):
        quota.charge("ops-bot")
    with pytest.raises(RateLimitedError):
        quota.charge("ops-bot")


def test_a_refused_request_costs_nothing() -> None:
    counter = InProcessCounter()
    limits = WriteLimits(2, 100, 0)
    quota = WriteQuota(limits, counter, clock=Clock())
    quota.charge("ops-bot", 60)
    with pytest.raises(RateLimitedError) as refused:
        quota.charge("ops-bot", 50)  # 110 bytes would pass 100
    assert (refused.value.limit, refused.value.value) == (BYTES_LIMIT, 100)
    assert "has written 60 bytes this minute" in refused.value.message
    # The refused 50 bytes were not counted: 40 more still fit, and a second request too.
    quota.charge("ops-bot", 40)
    assert counter.add("ops-bot", int(START), 0, limits) == WindowUsage(2, 100)


def test_bytes_per_minute_and_a_request_heavier_than_a_minute() -> None:
    clock = Clock(START + 10)
    quota = local_write_quota(WriteLimits(0, 4 * MIB, 0), clock=clock)
    for _ in range(4):
        quota.charge("ops-bot", MIB)
    with pytest.raises(RateLimitedError) as refused:
        quota.charge("ops-bot", 1)
    assert (refused.value.limit, refused.value.value, refused.value.retry_after) == (
        BYTES_LIMIT,
        4 * MIB,
        50,
    )
    assert "4 MiB a minute" in refused.value.message
    quota.charge("ops-bot")  # a delete weighs nothing and the request count is unlimited
    # More than a whole minute's bytes could never pass: a 413 for the field, not a 429.
    with pytest.raises(TooLargeError) as too_large:
        quota.charge("support-bot", 4 * MIB + 1, field="size")
    assert too_large.value.field == "size"
    assert "write_bytes_per_minute" in too_large.value.message
    clock.now = START + WINDOW_SECONDS
    quota.charge("ops-bot", 4 * MIB)


def test_the_in_process_counter_never_admits_more_than_the_limit_under_threads() -> None:
    quota = local_write_quota(WriteLimits(100, 0, 0), clock=Clock())
    admitted: list[int] = []
    refused: list[int] = []
    start = threading.Barrier(16)

    def writer() -> None:
        start.wait()
        for _ in range(25):
            try:
                quota.charge("ops-bot")
                admitted.append(1)
            except RateLimitedError:
                refused.append(1)

    threads = [threading.Thread(target=writer) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (len(admitted), len(refused)) == (100, 300)


def test_the_in_process_counter_drops_ended_windows_when_it_holds_many_agents(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from knowledge.local import write_quotas

    monkeypatch.setattr(write_quotas, "PRUNE_AT", 10)
    counter = InProcessCounter()
    limits = WriteLimits(1, 0, 0)
    for i in range(10):
        assert counter.add(f"agent-{i}", int(START), 0, limits) is None
    # A new agent in the next window: the ended windows go, the limit still holds per window.
    assert counter.add("late", int(START) + 60, 0, limits) is None
    assert len(counter._windows) == 1
    assert counter.add("late", int(START) + 60, 0, limits) == WindowUsage(1, 0)


# --- the DynamoDB counter (moto) ------------------------------------------------------------


@pytest.fixture
def dynamodb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    use_fake_aws(monkeypatch)
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield client


def item(client: Any, agent: str, window: float) -> dict[str, Any]:
    found: dict[str, Any] = client.get_item(
        TableName=TABLE, Key={"id": {"S": f"{agent}#{int(window)}"}}
    ).get("Item", {})
    return {key: int(value["N"]) for key, value in found.items() if "N" in value}


def test_the_dynamodb_counter_decides_and_counts_in_one_update(dynamodb: Any) -> None:
    clock = Clock(START + 5)
    quota = WriteQuota(WriteLimits(3, 10, 0), DynamoDBCounter(TABLE, dynamodb), clock=clock)
    quota.charge("ops-bot", 4)
    quota.charge("ops-bot", 4)
    with pytest.raises(RateLimitedError) as over_bytes:
        quota.charge("ops-bot", 3)  # 11 bytes would pass 10
    assert (over_bytes.value.limit, over_bytes.value.retry_after) == (BYTES_LIMIT, 55)
    quota.charge("ops-bot", 2)
    with pytest.raises(RateLimitedError) as over_requests:
        quota.charge("ops-bot")
    assert (over_requests.value.limit, over_requests.value.value) == (REQUESTS_LIMIT, 3)
    # Refused requests added nothing; the item's TTL attribute is the window's end.
    assert item(dynamodb, "ops-bot", START) == {
        "requests": 3,
        "bytes": 10,
        "expires_at": int(START) + WINDOW_SECONDS,
    }
    quota.charge("support-bot", 10)
    clock.now = START + WINDOW_SECONDS
    quota.charge("ops-bot", 10)
    assert item(dynamodb, "ops-bot", START + WINDOW_SECONDS)["requests"] == 1


def test_two_containers_share_one_agents_count(dynamodb: Any) -> None:
    """Two search function containers: their own clients and counters, one table."""
    clock = Clock(START + 30)
    limits = WriteLimits(4, 0, 0)
    first = WriteQuota(limits, DynamoDBCounter(TABLE, dynamodb), clock=clock)
    second = WriteQuota(
        limits, DynamoDBCounter(TABLE, boto3.client("dynamodb", region_name=REGION)), clock=clock
    )
    first.charge("ops-bot")
    second.charge("ops-bot")
    first.charge("ops-bot")
    second.charge("ops-bot")
    for quota in (first, second):
        with pytest.raises(RateLimitedError) as refused:
            quota.charge("ops-bot")
        assert "sent 4 write requests this minute" in refused.value.message
    assert item(dynamodb, "ops-bot", START)["requests"] == 4


def test_a_failing_or_missing_table_refuses_the_write_without_naming_it(dynamodb: Any) -> None:
    limits = WriteLimits(3, 0, 0)
    missing = WriteQuota(limits, DynamoDBCounter("no-such-table", dynamodb), clock=Clock())
    with pytest.raises(StoreUnavailableError) as failed:
        missing.charge("ops-bot")
    response = error_response(failed.value, "req-1")
    assert response.status == 503
    assert "no-such-table" not in json.dumps(response.body)
    assert "arn:" not in json.dumps(response.body)
    with pytest.raises(ConfigurationError, match="WRITE_QUOTA_TABLE"):
        WriteQuota(limits, DynamoDBCounter(None), clock=Clock()).charge("ops-bot")


# --- KnowledgeApi's write routes --------------------------------------------------------------


class Storage:
    """A ``DocumentStorage`` that records what reaches it."""

    max_upload_bytes = 64 * MIB

    def __init__(self) -> None:
        self.puts: list[tuple[KnowledgeScope, str, bytes]] = []
        self.deletes: list[str] = []
        self.grants: list[tuple[str, int]] = []

    def put(self, scope: KnowledgeScope, path: str, data: bytes, sidecar: bytes) -> None:
        self.puts.append((scope, path, data))

    def delete(self, scope: KnowledgeScope, path: str) -> bool | None:
        self.deletes.append(path)
        return None

    def presign_upload(
        self, scope: KnowledgeScope, path: str, max_bytes: int, expires_in: int
    ) -> dict[str, Any]:
        self.grants.append((path, max_bytes))
        return {"url": "https://uploads.example", "fields": {}}


def indexed(store: MemoryKnowledgeStore, scope: KnowledgeScope, *paths: str) -> None:
    for path in paths:
        data = f"# {path}\n\nhelm rollback {path}\n".encode()
        upsert_document(
            store, scope, SourceDocument(path=path, size=len(data), read=lambda d=data: d)
        )


def api_with(
    limits: WriteLimits, clock: Clock, store: MemoryKnowledgeStore | None = None
) -> tuple[KnowledgeApi, Storage]:
    storage = Storage()
    api = KnowledgeApi(
        store or MemoryKnowledgeStore(),
        writes=storage,
        write_quota=local_write_quota(limits, clock=clock),
    )
    return api, storage


def put(api: KnowledgeApi, path: str, data: bytes = b"# Note\n\nhelm\n", agent: str = "ops-bot"):
    return api.put_document(agent, "runbooks", path, data, content_type="text/markdown")


def test_the_write_routes_answer_429_with_retry_after_and_store_nothing() -> None:
    clock = Clock(START + 17.5)
    api, storage = api_with(WriteLimits(3, 0, 0), clock)
    assert put(api, "a.md").status == 202
    assert api.delete_document("ops-bot", "runbooks", "a.md").status == 202
    assert api.upload("ops-bot", "runbooks", {"path": "big.pdf", "size": 1000}).status == 200
    refused = put(api, "b.md")
    assert refused.status == 429
    assert refused.headers == {"Retry-After": "43"}
    assert refused.body == {
        "error": (
            "agent 'ops-bot' has sent 3 write requests this minute, its limit "
            "(write_requests_per_minute: 3); retry in 43 s"
        ),
        "field": None,
        "limit": "write_requests_per_minute",
        "limit_value": 3,
        "retry_after": 43,
    }
    for answer in (
        api.delete_document("ops-bot", "runbooks", "a.md"),
        api.upload("ops-bot", "runbooks", {"path": "c.pdf"}),
    ):
        assert (answer.status, answer.body["limit"]) == (429, REQUESTS_LIMIT)
    assert [p for _, p, _ in storage.puts] == ["a.md"]
    assert (storage.deletes, storage.grants) == (["a.md"], [("big.pdf", 1000)])
    # Another agent at the same moment, and the same agent's reads, pass.
    assert put(api, "b.md", agent="support-bot").status == 202
    for _ in range(10):
        assert api.search("ops-bot", "runbooks", {"query": "helm"}).status == 200
        assert api.status("ops-bot", "runbooks").status == 200
        assert api.documents("ops-bot", "runbooks").status == 200
    clock.now = START + WINDOW_SECONDS
    assert put(api, "b.md").status == 202


def test_a_bad_write_is_a_400_and_is_not_counted() -> None:
    api, storage = api_with(WriteLimits(1, 0, 0), Clock())
    for _ in range(3):
        assert put(api, "../escape.md").status == 400
        assert put(api, "blank.md", b" \n").status == 400
    assert put(api, "a.md").status == 202
    assert storage.puts[0][1] == "a.md"


def test_bytes_count_put_bodies_and_upload_grants_by_their_granted_size() -> None:
    clock = Clock(START)
    api, storage = api_with(WriteLimits(0, 10 * MIB, 0), clock)
    body = b"# Big\n\n" + b"helm " * (MIB // 5)
    assert put(api, "big.md", body).status == 202
    assert api.upload("ops-bot", "runbooks", {"path": "m.pdf", "size": 8 * MIB}).status == 200
    refused = api.upload("ops-bot", "runbooks", {"path": "n.pdf", "size": 2 * MIB})
    assert (refused.status, refused.body["limit"], refused.body["limit_value"]) == (
        429,
        BYTES_LIMIT,
        10 * MIB,
    )
    assert refused.headers["Retry-After"] == "60"
    # The grant's default size is the largest the indexer takes: over a minute's bytes.
    too_large = api.upload("support-bot", "runbooks", {"path": "n.pdf"})
    assert (too_large.status, too_large.body["field"]) == (413, "size")
    assert api.delete_document("ops-bot", "runbooks", "big.md").status == 202  # weighs nothing
    assert [g[0] for g in storage.grants] == ["m.pdf"]


def test_a_full_scope_refuses_a_new_path_and_takes_an_overwrite() -> None:
    store = MemoryKnowledgeStore()
    indexed(store, OPS, "a.md", "b.md")
    indexed(store, KnowledgeScope("ops-bot", "manuals"), "m.md")
    api, storage = api_with(WriteLimits(0, 0, 2), Clock(), store)
    refused = put(api, "new.md")
    assert refused.status == 429
    assert refused.headers == {"Retry-After": str(WINDOW_SECONDS)}
    assert refused.body["limit"] == DOCUMENTS_LIMIT
    assert refused.body["limit_value"] == 2
    assert refused.body["retryable"] is False  # waiting alone does not help
    assert "holds 2 documents" in refused.body["error"]
    upload = api.upload("ops-bot", "runbooks", {"path": "new.pdf", "size": 10})
    assert (upload.status, upload.body["limit"]) == (429, DOCUMENTS_LIMIT)
    assert put(api, "a.md", b"# A\n\nrewritten\n").status == 202  # an overwrite
    assert api.upload("ops-bot", "runbooks", {"path": "b.md", "size": 10}).status == 200
    assert (
        api.put_document(
            "ops-bot", "manuals", "new.md", b"# N\n\nx\n", content_type="text/markdown"
        ).status
        == 202
    )  # another scope of the agent has room
    assert [p for _, p, _ in storage.puts] == ["a.md", "new.md"]
    assert [g[0] for g in storage.grants] == ["b.md"]


def test_no_quota_and_zero_limits_never_refuse() -> None:
    store = MemoryKnowledgeStore()
    indexed(store, OPS, "a.md")
    unlimited = KnowledgeApi(store, writes=Storage())
    assert unlimited.write_quota is None
    zero, _ = api_with(NO_WRITE_LIMITS, Clock(), store)
    for api in (unlimited, zero):
        for i in range(300):
            assert put(api, f"n{i}.md").status == 202


def test_a_429_carries_no_trace_and_maps_in_one_place() -> None:
    response = error_response(
        RateLimitedError(REQUESTS_LIMIT, 5, 7, "agent 'a' is over; retry in 7 s"), "req-1"
    )
    assert (response.status, response.headers) == (429, {"Retry-After": "7"})
    assert response.body == {
        "error": "agent 'a' is over; retry in 7 s",
        "field": None,
        "limit": REQUESTS_LIMIT,
        "limit_value": 5,
        "retry_after": 7,
    }


class DownIndex(MemoryKnowledgeStore):
    """A store whose index cannot answer (an OpenSearch outage)."""

    def get_document(self, scope: KnowledgeScope, path: str) -> Any:
        raise StoreUnavailableError("https://search-kb.example.amazonaws.com: timed out")


def test_an_index_that_cannot_answer_skips_the_documents_limit_not_the_minute(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The bucket (or folder) takes writes without the index: the document count is
    skipped, logged, and the per-minute limits still hold."""
    api, storage = api_with(WriteLimits(2, 0, 1), Clock(), DownIndex())
    with caplog.at_level("WARNING", logger="knowledge.service.api"):
        assert put(api, "a.md").status == 202
        assert put(api, "b.md").status == 202
    assert (put(api, "c.md").status, put(api, "c.md").body["limit"]) == (429, REQUESTS_LIMIT)
    assert [p for _, p, _ in storage.puts] == ["a.md", "b.md"]
    assert "documents limit of ops-bot/runbooks was not checked" in caplog.text
    assert "amazonaws" not in caplog.text
