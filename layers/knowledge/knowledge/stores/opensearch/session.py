"""``OpenSearchWriteSession``: writes to one scope; a new version is complete before the
old one goes.

Every ``put_document`` is a new *generation* of the document (a time-ordered id): its
chunks get ids of their own (``<document id>:<generation>:<chunk index>``), so they are
written *beside* the previous version, never over it. Then, per document:

1. its chunks go out in the session's shared ``_bulk`` requests (``bulk.BulkSender``:
   one background thread, at most one request waiting while one is on the wire);
2. once the request holding its last chunk is answered and every chunk was accepted,
   its **record** (id = the document id: path, source type, size, chunk count,
   version, content hash, indexed time, generation, problem) is written *only if it
   is still what was read just before* (``_mget`` in real time, then ``create`` or
   ``index`` with ``if_seq_no``/``if_primary_term``). An indexed version newer than
   this one wins (the new chunks are removed; the document is reported "stale version");
   a record changed meanwhile (409) is read again and decided again. So the version
   check and the write are atomic in effect: two racing writers end at the newer one;
3. then the chunks of the generation the record pointed at before are deleted by id.
   If the node refuses (429 until retries are exhausted, a failed request), the record
   is pointed back at that generation, marked incomplete (``_point_back``), and the
   document is rejected: its retry finds it incomplete (not "unchanged"), writes it
   again and removes the old generation by id then. Otherwise the old version's chunks
   would stay searchable under a record that no longer names them;

4. when the session ends, if it replaced an indexed version of any document, one
   ``_delete_by_query`` (per session, not per document) removes those documents' chunks
   whose generation is more than ``_STALE_AFTER_NS`` old *and* older than the generation
   this session committed for that document (``records.stale_generations_query``): the
   generations of writers that died after their chunks were accepted and before their
   record switch (*orphans*; step 3 cannot name them, no record pointed at them). The
   committed generation itself is never matched, however long the session ran.
   A session that only adds new documents sends none (a new document costs no delete).

Orphans: between the crash and the next write of the document, its record still points
at the previous generation (``stored_documents``, the listing and the status report
that), while searches show the orphan's chunks, as the document's newest generation
(possibly not all of them: only what the node had accepted). The next successful write
that replaces the indexed version (step 4) or a reindex (``_remove_unwritten``) removes
them; orphans of a document's very first write (no record yet) stay until its next
update or a reindex: the redelivered write creates the record and searches show its
generation, the newest, wherever its chunks match. ``_STALE_AFTER_NS`` is the age
past which no writer still holds an uncommitted generation: it is longer than an
indexer invocation can run (300 s, at most 15 min for any Lambda), and shorter than the
queue's visibility timeout (30 min), after which a crashed writer's record comes back;
a younger generation of another document writer is left alone, since it may be about
to commit (its own step 3 then removes ours). A cleanup the node refuses is logged and
left to the next write: the session's documents are written.

A document whose chunks or record the node rejects (429 until retries are exhausted,
a mapping error) is listed in ``failures`` and only *its new chunks* are removed: the
previous version stays searchable, its record untouched. Searches show only each
document's newest generation among their hits (``answers.newest_generations``), so
while both versions exist for an instant, no search shows both.

Embedding reuse: ``stored_vectors(path)`` reads the document's chunk keys and vectors
(``records.stored_vectors_body``: one search per ``_VECTOR_PAGE`` chunks, so one request
for most documents). It reads what is searchable (a write of the last refresh interval
may be missing: that only costs reuse, since a key is a content address).

No refresh per document: what a session wrote is searchable within
``config.refresh_interval`` (1 s) of its end; with ``config.wait_for_refresh`` its last
request is sent with ``refresh=wait_for`` (it returns once the next scheduled refresh
ran, without forcing one), so it is searchable when the session ends.

On Serverless (``client_ids=False``) ids are the server's, there is no ``_mget`` of
records by id and no conditional write: records are written unconditionally and the
older generations of a document are found by a search and deleted (eventually
consistent; see the package README).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any

from knowledge.core.errors import KnowledgeError, StoreError, StoreUnavailableError
from knowledge.core.identity import document_id as _document_id
from knowledge.core.identity import is_newer_version
from knowledge.core.model import FileProblem
from knowledge.core.origin import FORMAT, ORIGIN
from knowledge.core.scope import KnowledgeScope
from knowledge.stores.opensearch import answers, query_filters, records
from knowledge.stores.opensearch.answers import item_reason
from knowledge.stores.opensearch.bulk import (
    BulkSender,
    byte_length,
    item_ok,
    send_bulk,
    serialize,
)
from knowledge.stores.opensearch.chunk_records import (
    chunk_document,
    document_record,
    problem_fields,
    problem_record,
    unread_record,
)
from knowledge.stores.opensearch.client import refused_as_expensive
from knowledge.stores.opensearch.mapping import (
    CHUNK_COUNT,
    CONTENT_HASH,
    GENERATION,
    INDEXED_AT,
    PROBLEM_AT,
)
from knowledge.stores.protocol import DocumentHeader, EmbeddedChunk

if TYPE_CHECKING:
    from knowledge.stores.opensearch.connection import Connection

__all__ = ["OpenSearchWriteSession", "new_generation"]

logger = logging.getLogger(__name__)

UNREAD_OWNER = "(unread files)"
"""The path a failed write of the unread-files record is reported under."""

_BULK_QUEUE_DEPTH = 1
"""Requests waiting for the sender thread (one more is on the wire); 0 sends inline."""

_CONFLICT_ROUNDS = 5
"""How often a record changed by another writer (409) is read and decided again."""

_MAX_REASONS_PER_DOCUMENT = 3

_STALE_AFTER_NS = 15 * 60 * 10**9
"""Generations older than this (15 min) that a committed document's record does not
point at are removed when the session ends (module docstring, step 4)."""

_STALE_IDS_PER_REQUEST = 1000
"""Documents named in one ``_delete_by_query`` of stale generations."""

_VECTOR_PAGE = 500
"""Chunks (keys and vectors) read per request by ``stored_vectors``."""


def new_generation(clock: Callable[[], int] = time.time_ns) -> str:
    """A generation id: sortable by the time it was made (``clock``: nanoseconds since
    the epoch), unique across writers."""
    return f"{clock():019d}-{secrets.token_hex(4)}"


class OpenSearchWriteSession:
    """Writes to one scope (``knowledge.stores.protocol.WriteSession``); see the module docstring.

    ``replace_scope`` (a reindex) removes, when the session ends, every record of the
    scope it did not write, so the old contents stay searchable until the new are in.
    """

    def __init__(
        self,
        connection: Connection,
        scope: KnowledgeScope,
        index: str,
        *,
        replace_scope: bool,
        on_close: Any = None,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        config = connection.config
        self._clock = clock
        self._connection = connection
        self._scope = scope
        self._index = index
        self._replace_scope = replace_scope
        self._on_close = on_close
        self._client_ids = bool(config.client_ids)
        self._headings = config.headings_weight > 0
        self._serverless = config.serverless
        self._max_actions = config.bulk_chunk_size
        self._max_bytes = config.bulk_max_chunk_bytes
        self._wait_for = config.wait_for_refresh and not config.serverless
        self._entered = False
        self._started = datetime.now(UTC)
        self._serializer: Any = None
        self._metadata_pairs = True  # the index's layout, read on entering
        # The next request.
        self._actions: list[str] = []
        self._owners: list[str] = []
        self._commits: list[_Commit] = []
        self._removals: list[tuple[str, str]] = []  # (path, record id) after their chunks
        self._bytes = 0
        self._sender: BulkSender[_Request] = BulkSender(self._send, _BULK_QUEUE_DEPTH)
        self._wrote = False
        # Shared with the sender thread, under the lock.
        self._state_lock = threading.Lock()
        self._rejections: dict[str, _Rejection] = {}
        self._server_ids: dict[str, list[str]] = {}  # uncommitted server-made ids, by path
        self._committed_ids: dict[str, list[str]] = {}  # committed ones (not yet searchable)
        # Documents whose indexed version this session replaced: id -> committed generation.
        self._replaced_documents: dict[str, str] = {}
        self._pending_commits = 0
        self._flushes = 0
        self._refreshed = False

    # --- the protocol ----------------------------------------------------------------------

    @property
    def failures(self) -> Sequence[FileProblem]:
        """Documents not written (rejected, or a newer version won); complete once the
        session is left."""
        with self._state_lock:
            return tuple(FileProblem(path, r.describe()) for path, r in self._rejections.items())

    def __enter__(self) -> OpenSearchWriteSession:
        self._serializer = self._connection.serializer
        self._metadata_pairs = self._connection.metadata_pairs(self._index)
        self._entered = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._entered:
            return
        self._entered = False
        try:
            if exc_type is None:
                try:
                    self._commit()
                except BaseException:
                    self._abandon()
                    raise
            else:
                self._abandon()
        finally:
            self._sender.close()
            if self._on_close is not None:
                self._on_close()

    def put_document(self, header: DocumentHeader, chunks: Iterable[EmbeddedChunk]) -> int:
        """Queue the document's chunks as a new generation, and its record after them.

        Returns the number of chunks; a rejection shows up in ``failures`` later. If
        ``chunks`` raises, nothing of this generation stays: what was queued is dropped,
        what was sent is deleted; the previous version is untouched."""
        self._check_open()
        self._sender.check()
        path, document_id = header.path, header.document_id
        generation = new_generation(self._clock)
        mark = (len(self._actions), len(self._commits))
        flushed_before = self._flushes
        count = embedded = reused = 0
        kind: str | None = _text(header.metadata.get(FORMAT))
        try:
            for item in chunks:
                chunk = item.chunk
                if item.vector is not None:
                    reused += item.reused
                    embedded += not item.reused
                if kind is None:
                    kind = _text(chunk.metadata.get(FORMAT))
                chunk_id = (
                    records.generation_chunk_id(document_id, generation, chunk.chunk_index)
                    if self._client_ids
                    else None
                )
                source = chunk_document(
                    self._scope,
                    header,
                    chunk,
                    vector=item.vector,
                    generation=generation,
                    embedding_key=item.embedding_key,
                    metadata_pairs=self._metadata_pairs,
                    headings=self._headings,
                )
                self._add(records.bulk_index_action(chunk_id, source), path)
                count += 1
        except BaseException:
            self._drop_generation(
                path=path,
                document_id=document_id,
                generation=generation,
                count=count,
                mark=mark,
                flushed_before=flushed_before,
            )
            raise
        size = getattr(header, "size", None)
        commit = _Commit(
            path=path,
            document_id=document_id,
            generation=generation,
            version=header.version,
            chunk_count=count,
            record=document_record(
                self._scope,
                header,
                chunk_count=count,
                generation=generation,
                format=kind,
                origin=_text(header.metadata.get(ORIGIN)),
                size=size if isinstance(size, int) else None,
                embedded_chunks=embedded,
                reused_chunks=reused,
            ),
        )
        self._commits.append(commit)
        with self._state_lock:
            self._pending_commits += 1
        self._wrote = True
        return count

    def delete_document(self, path: str) -> bool:
        """Remove the document (its record, its chunks, its problem); True if an indexed
        version existed. What the session queued before is written first."""
        self._check_open()
        self._settle_commits()
        document_id = _document_id(self._scope, path)
        action = f"delete '{path}' from {self._scope}"
        existed = False
        if self._client_ids:
            state = self._connection.mget_records(self._index, [document_id]).get(document_id)
            if state is not None:
                existed = state.generation is not None
                for chunk_id in _generation_ids(document_id, state.generation, state.chunk_count):
                    self._add(records.bulk_delete_action(chunk_id), path)
                # The record goes only once every chunk is gone (``_send``): a record
                # removed beside a chunk that stayed would leave that chunk searchable
                # with nothing left to find it by when the delete is retried.
                self._removals.append((path, document_id))
                self._wrote = True
        else:
            query = records.other_generations_query(self._scope, document_id, None)
            found = self._connection.find_ids(self._index, query, action)
            with self._state_lock:
                # What this session wrote is not searchable yet: its ids were kept.
                found += self._committed_ids.pop(path, [])
            for doc_id in dict.fromkeys(found):
                existed = True
                self._add(records.bulk_delete_action(doc_id), path)
        with self._state_lock:
            self._rejections.pop(path, None)
        if existed:
            self._wrote = True
        return existed

    def record_problem(self, path: str, reason: str) -> None:
        """Remember that the latest attempt to index ``path`` failed with ``reason``, in
        the document's record; the indexed version (if any) stays searchable."""
        self._check_open()
        if self._client_ids and any(removed == path for removed, _ in self._removals):
            # A delete of this path queued the removal of its record, sent after its
            # chunks' deletes, so it would take the problem with it (a changed file that
            # can no longer be indexed vanished from the status): send it first, and the
            # problem makes a record of its own.
            self._settle()
        document_id = _document_id(self._scope, path)
        now = datetime.now(UTC)
        if self._client_ids:
            action = records.bulk_problem_action(
                document_id,
                problem_fields(reason, now),
                problem_record(self._scope, document_id, path, reason, now),
            )
        else:
            action = records.bulk_index_action(
                None, problem_record(self._scope, document_id, path, reason, now)
            )
        self._add(action, path)
        self._wrote = True

    def record_unread(self, counts: Mapping[str, int]) -> None:
        """Write the scope's unread-files record (``chunk_records.unread_record``): one record
        under a fixed id where the store names ids, else a new one each time, of which
        the status reads the latest (a reindex's replace removes the older ones)."""
        self._check_open()
        source = unread_record(self._scope, counts, datetime.now(UTC))
        record_id = f"unread:{_document_id(self._scope, '')}" if self._client_ids else None
        self._add(records.bulk_index_action(record_id, source), UNREAD_OWNER)
        self._wrote = True

    def stored_vectors(self, path: str) -> Mapping[str, Sequence[float]]:
        """The vectors of the indexed version(s) of ``path`` by ``embedding_key``
        (module docstring); empty for a store without an embedder."""
        self._check_open()
        dimensions = self._connection.dimensions
        if dimensions is None:
            return {}
        document_id = _document_id(self._scope, path)
        action = f"read the stored vectors of '{path}' in {self._scope}"
        vectors: dict[str, Sequence[float]] = {}
        after: list[Any] | None = None
        while True:
            body = records.stored_vectors_body(self._scope, document_id, _VECTOR_PAGE, after)
            page, after, hits = records.parse_stored_vectors(
                self._connection.search_all(self._index, body, action), dimensions
            )
            for key, vector in page.items():
                # Doubles as JSON had them (written back unchanged), 8 bytes a number.
                vectors.setdefault(key, array("d", vector))
            if hits < _VECTOR_PAGE or after is None:
                return vectors

    # --- the buffer ------------------------------------------------------------------------

    def _check_open(self) -> None:
        if not self._entered:
            raise StoreError("write session is not open: use it in a 'with' block")

    def _add(self, action: Mapping[str, Any], path: str) -> None:
        lines = serialize(action, self._serializer)
        size = byte_length(lines)
        if self._actions and (
            len(self._actions) >= self._max_actions or self._bytes + size > self._max_bytes
        ):
            self._flush()
        self._actions.append(lines)
        self._owners.append(path)
        self._bytes += size

    def _flush(self, *, final: bool = False) -> None:
        if not self._actions and not self._commits and not self._removals and not final:
            return
        request = _Request(
            self._actions, self._owners, self._commits, final=final, removals=self._removals
        )
        self._actions, self._owners, self._commits, self._bytes = [], [], [], 0
        self._removals = []
        self._flushes += 1
        self._sender.submit(request)

    def _settle(self) -> None:
        """Send the buffer and wait until every request is answered."""
        self._flush()
        self._sender.wait()

    def _settle_commits(self) -> None:
        with self._state_lock:
            pending = self._pending_commits
        if pending:
            self._settle()

    def _drop_generation(
        self,
        *,
        path: str,
        document_id: str,
        generation: str,
        count: int,
        mark: tuple[int, int],
        flushed_before: int,
    ) -> None:
        """Forget a generation whose chunk stream failed: drop what is queued, delete
        what was sent."""
        if self._flushes == flushed_before:
            del self._actions[mark[0] :]
            del self._owners[mark[0] :]
            self._bytes = sum(byte_length(lines) for lines in self._actions)
            return
        keep = [i for i, owner in enumerate(self._owners) if owner != path]
        self._actions = [self._actions[i] for i in keep]
        self._owners = [self._owners[i] for i in keep]
        self._bytes = sum(byte_length(lines) for lines in self._actions)
        if self._client_ids:
            ids = _generation_ids(document_id, generation, count)
        else:
            self._settle()
            with self._state_lock:
                ids = self._server_ids.pop(path, [])
        for chunk_id in ids:
            self._add(records.bulk_delete_action(chunk_id), path)

    # --- the sender thread -----------------------------------------------------------------

    def _send(self, request: _Request) -> None:
        """Send one request (in the sender thread): the chunks, then the records of the
        documents it completes, then the removal of what they replace."""
        scope = self._scope
        paths = list(dict.fromkeys([*request.owners, *(c.path for c in request.commits)]))
        action = f"index {len(paths)} document(s) in {scope}"
        retry = self._connection.retry
        refresh_now = "wait_for" if request.final and self._wait_for and self._wrote else None
        answers: list[dict[str, Any]] = []
        if request.actions:
            try:
                answers = send_bulk(
                    self._connection,
                    self._index,
                    request.actions,
                    action,
                    retry=retry,
                    refresh=refresh_now if not (request.commits or request.removals) else None,
                )
            except StoreUnavailableError:
                raise
            except KnowledgeError as exc:
                for path in paths:
                    self._reject(path, str(exc))
                answers = []
            self._refreshed = refresh_now is not None and not (request.commits or request.removals)
        for path, info in zip(request.owners, answers, strict=False):
            if info.get("op") == "delete":
                if not item_ok(info) and info.get("status") != 404:
                    self._reject(path, "removal: " + item_reason(info))
            elif not item_ok(info):
                self._reject(path, item_reason(info))
            elif not self._client_ids and info.get("op") == "index":
                self._note_server_id(path, info)
        if request.removals:
            self._remove_records(request.removals, action, refresh_now)
        if request.commits:
            switched: dict[str, _Switch] = {}
            cleanup = self._commit_records(request.commits, action, refresh_now, switched)
            if cleanup:
                what = "removal of a replaced version"
                try:
                    failed = self._send_deletes(cleanup, action, refresh_now, what)
                except StoreUnavailableError:
                    raise
                except KnowledgeError as exc:
                    failed = {path for path, _ in cleanup}
                    for path in failed:
                        self._reject(path, f"{what}: {exc}")
                self._point_back(switched, failed, action)
            elif refresh_now is not None and not self._refreshed:
                # Rare: the records' request could not carry the wait (cleanup was expected).
                self._connection.refresh(self._index)

    def _remove_records(
        self, removals: Sequence[tuple[str, str]], action: str, refresh: str | None
    ) -> None:
        """Remove the records of deleted documents whose chunk removals all succeeded
        (this request's and the earlier ones', answered in order before it)."""
        with self._state_lock:
            ready = [(path, doc_id) for path, doc_id in removals if path not in self._rejections]
        if not ready:
            return
        try:
            self._send_deletes(ready, action, refresh, "removal")
        except StoreUnavailableError:
            raise
        except KnowledgeError as exc:
            for path, _ in ready:
                self._reject(path, "removal: " + str(exc))

    def _note_server_id(self, path: str, info: Mapping[str, Any]) -> None:
        # Server-made ids (Serverless), kept to remove a generation that failed.
        with self._state_lock:
            self._server_ids.setdefault(path, []).append(str(info.get("_id")))

    def _commit_records(
        self,
        commits: Sequence[_Commit],
        action: str,
        refresh: str | None,
        switched: dict[str, _Switch],
    ) -> list[tuple[str, str]]:
        """Write the records of the documents whose chunks were all accepted; returns the
        deletes (``(path, id)``) that follow: replaced generations, failed ones. Each
        record switched from an indexed generation goes into ``switched``."""
        cleanup: list[tuple[str, str]] = []
        pending: list[_Commit] = []
        with self._state_lock:
            self._pending_commits -= len(commits)
            rejected = set(self._rejections)
        for commit in commits:
            if commit.path in rejected:
                cleanup.extend(self._own_ids(commit))
            else:
                pending.append(commit)
        if not self._client_ids:
            return cleanup + self._commit_serverless(pending, action)
        for _ in range(_CONFLICT_ROUNDS):
            if not pending:
                break
            states = self._connection.mget_records(self._index, [c.document_id for c in pending])
            decided: list[tuple[_Commit, records.RecordState | None]] = []
            actions: list[str] = []
            for commit in pending:
                state = states.get(commit.document_id)
                if (
                    state is not None
                    and state.generation is not None
                    and not is_newer_version(commit.version, state.version)
                ):
                    self._reject(
                        commit.path,
                        f"stale version: {commit.version} is older than the indexed "
                        f"{state.version}",
                        plain=True,
                    )
                    cleanup.extend(self._own_ids(commit))
                    continue
                record = records.bulk_record_action(commit.document_id, commit.record, state)
                actions.append(serialize(record, self._serializer))
                decided.append((commit, state))
            if not actions:
                pending = []
                break
            replaces = any(
                s is not None and s.generation not in (None, c.generation) for c, s in decided
            )
            last = refresh if not cleanup and not replaces else None
            try:
                answers = send_bulk(
                    self._connection,
                    self._index,
                    actions,
                    action,
                    retry=self._connection.retry,
                    refresh=last,
                )
                self._refreshed = self._refreshed or last is not None
            except StoreUnavailableError:
                raise
            except KnowledgeError as exc:
                for commit, _ in decided:
                    self._reject(commit.path, f"document record: {exc}")
                    cleanup.extend(self._own_ids(commit))
                break
            pending = []
            for (commit, state), info in zip(decided, answers, strict=True):
                if item_ok(info):
                    if state is not None and state.generation is not None:
                        with self._state_lock:  # replaced a version: step 4 looks
                            self._replaced_documents[commit.document_id] = commit.generation
                    if state is not None and state.generation not in (None, commit.generation):
                        switched[commit.path] = _Switch(commit, state, info)
                        cleanup.extend(
                            (commit.path, i)
                            for i in _generation_ids(
                                commit.document_id, state.generation, state.chunk_count
                            )
                        )
                elif info.get("status") == 409:
                    pending.append(commit)  # another writer changed the record: decide again
                else:
                    self._reject(commit.path, "document record: " + item_reason(info))
                    cleanup.extend(self._own_ids(commit))
        for commit in pending:
            self._reject(commit.path, "document record: changed by other writers too often")
            cleanup.extend(self._own_ids(commit))
        return cleanup

    def _commit_serverless(self, commits: Sequence[_Commit], action: str) -> list[tuple[str, str]]:
        """Records without ids or conditions; then the older generations, found by search."""
        if not commits:
            return []
        actions = [
            serialize(records.bulk_index_action(None, c.record), self._serializer) for c in commits
        ]
        try:
            answers = send_bulk(
                self._connection, self._index, actions, action, retry=self._connection.retry
            )
        except StoreUnavailableError:
            raise
        except KnowledgeError as exc:
            answers = [{"status": 500, "error": str(exc)} for _ in commits]
        cleanup: list[tuple[str, str]] = []
        for commit, info in zip(commits, answers, strict=True):
            if not item_ok(info):
                self._reject(commit.path, "document record: " + item_reason(info))
                cleanup.extend(self._own_ids(commit))
                continue
            with self._state_lock:
                written = self._server_ids.pop(commit.path, [])
                self._committed_ids[commit.path] = [*written, str(info.get("_id"))]
            query = _older_generations_query(self._scope, commit.document_id, commit.generation)
            found = self._connection.find_ids(self._index, query, action)
            cleanup.extend((commit.path, i) for i in found)
        return cleanup

    def _own_ids(self, commit: _Commit) -> list[tuple[str, str]]:
        """The ids of the chunks ``commit``'s generation wrote (to remove it)."""
        if self._client_ids:
            ids = _generation_ids(commit.document_id, commit.generation, commit.chunk_count)
        else:
            with self._state_lock:
                ids = self._server_ids.pop(commit.path, [])
        return [(commit.path, i) for i in ids]

    def _point_back(self, switched: Mapping[str, _Switch], failed: set[str], action: str) -> None:
        """Records switched to a new generation whose old chunks could not be removed point
        back at the old generation, marked incomplete: the document is rejected (its
        record is retried), and the retry, finding it incomplete instead of unchanged,
        writes it again and removes the old generation by id then. Without this the old
        version's chunks would stay, searchable, under a record that no longer names them.
        (The new generation left behind holds the new text, as the retry's does.)"""
        backs = [switched[path] for path in failed if path in switched]
        if not backs:
            return
        lines = [serialize(back.action(), self._serializer) for back in backs]
        try:
            answers = send_bulk(
                self._connection, self._index, lines, action, retry=self._connection.retry
            )
        except KnowledgeError as exc:
            answers = [{"status": 500, "error": str(exc)} for _ in backs]
        for back, info in zip(backs, answers, strict=True):
            if not item_ok(info):
                logger.warning(
                    "%s: the record of %s still names the new version while the old one's "
                    "chunks are left (%s); a later write of it removes them",
                    action,
                    back.commit.path,
                    item_reason(info),
                )

    def _send_deletes(
        self, deletes: Sequence[tuple[str, str]], action: str, refresh: str | None, what: str
    ) -> set[str]:
        """Delete the ids of ``deletes`` (``(path, id)``) in one bulk request; an item that
        fails (404, already gone, is fine) rejects its path with ``what: <reason>``.
        Returns the paths rejected here."""
        lines = [serialize(records.bulk_delete_action(i), self._serializer) for _, i in deletes]
        # The request carries the refresh (counted as sent even if it then fails: a failed
        # request fails the session or rejects its documents).
        self._refreshed = self._refreshed or refresh is not None
        answers = send_bulk(
            self._connection,
            self._index,
            lines,
            action,
            retry=self._connection.retry,
            refresh=refresh,
        )
        failed: set[str] = set()
        for (path, _), info in zip(deletes, answers, strict=True):
            if not item_ok(info) and info.get("status") != 404:
                self._reject(path, f"{what}: " + item_reason(info))
                failed.add(path)
        return failed

    def _reject(self, path: str, reason: str, *, plain: bool = False) -> None:
        with self._state_lock:
            self._rejections.setdefault(path, _Rejection(plain=plain)).add(reason)

    # --- the end ---------------------------------------------------------------------------

    def _commit(self) -> None:
        self._flush(final=True)
        self._sender.wait()
        if self._replace_scope:
            self._remove_unwritten()
        elif self._client_ids:
            self._remove_stale_generations()

    def _remove_stale_generations(self) -> None:
        """Step 4 (module docstring): the orphaned generations of the documents whose
        indexed version this session replaced, one request per ``_STALE_IDS_PER_REQUEST``."""
        with self._state_lock:
            committed = dict(self._replaced_documents)
        if not committed:
            return
        cutoff = f"{self._clock() - _STALE_AFTER_NS:019d}"
        # Older than the cutoff and than what was committed: never the committed one.
        bounds = [(doc, min(cutoff, generation)) for doc, generation in committed.items()]
        action = f"remove stale generations in {self._scope}"
        for start in range(0, len(bounds), _STALE_IDS_PER_REQUEST):
            batch = dict(bounds[start : start + _STALE_IDS_PER_REQUEST])
            try:
                self._delete_stale(batch, action)
            except KnowledgeError as exc:
                logger.warning("%s: %s; the next write of those documents retries", action, exc)
                return

    def _delete_stale(self, bounds: Mapping[str, str], action: str) -> None:
        """Delete the chunks of each document of ``bounds`` older than its bound. A domain
        that refuses a ``range`` on a keyword field (``search.allow_expensive_queries:
        false``) gets the documents' generations read, and the older ones named."""
        query = records.stale_generations_query(self._scope, bounds)
        try:
            self._connection.delete_by_query(self._index, query, action)
            return
        except StoreError as exc:
            if refused_as_expensive(exc) != "range":
                raise
        older: dict[str, list[str]] = {}
        after: dict[str, Any] | None = None
        while True:
            body = records.chunk_generations_body(self._scope, list(bounds), after)
            pairs, after = records.read_generation_pairs(
                self._connection.search_all(self._index, body, action)
            )
            for document, generation in pairs:
                if document in bounds and generation < bounds[document]:
                    older.setdefault(document, []).append(generation)
            if after is None:
                break
        if older:
            named = records.named_generations_query(self._scope, older)
            self._connection.delete_by_query(self._index, named, action)

    def _remove_unwritten(self) -> None:
        """A reindex: remove every record of the scope written before the session."""
        before = self._started.isoformat()
        query = {
            "bool": {
                "filter": query_filters.scope_filters(self._scope),
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
        action = f"remove what the reindex of {self._scope} did not write"
        connection = self._connection
        if self._serverless:
            ids = connection.find_ids(self._index, query, action)
            if ids:
                lines = [serialize(records.bulk_delete_action(i), self._serializer) for i in ids]
                send_bulk(connection, self._index, lines, action, retry=connection.retry)
            return
        if connection.delete_by_query(self._index, query, action) and self._wait_for:
            connection.refresh(self._index)  # once per reindex, so it is searchable at once

    def _abandon(self) -> None:
        """Leave after a failure: send nothing more, wait for what is on the wire."""
        self._sender.cancel()
        self._sender.close()
        self._actions, self._owners, self._commits, self._bytes = [], [], [], 0
        self._removals = []


@dataclass(frozen=True, slots=True)
class _Commit:
    """A document whose chunks are all queued: its record, written when they are in."""

    path: str
    document_id: str
    generation: str
    version: str | None
    chunk_count: int
    record: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class _Switch:
    """A record switched from ``state``'s generation to ``commit``'s (``answer``: the
    record write's answer, the condition for pointing it back)."""

    commit: _Commit
    state: records.RecordState
    answer: Mapping[str, Any]

    def action(self) -> dict[str, Any]:
        """Point the record back at the replaced generation, marked incomplete (written
        only if it is still this write's record)."""
        source = {
            **self.commit.record,
            GENERATION: self.state.generation,
            CHUNK_COUNT: self.state.chunk_count,
            CONTENT_HASH: answers.INCOMPLETE_HASH,
        }
        condition = replace(
            self.state,
            seq_no=int(self.answer.get("_seq_no", -1)),
            primary_term=int(self.answer.get("_primary_term", -1)),
        )
        return records.bulk_record_action(self.commit.document_id, source, condition)


@dataclass(slots=True)
class _Request:
    """One ``_bulk`` request: serialized actions with their document paths, and the
    documents whose last chunk it carries."""

    actions: list[str]
    owners: list[str]
    commits: list[_Commit]
    final: bool = False
    removals: list[tuple[str, str]] = field(default_factory=list)


@dataclass(slots=True)
class _Rejection:
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


def _generation_ids(document_id: str, generation: str | None, count: int) -> list[str]:
    if generation is None:
        return []
    return [records.generation_chunk_id(document_id, generation, i) for i in range(count)]


def _older_generations_query(
    scope: KnowledgeScope, document_id: str, generation: str
) -> dict[str, Any]:
    """Records and chunks of a document older than ``generation`` (or without one: a
    problem-only record), never a newer writer's."""
    return {
        "bool": {
            "filter": [*query_filters.scope_filters(scope), {"term": {"document_id": document_id}}],
            "should": [
                {"range": {GENERATION: {"lt": generation}}},
                {"bool": {"must_not": [{"exists": {"field": GENERATION}}]}},
            ],
            "minimum_should_match": 1,
        }
    }


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
