"""``OpenSearchWriteSession``: writes to one scope; a new version is complete before the
old one goes.

The session turns ``put_document``, ``delete_document``, ``record_problem`` and
``record_unread`` into bulk actions, buffered into requests of at most
``bulk_chunk_size`` actions / ``bulk_max_chunk_bytes`` and handed to one background
thread (``sender.RequestWriter``). How a document's new generation replaces the old one
only once it is complete, and what is removed when the session ends, is the generation
protocol (``generations``); the Serverless differences are in ``serverless``.

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
older generations of a document are found by a search and deleted (``serverless``).
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any

from knowledge.core.errors import StoreError
from knowledge.core.identity import document_id as _document_id
from knowledge.core.model import FileProblem
from knowledge.core.origin import FORMAT, ORIGIN
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SYNONYMS_FILE
from knowledge.ranking.analysis import keyword_terms
from knowledge.ranking.page_signal import PageRow
from knowledge.stores.opensearch.write import records
from knowledge.stores.opensearch.write.bulk import BulkSender, byte_length, serialize
from knowledge.stores.opensearch.write.chunk_records import (
    chunk_document,
    document_record,
    problem_fields,
    problem_record,
    unread_record,
)
from knowledge.stores.opensearch.write.generations import (
    Commit,
    WriteState,
    delete_by_query,
    generation_ids,
    new_generation,
    record_states,
    remove_stale_generations,
    unwritten_query,
)
from knowledge.stores.opensearch.write.sender import Request, RequestBuffer, RequestWriter
from knowledge.stores.opensearch.write.serverless import (
    ServerlessWriter,
    delete_matching,
    document_ids,
)
from knowledge.stores.opensearch.write.synonym_records import (
    synonyms_body,
    synonyms_record,
    synonyms_record_id,
)
from knowledge.stores.protocol import DocumentHeader, EmbeddedChunk

if TYPE_CHECKING:
    from knowledge.stores.opensearch.connection import Connection
    from knowledge.stores.opensearch.indexes import Indexes

__all__ = ["OpenSearchWriteSession", "new_generation"]

UNREAD_OWNER = "(unread files)"
"""The path a failed write of the unread-files record is reported under."""

_BULK_QUEUE_DEPTH = 1
"""Requests waiting for the sender thread (one more is on the wire); 0 sends inline."""

_VECTOR_PAGE = 500
"""Chunks (keys and vectors) read per request by ``stored_vectors``."""


class OpenSearchWriteSession:
    """Writes to one scope (``knowledge.stores.protocol.WriteSession``); see the module docstring.

    ``replace_scope`` (a reindex) removes, when the session ends, every record of the
    scope it did not write, so the old contents stay searchable until the new are in;
    but not the indexed version of a document whose latest problem this session recorded
    (its new version could not be indexed: a failed write never removes what was
    searchable before).
    """

    def __init__(
        self,
        connection: Connection,
        indexes: Indexes,
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
        self._indexes = indexes
        self._scope = scope
        self._index = index
        self._replace_scope = replace_scope
        self._on_close = on_close
        self._client_ids = bool(config.client_ids)
        self._headings = config.headings_weight > 0
        self._serverless = config.serverless
        self._wait_for = config.wait_for_refresh and not config.serverless
        self._entered = False
        self._started = datetime.now(UTC)
        self._failed: set[str] = set()  # replace_scope: problems recorded, versions kept
        self._serializer: Any = None
        self._metadata_pairs = True  # the index's layout, read on entering
        self._buffer = RequestBuffer(config.bulk_chunk_size, config.bulk_max_chunk_bytes)
        # Shared with the sender thread (``generations.WriteState``), which writes the requests.
        self._state = WriteState()
        writer = RequestWriter if self._client_ids else ServerlessWriter
        self._writer = writer(connection, scope, index, self._state, wait_for=self._wait_for)
        self._sender: BulkSender[Request] = BulkSender(self._writer.send, _BULK_QUEUE_DEPTH)
        self._flushes = 0

    # --- the protocol ----------------------------------------------------------------------

    @property
    def failures(self) -> Sequence[FileProblem]:
        """Documents not written (rejected, or a newer version won); complete once the
        session is left."""
        return self._state.failures()

    def __enter__(self) -> OpenSearchWriteSession:
        self._serializer = self._writer.serializer = self._connection.serializer
        self._metadata_pairs = self._indexes.metadata_pairs(self._index)
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
        self._failed.discard(path)
        generation = new_generation(self._clock)
        mark = len(self._buffer.actions)
        flushed_before = self._flushes
        queued = _Queued(kind=_text(header.metadata.get(FORMAT)))
        try:
            self._queue_chunks(header, chunks, generation, queued)
        except BaseException:
            self._drop_generation(
                path=path,
                document_id=document_id,
                generation=generation,
                count=queued.count,
                mark=mark,
                flushed_before=flushed_before,
            )
            raise
        self._buffer.commits.append(self._commit_of(header, generation, queued))
        with self._state.lock:
            self._state.pending_commits += 1
        self._state.wrote = True
        return queued.count

    def _queue_chunks(
        self,
        header: DocumentHeader,
        chunks: Iterable[EmbeddedChunk],
        generation: str,
        queued: _Queued,
    ) -> None:
        """Queue each chunk's index action, and count into ``queued`` what its record
        says of them (so far, when ``chunks`` raises)."""
        path, document_id = header.path, header.document_id
        for item in chunks:
            chunk = item.chunk
            if item.vector is not None:
                queued.reused += item.reused
                queued.embedded += not item.reused
            if queued.kind is None:
                queued.kind = _text(chunk.metadata.get(FORMAT))
            chunk_id = (
                records.generation_chunk_id(document_id, generation, chunk.chunk_index)
                if self._client_ids
                else None
            )
            text_terms = keyword_terms(chunk.content)
            queued.page.add(text_terms)
            source = chunk_document(
                self._scope,
                header,
                chunk,
                vector=item.vector,
                generation=generation,
                embedding_key=item.embedding_key,
                metadata_pairs=self._metadata_pairs,
                headings=self._headings,
                text_terms=text_terms,
            )
            self._add(records.bulk_index_action(chunk_id, source), path)
            queued.count += 1

    def _commit_of(self, header: DocumentHeader, generation: str, queued: _Queued) -> Commit:
        """The document's commit: its record, written after its chunks."""
        size = getattr(header, "size", None)
        return Commit(
            path=header.path,
            document_id=header.document_id,
            generation=generation,
            version=header.version,
            chunk_count=queued.count,
            precondition=header.precondition,
            record=document_record(
                self._scope,
                header,
                chunk_count=queued.count,
                generation=generation,
                format=queued.kind,
                origin=_text(header.metadata.get(ORIGIN)),
                size=size if isinstance(size, int) else None,
                embedded_chunks=queued.embedded,
                reused_chunks=queued.reused,
                page_terms=queued.page.terms,
            ),
        )

    def delete_document(self, path: str) -> bool:
        """Remove the document (its record, its chunks, its problem); True if an indexed
        version existed. What the session queued before is written first."""
        self._check_open()
        self._settle_commits()
        self._failed.discard(path)
        document_id = _document_id(self._scope, path)
        action = f"delete '{path}' from {self._scope}"
        existed = False
        if self._client_ids:
            state = record_states(self._connection, self._index, [document_id]).get(document_id)
            if state is not None:
                existed = state.generation is not None
                for chunk_id in generation_ids(document_id, state.generation, state.chunk_count):
                    self._add(records.bulk_delete_action(chunk_id), path)
                # The record goes only once every chunk is gone (``RequestWriter.send``): a record
                # removed beside a chunk that stayed would leave that chunk searchable
                # with nothing left to find it by when the delete is retried.
                self._buffer.removals.append((path, document_id))
                self._state.wrote = True
        else:
            found = document_ids(
                self._connection,
                self._index,
                scope=self._scope,
                state=self._state,
                path=path,
                document_id=document_id,
                action=action,
            )
            for doc_id in found:
                existed = True
                self._add(records.bulk_delete_action(doc_id), path)
        with self._state.lock:
            self._state.rejections.pop(path, None)
        if existed:
            self._state.wrote = True
        return existed

    def record_problem(self, path: str, reason: str) -> None:
        """Remember that the latest attempt to index ``path`` failed with ``reason``, in
        the document's record; the indexed version (if any) stays searchable."""
        self._check_open()
        self._failed.add(path)
        if self._client_ids and any(removed == path for removed, _ in self._buffer.removals):
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
        self._state.wrote = True

    def record_unread(self, counts: Mapping[str, int]) -> None:
        """Write the scope's unread-files record (``chunk_records.unread_record``): one record
        under a fixed id where the store names ids, else a new one each time, of which
        the status reads the latest (a reindex's replace removes the older ones)."""
        self._check_open()
        source = unread_record(self._scope, counts, datetime.now(UTC))
        record_id = f"unread:{_document_id(self._scope, '')}" if self._client_ids else None
        self._add(records.bulk_index_action(record_id, source), UNREAD_OWNER)
        self._state.wrote = True

    def put_synonyms(self, text: str | None) -> None:
        """Write the scope's synonyms record (``opensearch.synonym_records``; ``None``: none) and
        clear the synonyms file's problem. With server-made ids the older records of the
        scope are deleted first (the status and searches read the latest)."""
        self._check_open()
        record_id = None
        if self._client_ids:
            record_id = synonyms_record_id(_document_id(self._scope, ""))
        else:
            query = {"bool": {"filter": synonyms_body(self._scope)["query"]["bool"]["filter"]}}
            action = f"remove the older synonyms of {self._scope}"
            delete_matching(self._connection, self._index, query, self._serializer, action)
        source = synonyms_record(self._scope, text, datetime.now(UTC))
        self._add(records.bulk_index_action(record_id, source), SYNONYMS_FILE)
        self._state.wrote = True
        self.delete_document(SYNONYMS_FILE)  # its problem, if one was recorded

    def stored_vectors(self, path: str) -> Mapping[str, Sequence[float]]:
        """The vectors of the indexed version(s) of ``path`` by ``embedding_key``
        (module docstring); empty for a store without an embedder."""
        self._check_open()
        dimensions = self._indexes.dimensions
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
        if self._buffer.full_for(size):
            self._flush()
        self._buffer.append(lines, size, path)

    def _flush(self, *, final: bool = False) -> None:
        request = self._buffer.take(final=final)
        if request is None:
            return
        self._flushes += 1
        self._sender.submit(request)

    def _settle(self) -> None:
        """Send the buffer and wait until every request is answered."""
        self._flush()
        self._sender.wait()

    def _settle_commits(self) -> None:
        with self._state.lock:
            pending = self._state.pending_commits
        if pending:
            self._settle()

    def _drop_generation(
        self,
        *,
        path: str,
        document_id: str,
        generation: str,
        count: int,
        mark: int,
        flushed_before: int,
    ) -> None:
        """Forget a generation whose chunk stream failed: drop what is queued, delete
        what was sent."""
        if self._flushes == flushed_before:
            self._buffer.forget(path, mark)
            return
        self._buffer.forget(path, None)
        if self._client_ids:
            ids = generation_ids(document_id, generation, count)
        else:
            self._settle()
            with self._state.lock:
                ids = self._state.server_ids.pop(path, [])
        for chunk_id in ids:
            self._add(records.bulk_delete_action(chunk_id), path)

    # --- the end ---------------------------------------------------------------------------

    def _commit(self) -> None:
        self._flush(final=True)
        self._sender.wait()
        if self._replace_scope:
            self._remove_unwritten()
        elif self._client_ids:
            # Step 4 of the generation protocol: the orphans of the replaced documents.
            with self._state.lock:
                committed = dict(self._state.replaced_documents)
            remove_stale_generations(
                self._connection, self._index, self._scope, committed, self._clock
            )

    def _remove_unwritten(self) -> None:
        """A reindex: remove every record of the scope written before the session."""
        query = unwritten_query(self._scope, self._started, keep=self._failed)
        action = f"remove what the reindex of {self._scope} did not write"
        connection = self._connection
        if self._serverless:
            delete_matching(connection, self._index, query, self._serializer, action)
            return
        if delete_by_query(connection, self._index, query, action) and self._wait_for:
            connection.refresh(self._index)  # once per reindex, so it is searchable at once

    def _abandon(self) -> None:
        """Leave after a failure: send nothing more, wait for what is on the wire."""
        self._sender.cancel()
        self._sender.close()
        self._buffer.clear()


@dataclass(slots=True)
class _Queued:
    """What ``put_document`` queued of a document's chunks: their count, how many were
    embedded or reused, its page row (``ranking.page_signal``) and its format."""

    kind: str | None
    count: int = 0
    embedded: int = 0
    reused: int = 0
    page: PageRow = field(default_factory=PageRow)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
