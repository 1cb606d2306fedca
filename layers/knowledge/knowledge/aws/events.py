"""Document events: S3 notifications (delivered through SQS) and reindex requests, as actions.

Pure parsing, no I/O. One SQS message body becomes a list of ``ObjectAction``:

- ``ObjectCreated:*`` (Put, Post, Copy, CompleteMultipartUpload) -> ``UPSERT``;
- ``ObjectRestore:Completed`` (an archived object became readable) -> ``UPSERT`` without
  a version (an archived object is skipped with a problem, ``knowledge.ingest.pipeline``);
- ``ObjectRemoved:*`` (Delete, DeleteMarkerCreated) and ``LifecycleExpiration:*`` -> ``DELETE``
  (in a versioned bucket a delete may remove an old version, the latest one, or a delete
  marker: the indexer re-checks the object's current state, ``knowledge.aws.event_indexing``);
- the ``s3:TestEvent`` S3 sends when notifications are configured, folder placeholders
  (keys ending in ``/``), hidden files (a path segment starting with ``.``, as the local
  sources skip them) and other event types -> ``IGNORE``;
- a key outside ``<agent>/<context>/<path>`` (``knowledge.core.scope.parse_object_key``), an
  event from another bucket, or a body that is not an S3 notification -> ``REJECT``,
  with a structured reason. Rejected and ignored events are acknowledged, not retried:
  retrying cannot make them valid, and the object stays in S3.

Keys arrive URL-encoded (``+`` for a space) and are decoded with ``unquote_plus``. A key
whose escapes are not UTF-8, or that holds a lone surrogate (a JSON ``\\ud800`` escape), is
rejected (field ``key``): no S3 object can have such a key, so retrying cannot succeed; the
logged key shows the bad character escaped. A
metadata sidecar ``<key>.metadata.json`` changes the metadata of the document it
describes, so any event on it becomes an ``UPSERT`` of that document. The ``sequencer``
of the event is the action's ``version``: for one key, a larger sequencer is a later
event. Sidecar and reindex actions carry no version, because a sequencer orders events
of one key only and a listing has none.

``reindex_message_body`` builds the message queued for each key of a reindexed scope;
the indexer parses it back into an ``UPSERT`` (which removes the document if the object
is gone). ``ReindexTask.to_body`` builds the one message ``POST .../reindex`` queues for
a whole scope; it becomes a ``REINDEX_SCOPE`` action carrying the task (the indexer
expands it page by page, ``knowledge.aws.reindex_queue``). An SNS envelope around an S3
notification (S3 -> SNS -> SQS fan-out) is unwrapped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import unquote_plus

from knowledge.core.errors import ValidationError
from knowledge.core.scope import KnowledgeScope, parse_object_key
from knowledge.core.source import SIDECAR_SUFFIX
from knowledge.ingest.repos import REGISTRY_PREFIX

__all__ = [
    "REINDEX_EVENT_NAME",
    "REINDEX_MESSAGE_TYPE",
    "REINDEX_SCOPE_EVENT_NAME",
    "REINDEX_SCOPE_MESSAGE_TYPE",
    "ActionKind",
    "ObjectAction",
    "ReindexPhase",
    "ReindexTask",
    "decode_object_key",
    "parse_s3_record",
    "parse_sqs_message",
    "reindex_message_body",
]

REINDEX_MESSAGE_TYPE = "knowledge.reindex"
"""``type`` of the message body that ``POST .../reindex`` queues for each key."""

REINDEX_EVENT_NAME = "Reindex"
"""``ObjectAction.event_name`` of an action parsed from a reindex message."""

REINDEX_SCOPE_MESSAGE_TYPE = "knowledge.reindex_scope"
"""``type`` of the one message ``POST .../reindex`` queues for a whole scope."""

REINDEX_SCOPE_EVENT_NAME = "ReindexScope"
"""``ObjectAction.event_name`` of an action parsed from a scope reindex message."""

_TEST_EVENT = "s3:TestEvent"
_UPSERT_PREFIXES = ("ObjectCreated:",)
_DELETE_PREFIXES = ("ObjectRemoved:", "LifecycleExpiration:")
_RESTORE_COMPLETED = "ObjectRestore:Completed"


class ActionKind(StrEnum):
    """What the indexer does for one event."""

    UPSERT = "upsert"
    DELETE = "delete"
    REINDEX_SCOPE = "reindex_scope"
    IGNORE = "ignore"
    REJECT = "reject"


class ReindexPhase(StrEnum):
    """Where a scope reindex is: queueing the bucket's keys, then the index's leftovers."""

    OBJECTS = "objects"
    REMOVALS = "removals"


@dataclass(frozen=True, slots=True)
class ReindexTask:
    """One step of a scope reindex, carried by a queue message.

    ``phase`` ``objects``: list the scope's prefix from ``cursor`` (an S3 continuation
    token; ``None`` = from the start). ``removals``: walk the index's documents of the
    scope whose path sorts after ``cursor`` and queue the ones the bucket no longer has.
    """

    bucket: str
    scope: KnowledgeScope
    phase: ReindexPhase = ReindexPhase.OBJECTS
    cursor: str | None = None
    unread: Mapping[str, int] | None = None
    """The ``objects`` phase's counts so far of the keys no pattern selects, by extension
    (``IndexStatus.unread_files``), carried from step to step; ``None``: none yet."""

    def to_body(self) -> str:
        """The SQS message body of this step."""
        body: dict[str, Any] = {
            "type": REINDEX_SCOPE_MESSAGE_TYPE,
            "bucket": self.bucket,
            "agent": self.scope.agent,
            "context": self.scope.context,
            "phase": self.phase.value,
            "cursor": self.cursor,
        }
        if self.unread:
            body["unread"] = dict(self.unread)
        return json.dumps(
            body,
            ensure_ascii=False,
            separators=(",", ":"),
        )


@dataclass(frozen=True, slots=True)
class ObjectAction:
    """One thing to do for one object event.

    ``key`` is the decoded key the event names (the sidecar's key for a sidecar event);
    ``scope`` and ``path`` name the document to act on (``None`` for ignored or rejected
    events that have none). ``reason`` says why an event is ignored or rejected, and
    ``field`` which part of it is wrong (``key``, ``agent``, ``context``, ``bucket``, ...).
    """

    kind: ActionKind
    event_name: str | None = None
    bucket: str | None = None
    key: str | None = None
    scope: KnowledgeScope | None = None
    path: str | None = None
    version: str | None = None
    reason: str | None = None
    field: str | None = None
    task: ReindexTask | None = None

    @property
    def is_sidecar(self) -> bool:
        """True if the event was on the document's metadata sidecar, not the document."""
        return self.key is not None and self.key.endswith(SIDECAR_SUFFIX)

    def log_fields(self) -> dict[str, Any]:
        """Structured fields for a log line (no ``None`` values)."""
        fields: dict[str, Any] = {
            "action": self.kind.value,
            "event_name": self.event_name,
            "bucket": self.bucket,
            "key": self.key,
            "agent": None if self.scope is None else self.scope.agent,
            "context": None if self.scope is None else self.scope.context,
            "path": self.path,
            "version": self.version,
            "reason": self.reason,
            "field": self.field,
        }
        if self.task is not None:
            fields["phase"] = self.task.phase.value
        return {name: value for name, value in fields.items() if value is not None}


def _reject(reason: str, field: str, **known: Any) -> ObjectAction:
    return ObjectAction(ActionKind.REJECT, reason=reason, field=field, **known)


def _ignore(reason: str, **known: Any) -> ObjectAction:
    return ObjectAction(ActionKind.IGNORE, reason=reason, **known)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _printable(key: str) -> str:
    """``key`` with anything that is not encodable text escaped, for log lines."""
    return key.encode("utf-8", "backslashreplace").decode("utf-8")


def decode_object_key(raw: str, *, url_encoded: bool) -> tuple[str, str | None]:
    """``(key, problem)``: the decoded key, and why it cannot be an S3 key (or ``None``).

    An S3 key is UTF-8: percent escapes that are not UTF-8, and lone surrogates (which
    only a JSON ``\\udXXX`` escape can produce), are problems; the returned key then
    shows the bad part escaped, so it can be logged.
    """
    if url_encoded:
        try:
            key = unquote_plus(raw, errors="strict")
        except UnicodeDecodeError:
            return _printable(unquote_plus(raw, errors="backslashreplace")), (
                "the key's percent escapes are not UTF-8; no S3 object can have this key"
            )
    else:
        key = raw
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as exc:
        return _printable(key), (
            f"the key holds a lone surrogate (U+{ord(key[exc.start]):04X}) at position "
            f"{exc.start}; no S3 object can have this key"
        )
    return key, None


def _action_for_key(
    kind: ActionKind, key: str, *, event_name: str, bucket: str | None, version: str | None
) -> ObjectAction:
    known: dict[str, Any] = {"event_name": event_name, "bucket": bucket, "key": key}
    if key.endswith("/"):
        return _ignore("folder placeholder, not a document", **known)
    if key.startswith(REGISTRY_PREFIX):  # repository registrations and states
        return _ignore("repository registration, not a document", **known)
    document_key = key[: -len(SIDECAR_SUFFIX)] if key.endswith(SIDECAR_SUFFIX) else key
    try:
        scoped = parse_object_key(document_key)
    except ValidationError as exc:
        return _reject(exc.message, exc.field, **known)
    if any(segment.startswith(".") for segment in scoped.path.split("/")):
        return _ignore("hidden file (a path segment starts with '.')", scope=scoped.scope, **known)
    if document_key != key:
        # A sidecar changed: re-read the document it describes. Its sequencer orders
        # events of the sidecar's key, not of the document's, so it is not a version.
        return ObjectAction(
            ActionKind.UPSERT, scope=scoped.scope, path=scoped.path, version=None, **known
        )
    return ObjectAction(kind, scope=scoped.scope, path=scoped.path, version=version, **known)


def parse_s3_record(record: Mapping[str, Any], *, bucket: str | None = None) -> ObjectAction:
    """One record of an S3 event notification -> its action.

    ``bucket`` is the bucket the deployment owns: a record from another bucket is
    rejected (field ``bucket``). Never raises for bad input: a record without the
    expected fields is a ``REJECT`` naming the missing field.
    """
    event_name = _text(record.get("eventName"))
    if event_name is None:
        return _reject("the record has no eventName", "eventName")
    event_name = event_name.removeprefix("s3:")
    s3 = record.get("s3")
    s3_object = s3.get("object") if isinstance(s3, Mapping) else None
    s3_bucket = s3.get("bucket") if isinstance(s3, Mapping) else None
    record_bucket = _text(s3_bucket.get("name")) if isinstance(s3_bucket, Mapping) else None
    raw_key = _text(s3_object.get("key")) if isinstance(s3_object, Mapping) else None
    if raw_key is None or not isinstance(s3_object, Mapping):
        return _reject("the record has no s3.object.key", "key", event_name=event_name)
    key, problem = decode_object_key(raw_key, url_encoded=True)
    known: dict[str, Any] = {"event_name": event_name, "bucket": record_bucket, "key": key}
    if problem is not None:
        return _reject(problem, "key", **known)
    if bucket is not None and record_bucket != bucket:
        return _reject(
            f"the event is from bucket {record_bucket!r}, not from {bucket!r}", "bucket", **known
        )
    version = _text(s3_object.get("sequencer"))
    if event_name.startswith(_UPSERT_PREFIXES):
        kind = ActionKind.UPSERT
    elif event_name.startswith(_DELETE_PREFIXES):
        kind = ActionKind.DELETE
    elif event_name == _RESTORE_COMPLETED:
        # An archived object became readable: index it as it is now. Its sequencer is not
        # ordered against the key's create events, so it is no version.
        kind, version = ActionKind.UPSERT, None
    else:
        return _ignore(f"event type {event_name} does not change documents", **known)
    return _action_for_key(kind, key, event_name=event_name, bucket=record_bucket, version=version)


def _parse_reindex(message: Mapping[str, Any], bucket: str | None) -> ObjectAction:
    message_bucket = _text(message.get("bucket"))
    raw_key = _text(message.get("key"))
    known: dict[str, Any] = {"event_name": REINDEX_EVENT_NAME, "bucket": message_bucket}
    if raw_key is None:
        return _reject("a reindex message needs a non-empty 'key'", "key", **known)
    key, problem = decode_object_key(raw_key, url_encoded=False)
    if problem is not None:
        return _reject(problem, "key", key=key, **known)
    if bucket is not None and message_bucket != bucket:
        return _reject(
            f"the reindex message names bucket {message_bucket!r}, not {bucket!r}",
            "bucket",
            key=key,
            **known,
        )
    # The message names a key, never a change: re-read whatever the object is now.
    return _action_for_key(
        ActionKind.UPSERT, key, event_name=REINDEX_EVENT_NAME, bucket=message_bucket, version=None
    )


def _parse_reindex_scope(message: Mapping[str, Any], bucket: str | None) -> ObjectAction:
    message_bucket = _text(message.get("bucket"))
    known: dict[str, Any] = {"event_name": REINDEX_SCOPE_EVENT_NAME, "bucket": message_bucket}
    if message_bucket is None or (bucket is not None and message_bucket != bucket):
        return _reject(
            f"the scope reindex message names bucket {message_bucket!r}, not {bucket!r}",
            "bucket",
            **known,
        )
    try:
        agent: Any = message.get("agent")  # KnowledgeScope checks the types
        context: Any = message.get("context")
        scope = KnowledgeScope(agent, context)
        phase = ReindexPhase(message.get("phase", ReindexPhase.OBJECTS.value))
    except ValidationError as exc:
        return _reject(exc.message, exc.field, **known)
    except ValueError:
        return _reject(f"unknown reindex phase {message.get('phase')!r}", "phase", **known)
    cursor = message.get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        return _reject("the reindex cursor must be a string or null", "cursor", **known)
    unread = message.get("unread")
    if unread is not None and not (
        isinstance(unread, dict)
        and all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
            for k, v in unread.items()
        )
    ):
        return _reject("the reindex unread counts must map extensions to counts", "unread", **known)
    task = ReindexTask(message_bucket, scope, phase, cursor or None, unread or None)
    return ObjectAction(ActionKind.REINDEX_SCOPE, scope=scope, task=task, **known)


