"""In-memory keyword store: an inverted index with TF-IDF scoring.

No dependencies and no persistence: the default for tests and embedding-free use.
Keyword mode only; asking for vector or hybrid raises ``UnsupportedModeError``.

Concurrency. Each scope's index is an immutable snapshot (documents, chunks, postings).
A write session builds its changes on the side and, on commit, publishes a new snapshot
by swapping one reference, so a search (which reads the reference once) sees either
all of a session's writes or none, and never waits for indexing. Write sessions on the
same scope are serialised (a second one waits for the first to finish); on different
scopes they run in parallel. Nothing published is ever mutated.

Scoring: ``sum over distinct query terms of (1 + ln tf) * ln(1 + N / df)``, where a
chunk's title and heading terms count ``headings_weight`` each in ``tf``
(``knowledge.ranking.headings``; a ``tf`` below 1 counts as itself), with ``N``
and ``df`` counted over the chunks being searched (every snapshot of the agent with
``cross_context``; each of a search's shared libraries, ``knowledge.core.scope_set``,
over its own); candidates filtered by file patterns and metadata first, then
divided by their maximum (``fusion.keyword_only``), then ``min_score``, sort and
``max_results`` (the rule in ``knowledge.core.path_filters``).
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from types import TracebackType

from knowledge.core.chunk_listing import (
    DEFAULT_CHUNKS_LIMIT,
    ChunkPage,
    IndexedChunk,
    chunk_page,
    decode_chunk_cursor,
    validate_chunks_limit,
)
from knowledge.core.documents import (
    DEFAULT_DOCUMENTS_LIMIT,
    DocumentPage,
    IndexedDocument,
    decode_cursor,
    document_page,
    validate_documents_limit,
)
from knowledge.core.errors import StoreError, UnsupportedModeError
from knowledge.core.model import (
    DocumentChunk,
    FileProblem,
    IndexState,
    IndexStatus,
    SearchMode,
    SearchQuery,
    SearchResult,
)
from knowledge.core.origin import FORMAT, ORIGIN
from knowledge.core.scope import KnowledgeScope
from knowledge.core.scope_set import library_hit, marked, searched_scopes
from knowledge.core.scope_summary import ScopeSummary, summary_state
from knowledge.core.source import SYNONYMS_FILE
from knowledge.ranking.analysis import keyword_terms
from knowledge.ranking.fusion import Fused, keyword_only
from knowledge.ranking.headings import DEFAULT_HEADINGS_WEIGHT, check_headings_weight, heading_terms
from knowledge.ranking.origin_weights import is_lesson
from knowledge.ranking.page_signal import (
    PAGE_WEIGHT,
    PageRow,
    PageScores,
    check_page_weight,
    with_pages,
)
from knowledge.ranking.relevance import Judged, QueryWeights, calibration, judge, query_weights
from knowledge.ranking.synonym_expansion import QueryTerms, compiled, expand
from knowledge.ranking.weighted_page import Page, weighted_page
from knowledge.stores.memory_pages import chunk_scores, document_of, page_scores
from knowledge.stores.memory_snapshots import (
    ChunkKey,
    ChunkRecord,
    DocumentRecord,
    Snapshot,
    apply_changes,
    empty_snapshot,
    latest_problems,
    listed_document,
)
from knowledge.stores.protocol import DocumentHeader, EmbeddedChunk, StoredDocument

__all__ = ["MemoryKnowledgeStore"]


_MODES = frozenset({SearchMode.KEYWORD})


class _MemoryWriteSession:
    """Collects one scope's writes; ``__exit__`` publishes them (or drops them on error)."""

    def __init__(self, store: MemoryKnowledgeStore, scope: KnowledgeScope, replace: bool) -> None:
        self._store = store
        self._scope = scope
        self._replace = replace
        self._changes: dict[str, DocumentRecord | None] = {}
        self._problems: dict[str, tuple[int, str] | None] = {}
        self._unread: Mapping[str, int] | None = None
        self._synonyms: tuple[str | None] | None = None
        self._base: Snapshot | None = None
        self._replaced: Mapping[str, DocumentRecord] = {}
        self._done = False

    @property
    def failures(self) -> Sequence[FileProblem]:
        return ()

    def __enter__(self) -> _MemoryWriteSession:
        if self._base is not None or self._done:
            raise StoreError("a memory write session can be entered only once")
        if self._replace:  # what the scope held: a failed write keeps its document's
            previous = self._store._snapshot(self._scope)
            self._replaced = {} if previous is None else previous.documents
        self._base = self._store._begin(self._scope, self._replace)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        base = self._require_open()
        self._done = True
        # replace_scope: a document whose latest attempt is a problem keeps the indexed
        # version it had (a failed write never removes what was searchable before).
        for path, problem in self._problems.items():
            if problem is not None and path not in self._changes and path in self._replaced:
                self._changes[path] = self._replaced[path]
        snapshot = (
            None
            if exc_type is not None
            else apply_changes(
                base, self._changes, _now(), self._problems, self._unread, synonyms=self._synonyms
            )
        )
        self._store._end(self._scope, snapshot)

    def _require_open(self) -> Snapshot:
        if self._base is None or self._done:
            raise StoreError("memory write session used outside its 'with' block")
        return self._base

    def _current(self, path: str) -> DocumentRecord | None:
        if path in self._changes:
            return self._changes[path]
        return self._require_open().documents.get(path)

    def put_document(self, header: DocumentHeader, chunks: Iterable[EmbeddedChunk]) -> int:
        self._require_open()
        key = self._scope.key
        # Built in full before anything changes: if the stream fails, the session is untouched.
        page = PageRow()  # the page row (knowledge.ranking.page_signal)
        records = tuple(
            ChunkRecord(
                key=(header.path, item.chunk.chunk_index, key),
                chunk=item.chunk,
                term_counts=self._store._term_counts(item.chunk, page),
            )
            for item in chunks
        )
        stored = StoredDocument(header.path, header.content_hash, header.version, len(records))
        kind, origin = header.metadata.get(FORMAT), header.metadata.get(ORIGIN)
        self._changes[header.path] = DocumentRecord(
            stored,
            records,
            indexed_at=header.indexed_at,
            format=kind if isinstance(kind, str) else None,
            size=header.size,
            origin=origin if isinstance(origin, str) else None,
            page_terms=dict(Counter(page.terms)),
        )
        self._problems[header.path] = None
        return len(records)

    def delete_document(self, path: str) -> bool:
        self._require_open()
        self._problems[path] = None
        if self._current(path) is None:
            return False
        self._changes[path] = None
        return True

    def record_problem(self, path: str, reason: str) -> None:
        """Published with the session; the indexed version of ``path`` stays as it is."""
        self._require_open()
        self._problems[path] = (self._store._next_problem(), reason)

    def record_unread(self, counts: Mapping[str, int]) -> None:
        """Published with the session."""
        self._require_open()
        self._unread = dict(counts)

    def put_synonyms(self, text: str | None) -> None:
        """Published with the session; clears the synonyms file's problem."""
        self._require_open()
        self._synonyms = (text,)
        self._problems[SYNONYMS_FILE] = None

    def stored_vectors(self, path: str) -> Mapping[str, Sequence[float]]:
        """Always empty: this store keeps no vectors (keyword only), so nothing to reuse."""
        self._require_open()
        return {}


