"""The indexing pipeline, once for every store: source -> extract -> chunk -> embed -> store.

``Indexer`` turns source documents into writes on a backend's ``IndexWriter``
(``knowledge.stores.protocol``); ``IndexingStoreMixin`` gives a store that is its own
``IndexWriter`` the ``KnowledgeStore`` methods ``index``, ``reindex``,
``upsert_document`` and ``delete_document``.

Per document: size check (``options.max_document_bytes``, before reading) -> read ->
fingerprint (``identity.content_hash`` of the bytes, and of the sidecar metadata when
there is some, so a metadata change re-indexes) -> skip if the stored document has the
same fingerprint ("unchanged") -> ``extraction.extract_document`` -> ``chunker.chunk``
(text) or ``chunker.chunk_blocks`` (structured formats: PDF, Office, CSV, HTML) -> embed
in batches of ``embed_batch_size`` (only with an embedder) -> ``put_document``. Chunks
are streamed: at most one embedding batch of one document is in memory, and a structured
document's blocks are read from its bytes as the chunks are asked for.

Embedding reuse: a changed document that is already indexed first gets the vectors of
its indexed version (``WriteSession.stored_vectors``, by ``identity.embedding_key``: the
hash of the exact text embedded and of the embedder's name and dimension). A chunk whose
key is there takes that vector; only the others are sent to the embedder, still in
batches of ``embed_batch_size`` texts. So editing one paragraph of a long document
embeds the chunks that paragraph touches, and an embedder change re-embeds everything.
``IndexResult.embedded_chunks`` / ``reused_chunks`` count both. A reindex embeds every
chunk again (its escape hatch), and a failed read of the stored vectors only costs the
reuse (logged), never the document.

Chunk metadata = sidecar user metadata (with its checked ``url``, if any), then
``source_key`` (the source key, else the path), ``content_type``, ``format`` (``pdf``,
``markdown``, ...) and ``origin`` (``knowledge.core.origin``: the source's, or the sidecar's
``repo``/``manual``), then the
chunker's ``title``, ``heading_path`` and citation (``page``/``page_end``, ``slide``,
``sheet``, ``row_start``/``row_end``); later keys win, so user metadata cannot hide the
system keys.

Files no pattern selects are visible too, as a count per extension: a listing's
``unread`` counts (``knowledge.ingest.sources.Listing``) are written with
``WriteSession.record_unread`` (``IndexStatus.unread_files``) and returned in
``IndexResult.unread_files``, never one problem per image of a repository.

Problems are visible: every document skipped for a reason (too large, unsupported,
corrupt, encrypted, over ``max_documents``, left out by the source) or failed is
recorded with ``WriteSession.record_problem`` (the status lists them); "unchanged" and
"stale version" are not problems. A later successful write or delete clears it.

Failures are per document and never stop a run: a file that cannot be read, extracted,
embedded or written is listed in ``errors`` (or ``skipped`` for deliberate skips), and
the run goes on. ``StoreUnavailableError`` is re-raised (nothing more can be written),
as is an error while listing the source (nothing is deleted then). A failed write
leaves the previous version searchable: every store's ``put_document`` writes the new
version beside the old one (or in a transaction) and drops what it wrote of a version
that failed, so the pipeline removes nothing then. A document whose new content cannot
be indexed (too large, binary, unsupported) has its previous version removed, as that
version is stale. ``WriteSession.failures`` reported at commit count as errors, not as
indexed documents.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import chain, islice
from typing import Any, Protocol

from knowledge.core.errors import (
    ArchivedObjectError,
    EmbeddingError,
    ExtractionError,
    KnowledgeError,
    StoreError,
    StoreUnavailableError,
    ValidationError,
)
from knowledge.core.identity import content_hash, document_id, embedding_key, is_newer_version
from knowledge.core.model import (
    DocumentChunk,
    FileProblem,
    IndexOptions,
    IndexResult,
    capped_unread,
)
from knowledge.core.origin import FORMAT, ORIGIN, ORIGINS, SHARED, SIDECAR_ORIGINS, UPLOAD
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import DocumentSource, SourceDocument
from knowledge.embedding.base import EmbeddingClient, checked_vector
from knowledge.extraction import ExtractedDocument, extract_document, source_type_of
from knowledge.ingest.chunking import DocumentChunker, StructuredChunker, embedding_text
from knowledge.ingest.lookahead import DEFAULT_WINDOW, MAX_PREPARED_BYTES, Lookahead, Prepared
from knowledge.ingest.sources import CANNOT_LIST, under_unlisted_folder
from knowledge.search.shared import SHARED_AGENT
from knowledge.stores.protocol import (
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
    "embeds_context_by_default",
    "listing_problems",
]

logger = logging.getLogger(__name__)

DEFAULT_EMBED_BATCH_SIZE = 64
DEFAULT_EMBED_CONTEXT: bool | None = None
"""Whether chunks are embedded with their title and heading path in front
(``chunking.embedding_text``, which leaves out titles and headings without a letter).
``None`` (the default): yes for every embedder except ``hashing``
(``embeds_context_by_default``). Measured (bench/REPORT.md, "Context in the chunk"):
all-MiniLM-L6-v2 on the man pages, vector MRR@10 0.832 -> 0.851 and hybrid 0.867 ->
0.891; on the Debian FAQ answers (numeric titles, no headings) nothing changes; the
hashing embedder, a bag of the chunk's own terms, loses 0.007 in vector mode on the man
pages and gains nothing in hybrid, so it stays as it was. The stored content never
changes; a vector embedded otherwise is not reused (its key hashes the text embedded),
so a reindex re-embeds it."""
_NO_CONTEXT_EMBEDDERS = frozenset({"hashing"})
_PREPARED_TYPES = frozenset({"markdown", "text"})
"""What ``knowledge.ingest.lookahead`` prepares ahead: text, whose extraction is thread-safe
(PDFium is not) and whose chunks are cheap to hold."""


def embeds_context_by_default(embedder: EmbeddingClient | None) -> bool:
    """Whether ``embed_context=None`` means on for ``embedder`` (``DEFAULT_EMBED_CONTEXT``)."""
    return embedder is not None and embedder.name not in _NO_CONTEXT_EMBEDDERS


REASON_UNCHANGED = "unchanged"
REASON_STALE_VERSION = "stale version"
_REUSE_WINDOW = 8
"""With reuse, a batch waits for ``embed_batch_size`` texts to embed, but holds at most
this many times ``embed_batch_size`` chunks (reused ones included) in memory."""
_NO_VECTORS: Mapping[str, Sequence[float]] = {}
_STALE_REMOVED = "; its previously indexed version was removed"


def document_origin(document: SourceDocument) -> str:
    """The document's origin: its sidecar's (already checked by ``parse_metadata_sidecar``
    against what a writer may set) unless its source is the shared library, else the
    source's. A value that is no origin at all (a source's bug) is the source's."""
    own = document.origin if document.origin in ORIGINS else UPLOAD
    said = document.metadata.get(ORIGIN)
    if own != SHARED and isinstance(said, str) and said in SIDECAR_ORIGINS:
        return said
    return own


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
    embedded: int = 0
    reused: int = 0
    unread: dict[str, int] = field(default_factory=dict)

    def take_listing_problems(self, listing: object, session: WriteSession) -> None:
        skipped, errors = listing_problems(listing)
        for problems, target in ((skipped, self.skipped), (errors, self.errors)):
            for problem in problems:
                target.append(problem)
                _record(session, problem.path, problem.reason)
        unread = listing_unread(listing)
        if unread is not None:
            self.unread = unread
            try:
                session.record_unread(unread)
            except KnowledgeError as exc:
                _reraise_if_unavailable(exc)
                logger.warning("could not record the unread files (%s): %s", unread, exc)

    def skip(self, session: WriteSession, problem: FileProblem) -> None:
        self.skipped.append(problem)
        _record(session, problem.path, problem.reason)

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
            embedded_chunks=self.embedded,
            reused_chunks=self.reused,
            unread_files=self.unread,
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
        embed_context: bool | None = DEFAULT_EMBED_CONTEXT,
        lookahead: int | None = None,
    ) -> None:
        if embed_context is None:
            embed_context = embeds_context_by_default(embedder)
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
        if lookahead is None:  # only an embedder with calls in flight at once gains
            concurrent = int(getattr(embedder, "concurrency", 1) or 1) > 1
            lookahead = DEFAULT_WINDOW if concurrent else 0
        if isinstance(lookahead, bool) or not isinstance(lookahead, int) or lookahead < 0:
            raise ValidationError("lookahead", f"must be an integer >= 0, got {lookahead!r}")
        self._lookahead = lookahead

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
        ones, delete stored documents the source no longer lists, and clear the problems
        of files it no longer lists (the status never names a file that is gone). The
        stored documents of a folder the source could not list (``errors`` whose reason
        begins ``knowledge.ingest.sources.CANNOT_LIST``) are kept: unknown, not gone.

        With ``options.max_documents`` set, documents past it are errors and nothing is
        deleted (the listing was incomplete).
        """
        options = options or IndexOptions()
        run = _Run()
        stored = writer.stored_documents(scope)
        problems = writer.problem_paths(scope)
        listed: set[str] = set()
        truncated = False
        with writer.write_session(scope) as session:
            listing = source.documents(scope, options)
            with self._ahead(listing, scope, options, stored) as documents:
                for document, prepared in documents:
                    if _over_limit(len(listed), options):
                        truncated = True
                        _fail(session, run, _over_limit_problem(document, options))
                        continue
                    listed.add(document.path)
                    self._put(
                        session,
                        scope,
                        document,
                        options=options,
                        run=run,
                        stored=stored.get(document.path),
                        prepared=prepared,
                    )
            self._settle_listing(
                session,
                run,
                listing,
                listed=listed,
                stored=set(stored),
                problems=problems,
                delete=not truncated,
            )
        _record_all(writer, scope, session.failures)
        return run.result(session.failures)

    def reindex(
        self,
        writer: IndexWriter,
        scope: KnowledgeScope,
        source: DocumentSource,
        options: IndexOptions | None = None,
    ) -> IndexResult:
        """Drop the scope and write every listed document again.

        ``deleted_documents`` counts the previously stored documents the source no
        longer lists. The listing is read in full before anything is dropped, so two
        cases never drop the scope: a listing longer than a set ``options.max_documents``
        (the documents within it are rewritten, the rest are errors, and nothing is
        deleted), and a folder the source could not list (``CANNOT_LIST``): its stored
        documents are kept (unknown, not gone), every listed one is rewritten and the
        other stored ones are deleted.
        """
        options = options or IndexOptions()
        run = _Run()
        previous = set(writer.stored_documents(scope))
        listing = source.documents(scope, options)
        # Up to one document past the limit: a longer listing is not read ahead in full.
        limit = None if options.max_documents is None else options.max_documents + 1
        head = list(islice(listing, limit))
        truncated = limit is not None and len(head) == limit
        documents: Iterable[SourceDocument] = chain(head, listing) if truncated else head
        unlisted = under_unlisted_folder(listing_problems(listing)[1])
        replace = not truncated and not any(unlisted(path) for path in previous)
        problems = set() if replace or truncated else writer.problem_paths(scope)
        listed: set[str] = set()
        with (
            writer.write_session(scope, replace_scope=replace) as session,
            self._ahead(documents, scope, options, {}) as ahead,
        ):
            for document, prepared in ahead:
                if _over_limit(len(listed), options):
                    _fail(session, run, _over_limit_problem(document, options))
                    continue
                listed.add(document.path)
                self._put(
                    session,
                    scope,
                    document,
                    options=options,
                    run=run,
                    stored=None,
                    force=True,
                    prepared=prepared,
                )
            if replace:
                run.take_listing_problems(listing, session)
            else:  # what replacing would remove, but what an unlisted folder held
                self._settle_listing(
                    session,
                    run,
                    listing,
                    listed=listed,
                    stored=previous,
                    problems=problems,
                    delete=not truncated,
                )
        if replace:
            run.deleted = previous - listed
        _record_all(writer, scope, session.failures)
        return run.result(session.failures)

    def _settle_listing(
        self,
        session: WriteSession,
        run: _Run,
        listing: object,
        *,
        listed: set[str],
        stored: set[str],
        problems: set[str],
        delete: bool,
    ) -> None:
        """After the listed documents are written: record the listing's own problems and,
        with ``delete`` (a complete listing), delete the ``stored`` documents and the
        ``problems`` of files it no longer lists, except what a folder the source could
        not list held (unknown, not gone)."""
        unlisted = under_unlisted_folder(listing_problems(listing)[1])
        if delete:
            for path in sorted(stored - listed):
                if not unlisted(path):
                    self._delete(session, path, run)
        # After the deletes: an indexed file the listing now leaves out (a link out of its
        # scope, say) is removed and keeps the problem that says why.
        run.take_listing_problems(listing, session)
        if delete:
            # A file that was never indexed and is gone: its problem goes with it (the
            # source's own listing problems were just recorded: they stay).
            reported = {p.path for p in (*run.skipped, *run.errors)}
            for path in sorted(problems - listed - reported - stored):
                if not unlisted(path):
                    self._delete(session, path, run)

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
        _record_all(writer, scope, session.failures)
        return run.result(session.failures)

    def delete(
        self, writer: IndexWriter, scope: KnowledgeScope, path: str, version: str | None = None
    ) -> bool:
        """Remove every chunk of one document. ``False`` if it is not indexed, or if the
        stored version is newer than ``version`` (a late delete event); ``StoreError`` if
        the store could not remove all of it (what is left stays findable for a retry).
        A document that was never indexed may still have a recorded problem: the delete
        clears it (the file is gone, so is its problem)."""
        stored = writer.stored_document(scope, path)
        # ``None`` may also be a document written a moment ago that a store's search-based
        # read does not show yet (OpenSearch refreshes every second): the session's own
        # delete reads in real time, so it is asked either way.
        if stored is not None and not is_newer_version(version, stored.version):
            return False
        with writer.write_session(scope) as session:
            removed = session.delete_document(path)
        failed = [problem.reason for problem in session.failures if problem.path == path]
        if failed:
            # Not "nothing to remove": what is left is still searchable; let the caller retry.
            raise StoreError(f"'{path}' in {scope} was not removed: {'; '.join(failed)}")
        return removed

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
        prepared: Prepared | None = None,
    ) -> None:
        path = document.path
        limit = options.max_document_bytes
        if document.size > limit:
            reason = (
                f"too large: document is {document.size} bytes, over max_document_bytes ({limit})"
            )
            self._skip_and_drop_stale(session, path, reason, stored, run)
            return
        ahead = prepared or Prepared()
        try:
            data = ahead.read(document)
        except ArchivedObjectError as exc:
            # Not a failure to retry, nor a stale version: the object is there, unreadable
            # until restored; what is indexed of it stays, and the status lists why.
            run.skipped.append(FileProblem(path, str(exc)))
            _record(session, path, str(exc))
            return
        except (OSError, KnowledgeError) as exc:
            _reraise_if_unavailable(exc)
            _fail(session, run, FileProblem(path, f"cannot read: {exc}"))
            return
        fingerprint = document_fingerprint(data, document.metadata)
        if not force and stored is not None and stored.content_hash == fingerprint:
            run.skipped.append(FileProblem(path, REASON_UNCHANGED))
            return
        try:
            if ahead.extract_error is not None:
                raise ahead.extract_error
            extracted = ahead.extracted or extract_document(path, data, max_bytes=limit)
        except KnowledgeError as exc:  # ExtractionError: unsupported, too large, corrupt...
            self._skip_and_drop_stale(session, path, str(exc), stored, run)
            return
        # Structured formats read their bytes while the chunks stream; text ones are done.
        del data
        document_metadata = _document_metadata(scope, document, extracted)
        header = DocumentHeader(
            path=path,
            document_id=document_id(scope, path),
            content_hash=fingerprint,
            indexed_at=datetime.now(UTC),
            version=document.version,
            metadata=document_metadata,
            size=document.size,
        )
        try:
            if ahead.embed_error is not None:
                raise ahead.embed_error
            if ahead.embedded is not None:  # chunked and embedded ahead (no stored version)
                run.tokens += ahead.tokens
                run.embedded += ahead.embedded_chunks
                written = session.put_document(header, iter(ahead.embedded))
            else:
                chunks = self._chunks(path, extracted, options, document_metadata)
                reusable = (
                    self._stored_vectors(session, path) if stored is not None else _NO_VECTORS
                )
                written = session.put_document(header, self._embedded(chunks, run, reusable))
        except ExtractionError as exc:  # found while streaming: corrupt page, no text layer
            if stored is None:  # else the stale version's delete below takes the partial too
                self._remove_partial(session, path, run)
            self._skip_and_drop_stale(session, path, str(exc), stored, run)
            return
        except KnowledgeError as exc:  # EmbeddingError, StoreError, a chunker's ValidationError
            _reraise_if_unavailable(exc)
            # The session dropped what it wrote of this version; the previous one stays.
            _fail(session, run, FileProblem(path, f"not indexed: {exc}"))
            return
        finally:
            run.warnings.extend(FileProblem(path, warning) for warning in extracted.warnings)
        run.written[path] = written

    def _ahead(
        self,
        documents: Iterable[SourceDocument],
        scope: KnowledgeScope,
        options: IndexOptions,
        stored: Mapping[str, StoredDocument],
    ) -> Lookahead:
        """``documents`` with the next ones prepared ahead (``knowledge.ingest.lookahead``); none
        are with ``lookahead=0`` (an embedder without concurrent calls)."""

        def eligible(number: int, document: SourceDocument) -> bool:
            return (
                self._lookahead > 0
                and not _over_limit(number, options)
                and document.path not in stored
                and document.size <= min(options.max_document_bytes, MAX_PREPARED_BYTES)
                and source_type_of(document.path) in _PREPARED_TYPES
            )

        def prepare(document: SourceDocument) -> Prepared:
            return self._prepare(scope, document, options)

        return Lookahead(documents, prepare, eligible=eligible, window=self._lookahead)

    def _prepare(
        self, scope: KnowledgeScope, document: SourceDocument, options: IndexOptions
    ) -> Prepared:
        """Read, extract, chunk and embed one new text document ahead of its write, on a
        lookahead thread: no store call, and every error kept for the writer to raise."""
        prepared = Prepared()
        try:
            prepared.data = document.read()
        except Exception as exc:  # the writer raises it where it reads
            prepared.read_error = exc
            return prepared
        path = document.path
        try:
            extracted = extract_document(path, prepared.data, max_bytes=options.max_document_bytes)
        except KnowledgeError as exc:
            prepared.extract_error = exc
            return prepared
        prepared.extracted = extracted
        if extracted.blocks is not None:
            return prepared
        metadata = _document_metadata(scope, document, extracted)
        cap = self._batch_size * _REUSE_WINDOW
        try:
            chunks = list(islice(self._chunks(path, extracted, options, metadata), cap + 1))
        except KnowledgeError:  # the writer chunks it again and meets the error itself
            return prepared
        if len(chunks) > cap:  # a long document: the writer streams it
            return prepared
        counts = _Run()
        try:
            prepared.embedded = list(self._embedded(chunks, counts))
        except KnowledgeError as exc:
            prepared.embed_error = exc
            return prepared
        prepared.tokens, prepared.embedded_chunks = counts.tokens, counts.embedded
        return prepared

    def _chunks(
        self,
        path: str,
        extracted: ExtractedDocument,
        options: IndexOptions,
        metadata: Mapping[str, Any],
    ) -> Iterator[DocumentChunk]:
        pieces = self._pieces(path, extracted, options.max_chunk_size)
        # Renumbered so chunk ids are always dense (0..n-1): no gap can hide a stale chunk.
        for index, piece in enumerate(pieces):
            yield DocumentChunk(
                document_path=path,
                chunk_index=index,
                content=piece.content,
                metadata={**metadata, **piece.metadata},
            )

    def _pieces(
        self, path: str, extracted: ExtractedDocument, max_chunk_size: int
    ) -> Iterator[DocumentChunk]:
        chunker = self._chunker
        if extracted.blocks is None:
            return chunker.chunk(path, extracted.text or "", max_chunk_size=max_chunk_size)
        if isinstance(chunker, StructuredChunker):
            return chunker.chunk_blocks(
                path,
                extracted.blocks,
                title=extracted.title,
                position_key=extracted.position_key,
                max_chunk_size=max_chunk_size,
            )
        # A chunker that knows only text: each section as one text, its citation kept.
        return _chunk_sections(chunker, path, extracted, max_chunk_size)

    def _stored_vectors(self, session: WriteSession, path: str) -> Mapping[str, Sequence[float]]:
        """The indexed version's vectors by embedding key (module docstring: reuse)."""
        if self._embedder is None:
            return _NO_VECTORS
        try:
            return session.stored_vectors(path)
        except KnowledgeError as exc:
            _reraise_if_unavailable(exc)
            logger.warning("no embedding reuse for %s: %s", path, exc)
            return _NO_VECTORS

    def _embedded(
        self,
        chunks: Iterable[DocumentChunk],
        run: _Run,
        reusable: Mapping[str, Sequence[float]] = _NO_VECTORS,
    ) -> Iterator[EmbeddedChunk]:
        embedder = self._embedder
        if embedder is None:
            for chunk in chunks:
                yield EmbeddedChunk(chunk)
            return
        name, dimensions = embedder.name, embedder.dimensions
        batch: list[_Pending] = []
        missing = 0
        for chunk in chunks:
            # The exact text embedded, which the key hashes: with embed_context, the title
            # and heading path go in front (the stored content stays as is).
            text = embedding_text(chunk) if self._embed_context else chunk.content
            pending = _Pending(chunk, text, embedding_key(name, dimensions, text))
            batch.append(pending)
            missing += pending.key not in reusable
            if missing >= self._batch_size or len(batch) >= self._batch_size * _REUSE_WINDOW:
                yield from self._embed_batch(embedder, batch, run, reusable)
                batch, missing = [], 0
        if batch:
            yield from self._embed_batch(embedder, batch, run, reusable)

    @staticmethod
    def _embed_batch(
        embedder: EmbeddingClient,
        batch: list[_Pending],
        run: _Run,
        reusable: Mapping[str, Sequence[float]],
    ) -> list[EmbeddedChunk]:
        todo = [item for item in batch if item.key not in reusable]
        embeddings = embedder.embed_batch([item.text for item in todo]) if todo else []
        if len(embeddings) != len(todo):
            raise EmbeddingError(
                f"{embedder.name} returned {len(embeddings)} embeddings for {len(todo)} texts"
            )
        run.tokens += sum(embedding.token_count for embedding in embeddings)
        for embedding in embeddings:  # whatever the embedder (a custom one too)
            checked_vector(embedding.vector, embedder.dimensions, embedder.name)
        run.embedded += len(todo)
        run.reused += len(batch) - len(todo)
        fresh = iter(embeddings)
        return [
            EmbeddedChunk(item.chunk, reusable[item.key], item.key, reused=True)
            if item.key in reusable
            else EmbeddedChunk(item.chunk, next(fresh).vector, item.key)
            for item in batch
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
        if stored is not None:
            before = len(run.deleted)
            self._delete(session, path, run)
            if len(run.deleted) > before:
                reason += _STALE_REMOVED
        run.skipped.append(FileProblem(path, reason))
        _record(session, path, reason)

    @staticmethod
    def _remove_partial(session: WriteSession, path: str, run: _Run) -> None:
        try:
            session.delete_document(path)
        except KnowledgeError as exc:
            _reraise_if_unavailable(exc)
            run.errors.append(FileProblem(path, f"partly written and not removed: {exc}"))


@dataclass(frozen=True, slots=True)
class _Pending:
    """A chunk waiting for its vector: the text to embed and its ``embedding_key``."""

    chunk: DocumentChunk
    text: str
    key: str


def _document_metadata(
    scope: KnowledgeScope, document: SourceDocument, extracted: ExtractedDocument
) -> dict[str, Any]:
    """The metadata every chunk of ``document`` carries (module docstring)."""
    return {
        **document.metadata,
        "source_key": document.source_key or document.path,
        "content_type": extracted.content_type,
        FORMAT: extracted.source_type,
        # The shared library's records say so, whatever a sidecar claims (knowledge.search.shared).
        ORIGIN: SHARED if scope.agent == SHARED_AGENT else document_origin(document),
    }


def _over_limit(taken: int, options: IndexOptions) -> bool:
    return options.max_documents is not None and taken >= options.max_documents


def _over_limit_problem(document: SourceDocument, options: IndexOptions) -> FileProblem:
    return FileProblem(
        document.path,
        f"over max_documents ({options.max_documents}): not indexed, and nothing was deleted; "
        "raise or unset max_documents to index the whole scope",
    )


def _fail(session: WriteSession, run: _Run, problem: FileProblem) -> None:
    run.errors.append(problem)
    _record(session, problem.path, problem.reason)


def listing_unread(listing: object) -> dict[str, int] | None:
    """The files a source's listing found and no pattern selects, by extension
    (``knowledge.ingest.sources.Listing.unread``, capped by ``model.capped_unread``); ``None``
    for a listing that does not count them, or that could not list a folder (its counts
    are partial): the store's counts then stay."""
    counts = getattr(listing, "unread", None)
    if not isinstance(counts, Mapping):
        return None
    if any(problem.reason.startswith(CANNOT_LIST) for problem in listing_problems(listing)[1]):
        return None
    return capped_unread({str(k): int(v) for k, v in counts.items() if isinstance(v, int)})


def listing_problems(listing: object) -> tuple[list[FileProblem], list[FileProblem]]:
    """``(skipped, errors)``: what a source's listing left out and found wrong while
    listing (``knowledge.ingest.sources.Listing``); none for a listing that reports nothing."""

    def reported(name: str) -> list[FileProblem]:
        problems = getattr(listing, name, None)
        if not isinstance(problems, list):
            return []
        return [problem for problem in problems if isinstance(problem, FileProblem)]

    return reported("skipped"), reported("errors")


def _record(session: WriteSession, path: str, reason: str) -> None:
    """Remember the problem in the store (the status lists it); a store that cannot is
    logged, not fatal: the run's own report still has it."""
    try:
        session.record_problem(path, reason)
    except KnowledgeError as exc:
        _reraise_if_unavailable(exc)
        logger.warning("could not record the problem of %s (%s): %s", path, reason, exc)


def _record_all(
    writer: IndexWriter, scope: KnowledgeScope, problems: Sequence[FileProblem]
) -> None:
    """Record problems known only after a session ended (``WriteSession.failures``)."""
    if not problems:
        return
    try:
        with writer.write_session(scope) as session:
            for problem in problems:
                _record(session, problem.path, problem.reason)
    except KnowledgeError as exc:
        _reraise_if_unavailable(exc)
        logger.warning("could not record %d problem(s) in %s: %s", len(problems), scope, exc)


def _chunk_sections(
    chunker: DocumentChunker, path: str, extracted: ExtractedDocument, max_chunk_size: int
) -> Iterator[DocumentChunk]:
    key = extracted.position_key
    for section, blocks in itertools.groupby(extracted.blocks or (), key=lambda b: b.section):
        group = list(blocks)
        citation: dict[str, Any] = dict(section)
        positions = [b.position for b in group if b.position is not None]
        if key is not None and positions:
            first, last = min(positions), max(positions)
            if key == "page":
                citation["page"] = first
                if last != first:
                    citation["page_end"] = last
            else:
                citation.update(row_start=first, row_end=last)
        text = "\n".join(block.text for block in group)
        for piece in chunker.chunk(path, text, max_chunk_size=max_chunk_size):
            yield DocumentChunk(
                path, piece.chunk_index, piece.content, {**piece.metadata, **citation}
            )


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
        self: _IndexingStore,
        scope: KnowledgeScope,
        document: SourceDocument,
        options: IndexOptions | None = None,
    ) -> IndexResult:
        """Index one document, respecting version order (``Indexer.upsert``)."""
        return self._indexer.upsert(self, scope, document, options)

    def delete_document(
        self: _IndexingStore, scope: KnowledgeScope, path: str, version: str | None = None
    ) -> bool:
        """Remove one document's chunks (``Indexer.delete``)."""
        return self._indexer.delete(self, scope, path, version)
