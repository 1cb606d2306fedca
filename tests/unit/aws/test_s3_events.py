"""knowledge.aws.events: SQS message bodies (S3 notifications, reindex requests) -> actions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from knowledge.aws.events import (
    REINDEX_EVENT_NAME,
    REINDEX_MESSAGE_TYPE,
    ActionKind,
    ObjectAction,
    ReindexPhase,
    ReindexTask,
    decode_object_key,
    parse_s3_record,
    parse_sqs_message,
    reindex_message_body,
)
from knowledge.core.errors import ValidationError
from knowledge.core.scope import KnowledgeScope

EVENTS = Path(__file__).resolve().parents[3] / "events"
BUCKET = "kb-123456789012-example"
SCOPE = KnowledgeScope("ops-bot", "runbooks")


def sample_bodies(name: str) -> list[str]:
    event = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return [record["body"] for record in event["Records"]]


def only_action(name: str) -> ObjectAction:
    (body,) = sample_bodies(name)
    (action,) = parse_sqs_message(body, bucket=BUCKET)
    return action


def record(event_name: str, key: str, sequencer: str | None = "00A1", bucket: str = BUCKET):
    s3_object: dict[str, Any] = {"key": key, "size": 10}
    if sequencer is not None:
        s3_object["sequencer"] = sequencer
    return {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "eventName": event_name,
        "s3": {"bucket": {"name": bucket}, "object": s3_object},
    }


def body(*records: dict[str, Any]) -> str:
    return json.dumps({"Records": list(records)})


# --- the samples in events/ --------------------------------------------------------------


@pytest.mark.parametrize(
    ("sample", "event_name", "path"),
    [
        ("sqs_s3_put.json", "ObjectCreated:Put", "deploy.md"),
        ("sqs_s3_post.json", "ObjectCreated:Post", "rollback.md"),
        ("sqs_s3_copy.json", "ObjectCreated:Copy", "archive/deploy-2024.md"),
    ],
)
def test_created_events_are_upserts_with_the_sequencer_as_version(sample, event_name, path):
    action = only_action(sample)
    assert action.kind is ActionKind.UPSERT
    assert action.event_name == event_name
    assert action.scope == SCOPE
    assert action.path == path
    assert action.version == "0065F2A1B3C4D5E6F7"
    assert action.bucket == BUCKET


def test_multipart_upload_is_an_upsert():
    action = only_action("sqs_s3_multipart_upload.json")
    assert action.kind is ActionKind.UPSERT
    assert action.event_name == "ObjectCreated:CompleteMultipartUpload"
    assert action.scope == KnowledgeScope("ops-bot", "manuals")
    assert action.path == "large-guide.md"


@pytest.mark.parametrize(
    ("sample", "event_name"),
    [
        ("sqs_s3_delete.json", "ObjectRemoved:Delete"),
        ("sqs_s3_delete_marker.json", "ObjectRemoved:DeleteMarkerCreated"),
    ],
)
def test_removed_events_are_deletes(sample, event_name):
    action = only_action(sample)
    assert action.kind is ActionKind.DELETE
    assert action.event_name == event_name
    assert (action.scope, action.path) == (SCOPE, "deploy.md")
    assert action.version == "0065F2A1B3C4D5E700"


def test_s3_test_event_is_ignored():
    action = only_action("sqs_s3_test_event.json")
    assert action.kind is ActionKind.IGNORE
    assert action.event_name == "s3:TestEvent"
    assert "test event" in (action.reason or "")


def test_url_encoded_korean_key_with_spaces_is_decoded():
    action = only_action("sqs_s3_korean_key.json")
    assert action.kind is ActionKind.UPSERT
    assert action.key == "ops-bot/runbooks/장애 대응/배포 실패 대응.md"
    assert action.path == "장애 대응/배포 실패 대응.md"


def test_plus_is_a_space_and_percent_2b_is_a_plus():
    (action,) = parse_sqs_message(body(record("ObjectCreated:Put", "a/b/c+%2B+d.md")))
    assert action.path == "c + d.md"


def test_invalid_keys_are_rejected_with_a_structured_reason():
    first, second = (
        parse_sqs_message(b, bucket=BUCKET) for b in sample_bodies("sqs_s3_invalid_key.json")
    )
    (bad_agent,) = first
    assert bad_agent.kind is ActionKind.REJECT
    assert bad_agent.field == "agent"
    assert bad_agent.key == "ops bot/runbooks/deploy.md"
    assert "ops bot" in (bad_agent.reason or "")
    (no_scope,) = second
    assert no_scope.kind is ActionKind.REJECT
    assert no_scope.field == "key"
    assert "<agent>/<context>/<path>" in (no_scope.reason or "")


def test_sidecar_change_reindexes_the_document_it_describes_without_a_version():
    action = only_action("sqs_s3_sidecar.json")
    assert action.kind is ActionKind.UPSERT
    assert action.key == "ops-bot/runbooks/deploy.md.metadata.json"
    assert action.is_sidecar
    assert action.path == "deploy.md"
    # The sidecar's sequencer orders the sidecar's events, not the document's.
    assert action.version is None


def test_sidecar_removal_also_reindexes_the_document():
    (action,) = parse_sqs_message(
        body(record("ObjectRemoved:Delete", "ops-bot/runbooks/deploy.md.metadata.json"))
    )
    assert action.kind is ActionKind.UPSERT
    assert action.path == "deploy.md"


def test_folder_placeholder_is_ignored():
    action = only_action("sqs_s3_folder_placeholder.json")
    assert action.kind is ActionKind.IGNORE
    assert action.key == "ops-bot/runbooks/drafts/"


@pytest.mark.parametrize("key", ["a/b/.DS_Store", "a/b/.git/config.md", "a/b/notes/.hidden.md"])
def test_hidden_files_are_ignored_like_the_local_sources_do(key):
    (action,) = parse_sqs_message(body(record("ObjectCreated:Put", key)))
    assert action.kind is ActionKind.IGNORE
    assert "hidden" in (action.reason or "")


@pytest.mark.parametrize("key", ["a/b/c//d.md", "a/b/../x.md", "a/../b/c.md", "a/b/"])
def test_keys_with_empty_or_dot_segments_never_become_documents(key):
    (action,) = parse_sqs_message(body(record("ObjectCreated:Put", key)))
    assert action.kind in (ActionKind.REJECT, ActionKind.IGNORE)
    assert action.path is None or ".." not in action.path.split("/")


def test_mixed_batch_sample_gives_one_action_per_record():
    kinds = [
        parse_sqs_message(b, bucket=BUCKET)[0].kind for b in sample_bodies("sqs_mixed_batch.json")
    ]
    assert kinds == [
        ActionKind.IGNORE,  # test event
        ActionKind.UPSERT,  # put
        ActionKind.UPSERT,  # multipart
        ActionKind.UPSERT,  # copy
        ActionKind.UPSERT,  # Korean key
        ActionKind.DELETE,  # delete
        ActionKind.DELETE,  # delete marker
        ActionKind.REJECT,  # invalid agent
        ActionKind.UPSERT,  # sidecar -> its document
        ActionKind.IGNORE,  # folder placeholder
    ]


# --- shapes and edge cases -------------------------------------------------------------------


def test_one_message_with_several_records_gives_several_actions_in_order():
    actions = parse_sqs_message(
        body(record("ObjectCreated:Put", "a/b/1.md"), record("ObjectRemoved:Delete", "a/b/2.md"))
    )
    assert [(a.kind, a.path) for a in actions] == [
        (ActionKind.UPSERT, "1.md"),
        (ActionKind.DELETE, "2.md"),
    ]


def test_empty_records_list_gives_no_actions():
    assert parse_sqs_message(json.dumps({"Records": []})) == []


def test_lifecycle_expiration_deletes_and_other_event_types_are_ignored():
    (expired,) = parse_sqs_message(body(record("LifecycleExpiration:Delete", "a/b/c.md")))
    assert expired.kind is ActionKind.DELETE
    for other in ("ObjectRestore:Post", "ObjectRestore:Delete", "LifecycleTransition"):
        (ignored,) = parse_sqs_message(body(record(other, "a/b/c.md")))
        assert ignored.kind is ActionKind.IGNORE
        assert other in (ignored.reason or "")


def test_a_completed_restore_reads_the_object_again_without_a_version():
    """An archived object is readable once its restore completes: index it as it is now
    (its sequencer is not ordered against the key's create events)."""
    (restored,) = parse_sqs_message(body(record("ObjectRestore:Completed", "a/b/c.md")))
    assert (restored.kind, restored.path, restored.version) == (ActionKind.UPSERT, "c.md", None)


def test_event_name_with_s3_prefix_is_accepted():
    (action,) = parse_sqs_message(body(record("s3:ObjectCreated:Put", "a/b/c.md")))
    assert action.kind is ActionKind.UPSERT
    assert action.event_name == "ObjectCreated:Put"


def test_event_from_another_bucket_is_rejected():
    (action,) = parse_sqs_message(
        body(record("ObjectCreated:Put", "a/b/c.md", bucket="someone-else")), bucket=BUCKET
    )
    assert action.kind is ActionKind.REJECT
    assert action.field == "bucket"
    assert "someone-else" in (action.reason or "")


def test_without_a_bucket_restriction_any_bucket_is_accepted():
    (action,) = parse_sqs_message(body(record("ObjectCreated:Put", "a/b/c.md", bucket="other")))
    assert action.kind is ActionKind.UPSERT
    assert action.bucket == "other"


def test_missing_sequencer_is_no_version():
    (action,) = parse_sqs_message(body(record("ObjectCreated:Put", "a/b/c.md", sequencer=None)))
    assert action.version is None


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (None, "body"),
        ("", "body"),
        ("   ", "body"),
        ("not json", "body"),
        ("[1, 2]", "body"),
        ('"a string"', "body"),
        ('{"hello": "world"}', "body"),
        ('{"Records": "nope"}', "body"),
        ('{"Records": [42]}', "Records"),
        ('{"Records": [{"s3": {"object": {"key": "a/b/c.md"}}}]}', "eventName"),
        ('{"Records": [{"eventName": "ObjectCreated:Put", "s3": {}}]}', "key"),
        ('{"Records": [{"eventName": "ObjectCreated:Put"}]}', "key"),
    ],
)
def test_bodies_that_are_not_notifications_are_rejected_never_raised(raw, field):
    actions = parse_sqs_message(raw)
    assert len(actions) == 1
    assert actions[0].kind is ActionKind.REJECT
    assert actions[0].field == field
    assert actions[0].reason


