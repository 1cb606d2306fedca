"""Fair indexing between tenants: which work queue each document event goes to.

Every S3 notification of every agent arrives on one intake queue (the document events
queue). Consumed in order by the indexer, a 10,000-file drop by one agent would be
drained before another agent's single edit. So the dispatcher function reads the intake
in large batches and forwards each record's body, unchanged, to one of two work queues
that the indexer consumes with separate concurrency caps:

- **express**: an agent's events when it has few of them (``express_max_events``, counted
  in the batch plus what this container sent express for the agent within the last
  ``window_seconds``) and no object is large (``express_max_object_bytes``); and every
  record that is not an S3 notification or names no agent (the S3 test event, bodies the
  indexer rejects at once): they cost the indexer next to nothing.
- **bulk**: everything else, and every message of a scope reindex (the search function's
  request, the indexer's steps and per-key messages): a busy agent's events, large
  objects, reindexes. Its concurrency is capped apart (``BulkMaxConcurrency``), so bulk
  work can never take the capacity the express lane keeps for single edits.

Each forwarded message carries its agent as ``MessageGroupId``. On a standard queue that
makes it a fair queue: SQS notices a tenant holding a disproportionate share of the
messages in flight (or of the consumers' time) and hands the other tenants' messages out
first, so in the bulk lane one agent's 10,000 files do not delay another agent's
reindex or large upload by 10,000 files either. In the express lane it is a second line
of defence against an agent that paces its uploads under the threshold.

The counting is per container and per batch, so it is approximate: with the dispatcher's
concurrency capped (two containers), an agent gets at most about ``2 *
express_max_events`` events a window into the express lane; the rest of its work waits
its fair turn in the bulk lane.

Pure decisions (``message_facts``, ``route_batch``, ``ExpressHistory``) are separate from
the SQS I/O (``Forwarder``); ``Dispatcher`` joins them for the function. A record whose
forward fails is reported back as a batch item failure: SQS delivers it again, and after
``maxReceiveCount`` deliveries moves it to the intake's dead-letter queue. Nothing here
imports the store, the embedders or boto3 before the first forward (boto3's SQS client
only, then).
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from knowledge.aws.environment import EnvironmentReader
from knowledge.aws.events import (
    REINDEX_MESSAGE_TYPE,
    REINDEX_SCOPE_MESSAGE_TYPE,
    decode_object_key,
)
from knowledge.aws.index_progress import ProgressTable, progress_table, queued_events
from knowledge.aws.sqs_messages import send_attributes
from knowledge.core.errors import ConfigurationError, ValidationError
from knowledge.core.scope import KnowledgeScope, validate_segment

__all__ = [
    "EXPRESS_MAX_EVENTS",
    "EXPRESS_MAX_OBJECT_MIB",
    "EXPRESS_WINDOW_SECONDS",
    "BodyKind",
    "DispatchPolicy",
    "DispatchReport",
    "DispatchSettings",
    "Dispatcher",
    "ExpressHistory",
    "Forwarder",
    "Lane",
    "MessageFacts",
    "Reason",
    "Route",
    "message_facts",
    "route_batch",
    "route_facts",
]

logger = logging.getLogger(__name__)

EXPRESS_MAX_EVENTS = 10
"""Default: most events of one agent that still go express (in a batch and window)."""

EXPRESS_MAX_OBJECT_MIB = 8
"""Default: a created object larger than this many MiB goes bulk (it takes long to index)."""

EXPRESS_WINDOW_SECONDS = 60
"""Default: how long a container remembers the events it sent express for each agent."""

SQS_BATCH_ENTRIES = 10
"""Most entries one ``SendMessageBatch`` call takes."""

SQS_BATCH_BYTES = 200 * 1024
"""Most bytes of bodies and attributes put in one ``SendMessageBatch`` call: under SQS's
256 KiB limit on a whole batch, with room for the request's own fields."""

_MIB = 1024 * 1024
_ENVELOPE_DEPTH = 2  # an SNS envelope around an S3 notification; nothing nests deeper


class Lane(StrEnum):
    """The work queue a record is forwarded to."""

    EXPRESS = "express"
    BULK = "bulk"


class BodyKind(StrEnum):
    """What an intake message body is."""

    NOTIFICATION = "notification"
    """An S3 event notification (possibly inside an SNS envelope)."""
    REINDEX = "reindex"
    """A reindex message: one key, or a step of a scope reindex."""
    OTHER = "other"
    """Anything else: the S3 test event, a body that is not JSON, an unknown shape."""