def parse_sqs_message(body: str | None, *, bucket: str | None = None) -> list[ObjectAction]:
    """The actions of one SQS message body: an S3 notification (``{"Records": [...]}``,
    possibly inside an SNS envelope), the S3 test event, a reindex message (one key) or a
    scope reindex message (``REINDEX_SCOPE``).

    ``bucket`` restricts events to the deployment's bucket. Never raises: a body that is
    none of these is a single ``REJECT`` (field ``body``), and an empty ``Records`` list
    gives no actions.
    """
    if body is None or not body.strip():
        return [_reject("the message body is empty", "body")]
    try:
        message = json.loads(body)
    except json.JSONDecodeError as exc:
        return [_reject(f"the message body is not JSON: {exc.msg}", "body")]
    if isinstance(message, dict) and message.get("Type") == "Notification":
        inner = message.get("Message")
        return parse_sqs_message(inner if isinstance(inner, str) else None, bucket=bucket)
    if not isinstance(message, dict):
        return [_reject("the message body is not a JSON object", "body")]
    if message.get("Event") == _TEST_EVENT:
        return [
            _ignore(
                "S3 test event (sent once when notifications are configured)",
                event_name=_TEST_EVENT,
                bucket=_text(message.get("Bucket")),
            )
        ]
    if message.get("type") == REINDEX_MESSAGE_TYPE:
        return [_parse_reindex(message, bucket)]
    if message.get("type") == REINDEX_SCOPE_MESSAGE_TYPE:
        return [_parse_reindex_scope(message, bucket)]
    records = message.get("Records")
    if not isinstance(records, list):
        return [_reject("the message is not an S3 event notification (no Records)", "body")]
    return [
        parse_s3_record(record, bucket=bucket)
        if isinstance(record, Mapping)
        else _reject("an S3 event record is not a JSON object", "Records")
        for record in records
    ]


def reindex_message_body(bucket: str, key: str) -> str:
    """The SQS message body asking the indexer to bring ``key`` in line with the bucket."""
    if not bucket or not key:
        raise ValidationError("key", "a reindex message needs a bucket and a key")
    return json.dumps(
        {"type": REINDEX_MESSAGE_TYPE, "bucket": bucket, "key": key},
        ensure_ascii=False,
        separators=(",", ":"),
    )
