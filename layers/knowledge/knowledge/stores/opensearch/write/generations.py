"""The generation protocol of the OpenSearch write session: a new version of a document
is complete before the old one goes.

Every ``put_document`` is a new *generation* of the document (``new_generation``: a
time-ordered id): its chunks get ids of their own (``<document id>:<generation>:<chunk
index>``), so they are written *beside* the previous version, never over it. Then, per
document:

1. its chunks go out in the session's shared ``_bulk`` requests (``bulk.BulkSender``:
   one background thread, at most one request waiting while one is on the wire);
2. once the request holding its last chunk is answered and every chunk was accepted,
   its **record** (id = the document id: path, source type, size, chunk count,
   version, content hash, indexed time, generation, problem) is written *only if it
   is still what was read just before* (``_mget`` in real time, then ``create`` or
   ``index`` with ``if_seq_no``/``if_primary_term``). An indexed version newer than
   this one wins (the new chunks are removed; the document is reported "stale version");
   so does a record that no longer names the generation an upsert was decided on
   (``Commit.precondition``), unless both carry a version (their order decides): the
   document is reported "superseded" (``sender.lost_to``), since the other writer
   committed after this one read the document; a record changed meanwhile (409) is
   read again and decided again. So the decision and the write are atomic in effect:
   two racing writers end at the newer one, with or without versions;
3. then the chunks of the generation the record pointed at before are deleted by id.
   If the node refuses (429 until retries are exhausted, a failed request), the record
   is pointed back at that generation, marked incomplete (``Switch.action``), and the
   document is rejected: its retry finds it incomplete (not "unchanged"), writes it
   again and removes the old generation by id then. Otherwise the old version's chunks
   would stay searchable under a record that no longer names them;

4. when the session ends, if it replaced an indexed version of any document, one
   ``_delete_by_query`` (per session, not per document) removes those documents' chunks
   whose generation is more than ``STALE_AFTER_NS`` old *and* older than the generation
   this session committed for that document (``records.stale_generations_query``): the
   generations of writers that died after their chunks were accepted and before their
   record switch (*orphans*; step 3 cannot name them, no record pointed at them). The
   committed generation itself is never matched, however long the session ran.
   A session that only adds new documents sends none (a new document costs no delete).

A session's ``WriteState`` holds what it shares with its sender thread: the
rejections (``failures``), the ids the server made, the documents it replaced.

Steps 2 and 3 run in the sender thread (``sender.RequestWriter``); step 4 is
``remove_stale_generations``, here, and so is what a reindex removes when it ends
(``unwritten_query``: what of the scope it did not write).

Orphans: between the crash and the next write of the document, its record still points
at the previous generation (``stored_documents``, the listing and the status report
that), while searches show the orphan's chunks, as the document's newest generation
(possibly not all of them: only what the node had accepted). The next successful write
that replaces the indexed version (step 4) or a reindex (the session's
``_remove_unwritten``) removes them; orphans of a document's very first write (no record
yet) stay until its next update or a reindex: the redelivered write creates the record
and searches show its generation, the newest, wherever its chunks match.
``STALE_AFTER_NS`` is the age past which no writer still holds an uncommitted
generation: it is longer than an indexer invocation can run (300 s, at most 15 min for
any Lambda), and shorter than the queue's visibility timeout (30 min), after which a
crashed writer's record comes back; a younger generation of another document writer is
left alone, since it may be about to commit (its own step 3 then removes ours). A
cleanup the node refuses is logged and left to the next write: the session's documents
are written.

A document whose chunks or record the node rejects (429 until retries are exhausted,
a mapping error) is listed in ``failures`` and only *its new chunks* are removed: the
previous version stays searchable, its record untouched. Searches show only each
document's newest generation among their hits (``answers.newest_generations``), so
while both versions exist for an instant, no search shows both.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from knowledge.core.errors import KnowledgeError, StoreError
from knowledge.core.model import FileProblem
from knowledge.core.scope import KnowledgeScope
from knowledge.stores.opensearch import request_filters
from knowledge.stores.opensearch.client import refused_as_expensive
from knowledge.stores.opensearch.hits import INCOMPLETE_HASH
from knowledge.stores.opensearch.mapping import (
    CHUNK_COUNT,
    CONTENT_HASH,
    DOCUMENT_PATH,
    GENERATION,
    INDEXED_AT,
    PROBLEM_AT,
    RECORD,
    RECORD_SYNONYMS,
)
from knowledge.stores.opensearch.write import records
from knowledge.stores.protocol import Precondition

if TYPE_CHECKING:
    from knowledge.stores.opensearch.connection import Connection

__all__ = [
    "STALE_AFTER_NS",
    "Commit",
    "Rejection",
    "Switch",
    "WriteState",
    "delete_by_query",
    "generation_ids",
    "new_generation",
    "record_states",
    "remove_stale_generations",
    "unwritten_query",
]

logger = logging.getLogger("knowledge.stores.opensearch.write.session")  # the write session's log

STALE_AFTER_NS = 15 * 60 * 10**9
"""Generations older than this (15 min) that a committed document's record does not
point at are removed when the session ends (module docstring, step 4)."""

_MAX_REASONS_PER_DOCUMENT = 3

_STALE_IDS_PER_REQUEST = 1000
"""Documents named in one ``_delete_by_query`` of stale generations."""


def new_generation(clock: Callable[[], int] = time.time_ns) -> str:
    """A generation id: sortable by the time it was made (``clock``: nanoseconds since
    the epoch), unique across writers."""
    return f"{clock():019d}-{secrets.token_hex(4)}"


def generation_ids(document_id: str, generation: str | None, count: int) -> list[str]:
    """The chunk ids of ``document_id``'s generation of ``count`` chunks (none without one)."""
    if generation is None:
        return []
    return [records.generation_chunk_id(document_id, generation, i) for i in range(count)]