def test_sns_envelope_is_unwrapped():
    envelope = json.dumps(
        {
            "Type": "Notification",
            "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
            "TopicArn": "arn:aws:sns:us-east-1:123456789012:documents",
            "Message": body(record("ObjectCreated:Put", "a/b/c.md")),
        }
    )
    (action,) = parse_sqs_message(envelope)
    assert (action.kind, action.path) == (ActionKind.UPSERT, "c.md")


def test_parse_s3_record_directly():
    action = parse_s3_record(record("ObjectCreated:Put", "ops-bot/runbooks/x.md"), bucket=BUCKET)
    assert (action.kind, action.scope, action.path) == (ActionKind.UPSERT, SCOPE, "x.md")


# --- reindex messages -----------------------------------------------------------------------


def test_reindex_message_round_trips_to_an_unversioned_upsert():
    raw = reindex_message_body(BUCKET, "ops-bot/runbooks/장애 대응/배포.md")
    assert json.loads(raw)["type"] == REINDEX_MESSAGE_TYPE
    (action,) = parse_sqs_message(raw, bucket=BUCKET)
    assert action.kind is ActionKind.UPSERT
    assert action.event_name == REINDEX_EVENT_NAME
    assert action.path == "장애 대응/배포.md"
    assert action.version is None


def test_reindex_sample_is_an_upsert():
    action = only_action("sqs_reindex.json")
    assert (action.kind, action.path, action.event_name) == (
        ActionKind.UPSERT,
        "deploy.md",
        REINDEX_EVENT_NAME,
    )