def _now() -> datetime:
    return datetime.now(UTC)


def _relevance_weights(terms: QueryTerms, searched: Sequence[Snapshot]) -> QueryWeights:
    """The absolute scores' term weights over every searched snapshot
    (``knowledge.ranking.relevance``)."""
    chunk_total = sum(len(s.chunks) for s in searched)
    df = {t: sum(len(s.postings.get(t, ())) for s in searched) for t in terms.typed}
    return query_weights(terms, df, chunk_total)


def _facts(records: Mapping[ChunkKey, ChunkRecord], key: ChunkKey) -> tuple[object, bool]:
    """A candidate's origin and whether it is a lesson card (``ranking.origin_weights``)."""
    metadata = records[key].chunk.metadata
    return metadata.get(ORIGIN), is_lesson(metadata)


def _judge(
    mode: SearchMode,
    weights: QueryWeights,
    records: Mapping[ChunkKey, ChunkRecord],
    candidates: list[Fused[ChunkKey]],
) -> Judged[ChunkKey]:
    """The candidates' absolute scores from the terms their chunks hold."""
    terms_of = {item.key: records[item.key].term_counts.keys() for item in candidates}
    return judge(mode, weights, calibration(None), candidates, terms_of=terms_of)


def _results(
    page: Page[ChunkKey],
    records: Mapping[ChunkKey, ChunkRecord],
    scope: KnowledgeScope,
    query: SearchQuery,
) -> list[SearchResult]:
    """The page's chosen chunks as results, a shared library's marked as its."""
    explained = page.explanations()
    results = []
    for item in page.chosen:
        chunk = records[item.key].chunk
        agent, _, context = item.key[2].partition("/")
        library = library_hit(scope, query.shared_libraries, agent, context)
        results.append(
            SearchResult(
                document_path=chunk.document_path,
                chunk_index=chunk.chunk_index,
                content=chunk.content,
                score=page.score(item.key),
                rank_score=item.score,
                keyword_score=item.keyword_score,
                vector_score=None,
                metadata=marked(chunk.metadata, library),
                matching_chunks=page.counts.get(item.key),
                extra=item.key in page.extras,
                explanation=explained(item.key),
            )
        )
    return results