@dataclass(frozen=True, slots=True)
class Commit:
    """A document whose chunks are all queued: its record, written when they are in."""

    path: str
    document_id: str
    generation: str
    version: str | None
    chunk_count: int
    record: Mapping[str, Any]
    precondition: Precondition | None = None


@dataclass(frozen=True, slots=True)
class Switch:
    """A record switched from ``state``'s generation to ``commit``'s (``answer``: the
    record write's answer, the condition for pointing it back)."""

    commit: Commit
    state: records.RecordState
    answer: Mapping[str, Any]

    def action(self) -> dict[str, Any]:
        """Point the record back at the replaced generation, marked incomplete (written
        only if it is still this write's record)."""
        source = {
            **self.commit.record,
            GENERATION: self.state.generation,
            CHUNK_COUNT: self.state.chunk_count,
            CONTENT_HASH: INCOMPLETE_HASH,
        }
        condition = replace(
            self.state,
            seq_no=int(self.answer.get("_seq_no", -1)),
            primary_term=int(self.answer.get("_primary_term", -1)),
        )
        return records.bulk_record_action(self.commit.document_id, source, condition)


@dataclass(slots=True)
class Rejection:
    """Why a document was not written (the first few reasons)."""

    reasons: list[str] = field(default_factory=list)
    count: int = 0
    plain: bool = False

    def add(self, reason: str) -> None:
        self.count += 1
        if len(self.reasons) < _MAX_REASONS_PER_DOCUMENT:
            self.reasons.append(reason)

    def describe(self) -> str:
        if self.plain:
            return "; ".join(self.reasons)
        more = self.count - len(self.reasons)
        suffix = f" (and {more} more)" if more > 0 else ""
        return (
            f"rejected by OpenSearch: {'; '.join(self.reasons)}{suffix}; not indexed "
            "(the previously indexed version, if any, is kept)"
        )


