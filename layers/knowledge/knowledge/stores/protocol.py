"""The ``KnowledgeStore`` protocol: one interface for every index backend.

docs/architecture.md, "One store protocol".

Guarantees every implementation keeps (checked by ``tests/contract``):

- every write is tagged with the scope; every search filters on it (agent and
  context, or agent only with ``cross_context``); the agent boundary is never crossed;
  a query's ``shared_libraries`` (``_shared`` scopes only, set by the server from its
  grant: ``knowledge.core.scope_set``) are covered by the same search, one ranking, and their
  hits name their library;
- ``score`` in [0, 1], higher is better; results sorted by score, at most
  ``max_results``, none below ``min_score``; no match is an empty list, not an error;
  a first page may end with up to ``RankWeights.extra_lessons`` lesson cards past
  ``max_results``, each marked ``extra`` (``knowledge.ranking.origin_weights``);
- an overwrite replaces all chunks of the document; a delete removes them all;
- ``search`` is safe to call concurrently with indexing and never sees half a document
  where the backend can promise it (memory, embedded; the embedded store commits a long
  write session in batches, so its documents become searchable as they land);
- a keyword search (keyword mode, hybrid's keyword side) expands its terms with the
  synonyms of exactly the scope it names (``WriteSession.put_synonyms``,
  ``knowledge.ranking.synonym_expansion``), each added term weighing ``SYNONYM_WEIGHT``;
- ``close()`` is idempotent and never closes injected collaborators.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

from knowledge.core.chunk_listing import DEFAULT_CHUNKS_LIMIT, ChunkPage
from knowledge.core.documents import DEFAULT_DOCUMENTS_LIMIT, DocumentPage, IndexedDocument
from knowledge.core.model import (
    DocumentChunk,
    FileProblem,
    IndexStatus,
    SearchMode,
    SearchQuery,
    SearchResult,
)
from knowledge.core.scope import KnowledgeScope
from knowledge.core.scope_summary import ScopeSummary
from knowledge.embedding.base import EmbeddingClient

__all__ = [
    "REASON_STALE_VERSION",
    "REASON_SUPERSEDED",
    "DocumentHeader",
    "EmbeddedChunk",
    "IndexWriter",
    "KnowledgeStore",
    "Precondition",
    "ScopeSources",
    "StoredDocument",
    "WriteSession",
]


# --- The write side every backend provides to the shared indexing pipeline ---------------
#
# ``knowledge.ingest.pipeline`` owns extract -> chunk -> embed and the index/reindex/upsert/delete
# logic once; a backend only stores what it is given. Chunks arrive as a stream so that one
# very large document never has to sit in memory with all its vectors.

REASON_STALE_VERSION = "stale version"
"""A write (or an event) older than the indexed version: skipped, not a failure."""

REASON_SUPERSEDED = "superseded"
"""A write with a ``Precondition`` that no longer held when it was committed: another
writer committed the document meanwhile, with content that may be newer. Nothing of it
stays (the indexed version is kept); the writer reads the document and decides again."""


@dataclass(frozen=True, slots=True)
class Precondition:
    """What an upsert was decided against: the ``StoredDocument.generation`` the store
    held, read inside the write session just before the document's bytes (``None``:
    no version was indexed).

    A store whose write sessions of one scope run side by side (OpenSearch) commits a
    document with a precondition only while that generation is still the indexed one,
    unless the write and the indexed version both carry a version (their order decides):
    else it reports the document ``REASON_SUPERSEDED`` in ``failures``. A write without a
    version (a reindex message, a sidecar event, a watcher) read the document as it was
    *then*, so it must not replace a version committed since. Stores whose sessions of a
    scope run one at a time (memory, embedded) hold it by construction and ignore it."""

    generation: str | None


@dataclass(frozen=True, slots=True)
class DocumentHeader:
    """Document-level facts written with every chunk of the document.

    ``size`` is the source document's size in bytes (``None`` when not known);
    ``precondition`` what the write was decided against (``None``: unconditional, as a
    listing run's writes are).
    """

    path: str
    document_id: str
    content_hash: str
    indexed_at: datetime
    version: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    size: int | None = None
    precondition: Precondition | None = None


@dataclass(frozen=True, slots=True)
class EmbeddedChunk:
    """A chunk and its vector (``None`` for keyword-only stores).

    ``embedding_key`` (``identity.embedding_key``: the embedded text and the embedder's
    identity) is stored with the vector, so a later version of the document can reuse
    the vector of an unchanged chunk (``WriteSession.stored_vectors``). ``reused`` says
    the vector is such a reused one (not sent to the embedder for this write); the stores
    keep it, and a scope's status counts both kinds (``IndexStatus.reused_chunks``)."""

    chunk: DocumentChunk
    vector: Sequence[float] | None = None
    embedding_key: str | None = None
    reused: bool = False


@dataclass(frozen=True, slots=True)
class StoredDocument:
    """What a backend remembers of an indexed document, for skip-unchanged and ordering.

    ``generation``: the store's id of the indexed version, where it has one (OpenSearch:
    the generation the document's record names), for a ``Precondition``."""

    path: str
    content_hash: str
    version: str | None
    chunk_count: int
    generation: str | None = None


@runtime_checkable
class ScopeSources(Protocol):
    """A local store that remembers where each scope was last indexed from.

    ``kb index DIR`` records ``kb index <DIR>``, ``kb serve ROOT`` records ``kb serve
    <ROOT>`` for every scope it finds under ROOT. At start-up ``kb serve`` empties a scope
    it holds no folder for (deleted while nothing watched), but not one recorded as
    indexed from somewhere else: two commands sharing one index file never undo each
    other's scopes. ``None``: nothing recorded (a scope written before this was kept).
    """

    def scope_source(self, scope: KnowledgeScope) -> str | None: ...

    def set_scope_source(self, scope: KnowledgeScope, source: str) -> None: ...


@runtime_checkable
class WriteSession(Protocol):
    """A batch of writes to one scope; a context manager that commits on success.

    ``put_document`` replaces all chunks of the document (no stale tail).
    ``failures`` lists per-document write failures (a bulk item error, say);
    a failed document must not be reported as indexed.
    """

    def put_document(self, header: DocumentHeader, chunks: Iterable[EmbeddedChunk]) -> int:
        """Write the document; return the number of chunks written."""
        ...

    def delete_document(self, path: str) -> bool: ...

    def record_problem(self, path: str, reason: str) -> None:
        """Remember that the latest attempt to index ``path`` was skipped or failed with
        ``reason``, replacing an earlier problem of that path. Never removes the previously
        indexed version of the document. A later successful ``put_document(path)`` or
        ``delete_document(path)`` clears it; ``status(scope).problems`` lists them, most
        recent first."""
        ...

    def record_unread(self, counts: Mapping[str, int]) -> None:
        """Replace the scope's counts of the files its source holds that no pattern
        selects, by extension (``IndexStatus.unread_files``; ``model.capped_unread``
        already applied). Written with the session; a session that does not call it
        leaves the counts as they were."""
        ...

    def put_synonyms(self, text: str | None) -> None:
        """Replace the scope's synonyms with ``text`` (a synonyms file that
        ``knowledge.ranking.synonym_expansion.parse_synonyms`` accepted; ``None``: none), written
        with the session, and clear a problem recorded under ``SYNONYMS_FILE``. Every
        keyword search of exactly this scope expands its terms with them; a reindex's
        ``replace_scope`` keeps them (configuration, not documents)."""
        ...

    def stored_vectors(self, path: str) -> Mapping[str, Sequence[float]]:
        """The vectors of the indexed version of ``path`` by their ``embedding_key``, so the
        pipeline embeds only the chunks whose text (or embedder) changed. Empty when the
        document is not indexed or the store keeps no vectors (memory). May be a snapshot
        slightly behind the latest write (OpenSearch reads what is searchable): a key is
        a content address, so any vector found under it is right for it."""
        ...

    @property
    def failures(self) -> Sequence[FileProblem]: ...

    def __enter__(self) -> WriteSession: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class IndexWriter(Protocol):
    """The primitive write API of a backend."""

    @property
    def embedder(self) -> EmbeddingClient | None:
        """The embedder whose vectors the store holds (the pipeline embeds with it by
        default); ``None``: a keyword-only store."""
        ...

    def stored_documents(self, scope: KnowledgeScope) -> dict[str, StoredDocument]:
        """Every document of the scope (exact scope, not cross-context), by path."""
        ...

    def stored_document(self, scope: KnowledgeScope, path: str) -> StoredDocument | None:
        """The document's indexed version as the store holds it now: what a write that
        follows is decided on (unchanged, stale, its ``Precondition``). Where searches
        lag behind writes (OpenSearch's refresh), it is checked against a real-time read
        of the document's record, and a search that lags reports it incomplete (so a
        write follows, never a wrong "unchanged")."""
        ...

    def problem_paths(self, scope: KnowledgeScope) -> set[str]:
        """The paths of the scope with a recorded problem (``WriteSession.record_problem``),
        indexed or not: what an index clears for the files its source no longer lists."""
        ...

    def write_session(self, scope: KnowledgeScope, *, replace_scope: bool = False) -> WriteSession:
        """Open a write batch; ``replace_scope`` drops everything in the scope the session
        does not write, except the indexed version of a document whose problem it records
        (a failed write never removes what was searchable before)."""
        ...


@runtime_checkable
class KnowledgeStore(IndexWriter, Protocol):
    """A backend: the read side (search, status, documents) and the ``IndexWriter`` the
    indexing pipeline (``knowledge.ingest.pipeline``) writes through. A store never
    indexes by itself: ``index_source(store, scope, source)`` and its siblings do."""

    @property
    def name(self) -> str:
        """Short backend name for messages and logs (``memory``, ``embedded``, ``opensearch``)."""
        ...

    @property
    def supported_modes(self) -> frozenset[SearchMode]: ...

    @property
    def default_mode(self) -> SearchMode: ...

    def search(self, scope: KnowledgeScope, query: SearchQuery) -> list[SearchResult]: ...

    def status(self, scope: KnowledgeScope) -> IndexStatus: ...

    def list_scopes(self) -> list[KnowledgeScope]:
        """Every scope holding at least one indexed document or problem, sorted (by agent,
        then context). Lets a caller reconcile the index with the source (``kb serve``
        empties the scopes whose folders vanished)."""
        ...

    def list_documents(
        self,
        scope: KnowledgeScope,
        *,
        limit: int = DEFAULT_DOCUMENTS_LIMIT,
        cursor: str | None = None,
    ) -> DocumentPage:
        """One page of exactly this scope's documents (indexed, with a problem, or both),
        in path order, from the per-document records (``knowledge.core.documents``).
        ``limit`` in [1, MAX_DOCUMENTS_LIMIT]; ``cursor`` is a page's ``next_cursor``.
        Raises ``ValidationError`` (``limit``/``cursor``) for a bad limit or a cursor
        that is not one of this scope's."""
        ...

    def get_document(self, scope: KnowledgeScope, path: str) -> IndexedDocument | None:
        """The record of one document of exactly this scope; ``None`` when it has
        neither an indexed version nor a problem."""
        ...

    def list_chunks(
        self,
        scope: KnowledgeScope,
        path: str,
        *,
        limit: int = DEFAULT_CHUNKS_LIMIT,
        cursor: str | None = None,
    ) -> ChunkPage | None:
        """One page of the chunks of the indexed version of ``path`` in exactly this scope,
        by chunk index (``knowledge.core.chunk_listing``); ``None`` when the scope holds no
        indexed version of it. ``limit`` in [1, MAX_CHUNKS_LIMIT]; ``cursor`` is a page's
        ``next_cursor``. Raises ``ValidationError`` (``limit``/``cursor``) for a bad limit
        or a cursor that is not one of this document's."""
        ...

    def agent_scopes(self, agent: str) -> list[ScopeSummary]:
        """Every context of ``agent`` holding an indexed document or a problem, by name,
        with its counts, last indexed time and state (``knowledge.core.scope_summary``):
        one read for all of them, never another agent's."""
        ...

    def close(self) -> None: ...