class Reason(StrEnum):
    """Why a record went where it went (logged and counted)."""

    FEW_EVENTS = "few events of the agent"
    BUSY_AGENT = "many events of the agent"
    LARGE_OBJECT = "large object"
    REINDEX = "reindex"
    NO_AGENT = "names no agent"
    NOT_A_NOTIFICATION = "not an S3 notification"


@dataclass(frozen=True, slots=True)
class MessageFacts:
    """What routing needs to know of one message body.

    ``agent_events``: each agent the body names, in order, with its number of S3 event
    records (a reindex message: 1); ``events``: all the body's S3 event records, those
    that name no agent included; ``largest_bytes``: the largest ``object.size`` among
    them (``0``: none given, as for deletes).
    """

    kind: BodyKind
    agent_events: tuple[tuple[str, int], ...] = ()
    events: int = 0
    largest_bytes: int = 0

    @property
    def agents(self) -> tuple[str, ...]:
        return tuple(agent for agent, _ in self.agent_events)


_OTHER = MessageFacts(BodyKind.OTHER)


def _agent_of_key(key: str) -> str | None:
    """The agent of ``<agent>/<context>/<path>``: the first segment, if it is a valid one."""
    head, slash, _ = key.partition("/")
    if not slash:
        return None
    try:
        return validate_segment("agent", head)
    except ValidationError:
        return None


def _agent(value: object) -> str | None:
    try:
        return validate_segment("agent", value)
    except ValidationError:
        return None