class WriteState:
    """What a session and its sender thread share; the dicts and the count under ``lock``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rejections: dict[str, Rejection] = {}
        self.server_ids: dict[str, list[str]] = {}  # uncommitted server-made ids, by path
        self.committed_ids: dict[str, list[str]] = {}  # committed ones (not yet searchable)
        # Documents whose indexed version the session replaced: id -> committed generation.
        self.replaced_documents: dict[str, str] = {}
        self.pending_commits = 0
        self.wrote = False  # set by the session only: it queued a write

    def reject(self, path: str, reason: str, *, plain: bool = False) -> None:
        with self.lock:
            self.rejections.setdefault(path, Rejection(plain=plain)).add(reason)

    def failures(self) -> tuple[FileProblem, ...]:
        with self.lock:
            return tuple(FileProblem(path, r.describe()) for path, r in self.rejections.items())


def record_states(
    connection: Connection, index: str, record_ids: Sequence[str]
) -> dict[str, records.RecordState]:
    """The current state of document records, read in real time (no refresh needed)."""
    if not record_ids:
        return {}
    body = records.records_mget_body(record_ids)
    action = f"read {len(record_ids)} document record(s)"
    return records.parse_records_mget(connection.mget(index, body, action))


def delete_by_query(
    connection: Connection, index: str, query: Mapping[str, Any], action: str
) -> int:
    """``_delete_by_query`` (not on Serverless); how many were deleted. Records it could
    not delete are a ``StoreError``."""
    response = connection.delete_by_query(index, query, action)
    failures = response.get("failures") or []
    if failures:
        raise StoreError(
            f"OpenSearch at {connection.config.url} failed to {action}: "
            f"{len(failures)} record(s) not deleted"
        )
    return int(response.get("deleted", 0))


def remove_stale_generations(
    connection: Connection,
    index: str,
    scope: KnowledgeScope,
    committed: Mapping[str, str],
    clock: Callable[[], int],
) -> None:
    """Step 4 (module docstring): the orphaned generations of the documents whose
    indexed version a session replaced (``committed``: document id -> the generation it
    committed), one request per ``_STALE_IDS_PER_REQUEST``; ``clock``: the session's."""
    if not committed:
        return
    cutoff = f"{clock() - STALE_AFTER_NS:019d}"
    # Older than the cutoff and than what was committed: never the committed one.
    bounds = [(doc, min(cutoff, generation)) for doc, generation in committed.items()]
    action = f"remove stale generations in {scope}"
    for start in range(0, len(bounds), _STALE_IDS_PER_REQUEST):
        batch = dict(bounds[start : start + _STALE_IDS_PER_REQUEST])
        try:
            _delete_stale(connection, index, scope, batch, action)
        except KnowledgeError as exc:
            logger.warning("%s: %s; the next write of those documents retries", action, exc)
            return


def _delete_stale(
    connection: Connection,
    index: str,
    scope: KnowledgeScope,
    bounds: Mapping[str, str],
    action: str,
) -> None:
    """Delete the chunks of each document of ``bounds`` older than its bound. A domain
    that refuses a ``range`` on a keyword field (``search.allow_expensive_queries:
    false``) gets the documents' generations read, and the older ones named."""
    query = records.stale_generations_query(scope, bounds)
    try:
        delete_by_query(connection, index, query, action)
        return
    except StoreError as exc:
        if refused_as_expensive(exc) != "range":
            raise
    older: dict[str, list[str]] = {}
    after: dict[str, Any] | None = None
    while True:
        body = records.chunk_generations_body(scope, list(bounds), after)
        pairs, after = records.read_generation_pairs(connection.search_all(index, body, action))
        for document, generation in pairs:
            if document in bounds and generation < bounds[document]:
                older.setdefault(document, []).append(generation)
        if after is None:
            break
    if older:
        named = records.named_generations_query(scope, older)
        delete_by_query(connection, index, named, action)


MAX_KEPT_PATHS = 65_536
"""OpenSearch's default ``index.max_terms_count``: a reindex keeps at most this many
failed documents' previous versions (past it, it removes them as before)."""


def unwritten_query(
    scope: KnowledgeScope, started: datetime, keep: Collection[str] = ()
) -> dict[str, Any]:
    """What a reindex that started at ``started`` removes when it ends: every record of
    the scope written before it (indexed, or only a problem, before then), but its
    synonyms record (configuration, not documents: a reindex whose file is bad keeps the
    last good set) and the indexed versions of ``keep``: the documents whose new version
    the reindex could not index (a failed write never removes what was searchable before)."""
    before = started.isoformat()
    query: dict[str, Any] = {
        "bool": {
            "filter": request_filters.scope_filters(scope),
            "must_not": [{"term": {RECORD: RECORD_SYNONYMS}}],
            "should": [
                {"range": {INDEXED_AT: {"lt": before}}},
                {
                    "bool": {
                        "must_not": [{"exists": {"field": INDEXED_AT}}],
                        "filter": [{"range": {PROBLEM_AT: {"lt": before}}}],
                    }
                },
            ],
            "minimum_should_match": 1,
        }
    }
    if keep and len(keep) <= MAX_KEPT_PATHS:
        kept = {"terms": {DOCUMENT_PATH: sorted(keep)}}
        indexed = {"exists": {"field": INDEXED_AT}}
        query["bool"]["must_not"].append({"bool": {"filter": [kept, indexed]}})
    return query