def test_reindex_message_keys_are_not_url_decoded():
    (action,) = parse_sqs_message(reindex_message_body(BUCKET, "a/b/100%+sure.md"))
    assert action.path == "100%+sure.md"


def test_reindex_message_for_another_bucket_or_without_key_is_rejected():
    (other,) = parse_sqs_message(reindex_message_body("other", "a/b/c.md"), bucket=BUCKET)
    assert (other.kind, other.field) == (ActionKind.REJECT, "bucket")
    (no_key,) = parse_sqs_message(json.dumps({"type": REINDEX_MESSAGE_TYPE, "bucket": BUCKET}))
    assert (no_key.kind, no_key.field) == (ActionKind.REJECT, "key")


def test_reindex_message_body_needs_bucket_and_key():
    with pytest.raises(ValidationError):
        reindex_message_body("", "a/b/c.md")


def test_log_fields_leave_out_unknowns():
    fields = only_action("sqs_s3_put.json").log_fields()
    assert fields["action"] == "upsert"
    assert fields["agent"] == "ops-bot"
    assert fields["context"] == "runbooks"
    assert "reason" not in fields
    assert all(value is not None for value in fields.values())


@pytest.mark.parametrize(
    ("raw", "url_encoded", "key", "problem"),
    [
        ("a/b/ok%20file.md", True, "a/b/ok file.md", None),
        ("a/b/bad%ED%A0%80.md", True, "a/b/bad\\xed\\xa0\\x80.md", "not UTF-8"),
        ("a/b/x\udc80.md", False, "a/b/x\\udc80.md", "lone surrogate (U+DC80) at position 5"),
        # Two surrogates in a Python str are not a pair; json.loads would have joined them.
        ("a/b/\ud83d\ude00.md", False, "a/b/\\ud83d\\ude00.md", "lone surrogate (U+D83D)"),
        ("a/b/😀.md", False, "a/b/😀.md", None),
    ],
)
def test_keys_that_cannot_be_s3_keys(raw, url_encoded, key, problem):
    decoded, found = decode_object_key(raw, url_encoded=url_encoded)
    if problem is None:
        assert (decoded, found) == (key, None)
    else:
        assert found is not None
        assert problem in found
        assert decoded == key
        decoded.encode("utf-8")  # the reported key can always be logged


