"""One document into a write session: read, fingerprint, extract, chunk, embed, put.

Per document: size check (``options.max_document_bytes``, before reading) -> read ->
fingerprint (``identity.content_hash`` of the bytes, and of the sidecar metadata when
there is some, so a metadata change re-indexes) -> skip if the stored document has the
same fingerprint ("unchanged") -> ``extraction.extract_document`` -> ``chunker.chunk``
(text) or ``chunker.chunk_blocks`` (structured formats: PDF, Office, CSV, HTML) -> embed
(``knowledge.ingest.chunk_embedding``) -> ``put_document``. Chunks are streamed: at most
one embedding batch of one document is in memory, and a structured document's blocks are
read from its bytes as the chunks are asked for. New text documents can be read,
chunked and embedded ahead of their write (``ahead``: ``knowledge.ingest.lookahead``).

Chunk metadata = sidecar user metadata (with its checked ``url``, if any), then
``source_key`` (the source key, else ``<agent>/<context>/<path>``), ``content_type``,
``format`` (``pdf``, ``markdown``, ...) and ``origin`` (``knowledge.core.origin``: the
source's, or the sidecar's ``repo``/``manual``), then the chunker's ``title``,
``heading_path`` and citation (``page``/``page_end``, ``slide``, ``sheet``,
``row_start``/``row_end``); later keys win, so user metadata cannot hide the system keys.

A failed write never removes what was searchable before: every store's ``put_document``
writes the new version beside the old one (or in a transaction) and drops what it wrote
of a version that failed. A new version that cannot be indexed at all (too large,
encrypted, corrupt, an archive bomb, no text; or a read, embedding or store failure)
is a problem whose reason names that version (``kept_previous``), and the previously
indexed version stays searchable: the documents listing marks it ``stale``
(``IndexedDocument.stale``). Only a delete of the file removes it. Content the index
already holds while its path has a problem (the old file back again) is written again
rather than skipped as "unchanged", so that the write clears the problem.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import islice
from typing import Any

from knowledge.agent_tools.shared import SHARED_AGENT
from knowledge.core.errors import ArchivedObjectError, ExtractionError, KnowledgeError
from knowledge.core.identity import content_hash, document_id
from knowledge.core.model import DocumentChunk, FileProblem, IndexOptions
from knowledge.core.origin import FORMAT, ORIGIN, ORIGINS, SHARED, SIDECAR_ORIGINS, UPLOAD
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.extraction import ExtractedDocument, extract_document, source_type_of
from knowledge.ingest.chunk_embedding import NO_VECTORS, REUSE_WINDOW, ChunkEmbedder
from knowledge.ingest.chunking import DocumentChunker, StructuredChunker
from knowledge.ingest.lookahead import MAX_PREPARED_BYTES, Lookahead, Prepared
from knowledge.ingest.progress import current_progress
from knowledge.ingest.run_report import (
    RunReport,
    fail,
    over_limit,
    reraise_if_unavailable,
)
from knowledge.stores.protocol import DocumentHeader, Precondition, StoredDocument, WriteSession

__all__ = [
    "KEPT_PREVIOUS",
    "REASON_UNCHANGED",
    "DocumentWriter",
    "document_fingerprint",
    "document_origin",
    "kept_previous",
]

REASON_UNCHANGED = "unchanged"
KEPT_PREVIOUS = "the previously indexed version is still searched"
_PREPARED_TYPES = frozenset({"markdown", "text"})
"""What ``knowledge.ingest.lookahead`` prepares ahead: text, whose extraction is thread-safe
(PDFium is not) and whose chunks are cheap to hold."""


def document_origin(document: SourceDocument) -> str:
    """The document's origin: its sidecar's (already checked by ``parse_metadata_sidecar``
    against what a writer may set) unless its source is the shared library, else the
    source's. A value that is no origin at all (a source's bug) is the source's."""
    own = document.origin if document.origin in ORIGINS else UPLOAD
    said = document.metadata.get(ORIGIN)
    if own != SHARED and isinstance(said, str) and said in SIDECAR_ORIGINS:
        return said
    return own


def kept_previous(reason: str, document: SourceDocument, stored: StoredDocument | None) -> str:
    """``reason`` as the problem of ``document``'s new version: for a document with an
    indexed version, it says that this version is not indexed and the previous one is
    still searched (module docstring)."""
    if stored is None:
        return reason
    which = "this version" if document.version is None else f"version {document.version}"
    indexed = "" if stored.version is None else f" (version {stored.version})"
    return f"{reason}; {which} is not indexed: {KEPT_PREVIOUS}{indexed}"