def _size(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _unwrapped(body: str | None) -> object:
    """The JSON message of ``body``, out of its SNS envelope if it has one; ``None`` if
    the body is not JSON."""
    text = body
    for _ in range(_ENVELOPE_DEPTH + 1):
        if text is None or not text.strip():
            return None
        try:
            message: object = json.loads(text)
        except (ValueError, RecursionError):
            return None
        if not (isinstance(message, dict) and message.get("Type") == "Notification"):
            return message
        inner = message.get("Message")
        text = inner if isinstance(inner, str) else None
    return None


def message_facts(body: str | None) -> MessageFacts:
    """The facts of one intake message body (pure; never raises)."""
    message = _unwrapped(body)
    if not isinstance(message, dict):
        return _OTHER
    kind = message.get("type")
    if kind in (REINDEX_MESSAGE_TYPE, REINDEX_SCOPE_MESSAGE_TYPE):
        if kind == REINDEX_SCOPE_MESSAGE_TYPE:
            agent = _agent(message.get("agent"))
        else:
            key = message.get("key")
            agent = _agent_of_key(key) if isinstance(key, str) else None
        return MessageFacts(BodyKind.REINDEX, ((agent, 1),) if agent else ())
    records = message.get("Records")
    if not isinstance(records, list):
        return _OTHER
    per_agent: Counter[str] = Counter()
    largest = 0
    for record in records:
        s3 = record.get("s3") if isinstance(record, dict) else None
        s3_object = s3.get("object") if isinstance(s3, dict) else None
        if not isinstance(s3_object, dict):
            continue
        largest = max(largest, _size(s3_object.get("size")))
        raw_key = s3_object.get("key")
        if isinstance(raw_key, str):
            key, problem = decode_object_key(raw_key, url_encoded=True)
            agent = None if problem else _agent_of_key(key)
            if agent is not None:
                per_agent[agent] += 1
    return MessageFacts(BodyKind.NOTIFICATION, tuple(per_agent.items()), len(records), largest)


@dataclass(frozen=True, slots=True)
class DispatchPolicy:
    """The thresholds of the routing (module docstring)."""

    express_max_events: int = EXPRESS_MAX_EVENTS
    express_max_object_bytes: int = EXPRESS_MAX_OBJECT_MIB * _MIB
    window_seconds: float = EXPRESS_WINDOW_SECONDS

    def __post_init__(self) -> None:
        if self.express_max_events < 1:
            raise ValidationError(
                "express_max_events", f"must be at least 1, got {self.express_max_events}"
            )
        if self.express_max_object_bytes < 1:
            raise ValidationError(
                "express_max_object_bytes",
                f"must be at least 1, got {self.express_max_object_bytes}",
            )
        if not (math.isfinite(self.window_seconds) and self.window_seconds >= 0):
            raise ValidationError(
                "window_seconds", f"must be a number >= 0, got {self.window_seconds}"
            )


@dataclass(frozen=True, slots=True)
class Route:
    """Where one record goes: its lane, its ``MessageGroupId`` (its agent; ``None`` for a
    record that names none) and why."""

    lane: Lane
    group: str | None
    reason: Reason


def route_batch(
    bodies: Sequence[str | None],
    policy: DispatchPolicy,
    recent: Mapping[str, int] | None = None,
) -> list[Route]:
    """The route of each body of one intake batch, in order (pure).

    ``recent`` is, per agent, the events already sent express within the policy's window
    (``ExpressHistory.counts``). An S3 notification goes express when every agent it
    names has at most ``express_max_events`` events in the batch and the window together
    and no object it names is larger than ``express_max_object_bytes``; otherwise bulk.
    Reindex messages go bulk; bodies that name no agent, or are not S3 notifications, go
    express as they are (the indexer ignores or rejects them at once)."""
    return route_facts([message_facts(body) for body in bodies], policy, recent)


def route_facts(
    facts: Sequence[MessageFacts],
    policy: DispatchPolicy,
    recent: Mapping[str, int] | None = None,
) -> list[Route]:
    """``route_batch`` for bodies already read into their facts."""
    in_batch: Counter[str] = Counter()
    for fact in facts:
        if fact.kind is BodyKind.NOTIFICATION:
            for agent, events in fact.agent_events:
                in_batch[agent] += events
    earlier = recent or {}
    routes: list[Route] = []
    for fact in facts:
        group = fact.agents[0] if fact.agents else None
        if fact.kind is BodyKind.OTHER:
            routes.append(Route(Lane.EXPRESS, None, Reason.NOT_A_NOTIFICATION))
        elif group is None:
            routes.append(Route(Lane.EXPRESS, None, Reason.NO_AGENT))
        elif fact.kind is BodyKind.REINDEX:
            routes.append(Route(Lane.BULK, group, Reason.REINDEX))
        elif fact.largest_bytes > policy.express_max_object_bytes:
            routes.append(Route(Lane.BULK, group, Reason.LARGE_OBJECT))
        elif any(
            in_batch[agent] + earlier.get(agent, 0) > policy.express_max_events
            for agent in fact.agents
        ):
            routes.append(Route(Lane.BULK, group, Reason.BUSY_AGENT))
        else:
            routes.append(Route(Lane.EXPRESS, group, Reason.FEW_EVENTS))
    return routes


class ExpressHistory:
    """How many events this container sent express for each agent within the last
    ``window_seconds`` (so an agent cannot fill the express lane by pacing its uploads a
    few per batch). ``clock`` is monotonic seconds. Agents with nothing in the window
    are forgotten, so the memory stays as small as the set of recently active agents."""

    def __init__(
        self, window_seconds: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._window = window_seconds
        self._clock = clock
        self._sent: dict[str, deque[tuple[float, int]]] = {}

    def counts(self) -> dict[str, int]:
        """Per agent, the events sent express within the window (agents with none: absent)."""
        horizon = self._clock() - self._window
        counts: dict[str, int] = {}
        for agent in list(self._sent):
            entries = self._sent[agent]
            while entries and entries[0][0] <= horizon:
                entries.popleft()
            if entries:
                counts[agent] = sum(events for _, events in entries)
            else:
                del self._sent[agent]
        return counts

    def record(self, agent: str, events: int) -> None:
        if self._window > 0 and events > 0:
            self._sent.setdefault(agent, deque()).append((self._clock(), events))


@dataclass(frozen=True, slots=True)
class DispatchSettings:
    """The dispatcher's environment (``template.yaml``: ``DispatcherFunction``).

    ==========================  ==============================================  =========
    variable                    meaning                                         default
    ==========================  ==============================================  =========
    ``EXPRESS_QUEUE_URL``       the express work queue                          required
    ``BULK_QUEUE_URL``          the bulk work queue                             required
    ``EXPRESS_MAX_EVENTS``      most events of an agent that still go express   10
    ``EXPRESS_MAX_OBJECT_MIB``  larger created objects go bulk                  8
    ``EXPRESS_WINDOW_SECONDS``  how long an agent's express events are counted  60
    ``INDEX_PROGRESS_TABLE``    where each scope's queued events are counted    unset
    ==========================  ==============================================  =========
    """

    express_queue_url: str
    bulk_queue_url: str
    policy: DispatchPolicy = field(default_factory=DispatchPolicy)
    index_progress_table: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> DispatchSettings:
        reader = EnvironmentReader(env)
        get, integer, number = reader.get, reader.integer, reader.number

        urls = {name: get(name) for name in ("EXPRESS_QUEUE_URL", "BULK_QUEUE_URL")}
        missing = [name for name, url in urls.items() if url is None]
        if missing:
            raise ConfigurationError(
                f"{', '.join(missing)}: the dispatcher needs both work queues' URLs"
            )
        try:
            policy = DispatchPolicy(
                express_max_events=integer("EXPRESS_MAX_EVENTS", EXPRESS_MAX_EVENTS),
                express_max_object_bytes=(
                    integer("EXPRESS_MAX_OBJECT_MIB", EXPRESS_MAX_OBJECT_MIB) * _MIB
                ),
                window_seconds=number("EXPRESS_WINDOW_SECONDS", EXPRESS_WINDOW_SECONDS),
            )
        except ValidationError as exc:
            raise ConfigurationError(f"dispatcher settings: {exc}") from None
        return cls(
            str(urls["EXPRESS_QUEUE_URL"]),
            str(urls["BULK_QUEUE_URL"]),
            policy,
            get("INDEX_PROGRESS_TABLE"),
        )


def _entry_bytes(entry: Mapping[str, Any]) -> int:
    size = len(str(entry["MessageBody"]).encode("utf-8"))
    for name, value in (entry.get("MessageAttributes") or {}).items():
        size += len(name.encode("utf-8")) + len(str(value.get("DataType", "")))
        size += len(str(value.get("StringValue", "")).encode("utf-8"))
        size += len(value.get("BinaryValue", b""))
    return size


def _chunks(entries: Sequence[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """``entries`` in ``SendMessageBatch`` calls: at most ten, at most ``SQS_BATCH_BYTES``
    together (one larger entry goes alone)."""
    chunk: list[dict[str, Any]] = []
    size = 0
    for entry in entries:
        entry_size = _entry_bytes(entry)
        if chunk and (len(chunk) == SQS_BATCH_ENTRIES or size + entry_size > SQS_BATCH_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(entry)
        size += entry_size
    if chunk:
        yield chunk


_WHOLE_QUEUE_ERRORS = frozenset(
    {
        "AWS.SimpleQueueService.NonExistentQueue",
        "QueueDoesNotExist",
        "AccessDenied",
        "AccessDeniedException",
        "KMS.AccessDeniedException",
        "RequestThrottled",
        "ThrottlingException",
    }
)


def _refused_by_the_service(exc: Exception) -> bool:
    """True if SQS answered the call with an error about its content (a botocore
    ``ClientError`` whose code is not about the queue as a whole)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return False
    code = str((response.get("Error") or {}).get("Code", ""))
    return bool(code) and code not in _WHOLE_QUEUE_ERRORS


class Forwarder:
    """Sends records on to the two work queues (the SQS I/O of the dispatcher).

    ``client`` is an SQS client (default: a bounded boto3 client, created on the first
    forward). ``forward`` never raises for a failed send: it returns the message ids of
    the records that were not sent, for the caller to report as batch item failures.
    """

    def __init__(self, express_url: str, bulk_url: str, *, client: Any | None = None) -> None:
        self._urls = {Lane.EXPRESS: express_url, Lane.BULK: bulk_url}
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            from knowledge.core.aws_clients import bounded_client  # boto3 at the first forward

            self._client = bounded_client("sqs")
        return self._client

    def forward(self, records: Sequence[Mapping[str, Any]], routes: Sequence[Route]) -> set[str]:
        """Send each record's body (and message attributes) to its route's queue, with its
        route's group; returns the message ids of the records not sent."""
        by_lane: dict[Lane, list[dict[str, Any]]] = {}
        ids: dict[str, str] = {}
        for index, (record, route) in enumerate(zip(records, routes, strict=True)):
            entry: dict[str, Any] = {
                "Id": str(index),
                "MessageBody": record.get("body") or "",
                **send_attributes(record.get("messageAttributes")),
            }
            if route.group is not None:
                entry["MessageGroupId"] = route.group
            ids[str(index)] = str(record.get("messageId"))
            by_lane.setdefault(route.lane, []).append(entry)
        failed: set[str] = set()
        for lane, entries in by_lane.items():
            for chunk in _chunks(entries):
                failed |= {ids[entry_id] for entry_id in self._send(self._urls[lane], chunk)}
        return failed

    def _send(self, url: str, entries: list[dict[str, Any]]) -> set[str]:
        """Send one batch; the ids of the entries not sent (refused entries get one more
        try: SQS refuses some under throttling). A batch the service refuses as a whole
        (it answered: one entry it cannot take fails the call) is sent again one entry
        at a time, so that entry alone comes back; one that fails without an answer (the
        network, a missing queue) is not, as every entry would fail the same way."""
        pending = entries
        for attempt in (1, 2):
            try:
                response = self.client.send_message_batch(QueueUrl=url, Entries=pending)
            except Exception as exc:
                if len(pending) > 1 and _refused_by_the_service(exc):
                    return {entry_id for entry in pending for entry_id in self._send(url, [entry])}
                logger.warning(
                    "cannot forward records to the work queue; they come back to the intake",
                    exc_info=sys.exc_info(),
                    extra={"queue_url": url, "records": len(pending)},
                )
                return {entry["Id"] for entry in pending}
            refused = {entry["Id"]: entry for entry in response.get("Failed") or []}
            if not refused:
                return set()
            pending = [entry for entry in pending if entry["Id"] in refused]
            if attempt == 2:
                logger.warning(
                    "the work queue refused records; they come back to the intake",
                    extra={
                        "queue_url": url,
                        "records": len(refused),
                        "codes": sorted({str(e.get("Code")) for e in refused.values()}),
                    },
                )
        return {entry["Id"] for entry in pending}


@dataclass(frozen=True, slots=True)
class DispatchReport:
    """What one intake batch became: records forwarded per lane, the message ids that
    were not forwarded (batch item failures), and per lane the events of each agent."""

    forwarded: Mapping[Lane, int]
    failed: tuple[str, ...]
    reasons: Mapping[Reason, int]
    agents: Mapping[Lane, Mapping[str, int]]

    def log_fields(self, most_agents: int = 10) -> dict[str, Any]:
        """Structured fields for the batch's log line (the busiest agents of each lane)."""
        return {
            "express": self.forwarded.get(Lane.EXPRESS, 0),
            "bulk": self.forwarded.get(Lane.BULK, 0),
            "failed": len(self.failed),
            "reasons": {reason.value: count for reason, count in self.reasons.items()},
            **{
                f"{lane.value}_agents": dict(Counter(agents).most_common(most_agents))
                for lane, agents in self.agents.items()
                if agents
            },
        }


class Dispatcher:
    """Routes and forwards intake batches (what the dispatcher function runs); one per
    container, so its ``ExpressHistory`` spans the container's invocations. What it
    forwarded is counted as queued per scope in ``progress`` (default: the settings'
    ``INDEX_PROGRESS_TABLE``; ``knowledge.aws.index_progress``)."""

    def __init__(
        self,
        settings: DispatchSettings,
        *,
        client: Any | None = None,
        clock: Callable[[], float] = time.monotonic,
        progress: ProgressTable | None = None,
    ) -> None:
        self.progress = progress or progress_table(settings.index_progress_table)
        self.policy = settings.policy
        self.forwarder = Forwarder(
            settings.express_queue_url, settings.bulk_queue_url, client=client
        )
        self.history = ExpressHistory(settings.policy.window_seconds, clock=clock)

    def dispatch(self, records: Sequence[Mapping[str, Any]]) -> DispatchReport:
        """Route and forward one batch of Lambda's SQS records."""
        facts = [message_facts(record.get("body")) for record in records]
        routes = route_facts(facts, self.policy, self.history.counts())
        failed = self.forwarder.forward(records, routes)
        forwarded: Counter[Lane] = Counter()
        reasons: Counter[Reason] = Counter()
        agents: dict[Lane, Counter[str]] = {Lane.EXPRESS: Counter(), Lane.BULK: Counter()}
        queued: Counter[KnowledgeScope] = Counter()
        for record, fact, route in zip(records, facts, routes, strict=True):
            if str(record.get("messageId")) in failed:
                continue
            if self.progress is not None:
                queued.update(queued_events(record.get("body")))
            forwarded[route.lane] += 1
            reasons[route.reason] += 1
            for agent, events in fact.agent_events:
                agents[route.lane][agent] += events
        for agent, events in agents[Lane.EXPRESS].items():
            self.history.record(agent, events)
        if self.progress is not None and queued:
            self.progress.add_queued(queued)
        order = [str(record.get("messageId")) for record in records]
        return DispatchReport(
            dict(forwarded),
            tuple(message_id for message_id in order if message_id in failed),
            dict(reasons),
            {lane: dict(counts) for lane, counts in agents.items()},
        )