class MemoryKnowledgeStore:
    """Keyword-only ``KnowledgeStore`` held in memory (module docstring).

    Keyword-only: its ``embedder`` is ``None``. Everything is lost on ``close()`` or
    when the process ends.
    """

    def __init__(
        self,
        *,
        headings_weight: float = DEFAULT_HEADINGS_WEIGHT,
        page_weight: float = PAGE_WEIGHT,
    ) -> None:
        self._headings_weight = check_headings_weight(headings_weight)
        self._page_weight = check_page_weight(page_weight)
        self._lock = threading.Lock()
        self._snapshots: dict[str, Snapshot] = {}
        self._writers: dict[str, threading.Lock] = {}
        self._open_sessions: Counter[str] = Counter()
        self._problem_sequence = itertools.count()
        self._closed = False

    @property
    def name(self) -> str:
        return "memory"

    @property
    def embedder(self) -> None:
        """Keyword-only: the pipeline embeds nothing for this store."""
        return None

    def _term_counts(self, chunk: DocumentChunk, page: PageRow) -> dict[str, float]:
        """A chunk's term frequencies: its text's terms, plus its title and heading terms
        (``knowledge.ranking.headings``) counted ``headings_weight`` each; its text's terms
        are added to ``page``, its document's page row."""
        terms = keyword_terms(chunk.content)
        page.add(terms)
        counts: dict[str, float] = dict(Counter(terms))
        if self._headings_weight > 0:
            for term in heading_terms(chunk.metadata):
                counts[term] = counts.get(term, 0.0) + self._headings_weight
        return counts

    @property
    def supported_modes(self) -> frozenset[SearchMode]:
        return _MODES

    @property
    def default_mode(self) -> SearchMode:
        return SearchMode.KEYWORD

    # --- IndexWriter -----------------------------------------------------------------------

    def _snapshot(self, scope: KnowledgeScope) -> Snapshot | None:
        with self._lock:
            self._check_open()
            return self._snapshots.get(scope.key)

    def stored_documents(self, scope: KnowledgeScope) -> dict[str, StoredDocument]:
        snapshot = self._snapshot(scope)
        if snapshot is None:
            return {}
        return {path: record.stored for path, record in snapshot.documents.items()}

    def stored_document(self, scope: KnowledgeScope, path: str) -> StoredDocument | None:
        snapshot = self._snapshot(scope)
        record = None if snapshot is None else snapshot.documents.get(path)
        return None if record is None else record.stored

    def problem_paths(self, scope: KnowledgeScope) -> set[str]:
        snapshot = self._snapshot(scope)
        return set() if snapshot is None else set(snapshot.problems)

    def write_session(
        self, scope: KnowledgeScope, *, replace_scope: bool = False
    ) -> _MemoryWriteSession:
        """A batch of writes to ``scope``, published atomically when its ``with`` block ends
        without an exception; ``replace_scope`` starts from an empty scope, keeping only
        the indexed version of a document whose problem the session records."""
        return _MemoryWriteSession(self, scope, replace_scope)

    def _begin(self, scope: KnowledgeScope, replace: bool) -> Snapshot:
        with self._lock:
            self._check_open()
            writer = self._writers.setdefault(scope.key, threading.Lock())
            self._open_sessions[scope.key] += 1
        # Outside the store lock: waiting for another writer of this scope blocks nobody else.
        writer.acquire()
        with self._lock:
            current = self._snapshots.get(scope.key)
        if current is None:
            return empty_snapshot(scope)
        if replace:  # the synonyms are the scope's config, not documents: they stay
            return dataclasses.replace(empty_snapshot(scope), synonyms=current.synonyms)
        return current

    def _next_problem(self) -> int:
        with self._lock:
            return next(self._problem_sequence)

    def _end(self, scope: KnowledgeScope, snapshot: Snapshot | None) -> None:
        with self._lock:
            if snapshot is not None and not self._closed:
                self._snapshots[scope.key] = snapshot
            self._open_sessions[scope.key] -= 1
            if self._open_sessions[scope.key] <= 0:
                del self._open_sessions[scope.key]
            writer = self._writers[scope.key]
        writer.release()

    # --- search and status -----------------------------------------------------------------

    def search(self, scope: KnowledgeScope, query: SearchQuery) -> list[SearchResult]:
        """TF-IDF keyword search in the scope (or the agent's every context with
        ``cross_context``) and the query's shared libraries (``knowledge.core.scope_set``), in
        one ranking. Only keyword mode; no match is ``[]``."""
        mode = query.mode or SearchMode.KEYWORD
        if mode not in _MODES:
            raise UnsupportedModeError(mode.value, self.name, SearchMode.KEYWORD.value)
        own, shared, synonyms = self._searched_snapshots(scope, query)
        terms = expand(query.text, compiled(synonyms))  # the scope's own synonyms
        if not terms.weights or not (own or shared):
            return []
        records, keyword = self._keyword_side(own, shared, terms, query)
        combined = keyword.combined()
        relevance_weights = _relevance_weights(terms, [*own, *shared])
        page = weighted_page(  # weights, page, extras, the trace (ranking.weighted_page)
            keyword_only(combined),
            functools.partial(_facts, records),
            query,
            document_of=document_of,
            judge=functools.partial(_judge, mode, relevance_weights, records),
            trace=lambda: {
                "store": self.name,
                "scope": f"{scope.agent}/*" if query.cross_context else scope.key,
                "mode": mode.value,
                "fusion": "keyword",
                "keyword": combined,
                "vector": None,
                "page": keyword,
                "synonyms": terms,
            },
        )
        return _results(page, records, scope, query)

    def _searched_snapshots(
        self, scope: KnowledgeScope, query: SearchQuery
    ) -> tuple[list[Snapshot], list[Snapshot], str | None]:
        """The published snapshots a search reads, taken together: the caller's own (the
        scope, or the agent's every context with ``cross_context``), those of the query's
        shared libraries, and the scope's synonyms."""
        searched = searched_scopes(scope, query.cross_context, query.shared_libraries)
        with self._lock:
            self._check_open()
            if query.cross_context:
                own = [s for s in self._snapshots.values() if s.scope.agent == scope.agent]
            else:
                one = self._snapshots.get(scope.key)
                own = [] if one is None else [one]
            shared = [
                self._snapshots[key]
                for key in (f"{agent}/{context}" for agent, context in searched[1:])
                if key in self._snapshots
            ]
            snapshot = self._snapshots.get(scope.key)
        return own, shared, None if snapshot is None else snapshot.synonyms

    def _keyword_side(
        self,
        own: Sequence[Snapshot],
        shared: Sequence[Snapshot],
        terms: QueryTerms,
        query: SearchQuery,
    ) -> tuple[dict[ChunkKey, ChunkRecord], PageScores[ChunkKey, tuple[str, str]]]:
        """The matching chunks' records and their keyword scores in two parts
        (``knowledge.ranking.page_signal``): the caller's snapshots over their statistics,
        each library over its own (``knowledge.core.scope_set.statistics_owner``),
        normalised once; the page rows over the same snapshots, for the same terms."""
        scores: dict[ChunkKey, float] = {}
        records: dict[ChunkKey, ChunkRecord] = {}
        pages: dict[tuple[str, str], float] = {}
        for snapshots in (own, *([library] for library in shared)):
            chunk_scores(snapshots, terms.weights, query, scores, records)
            page_scores(snapshots, terms.weights, {document_of(k) for k in scores}, pages)
        return records, with_pages(scores, pages, document_of, self._page_weight)

    def status(self, scope: KnowledgeScope) -> IndexStatus:
        """Counts of the published snapshot; ``INDEXING`` while a write session is open."""
        with self._lock:
            self._check_open()
            snapshot = self._snapshots.get(scope.key)
            indexing = self._open_sessions[scope.key] > 0
        documents = 0 if snapshot is None else len(snapshot.documents)
        chunks = 0 if snapshot is None else len(snapshot.chunks)
        if indexing:
            state = IndexState.INDEXING
        else:
            state = IndexState.READY if documents else IndexState.EMPTY
        problems = () if snapshot is None else latest_problems(snapshot.problems)
        return IndexStatus(
            document_count=documents,
            chunk_count=chunks,
            last_indexed_at=None if snapshot is None else snapshot.last_indexed_at,
            state=state,
            problems=problems,
            unread_files={} if snapshot is None else snapshot.unread,
        )

    def list_scopes(self) -> list[KnowledgeScope]:
        """Every scope with at least one document, sorted."""
        with self._lock:
            self._check_open()
            scopes = [snap.scope for snap in self._snapshots.values() if snap.documents]
        return sorted(scopes, key=lambda scope: (scope.agent, scope.context))

    def list_documents(
        self,
        scope: KnowledgeScope,
        *,
        limit: int = DEFAULT_DOCUMENTS_LIMIT,
        cursor: str | None = None,
    ) -> DocumentPage:
        """A page of the published snapshot's documents and problems, in path order."""
        validate_documents_limit(limit)
        after = decode_cursor(scope, cursor)
        snapshot = self._snapshot(scope)
        if snapshot is None:
            return DocumentPage(())
        paths = sorted(set(snapshot.documents) | set(snapshot.problems))
        start = 0 if after is None else bisect.bisect_right(paths, after)
        documents = [listed_document(snapshot, path) for path in paths[start : start + limit + 1]]
        return document_page(scope, documents, limit)

    def get_document(self, scope: KnowledgeScope, path: str) -> IndexedDocument | None:
        snapshot = self._snapshot(scope)
        if snapshot is None or (path not in snapshot.documents and path not in snapshot.problems):
            return None
        return listed_document(snapshot, path)

    def list_chunks(
        self,
        scope: KnowledgeScope,
        path: str,
        *,
        limit: int = DEFAULT_CHUNKS_LIMIT,
        cursor: str | None = None,
    ) -> ChunkPage | None:
        """A page of the published snapshot's chunks of ``path``, by chunk index."""
        validate_chunks_limit(limit)
        after = decode_chunk_cursor(scope, path, cursor)
        snapshot = self._snapshot(scope)
        record = None if snapshot is None else snapshot.documents.get(path)
        if record is None:
            return None
        chunks = sorted(
            (r.chunk for r in record.chunks if after is None or r.chunk.chunk_index > after),
            key=lambda chunk: chunk.chunk_index,
        )
        listed = [IndexedChunk(c.chunk_index, c.content, c.metadata) for c in chunks[: limit + 1]]
        return chunk_page(scope, path, listed, limit)

    def agent_scopes(self, agent: str) -> list[ScopeSummary]:
        """The published snapshots of ``agent``'s contexts with a document or a problem."""
        with self._lock:
            self._check_open()
            found = [
                (snap, self._open_sessions[key] > 0)
                for key, snap in self._snapshots.items()
                if snap.scope.agent == agent and (snap.documents or snap.problems)
            ]
        return [
            ScopeSummary(
                context=snap.scope.context,
                document_count=len(snap.documents),
                chunk_count=len(snap.chunks),
                problem_count=len(snap.problems),
                last_indexed_at=snap.last_indexed_at,
                state=summary_state(len(snap.documents), writing=writing),
            )
            for snap, writing in sorted(found, key=lambda pair: pair[0].scope.context)
        ]

    def close(self) -> None:
        """Drop every index. Idempotent; the chunker is not closed. Later calls raise
        ``StoreError``."""
        with self._lock:
            self._closed = True
            self._snapshots.clear()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the memory store is closed")
