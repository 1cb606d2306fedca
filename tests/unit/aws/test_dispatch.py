"""knowledge.aws.dispatch: the routing decision (pure) and the forward's batching.

The routes are checked against bodies shaped as S3, SNS and the reindex code write them;
the thresholds at and around their limits. The dispatcher function against moto's SQS is
in test_handlers_dispatcher.py; one tenant's drop against another's edit, end to end, in
test_fair_indexing.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from lambda_support import BUCKET, load_event, s3_notification

from knowledge.aws.dispatch import (
    BodyKind,
    DispatchPolicy,
    DispatchSettings,
    ExpressHistory,
    Lane,
    Reason,
    Route,
    message_facts,
    route_batch,
)
from knowledge.aws.dispatch import _chunks as chunks
from knowledge.aws.events import ReindexTask, reindex_message_body
from knowledge.core.errors import ConfigurationError, ValidationError
from knowledge.core.scope import KnowledgeScope

MIB = 1024 * 1024
POLICY = DispatchPolicy(express_max_events=3, express_max_object_bytes=8 * MIB)


def put(key: str, size: int = 100, event: str = "ObjectCreated:Put") -> str:
    body = s3_notification(event, key, "0001")
    body["Records"][0]["s3"]["object"]["size"] = size
    return json.dumps(body)


def delete(key: str) -> str:
    body = s3_notification("ObjectRemoved:Delete", key, "0002")
    del body["Records"][0]["s3"]["object"]["size"]
    return json.dumps(body)


def sns(inner: str) -> str:
    return json.dumps({"Type": "Notification", "Message": inner, "TopicArn": "arn:aws:sns:x"})


def lanes(routes: list[Route]) -> list[str]:
    return [route.lane.value for route in routes]


# --- the facts of one body ---------------------------------------------------------------


def test_an_s3_notification_names_its_agent_events_and_size() -> None:
    facts = message_facts(put("ops-bot/runbooks/deploy.md", size=2048))
    assert facts.kind is BodyKind.NOTIFICATION
    assert facts.agent_events == (("ops-bot", 1),)
    assert (facts.events, facts.largest_bytes) == (1, 2048)


def test_the_samples_of_every_event_kind_name_their_agent() -> None:
    for sample in ("sqs_s3_put.json", "sqs_s3_delete.json", "sqs_s3_korean_key.json"):
        (record,) = load_event(sample)["Records"]
        assert message_facts(record["body"]).agents == ("ops-bot",), sample
    (scope,) = load_event("sqs_reindex_scope.json")["Records"]
    facts = message_facts(scope["body"])
    assert (facts.kind, facts.agents) == (BodyKind.REINDEX, ("ops-bot",))


def test_url_encoded_keys_and_sns_envelopes_are_read_as_the_indexer_reads_them() -> None:
    encoded = put("support-bot%2Ffaq%2Fmy+file.md")  # moto and S3 encode '/' and ' '
    assert message_facts(encoded).agents == ("support-bot",)
    assert message_facts(sns(encoded)).agents == ("support-bot",)
    assert message_facts(sns(sns(encoded))).agents == ("support-bot",)


def test_a_multi_record_notification_counts_each_agent() -> None:
    body = s3_notification("ObjectCreated:Put", "a/c/1.md", "01")
    record = body["Records"][0]
    body["Records"] = [
        record,
        {**record, "s3": {**record["s3"], "object": {"key": "a/c/2.md", "size": 9 * MIB}}},
        {**record, "s3": {**record["s3"], "object": {"key": "b/c/3.md"}}},
        {**record, "s3": {**record["s3"], "object": {"key": "not-a-scope.md"}}},
    ]
    facts = message_facts(json.dumps(body))
    assert facts.agent_events == (("a", 2), ("b", 1))
    assert (facts.events, facts.largest_bytes) == (4, 9 * MIB)


@pytest.mark.parametrize(
    "body",
    [
        None,
        "",
        "   ",
        "not json",
        "[1, 2]",
        '{"Records": "no list"}',
        load_event("sqs_s3_test_event.json")["Records"][0]["body"],
        json.dumps({"Type": "Notification", "Message": 5}),
        "[" * 100_000,  # too deep for the parser: not JSON here either
    ],
)
def test_bodies_that_are_not_s3_notifications_are_other(body: str | None) -> None:
    assert message_facts(body).kind is BodyKind.OTHER


def test_reindex_messages_name_the_agent_of_their_key_or_scope() -> None:
    key = message_facts(reindex_message_body(BUCKET, "drop-bot/archive/a.md"))
    scope = message_facts(ReindexTask(BUCKET, KnowledgeScope("drop-bot", "archive")).to_body())
    assert (key.kind, key.agents) == (BodyKind.REINDEX, ("drop-bot",))
    assert (scope.kind, scope.agents) == (BodyKind.REINDEX, ("drop-bot",))
    bad = message_facts(json.dumps({"type": "knowledge.reindex", "key": "no-agent.md"}))
    assert (bad.kind, bad.agents) == (BodyKind.REINDEX, ())


@pytest.mark.parametrize(
    "key",
    [
        ".kb@repos/ops-bot/runbooks/docs.json",  # a repository registration
        "BAD AGENT/runbooks/a.md",
        "toplevel.md",
        "ops-bot%ED%A0%80/runbooks/a.md",  # escapes that are not UTF-8
    ],
)
def test_keys_without_a_valid_agent_name_no_agent(key: str) -> None:
    facts = message_facts(put(key))
    assert (facts.kind, facts.agents, facts.events) == (BodyKind.NOTIFICATION, (), 1)


# --- the routes of one batch --------------------------------------------------------------


def test_an_agent_with_few_events_goes_express_with_its_agent_as_group() -> None:
    routes = route_batch([put(f"quiet/faq/{i}.md") for i in range(3)], POLICY)
    assert routes == [Route(Lane.EXPRESS, "quiet", Reason.FEW_EVENTS)] * 3


def test_one_event_over_the_threshold_sends_all_the_agents_events_bulk() -> None:
    routes = route_batch([put(f"busy/archive/{i}.md") for i in range(4)], POLICY)
    assert routes == [Route(Lane.BULK, "busy", Reason.BUSY_AGENT)] * 4


def test_a_busy_agent_does_not_drag_a_quiet_one_into_the_bulk_lane() -> None:
    bodies = [put(f"busy/archive/{i}.md") for i in range(50)]
    bodies.insert(25, put("quiet/faq/refunds.md"))
    bodies.append(delete("quiet/faq/old.md"))
    routes = route_batch(bodies, POLICY)
    assert routes[25] == Route(Lane.EXPRESS, "quiet", Reason.FEW_EVENTS)
    assert routes[-1] == Route(Lane.EXPRESS, "quiet", Reason.FEW_EVENTS)
    busy = [r for i, r in enumerate(routes) if i not in (25, len(routes) - 1)]
    assert set(busy) == {Route(Lane.BULK, "busy", Reason.BUSY_AGENT)}


def test_deletes_count_towards_an_agents_events_too() -> None:
    bodies = [delete(f"busy/archive/{i}.md") for i in range(4)]
    assert set(lanes(route_batch(bodies, POLICY))) == {"bulk"}


def test_a_large_object_goes_bulk_even_alone() -> None:
    at_limit = put("quiet/faq/at-limit.pdf", size=8 * MIB)
    over = put("quiet/faq/huge.pdf", size=8 * MIB + 1)
    assert route_batch([at_limit], POLICY) == [Route(Lane.EXPRESS, "quiet", Reason.FEW_EVENTS)]
    assert route_batch([over], POLICY) == [Route(Lane.BULK, "quiet", Reason.LARGE_OBJECT)]


def test_recent_express_events_count_towards_the_threshold() -> None:
    bodies = [put("pacer/faq/a.md"), put("pacer/faq/b.md")]
    assert lanes(route_batch(bodies, POLICY, {"pacer": 1})) == ["express", "express"]
    assert lanes(route_batch(bodies, POLICY, {"pacer": 2})) == ["bulk", "bulk"]
    assert lanes(route_batch(bodies, POLICY, {"someone-else": 9})) == ["express", "express"]


def test_reindex_messages_go_bulk_grouped_by_agent() -> None:
    bodies = [
        ReindexTask(BUCKET, KnowledgeScope("drop-bot", "archive")).to_body(),
        reindex_message_body(BUCKET, "drop-bot/archive/a.md"),
        put("drop-bot/archive/b.md"),  # its one edit is still an edit
    ]
    assert route_batch(bodies, POLICY) == [
        Route(Lane.BULK, "drop-bot", Reason.REINDEX),
        Route(Lane.BULK, "drop-bot", Reason.REINDEX),
        Route(Lane.EXPRESS, "drop-bot", Reason.FEW_EVENTS),
    ]


def test_bodies_that_name_no_agent_go_express_as_they_are_without_a_group() -> None:
    (test_event,) = load_event("sqs_s3_test_event.json")["Records"]
    bodies = [
        test_event["body"],
        "not json",
        put(".kb@repos/ops-bot/runbooks/docs.json"),
        json.dumps({"type": "knowledge.reindex", "key": "no-agent.md"}),
    ]
    assert route_batch(bodies, POLICY) == [
        Route(Lane.EXPRESS, None, Reason.NOT_A_NOTIFICATION),
        Route(Lane.EXPRESS, None, Reason.NOT_A_NOTIFICATION),
        Route(Lane.EXPRESS, None, Reason.NO_AGENT),
        Route(Lane.EXPRESS, None, Reason.NO_AGENT),
    ]


def test_a_message_naming_two_agents_goes_bulk_if_either_is_busy() -> None:
    body = s3_notification("ObjectCreated:Put", "busy/c/x.md", "01")
    body["Records"].append(s3_notification("ObjectCreated:Put", "quiet/c/y.md", "02")["Records"][0])
    bodies = [json.dumps(body)] + [put(f"busy/c/{i}.md") for i in range(3)]
    assert route_batch(bodies, POLICY)[0] == Route(Lane.BULK, "busy", Reason.BUSY_AGENT)


# --- the container's memory and the settings -------------------------------------------


def test_express_history_forgets_events_older_than_its_window() -> None:
    now = [1000.0]
    history = ExpressHistory(60, clock=lambda: now[0])
    history.record("a", 3)
    now[0] += 30
    history.record("a", 2)
    history.record("b", 1)
    assert history.counts() == {"a": 5, "b": 1}
    now[0] += 31  # the first entry is 61 s old
    assert history.counts() == {"a": 2, "b": 1}
    now[0] += 30
    assert history.counts() == {}
    off = ExpressHistory(0, clock=lambda: now[0])
    off.record("a", 3)
    assert off.counts() == {}


@pytest.mark.parametrize(
    "values",
    [
        {"express_max_events": 0},
        {"express_max_object_bytes": 0},
        {"window_seconds": -1},
        {"window_seconds": float("nan")},
    ],
)
def test_policy_refuses_thresholds_that_cannot_work(values: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        DispatchPolicy(**values)


def test_settings_come_from_the_template_environment() -> None:
    env = {
        "EXPRESS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/1/express",
        "BULK_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/1/bulk",
        "EXPRESS_MAX_EVENTS": "25",
        "EXPRESS_MAX_OBJECT_MIB": "16",
        "EXPRESS_WINDOW_SECONDS": "30",
    }
    settings = DispatchSettings.from_env(env)
    assert settings.express_queue_url.endswith("/express")
    assert settings.bulk_queue_url.endswith("/bulk")
    assert settings.policy == DispatchPolicy(25, 16 * MIB, 30)
    defaults = DispatchSettings.from_env({k: env[k] for k in list(env)[:2]})
    assert defaults.policy == DispatchPolicy(10, 8 * MIB, 60)
    with pytest.raises(ConfigurationError, match="BULK_QUEUE_URL"):
        DispatchSettings.from_env({"EXPRESS_QUEUE_URL": env["EXPRESS_QUEUE_URL"]})
    with pytest.raises(ConfigurationError, match="EXPRESS_MAX_EVENTS"):
        DispatchSettings.from_env({**env, "EXPRESS_MAX_EVENTS": "2.5"})
    with pytest.raises(ConfigurationError, match="express_max_events"):
        DispatchSettings.from_env({**env, "EXPRESS_MAX_EVENTS": "0"})


def test_forwarded_entries_are_batched_by_ten_and_by_bytes() -> None:
    small = [{"Id": str(i), "MessageBody": "x" * 100} for i in range(25)]
    assert [len(c) for c in chunks(small)] == [10, 10, 5]
    large = [{"Id": str(i), "MessageBody": "x" * 90_000} for i in range(5)]
    assert [len(c) for c in chunks(large)] == [2, 2, 1]
    huge = [{"Id": "0", "MessageBody": "x" * 250_000}, {"Id": "1", "MessageBody": "y"}]
    assert [len(c) for c in chunks(huge)] == [1, 1]