def _scope_message(**fields: Any) -> str:
    message = {
        "type": "knowledge.reindex_scope",
        "bucket": "kb-docs",
        "agent": "ops-bot",
        "context": "runbooks",
        "phase": "objects",
        "cursor": None,
    }
    message.update(fields)
    return json.dumps(message)


def test_scope_reindex_message_round_trips():
    task = ReindexTask(
        "kb-docs", KnowledgeScope("ops-bot", "runbooks"), ReindexPhase.REMOVALS, "x.md"
    )
    (action,) = parse_sqs_message(task.to_body(), bucket="kb-docs")
    assert action.kind is ActionKind.REINDEX_SCOPE
    assert action.task == task
    assert action.log_fields()["phase"] == "removals"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"bucket": "another"}, "bucket"),
        ({"agent": "ops bot"}, "agent"),
        ({"context": None}, "context"),
        ({"phase": "everything"}, "phase"),
        ({"cursor": 42}, "cursor"),
    ],
)
def test_bad_scope_reindex_messages_are_rejected(fields, field):
    (action,) = parse_sqs_message(_scope_message(**fields), bucket="kb-docs")
    assert (action.kind, action.field) == (ActionKind.REJECT, field)


def test_a_repository_registration_key_is_ignored_not_rejected() -> None:
    """``.kb@repos/...`` (knowledge.ingest.repos) holds registrations, never documents."""
    from knowledge.aws.events import ActionKind, parse_s3_record

    record = {
        "eventSource": "aws:s3",
        "eventName": "ObjectCreated:Put",
        "s3": {
            "bucket": {"name": "b"},
            "object": {"key": ".kb%40repos/ops-bot/runbooks/docs.json", "sequencer": "01"},
        },
    }
    action = parse_s3_record(record, bucket="b")
    assert action.kind is ActionKind.IGNORE