def document_fingerprint(data: bytes, metadata: Mapping[str, Any]) -> str:
    """What ``StoredDocument.content_hash`` holds: the content hash of the bytes, mixed
    with the user metadata when there is any (so editing a sidecar re-indexes)."""
    digest = content_hash(data)
    if not metadata:
        return digest
    canonical = json.dumps(dict(metadata), sort_keys=True, ensure_ascii=False)
    return content_hash(f"{digest}\x00{canonical}".encode())


class DocumentWriter:
    """Writes one document at a time into a session (module docstring), with ``chunker``
    and ``embedding``; ``lookahead`` documents are prepared ahead (0: none)."""

    def __init__(self, chunker: DocumentChunker, embedding: ChunkEmbedder, lookahead: int) -> None:
        self._chunker = chunker
        self._embedding = embedding
        self._lookahead = lookahead

    def put(
        self,
        session: WriteSession,
        scope: KnowledgeScope,
        document: SourceDocument,
        *,
        options: IndexOptions,
        run: RunReport,
        stored: StoredDocument | None,
        force: bool = False,
        prepared: Prepared | None = None,
        precondition: Precondition | None = None,
        has_problem: Callable[[str], bool] | None = None,
        replacing: StoredDocument | None = None,
    ) -> None:
        """Write ``document`` (module docstring); ``stored`` is its indexed version, kept
        if this one cannot be written; ``has_problem`` (asked only for content equal to
        ``stored``'s) says its path has a recorded problem: then that content is written
        again (clearing it), not skipped as "unchanged". ``replacing``: the version a
        reindex (``stored=None``, ``force``) replaces, kept the same way."""
        reuse = stored is not None  # the path's own stored vectors, not a replaced version's
        attempt = _Attempt(session, run, document, stored or replacing)
        limit = options.max_document_bytes
        if document.size > limit:
            attempt.skip(
                f"too large: document is {document.size} bytes, over max_document_bytes ({limit})"
            )
            return
        ahead = prepared or Prepared()
        data = _read(attempt, ahead)
        if data is None:
            return
        fingerprint = document_fingerprint(data, document.metadata)
        if not force and attempt.unchanged(fingerprint, has_problem):
            run.skipped.append(FileProblem(document.path, REASON_UNCHANGED))
            return
        extracted = _extract(attempt, ahead, data, limit)
        if extracted is None:
            return
        # Structured formats read their bytes while the chunks stream; text ones are done.
        del data
        metadata = _document_metadata(scope, document, extracted)
        header = DocumentHeader(
            path=document.path,
            document_id=document_id(scope, document.path),
            content_hash=fingerprint,
            indexed_at=datetime.now(UTC),
            version=document.version,
            metadata=metadata,
            size=document.size,
            precondition=precondition,
        )
        self._write(attempt, header, extracted, ahead, options, reuse=reuse)

    def _write(
        self,
        attempt: _Attempt,
        header: DocumentHeader,
        extracted: ExtractedDocument,
        ahead: Prepared,
        options: IndexOptions,
        *,
        reuse: bool,
    ) -> None:
        """Put the version's chunks, as they stream, with their vectors (those prepared
        ahead, else embedded now, ``reuse``-ing the stored version's where the text is
        the same); a failure keeps the previous version (module docstring)."""
        session, run, path = attempt.session, attempt.run, header.path
        progress = current_progress()
        if progress is not None:
            text = extracted.text if extracted.blocks is None else None
            progress.begin(path, attempt.document.size, None if text is None else len(text))
        try:
            if ahead.embed_error is not None:
                raise ahead.embed_error
            if ahead.embedded is not None:  # chunked and embedded ahead (no stored version)
                run.tokens += ahead.tokens
                run.embedded += ahead.embedded_chunks
                written = session.put_document(header, iter(ahead.embedded))
            else:
                chunks = self._chunks(path, extracted, options, header.metadata)
                embedding = self._embedding
                reusable = embedding.stored_vectors(session, path) if reuse else NO_VECTORS
                written = session.put_document(header, embedding.embedded(chunks, run, reusable))
        except ExtractionError as exc:  # found while streaming: corrupt page, no text layer
            # Every store drops what it wrote of a version whose chunks raised; one that
            # had no previous version is made sure of (nothing of it may stay).
            if attempt.stored is None:
                self._remove_partial(session, path, run)
            attempt.skip(str(exc))
            return
        except KnowledgeError as exc:  # EmbeddingError, StoreError, a chunker's ValidationError
            reraise_if_unavailable(exc)
            # The session dropped what it wrote of this version; the previous one stays.
            attempt.fail(f"not indexed: {exc}")
            return
        finally:
            run.warnings.extend(FileProblem(path, warning) for warning in extracted.warnings)
            if progress is not None:
                progress.end()
        run.written[path] = written

    def ahead(
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
                and not over_limit(number, options)
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
        cap = self._embedding.batch_size * REUSE_WINDOW
        try:
            chunks = list(islice(self._chunks(path, extracted, options, metadata), cap + 1))
        except KnowledgeError:  # the writer chunks it again and meets the error itself
            return prepared
        if len(chunks) > cap:  # a long document: the writer streams it
            return prepared
        counts = RunReport()
        try:
            prepared.embedded = list(self._embedding.embedded(chunks, counts))
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
        progress = current_progress()
        # Renumbered so chunk ids are always dense (0..n-1): no gap can hide a stale chunk.
        for index, piece in enumerate(pieces):
            if progress is not None:
                progress.chunk(len(piece.content))
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

    @staticmethod
    def delete(session: WriteSession, path: str, run: RunReport) -> None:
        try:
            if session.delete_document(path):
                run.deleted.add(path)
        except KnowledgeError as exc:
            reraise_if_unavailable(exc)
            run.errors.append(FileProblem(path, f"not deleted: {exc}"))

    @staticmethod
    def _remove_partial(session: WriteSession, path: str, run: RunReport) -> None:
        try:
            session.delete_document(path)
        except KnowledgeError as exc:
            reraise_if_unavailable(exc)
            run.errors.append(FileProblem(path, f"partly written and not removed: {exc}"))


@dataclass(frozen=True, slots=True)
class _Attempt:
    """One version of a document being written: where its outcome is recorded, and
    ``stored``, the indexed version that stays searchable if this one is not written."""

    session: WriteSession
    run: RunReport
    document: SourceDocument
    stored: StoredDocument | None

    def unchanged(self, fingerprint: str, has_problem: Callable[[str], bool] | None) -> bool:
        """Whether the index holds this content already, with no problem recorded for its
        path (``DocumentWriter.put``)."""
        return (
            self.stored is not None
            and self.stored.content_hash == fingerprint
            and not (has_problem is not None and has_problem(self.document.path))
        )

    def skip(self, reason: str) -> None:
        """Not indexed for ``reason``, not to be retried (``RunReport.skip``)."""
        problem = FileProblem(self.document.path, kept_previous(reason, self.document, self.stored))
        self.run.skip(self.session, problem)

    def fail(self, reason: str) -> None:
        """Not indexed for ``reason``, a failure the next run retries."""
        problem = FileProblem(self.document.path, kept_previous(reason, self.document, self.stored))
        fail(self.session, self.run, problem)


def _read(attempt: _Attempt, ahead: Prepared) -> bytes | None:
    """The version's bytes (read ahead, or now), or ``None`` with its problem recorded."""
    try:
        return ahead.read(attempt.document)
    except ArchivedObjectError as exc:
        # Not a failure to retry: the object is there, unreadable until restored; what
        # is indexed of it stays, and the status lists why.
        attempt.skip(str(exc))
    except (OSError, KnowledgeError) as exc:
        reraise_if_unavailable(exc)
        attempt.fail(f"cannot read: {exc}")
    return None


def _extract(
    attempt: _Attempt, ahead: Prepared, data: bytes, max_bytes: int
) -> ExtractedDocument | None:
    """The version's text or blocks (extracted ahead, or now), or ``None`` with its
    problem recorded (unsupported, too large, corrupt...)."""
    try:
        if ahead.extract_error is not None:
            raise ahead.extract_error
        return ahead.extracted or extract_document(attempt.document.path, data, max_bytes=max_bytes)
    except KnowledgeError as exc:  # ExtractionError: unsupported, too large, corrupt...
        attempt.skip(str(exc))
        return None


def _document_metadata(
    scope: KnowledgeScope, document: SourceDocument, extracted: ExtractedDocument
) -> dict[str, Any]:
    """The metadata every chunk of ``document`` carries (module docstring)."""
    return {
        **document.metadata,
        # Bucket-style when the source has no key of its own (a folder given to `kb index`),
        # so every hit says its scope (core.scope_set.hit_scope) and two contexts' x.md differ.
        "source_key": document.source_key or f"{scope.key}/{document.path}",
        "content_type": extracted.content_type,
        FORMAT: extracted.source_type,
        # The shared library's records say so, whatever a sidecar claims
        # (knowledge.agent_tools.shared).
        ORIGIN: SHARED if scope.agent == SHARED_AGENT else document_origin(document),
    }


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
