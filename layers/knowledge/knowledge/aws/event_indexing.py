"""Apply document events (``knowledge.aws.events``) to a store, reading objects from their source.

The indexer function calls ``EventIndexer.apply`` for every action of every SQS record.
The rule is "the bucket is the truth": an event says *which* object changed, and the
object's current state says *what* to do, so duplicate, late and out-of-order events
all end with the index matching the bucket.

- ``UPSERT``: the object as it is now is indexed with the event's sequencer as its
  version (an older version than the indexed one changes nothing: "stale"); an object
  that no longer exists (deleted before its create event was processed) is removed
  from the index instead. After a write the bucket is asked once more
  (``ObjectLookup.revision``): an object deleted while it was being read and indexed
  has its document removed again, since the delete's own event may have been applied
  by another invocation before this write landed (nothing to remove then); an object
  (or sidecar) replaced meanwhile is indexed again as it is now, since a write without
  a version (a sidecar event, a reindex message) is not ordered against the newer
  one's and may have replaced it. Either would otherwise leave the index stale. A
  write that another writer's commit superseded (``REASON_SUPERSEDED``: the store
  committed the document after this write read it, so what this one read may be older,
  and nothing of it was kept) is read and decided again the same way. A document that
  fails because its object was deleted under the read is removed, not retried;
- ``DELETE`` (of the latest version, of an older version, of a delete marker = a
  restore, a delete marker created, a lifecycle expiration): the bucket is asked again.
  If an object exists at the key now, its current version is indexed with the delete
  event's sequencer as version (so a late, older create event cannot replace it), which
  changes nothing if the index already holds that content; if none exists, the
  document is removed (unless a newer version is indexed). Either way the index ends
  matching the object's current state, whatever kind of delete it was;
- ``REINDEX_SCOPE``: one step of a scope reindex, expanded by the injected
  ``ScopeExpander`` (``knowledge.aws.reindex_queue.ScopeReindexer``) within the time budget;
- the scope's synonyms file (``_synonyms.txt``, any event): stored with the scope as it
  is now (``knowledge.ingest.synonyms_file``; a bad file is a problem in the status, kept
  until fixed, not retried);
- ``IGNORE`` and ``REJECT`` change nothing; a path that does not match the file patterns
  is ignored.

A document that fails (read, embedding or write error) raises ``DocumentNotIndexedError``
so that the record is retried; deliberate skips (binary, too large, unchanged, stale)
are outcomes, not errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from knowledge.aws.events import ActionKind, ObjectAction, ReindexTask
from knowledge.aws.invocation_time import TimeBudget
from knowledge.core.errors import ConfigurationError, KnowledgeError
from knowledge.core.model import IndexOptions, IndexResult
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SYNONYMS_FILE, SourceDocument, is_document_path
from knowledge.ingest.pipeline import (
    REASON_STALE_VERSION,
    REASON_SUPERSEDED,
    REASON_UNCHANGED,
    delete_document,
    upsert_document,
)
from knowledge.ingest.sources import SynonymsFile
from knowledge.ingest.synonyms_file import apply_synonyms
from knowledge.stores.protocol import KnowledgeStore

__all__ = [
    "DocumentNotIndexedError",
    "EventIndexer",
    "EventOutcome",
    "EventStatus",
    "ExpansionReport",
    "ObjectLookup",
    "ScopeExpander",
]


_CHANGED_ROUNDS = 2
"""How often an object replaced while it was being indexed (or a write superseded by
another writer's) is read and indexed again before the record is handed back for a retry."""


class DocumentNotIndexedError(KnowledgeError):
    """A document could not be indexed (read, embedding or write failure): retry the event."""


class ObjectLookup(Protocol):
    """What the event path needs from a source (``S3DocumentSource`` provides it)."""

    def get_document(
        self, scope: KnowledgeScope, path: str, *, version: str | None = None
    ) -> SourceDocument | None: ...

    def revision(self, scope: KnowledgeScope, path: str) -> str | None: ...

    def synonyms_file(self, scope: KnowledgeScope) -> SynonymsFile: ...


@dataclass(frozen=True, slots=True)
class ExpansionReport:
    """What one step of a scope reindex queued, and the step that continues it (if any)."""

    documents: int
    removals: int
    continued: ReindexTask | None = None

    def describe(self) -> str:
        done = f"queued {self.documents} documents and {self.removals} removals"
        if self.continued is None:
            return f"{done}; the scope reindex is complete"
        return f"{done}; continues in phase {self.continued.phase.value}"


class ScopeExpander(Protocol):
    """Expands a scope reindex step into per-key messages (``ScopeReindexer``)."""

    def expand(
        self, task: ReindexTask, store: KnowledgeStore, budget: TimeBudget
    ) -> ExpansionReport: ...


class EventStatus(StrEnum):
    """What applying one action did."""

    INDEXED = "indexed"
    UNCHANGED = "unchanged"
    STALE = "stale"
    SKIPPED = "skipped"
    DELETED = "deleted"
    NOT_INDEXED = "not_indexed"
    KEPT = "kept"
    EXPANDED = "expanded"
    IGNORED = "ignored"
    REJECTED = "rejected"


@dataclass(frozen=True, slots=True)
class EventOutcome:
    """The action, what happened (``status``), why (``detail``) and the store's report."""

    action: ObjectAction
    status: EventStatus
    detail: str | None = None
    result: IndexResult | None = None
    expansion: ExpansionReport | None = None

    def log_fields(self) -> dict[str, Any]:
        fields = self.action.log_fields()
        fields["status"] = self.status.value
        if self.detail is not None:
            fields["detail"] = self.detail
        if self.result is not None:
            fields["chunks"] = self.result.indexed_chunks
            fields["embedding_tokens"] = self.result.embedding_tokens
            fields["embedded_chunks"] = self.result.embedded_chunks
            fields["reused_chunks"] = self.result.reused_chunks
            fields["duration_ms"] = round(self.result.duration_ms, 1)
            if self.result.warnings:  # indexed, but not all of it: hidden sheets, ...
                fields["warnings"] = [problem.reason for problem in self.result.warnings]
        return fields


def _upsert_outcome(action: ObjectAction, result: IndexResult) -> EventOutcome:
    if result.errors:
        problems = "; ".join(problem.reason for problem in result.errors)
        raise DocumentNotIndexedError(f"{action.key}: {problems}")
    if result.indexed_documents:
        return EventOutcome(action, EventStatus.INDEXED, result=result)
    reasons = [problem.reason for problem in result.skipped]
    detail = "; ".join(reasons) or None
    if any(reason.startswith(REASON_STALE_VERSION) for reason in reasons):
        return EventOutcome(action, EventStatus.STALE, detail, result)
    if reasons == [REASON_UNCHANGED]:
        return EventOutcome(action, EventStatus.UNCHANGED, detail, result)
    return EventOutcome(action, EventStatus.SKIPPED, detail, result)


class EventIndexer:
    """Applies object actions to ``store``, reading objects through ``source``.

    ``options.file_patterns`` decide which paths are documents (others are ignored) and
    ``options.max_document_bytes`` which are too large. ``expander`` handles scope reindex
    steps (without one they fail with ``ConfigurationError``). Holds no state between
    calls; create one per container and reuse it.
    """

    def __init__(
        self,
        store: KnowledgeStore,
        source: ObjectLookup,
        options: IndexOptions | None = None,
        *,
        expander: ScopeExpander | None = None,
    ) -> None:
        self._store = store
        self._source = source
        self._options = options or IndexOptions()
        self._expander = expander

    @property
    def store(self) -> KnowledgeStore:
        return self._store

    def apply(self, action: ObjectAction, budget: TimeBudget | None = None) -> EventOutcome:
        """Apply one action (module docstring). Raises ``DocumentNotIndexedError`` when a
        document fails, and whatever the store or source raise when they are unavailable.
        ``budget`` bounds a scope reindex step (default: unlimited)."""
        if action.kind is ActionKind.REJECT:
            return EventOutcome(action, EventStatus.REJECTED, action.reason)
        if action.kind is ActionKind.IGNORE:
            return EventOutcome(action, EventStatus.IGNORED, action.reason)
        if action.kind is ActionKind.REINDEX_SCOPE:
            return self._expand(action, budget or TimeBudget.unlimited())
        scope, path = action.scope, action.path
        if scope is None or path is None:
            return EventOutcome(action, EventStatus.REJECTED, "the action names no document")
        if path == SYNONYMS_FILE:
            return self._synonyms(action, scope)
        if not is_document_path(path, self._options.file_patterns):
            patterns = ", ".join(self._options.file_patterns)
            return EventOutcome(
                action, EventStatus.IGNORED, f"does not match the file patterns ({patterns})"
            )
        for _ in range(_CHANGED_ROUNDS):
            outcome = self._apply_current(action, scope, path)
            if outcome is not None:
                return outcome
        raise DocumentNotIndexedError(
            f"{action.key}: changed while it was being indexed, {_CHANGED_ROUNDS} times; "
            "the record is retried"
        )

    def _apply_current(
        self, action: ObjectAction, scope: KnowledgeScope, path: str
    ) -> EventOutcome | None:
        """Make the index hold the object as it is now; ``None`` if it was replaced while
        it was being indexed (what was written may be older than what is there now)."""
        # Whatever the event says, the object's current state decides (module docstring).
        document = self._source.get_document(scope, path, version=action.version)
        if document is None:
            why = None if action.kind is ActionKind.DELETE else "the object no longer exists"
            return self._delete(action, scope, path, why)
        result = upsert_document(self._store, scope, document, self._options)
        if result.errors and self._source.revision(scope, path) is None:
            # Deleted under the read (or the write): the bucket decides, nothing to retry.
            return self._delete(action, scope, path, "the object was deleted while indexing")
        if any(problem.reason.startswith(REASON_SUPERSEDED) for problem in result.skipped):
            # Another writer committed the document after this one read it: nothing of
            # this write stays; read the object again and decide on what is indexed now.
            return None
        outcome = _upsert_outcome(action, result)
        if outcome.status is EventStatus.INDEXED:
            now = self._source.revision(scope, path)
            if now is None:
                # Deleted while it was read and written: the delete's event may already
                # have been applied (to an index without it); this write must not outlive it.
                return self._delete(action, scope, path, "the object was deleted while indexing")
            if document.revision is not None and now != document.revision:
                return None
        if action.kind is not ActionKind.DELETE:
            return outcome
        current = "an object exists at the key after the delete"
        if outcome.status is EventStatus.UNCHANGED:
            detail = f"{current}; the index already holds it"
            return EventOutcome(action, EventStatus.KEPT, detail, outcome.result)
        detail = f"{current}; {outcome.status.value} its current version"
        if outcome.detail:
            detail += f" ({outcome.detail})"
        return EventOutcome(action, outcome.status, detail, outcome.result)

    def _synonyms(self, action: ObjectAction, scope: KnowledgeScope) -> EventOutcome:
        """The scope's synonyms file changed: store it as it is now (``ingest.synonyms_file``).
        A bad file is a problem in the status (the last good set stays), not retried."""
        found = self._source.synonyms_file(scope)
        with self._store.write_session(scope) as session:
            problem = apply_synonyms(session, found)
        if problem is not None:
            return EventOutcome(action, EventStatus.SKIPPED, problem.reason)
        if found.data is None:
            return EventOutcome(action, EventStatus.DELETED, "the scope has no synonyms now")
        return EventOutcome(action, EventStatus.INDEXED, "the scope's synonyms")

    def _expand(self, action: ObjectAction, budget: TimeBudget) -> EventOutcome:
        if action.task is None:
            return EventOutcome(action, EventStatus.REJECTED, "the action carries no task")
        if self._expander is None:
            raise ConfigurationError(
                "INDEX_QUEUE_URL: a scope reindex needs the document events queue to queue keys on"
            )
        report = self._expander.expand(action.task, self._store, budget)
        return EventOutcome(action, EventStatus.EXPANDED, report.describe(), expansion=report)

    def _delete(
        self, action: ObjectAction, scope: KnowledgeScope, path: str, why: str | None
    ) -> EventOutcome:
        if delete_document(self._store, scope, path, action.version):
            return EventOutcome(action, EventStatus.DELETED, why)
        detail = "not in the index, or a newer version is indexed"
        return EventOutcome(
            action, EventStatus.NOT_INDEXED, detail if why is None else f"{why}; {detail}"
        )
