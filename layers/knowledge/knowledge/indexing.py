"""The indexing pipeline, once for every store: source -> extract -> chunk -> embed -> store.

``Indexer`` turns source documents into writes on a backend's ``IndexWriter``
(``knowledge.store``); ``IndexingStoreMixin`` gives a store that is its own
``IndexWriter`` the ``KnowledgeStore`` methods ``index``, ``reindex``,
``upsert_document`` and ``delete_document``.

Per document: size check (``options.max_document_bytes``, before reading) -> read ->
fingerprint (``identity.content_hash`` of the bytes, and of the sidecar metadata when
there is some, so a metadata change re-indexes) -> skip if the stored document has the
same fingerprint ("unchanged") -> ``extraction.extract_text`` -> ``chunker.chunk`` ->
embed in batches of ``embed_batch_size`` (only with an embedder) -> ``put_document``.
Chunks are streamed: at most one embedding batch of one document is in memory.

Chunk metadata = sidecar user metadata, then ``source_key`` (the source key, else the
path) and ``content_type``, then the chunker's ``title`` and ``heading_path`` (later
keys win, so user metadata cannot hide the system keys).

Failures are per document and never stop a run: a file that cannot be read, extracted,
embedded or written is listed in ``errors`` (or ``skipped`` for deliberate skips), and
the run goes on. ``StoreUnavailableError`` is re-raised (nothing more can be written),
as is an error while listing the source (nothing is deleted then). A document whose
write fails is removed from the index, so a half-written document is never searchable:
backends that stream chunks cannot promise to keep the old version, so none does. A
document whose new content cannot be indexed (too large, binary, unsupported) has its
previous version removed too, as that version is stale. ``WriteSession.failures``
reported at commit count as errors, not as indexed documents.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from knowledge.chunking import DocumentChunker, embedding_text
from knowledge.embedding.base import EmbeddingClient
from knowledge.errors import (
    EmbeddingError,
    KnowledgeError,
    StoreUnavailableError,
    ValidationError,
)
from knowledge.extraction import extract_text
from knowledge.identity import content_hash, document_id, is_newer_version
from knowledge.model import DocumentChunk, FileProblem, IndexOptions, IndexResult
from knowledge.scope import KnowledgeScope
from knowledge.source import DocumentSource, SourceDocument
from knowledge.store import (
    DocumentHeader,
    EmbeddedChunk,
    IndexWriter,
    StoredDocument,
    WriteSession,
)

__all__ = [
    "DEFAULT_EMBED_BATCH_SIZE",
    "DEFAULT_EMBED_CONTEXT",
    "REASON_STALE_VERSION",
    "REASON_UNCHANGED",
    "Indexer",
    "IndexingStoreMixin",
    "document_fingerprint",
]

DEFAULT_EMBED_BATCH_SIZE = 64
DEFAULT_EMBED_CONTEXT = False
"""Whether chunks are embedded with their title and heading path in front
(``chunking.embedding_text``); see bench/REPORT.md for why the default is what it is."""
REASON_UNCHANGED = "unchanged"
REASON_STALE_VERSION = "stale version"
_STALE_REMOVED = "; its previously indexed version was removed"


def document_fingerprint(data: bytes, metadata: Mapping[str, Any]) -> str:
    """What ``StoredDocument.content_hash`` holds: the content hash of the bytes, mixed
    with the user metadata when there is any (so editing a sidecar re-indexes)."""
    digest = content_hash(data)
    if not metadata:
        return digest
    canonical = json.dumps(dict(metadata), sort_keys=True, ensure_ascii=False)
    return content_hash(f"{digest}\x00{canonical}".encode())


@dataclass
class _Run:
    """Accumulates what one index/reindex/upsert call did."""

    started: float = field(default_factory=time.perf_counter)
    written: dict[str, int] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    skipped: list[FileProblem] = field(default_factory=list)
    errors: list[FileProblem] = field(default_factory=list)
    warnings: list[FileProblem] = field(default_factory=list)
    tokens: int = 0

    def take_listing_problems(self, listing: object) -> None:
        # Sources may report what they left out while listing (knowledge.sources.Listing).
        for name, target in (("skipped", self.skipped), ("errors", self.errors)):
            problems = getattr(listing, name, None)
            if isinstance(problems, list):
                target.extend(p for p in problems if isinstance(p, FileProblem))

    def result(self, failures: Sequence[FileProblem]) -> IndexResult:
        failed = {problem.path for problem in failures}
        indexed = {path: n for path, n in self.written.items() if path not in failed}
        return IndexResult(
            indexed_documents=len(indexed),
            indexed_chunks=sum(indexed.values()),
            deleted_documents=len(self.deleted - failed),
            duration_ms=(time.perf_counter() - self.started) * 1000.0,
            skipped=tuple(self.skipped),
            errors=(*self.errors, *failures),
            embedding_tokens=self.tokens,
            warnings=tuple(self.warnings),
        )


class Indexer:
    """The shared pipeline (module docstring). Holds no per-scope state; thread-safe
    if its chunker and embedder are.

    ``embedder=None`` makes keyword-only writes (``EmbeddedChunk.vector`` is ``None``).
    """

    def __init__(
        self,
        chunker: DocumentChunker,
        embedder: EmbeddingClient | None = None,
        *,
        embed_batch_size: int = DEFAULT_EMBED_BATCH_SIZE,
        embed_context: bool = DEFAULT_EMBED_CONTEXT,
    ) -> None:
        if not isinstance(embed_context, bool):
            raise ValidationError("embed_context", "must be true or false")
        self._embed_context = embed_context
        if isinstance(embed_batch_size, bool) or not isinstance(embed_batch_size, int):
            raise ValidationError("embed_batch_size", "must be an integer")
        if embed_batch_size < 1:
            raise ValidationError("embed_batch_size", f"must be at least 1, got {embed_batch_size}")
        self._chunker = chunker
        self._embedder = embedder
        self._batch_size = embed_batch_size

    @property
    def chunker(self) -> DocumentChunker:
        return self._chunker

    @property
    def embedder(self) -> EmbeddingClient | None:
        return self._embedder

    @property
    def embed_batch_size(self) -> int:
        return self._batch_size

    # --- the four operations ---------------------------------------------------------------

    def index(
        self,
        writer: IndexWriter,
        scope: KnowledgeScope,
        source: DocumentSource,
        options: IndexOptions | None = None,
    ) -> IndexResult:
        """Sync the scope with the source: write new and changed documents, skip unchanged
        ones, delete stored documents the source no longer lists.

        Only the first ``options.max_documents`` listed documents are taken; the rest are
        reported skipped, and then nothing is deleted (the listing was incomplete).
        """
        options = options or IndexOptions()
        run = _Run()
        stored = writer.stored_documents(scope)
        listed: set[str] = set()
        truncated = False
        with writer.write_session(scope) as session:
            listing = source.documents(scope, options)
            for document in listing:
                if len(listed) >= options.max_documents:
                    truncated = True
                    run.skipped.append(_over_limit(document, options))
                    continue
                listed.add(document.path)
                self._put(
                    session,
                    scope,
                    document,
                    options=options,
                    run=run,
                    stored=stored.get(document.path),
                )
            run.take_listing_problems(listing)
            if not truncated:
                for path in sorted(stored.keys() - listed):
                    self._delete(session, path, run)
        return run.result(session.failures)

    def reindex(
        self,
        writer: IndexWriter,
        scope: KnowledgeScope,
        source: DocumentSource,
        options: IndexOptions | None = None,
    ) -> IndexResult:
        """Drop the scope and write every listed document (up to ``max_documents``) again.

        ``deleted_documents`` counts the previously stored documents the source no
        longer lists (or that are past ``max_documents``).
        """
        options = options or IndexOptions()
        run = _Run()
        previous = set(writer.stored_documents(scope))
        listed: set[str] = set()
        with writer.write_session(scope, replace_scope=True) as session:
            listing = source.documents(scope, options)
            for document in listing:
                if len(listed) >= options.max_documents:
                    run.skipped.append(_over_limit(document, options))
                    continue
                listed.add(document.path)
                self._put(
                    session, scope, document, options=options, run=run, stored=None, force=True
                )
            run.take_listing_problems(listing)
        run.deleted = previous - listed
        return run.result(session.failures)

    def upsert(
        self,
        writer: IndexWriter,
        scope: KnowledgeScope,
        document: SourceDocument,
        options: IndexOptions | None = None,
    ) -> IndexResult:
        """Index one document (event-driven path). A ``document.version`` older than the
        stored one is skipped with reason ``"stale version"`` and nothing is written;
        unchanged content is skipped as ``"unchanged"``. File patterns are not applied:
        the caller chose the document."""
        options = options or IndexOptions()
        run = _Run()
        stored = writer.stored_document(scope, document.path)
        if stored is not None and not is_newer_version(document.version, stored.version):
            run.skipped.append(
                FileProblem(
                    document.path,
                    f"{REASON_STALE_VERSION}: {document.version} is older than the "
                    f"indexed {stored.version}",
                )
            )
            return run.result(())
        with writer.write_session(scope) as session:
            self._put(session, scope, document, options=options, run=run, stored=stored)
        return run.result(session.failures)

    def delete(
        self, writer: IndexWriter, scope: KnowledgeScope, path: str, version: str | None = None
    ) -> bool:
        """Remove every chunk of one document. ``False`` if it is not indexed, if the stored
        version is newer than ``version`` (a late delete event), or if the write failed."""
        stored = writer.stored_document(scope, path)
        if stored is None:
            return False
        if not is_newer_version(version, stored.version):
            return False
        with writer.write_session(scope) as session:
            removed = session.delete_document(path)
        return removed and all(problem.path != path for problem in session.failures)

    # --- one document ----------------------------------------------------------------------

    def _put(
        self,
        session: WriteSession,
        scope: KnowledgeScope,
        document: SourceDocument,
        *,
        options: IndexOptions,
        run: _Run,
        stored: StoredDocument | None,
        force: bool = False,
    ) -> None:
        path = document.path
        limit = options.max_document_bytes
        if document.size > limit:
            reason = f"document is {document.size} bytes, over max_document_bytes ({limit})"
            self._skip_and_drop_stale(session, path, reason, stored, run)
            return
        try:
            data = document.read()
        except (OSError, KnowledgeError) as exc:
            _reraise_if_unavailable(exc)
            run.errors.append(FileProblem(path, f"cannot read: {exc}"))
            return
        fingerprint = document_fingerprint(data, document.metadata)
        if not force and stored is not None and stored.content_hash == fingerprint:
            run.skipped.append(FileProblem(path, REASON_UNCHANGED))
            return
        try:
            extracted = extract_text(path, data, max_bytes=limit)
        except KnowledgeError as exc:  # ExtractionError: binary, oversize, unsupported type
            self._skip_and_drop_stale(session, path, str(exc), stored, run)
            return
        del data  # the text is all that is needed from here on; free the bytes early
        run.warnings.extend(FileProblem(path, warning) for warning in extracted.warnings)
        document_metadata: dict[str, Any] = {
            **document.metadata,
            "source_key": document.source_key or path,
            "content_type": extracted.content_type,
        }
        header = DocumentHeader(
            path=path,
            document_id=document_id(scope, path),
            content_hash=fingerprint,
            indexed_at=datetime.now(UTC),
            version=document.version,
            metadata=document_metadata,
        )
        try:
            chunks = self._chunks(path, extracted.text, options, document_metadata)
            written = session.put_document(header, self._embedded(chunks, run))
        except KnowledgeError as exc:  # EmbeddingError, StoreError, a chunker's ValidationError
            _reraise_if_unavailable(exc)
            run.errors.append(FileProblem(path, f"not indexed: {exc}"))
            self._remove_partial(session, path, run)
            return
        run.written[path] = written

    def _chunks(
        self, path: str, text: str, options: IndexOptions, metadata: Mapping[str, Any]
    ) -> Iterator[DocumentChunk]:
        pieces = self._chunker.chunk(path, text, max_chunk_size=options.max_chunk_size)
        # Renumbered so chunk ids are always dense (0..n-1): no gap can hide a stale chunk.
        for index, piece in enumerate(pieces):
            yield DocumentChunk(
                document_path=path,
                chunk_index=index,
                content=piece.content,
                metadata={**metadata, **piece.metadata},
            )

    def _embedded(self, chunks: Iterable[DocumentChunk], run: _Run) -> Iterator[EmbeddedChunk]:
        embedder = self._embedder
        if embedder is None:
            for chunk in chunks:
                yield EmbeddedChunk(chunk)
            return
        batch: list[DocumentChunk] = []
        for chunk in chunks:
            batch.append(chunk)
            if len(batch) >= self._batch_size:
                yield from self._embed_batch(embedder, batch, run)
                batch = []
        if batch:
            yield from self._embed_batch(embedder, batch, run)

    def _embed_batch(
        self, embedder: EmbeddingClient, batch: list[DocumentChunk], run: _Run
    ) -> list[EmbeddedChunk]:
        # With embed_context, the title and heading path go in front (stored content as is).
        texts = [embedding_text(c) if self._embed_context else c.content for c in batch]
        embeddings = embedder.embed_batch(texts)
        if len(embeddings) != len(batch):
            raise EmbeddingError(
                f"{embedder.name} returned {len(embeddings)} embeddings for {len(batch)} texts"
            )
        run.tokens += sum(embedding.token_count for embedding in embeddings)
        for embedding in embeddings:
            if len(embedding.vector) != embedder.dimensions:
                raise EmbeddingError(
                    f"{embedder.name} returned a vector of {len(embedding.vector)} dimensions, "
                    f"expected {embedder.dimensions}"
                )
        return [
            EmbeddedChunk(chunk, embedding.vector)
            for chunk, embedding in zip(batch, embeddings, strict=True)
        ]

    # --- removals --------------------------------------------------------------------------

    @staticmethod
    def _delete(session: WriteSession, path: str, run: _Run) -> None:
        try:
            if session.delete_document(path):
                run.deleted.add(path)
        except KnowledgeError as exc:
            _reraise_if_unavailable(exc)
            run.errors.append(FileProblem(path, f"not deleted: {exc}"))

    def _skip_and_drop_stale(
        self,
        session: WriteSession,
        path: str,
        reason: str,
        stored: StoredDocument | None,
        run: _Run,
    ) -> None:
        if stored is None:
            run.skipped.append(FileProblem(path, reason))
            return
        before = len(run.deleted)
        self._delete(session, path, run)
        dropped = len(run.deleted) > before
        run.skipped.append(FileProblem(path, reason + (_STALE_REMOVED if dropped else "")))

    @staticmethod
    def _remove_partial(session: WriteSession, path: str, run: _Run) -> None:
        try:
            session.delete_document(path)
        except KnowledgeError as exc:
            _reraise_if_unavailable(exc)
            run.errors.append(FileProblem(path, f"partly written and not removed: {exc}"))


def _over_limit(document: SourceDocument, options: IndexOptions) -> FileProblem:
    return FileProblem(document.path, f"over max_documents ({options.max_documents}); not indexed")


def _reraise_if_unavailable(exc: BaseException) -> None:
    if isinstance(exc, StoreUnavailableError):
        raise exc


class _IndexingStore(IndexWriter, Protocol):
    """What ``IndexingStoreMixin`` needs from the store it is mixed into."""

    _indexer: Indexer


class IndexingStoreMixin:
    """``index``, ``reindex``, ``upsert_document`` and ``delete_document`` for a store that
    implements ``IndexWriter`` itself and sets ``self._indexer`` (an ``Indexer`` built with
    the store's chunker, and its embedder if it wants vectors)."""

    def index(
        self: _IndexingStore,
        scope: KnowledgeScope,
        source: DocumentSource,
        options: IndexOptions | None = None,
    ) -> IndexResult:
        """Sync the scope with the source (``Indexer.index``)."""
        return self._indexer.index(self, scope, source, options)

    def reindex(
        self: _IndexingStore,
        scope: KnowledgeScope,
        source: DocumentSource,
        options: IndexOptions | None = None,
    ) -> IndexResult:
        """Drop the scope and index the source in full (``Indexer.reindex``)."""
        return self._indexer.reindex(self, scope, source, options)

    def upsert_document(
        self: _IndexingStore, scope: KnowledgeScope, document: SourceDocument
    ) -> IndexResult:
        """Index one document, respecting version order (``Indexer.upsert``)."""
        return self._indexer.upsert(self, scope, document)

    def delete_document(
        self: _IndexingStore, scope: KnowledgeScope, path: str, version: str | None = None
    ) -> bool:
        """Remove one document's chunks (``Indexer.delete``)."""
        return self._indexer.delete(self, scope, path, version)
