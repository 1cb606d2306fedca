"""Per-agent write quotas: the decision, apart from where the counts live.

One agent writing without pause (a script in a loop, a client retrying in parallel) fills
the indexer's queue, and every other agent's writes wait behind it. So the write routes
(``KnowledgeApi.put_document``, ``delete_document``, ``upload``) admit, per agent:

- at most ``requests_per_minute`` write requests (``PUT``, ``DELETE``, upload grants);
- at most ``bytes_per_minute`` bytes: a ``PUT``'s body, and an upload grant's granted
  maximum size (its bytes go straight to S3, and the grant is the last moment the service
  sees them); a ``DELETE`` weighs nothing;
- and, per scope, at most ``documents_per_scope`` indexed documents: a ``PUT`` or upload
  grant of a path the scope has not indexed is refused when the scope already holds that
  many (an overwrite of an indexed path is not a new document and always passes).

``0`` means no limit; ``DEFAULT_WRITE_LIMITS`` (120 requests, 256 MiB, 10,000 documents)
is far above what a team's writing needs (the reasons: docs/agents.md, "Write quotas"),
and the same on both stacks. Reads (search, status, documents) are never counted.

**Windows.** The per-minute limits count in fixed windows of ``WINDOW_SECONDS`` aligned
to the epoch (``window_start``), so every process (each Lambda container) puts a request
into the same window without talking to another, and a window's count is one atomic
update of one record: an in-process dict under a lock (``kb serve``,
``knowledge.local.write_quotas``) or one DynamoDB item per agent and window
(``knowledge.aws.write_quotas``). A counter adds a request only if it passes
(``refused_by`` on the counts before it), so a refused request costs its agent nothing
and the next window starts from zero. The price of fixed windows: an agent may send a
window's worth at the end of one window and another at the start of the next: at most
twice a limit within any sixty seconds, and never more than a limit per window.

**Refusals.** Over a per-minute limit is a ``RateLimitedError`` (HTTP 429) naming the
limit, its value and ``retry_after``, the whole seconds until the window ends
(``seconds_left``, at least 1): then the request passes, as the next window is empty. A
request heavier than a whole minute's bytes could never pass: a ``TooLargeError`` (413)
names the limit instead. A scope at its document limit is a 429 too, with the window as
``Retry-After`` (a delete counts once the indexer has taken the document out) and
``retryable: false``: waiting alone does not help. Every check runs before the storage
is touched, so a refused write stores nothing.

The document count is the scope's indexed count (``KnowledgeStore.status``): writes
accepted and not indexed yet are not in it, so a burst of new paths may pass the limit by
what the indexer has still to do, which the per-minute limits bound. An index that
cannot answer skips that count (``KnowledgeApi``): the bucket or folder takes writes
without it. A counter that cannot answer refuses the write instead: without it nothing
would bound the writes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from knowledge.core.errors import ConfigurationError, RateLimitedError, TooLargeError
from knowledge.core.scope import KnowledgeScope

__all__ = [
    "BYTES_LIMIT",
    "DEFAULT_DOCUMENTS_PER_SCOPE",
    "DEFAULT_MIB_PER_MINUTE",
    "DEFAULT_REQUESTS_PER_MINUTE",
    "DEFAULT_WRITE_LIMITS",
    "DOCUMENTS_LIMIT",
    "MIB",
    "NO_WRITE_LIMITS",
    "REQUESTS_LIMIT",
    "WINDOW_SECONDS",
    "Clock",
    "WindowCounter",
    "WindowUsage",
    "WriteLimits",
    "WriteQuota",
    "refused_by",
    "seconds_left",
    "window_start",
]

WINDOW_SECONDS = 60
MIB = 1024 * 1024
DEFAULT_REQUESTS_PER_MINUTE = 120
DEFAULT_MIB_PER_MINUTE = 256
DEFAULT_DOCUMENTS_PER_SCOPE = 10_000

Clock = Callable[[], float]
"""Seconds since the epoch (``time.time``): windows are aligned to it in every process."""

REQUESTS_LIMIT = "write_requests_per_minute"
BYTES_LIMIT = "write_bytes_per_minute"
DOCUMENTS_LIMIT = "documents_per_scope"
"""The names a 429 gives its limit (the body's ``limit``)."""


@dataclass(frozen=True, slots=True)
class WriteLimits:
    """What one agent may write (module docstring); ``0`` is no limit."""

    requests_per_minute: int = DEFAULT_REQUESTS_PER_MINUTE
    bytes_per_minute: int = DEFAULT_MIB_PER_MINUTE * MIB
    documents_per_scope: int = DEFAULT_DOCUMENTS_PER_SCOPE

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "bytes_per_minute", "documents_per_scope"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(
                    f"write limit {name}: must be a whole number, 0 for no limit, got {value!r}"
                )

    @classmethod
    def of(
        cls, requests_per_minute: int, mib_per_minute: int, documents_per_scope: int
    ) -> WriteLimits:
        """The limits as operators set them: the bytes in MiB (``kb serve`` flags, the
        template's parameters)."""
        if isinstance(mib_per_minute, bool) or not isinstance(mib_per_minute, int):
            raise ConfigurationError(
                f"write MiB per minute: must be a whole number, got {mib_per_minute!r}"
            )
        return cls(requests_per_minute, mib_per_minute * MIB, documents_per_scope)

    @property
    def per_minute(self) -> bool:
        """Whether a per-minute limit is set (else no counter is ever asked)."""
        return self.requests_per_minute > 0 or self.bytes_per_minute > 0


DEFAULT_WRITE_LIMITS = WriteLimits()
NO_WRITE_LIMITS = WriteLimits(0, 0, 0)


@dataclass(frozen=True, slots=True)
class WindowUsage:
    """What one agent has written in one window: requests and bytes."""

    requests: int = 0
    bytes: int = 0


def window_start(now: float) -> int:
    """The first second (epoch) of the window ``now`` falls in."""
    return math.floor(now / WINDOW_SECONDS) * WINDOW_SECONDS


def seconds_left(now: float) -> int:
    """Whole seconds from ``now`` until the next window, at least 1 (a ``Retry-After``
    that passes before the window does would only be refused again)."""
    return max(1, math.ceil(window_start(now) + WINDOW_SECONDS - now))


def refused_by(usage: WindowUsage, size: int, limits: WriteLimits) -> str | None:
    """The per-minute limit one more request of ``size`` bytes would pass, after
    ``usage`` in its window (``REQUESTS_LIMIT`` first), or ``None`` when it fits."""
    if limits.requests_per_minute and usage.requests + 1 > limits.requests_per_minute:
        return REQUESTS_LIMIT
    if limits.bytes_per_minute and usage.bytes + size > limits.bytes_per_minute:
        return BYTES_LIMIT
    return None


class WindowCounter(Protocol):
    """Where the counts live: ``kb serve``'s memory, a DynamoDB table shared by every
    Lambda container."""

    def add(self, agent: str, window: int, size: int, limits: WriteLimits) -> WindowUsage | None:
        """Count one request of ``size`` bytes in ``agent``'s window starting at
        ``window``, atomically, if it fits (``refused_by`` of the counts so far is
        ``None``): then ``None``. Otherwise count nothing and return the counts that
        refused it."""
        ...


def _mib(size: int) -> str:
    return f"{size / MIB:g} MiB" if size % MIB == 0 else f"{size} bytes"


class WriteQuota:
    """The limits, a counter and a clock (``time.time``; tests pass their own): what the
    write routes ask before they touch the storage (module docstring)."""

    def __init__(
        self,
        limits: WriteLimits,
        counter: WindowCounter | None,
        *,
        clock: Clock | None = None,
    ) -> None:
        if limits.per_minute and counter is None:
            raise ConfigurationError("a per-minute write limit needs a counter")
        self._limits = limits
        self._counter = counter
        self._clock = clock or time.time

    @property
    def limits(self) -> WriteLimits:
        return self._limits

    def charge(self, agent: str, size: int = 0, *, field: str = "body") -> None:
        """Count one write request of ``size`` bytes for ``agent``, or raise: a
        ``RateLimitedError`` over a per-minute limit (nothing counted), a
        ``TooLargeError`` (``field``) when ``size`` alone is over the bytes a minute."""
        limits = self._limits
        if not limits.per_minute:
            return
        if limits.bytes_per_minute and size > limits.bytes_per_minute:
            raise TooLargeError(
                field,
                f"is {size} bytes, over the {_mib(limits.bytes_per_minute)} agent '{agent}' "
                f"may write in a minute ({BYTES_LIMIT}: {limits.bytes_per_minute}); "
                "send less at once",
            )
        now = self._clock()
        assert self._counter is not None  # checked in __init__
        usage = self._counter.add(agent, window_start(now), size, limits)
        if usage is None:
            return
        wait = seconds_left(now)
        # A counter that could not say why (no counts returned) refused on requests.
        limit = refused_by(usage, size, limits) or REQUESTS_LIMIT
        if limit == BYTES_LIMIT:
            value = limits.bytes_per_minute
            what = (
                f"agent '{agent}' has written {usage.bytes} bytes this minute; another "
                f"{size} would pass its limit of {_mib(value)} a minute ({BYTES_LIMIT}: {value})"
            )
        else:
            value = limits.requests_per_minute
            what = (
                f"agent '{agent}' has sent {usage.requests} write requests this minute, its "
                f"limit ({REQUESTS_LIMIT}: {value})"
            )
        raise RateLimitedError(limit, value, wait, f"{what}; retry in {wait} s")

    def check_documents(self, scope: KnowledgeScope, indexed: int) -> None:
        """Refuse a new document in ``scope`` when it already holds ``indexed`` documents,
        its limit or more (module docstring)."""
        limit = self._limits.documents_per_scope
        if not limit or indexed < limit:
            return
        raise RateLimitedError(
            DOCUMENTS_LIMIT,
            limit,
            WINDOW_SECONDS,
            f"scope {scope} holds {indexed} documents, its limit ({DOCUMENTS_LIMIT}: {limit}); "
            "a new path is refused until documents are deleted (an existing path may be "
            "overwritten)",
            retryable=False,
        )
