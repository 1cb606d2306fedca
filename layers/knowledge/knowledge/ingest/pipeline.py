"""The indexing pipeline, once for every store: source -> extract -> chunk -> embed -> store.

``Indexer`` turns source documents into writes on a backend's ``IndexWriter``
(``knowledge.stores.protocol``): it opens the store's write sessions and drives them, the
store only stores what it is given (the store never calls the pipeline). Callers index
with ``index_source(store, scope, source, options)``, ``reindex_source``,
``upsert_document`` and ``delete_document``: the store's default pipeline
(``indexer_for``: ``MarkdownSectionChunker`` and the store's embedder); an ``Indexer``
built by hand (another chunker, batch size, ``embed_context``) runs the same four
operations with the store as their first argument.

The pipeline is four modules: this one (the four operations over a listing or one
document), ``document_writer`` (one document: read, fingerprint, extract, chunk, put),
``chunk_embedding`` (batches to the embedder, reusing an indexed version's vectors) and
``run_report`` (what a run did, and the problems it records).

Failures are per document and never stop a run: a file that cannot be read, extracted,
embedded or written is listed in ``errors`` (or ``skipped`` for deliberate skips), and
the run goes on. ``StoreUnavailableError`` is re-raised (nothing more can be written),
as is an error while listing the source (nothing is deleted then). A failed write never
removes what was searchable before: a new version that cannot be read, extracted,
embedded or written is a problem naming that version, and the previous version stays
searchable (``document_writer``; the documents listing marks it ``stale``) until a good
version replaces it or the file is deleted. ``WriteSession.failures`` reported at commit
count as errors, not as indexed documents.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain, islice

from knowledge.core.errors import StoreError, ValidationError
from knowledge.core.identity import is_newer_version
from knowledge.core.model import FileProblem, IndexOptions, IndexResult
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SYNONYMS_FILE, DocumentSource, SourceDocument
from knowledge.embedding.base import EmbeddingClient
from knowledge.ingest.chunk_embedding import (
    DEFAULT_EMBED_BATCH_SIZE,
    DEFAULT_EMBED_CONTEXT,
    ChunkEmbedder,
    embeds_context_by_default,
)
from knowledge.ingest.chunking import DocumentChunker, MarkdownSectionChunker
from knowledge.ingest.document_writer import REASON_UNCHANGED, DocumentWriter, document_fingerprint
from knowledge.ingest.lookahead import DEFAULT_WINDOW
from knowledge.ingest.run_report import (
    RunReport,
    fail,
    listing_problems,
    listing_unread,
    over_limit,
    over_limit_problem,
    record_all,
)
from knowledge.ingest.sources import under_unlisted_folder
from knowledge.stores.protocol import (
    REASON_STALE_VERSION,
    REASON_SUPERSEDED,
    IndexWriter,
    Precondition,
    WriteSession,
)

__all__ = [
    "DEFAULT_EMBED_BATCH_SIZE",
    "DEFAULT_EMBED_CONTEXT",
    "REASON_STALE_VERSION",
    "REASON_SUPERSEDED",
    "REASON_UNCHANGED",
    "Indexer",
    "delete_document",
    "document_fingerprint",
    "embeds_context_by_default",
    "index_source",
    "indexer_for",
    "listing_problems",
    "listing_unread",
    "reindex_source",
    "upsert_document",
]


_LOST_AT_COMMIT = (REASON_STALE_VERSION, REASON_SUPERSEDED)
"""What a store reports of a write that another writer's won at commit: skips, not errors."""


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
        embedding = ChunkEmbedder(
            embedder, embed_batch_size=embed_batch_size, embed_context=embed_context
        )
        self._chunker = chunker
        self._embedding = embedding
        if lookahead is None:  # only an embedder with calls in flight at once gains
            concurrent = int(getattr(embedder, "concurrency", 1) or 1) > 1
            lookahead = DEFAULT_WINDOW if concurrent else 0
        if isinstance(lookahead, bool) or not isinstance(lookahead, int) or lookahead < 0:
            raise ValidationError("lookahead", f"must be an integer >= 0, got {lookahead!r}")
        self._lookahead = lookahead
        self._documents = DocumentWriter(chunker, embedding, lookahead)

    @property
    def chunker(self) -> DocumentChunker:
        return self._chunker

    @property
    def embedder(self) -> EmbeddingClient | None:
        return self._embedding.embedder

    @property
    def embed_batch_size(self) -> int:
        return self._embedding.batch_size

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
        run = RunReport()
        stored = writer.stored_documents(scope)
        problems = writer.problem_paths(scope)
        listed: set[str] = set()
        truncated = False
        with writer.write_session(scope) as session:
            listing = source.documents(scope, options)
            with self._documents.ahead(listing, scope, options, stored) as documents:
                for document, prepared in documents:
                    if over_limit(len(listed), options):
                        truncated = True
                        fail(session, run, over_limit_problem(document, options))
                        continue
                    listed.add(document.path)
                    self._documents.put(
                        session,
                        scope,
                        document,
                        options=options,
                        run=run,
                        stored=stored.get(document.path),
                        prepared=prepared,
                        has_problem=problems.__contains__,
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
        record_all(writer, scope, session.failures)
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
        other stored ones are deleted. A listed document whose new version cannot be
        indexed keeps its indexed version (a problem, ``stale``), as in ``index``.
        """
        options = options or IndexOptions()
        run = RunReport()
        indexed = writer.stored_documents(scope)
        previous = set(indexed)
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
            self._documents.ahead(documents, scope, options, {}) as ahead,
        ):
            for document, prepared in ahead:
                if over_limit(len(listed), options):
                    fail(session, run, over_limit_problem(document, options))
                    continue
                listed.add(document.path)
                self._documents.put(
                    session,
                    scope,
                    document,
                    options=options,
                    run=run,
                    stored=None,
                    force=True,
                    prepared=prepared,
                    replacing=indexed.get(document.path),
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
        record_all(writer, scope, session.failures)
        return run.result(session.failures)

    def _settle_listing(
        self,
        session: WriteSession,
        run: RunReport,
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
                    self._documents.delete(session, path, run)
        # After the deletes: an indexed file the listing now leaves out (a link out of its
        # scope, say) is removed and keeps the problem that says why.
        run.take_listing_problems(listing, session)
        if delete:
            # A file that was never indexed and is gone: its problem goes with it (the
            # source's own listing problems were just recorded: they stay).
            reported = {p.path for p in (*run.skipped, *run.errors)}
            # The synonyms file's problem is the synonyms' own (ingest.synonyms_file).
            for path in sorted(problems - listed - reported - stored - {SYNONYMS_FILE}):
                if not unlisted(path):
                    self._documents.delete(session, path, run)

    def upsert(
        self,
        writer: IndexWriter,
        scope: KnowledgeScope,
        document: SourceDocument,
        options: IndexOptions | None = None,
    ) -> IndexResult:
        """Index one document (event-driven path). A ``document.version`` older than the
        stored one is skipped with reason ``"stale version"`` and nothing is written;
        unchanged content is skipped as ``"unchanged"`` (unless the path has a problem:
        then it is written again, which clears it). File patterns are not applied: the
        caller chose the document.

        The indexed version is read inside the write session, just before the document's
        bytes: where sessions of a scope run one at a time (memory, embedded) nothing can
        change it before the write lands; where they run side by side (OpenSearch) the
        write carries it as its ``Precondition``. A write that loses at commit (a newer
        version, or another writer's commit since: ``"superseded"``) is skipped with that
        reason, not an error: the indexed version stays."""
        options = options or IndexOptions()
        run = RunReport()
        with writer.write_session(scope) as session:
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
            precondition = Precondition(None if stored is None else stored.generation)
            self._documents.put(
                session,
                scope,
                document,
                options=options,
                run=run,
                stored=stored,
                precondition=precondition,
                has_problem=lambda path: path in writer.problem_paths(scope),
            )
        lost = [p for p in session.failures if p.reason.startswith(_LOST_AT_COMMIT)]
        failures = [p for p in session.failures if p not in lost]
        run.skipped.extend(lost)
        for problem in lost:
            run.written.pop(problem.path, None)
        record_all(writer, scope, failures)
        return run.result(failures)

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


def indexer_for(writer: IndexWriter) -> Indexer:
    """The default pipeline for ``writer``: ``MarkdownSectionChunker()`` and the embedder
    whose vectors the store holds (``IndexWriter.embedder``; ``None``: keyword-only)."""
    return Indexer(MarkdownSectionChunker(), writer.embedder)


def index_source(
    writer: IndexWriter,
    scope: KnowledgeScope,
    source: DocumentSource,
    options: IndexOptions | None = None,
) -> IndexResult:
    """Sync the scope with the source, with the store's default pipeline (``Indexer.index``)."""
    return indexer_for(writer).index(writer, scope, source, options)


def reindex_source(
    writer: IndexWriter,
    scope: KnowledgeScope,
    source: DocumentSource,
    options: IndexOptions | None = None,
) -> IndexResult:
    """Drop the scope and index the source in full (``Indexer.reindex``)."""
    return indexer_for(writer).reindex(writer, scope, source, options)


def upsert_document(
    writer: IndexWriter,
    scope: KnowledgeScope,
    document: SourceDocument,
    options: IndexOptions | None = None,
) -> IndexResult:
    """Index one document, respecting version order (``Indexer.upsert``)."""
    return indexer_for(writer).upsert(writer, scope, document, options)


def delete_document(
    writer: IndexWriter, scope: KnowledgeScope, path: str, version: str | None = None
) -> bool:
    """Remove one document's chunks (``Indexer.delete``)."""
    return indexer_for(writer).delete(writer, scope, path, version)
