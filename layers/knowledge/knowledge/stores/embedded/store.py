"""``EmbeddedKnowledgeStore``: opening the file, searching it, and its status.

**Search.** The scope is always a SQL condition (``agent`` and ``context``, or ``agent``
only with ``cross_context``), and so is the search ``filter`` (``filter_sql``). File
patterns and metadata filters are then applied to the ranked candidates
(``knowledge.core.path_filters``: filter first, then normalise among what is left),
until enough candidates pass: ``fusion.candidate_count(offset + max_results)`` for one
mode (read again at the deepest page's depth when the per-document cap leaves the page
short, unless for a keyword page the chunks that read adds could not change it:
``ranking.deeper_read_same``, those chunks bounded without reading them where the scope
allows, ``deeper_bound``; an empty keyword page is read again only if some chunk holds
enough of the query to answer, ``ranking.answering_term_sets``),
``fusion.HYBRID_CANDIDATES`` per side for hybrid (a fixed
depth: every page is a slice of one order). Keyword mode is ``fusion.keyword_only`` over
``keyword_index``; vector mode ``fusion.vector_only`` over ``vector_search`` above the
relevance floor (``fusion.above_floor``); hybrid ``fusion.fuse_weighted`` with the
store's weights (default: the embedder's, ``fusion.hybrid_weights``) or
``fusion.fuse_rrf`` with ``fusion="rrf"``; then ``ranking.weighted_page`` (origin and
lesson weights, then the per-document cap or ``group_by``, ``offset``, ``max_results``,
lesson extras), the absolute scores read for the page's chunks only when they say the
search answers (``ranking.scores_read``); a keyword search no chunk could answer
(``ranking.may_answer``) reads no candidate. The query is embedded once per search, only
in vector and hybrid modes, and before the read snapshot is taken. A query whose
embedding is the zero vector finds nothing on the vector side. Ties rank by (path, chunk
index, context, agent). A query's shared libraries (``knowledge.core.scope_set``) are
part of the same scope condition, each side's candidates of every scope ranked together.

**Embedder identity.** The first chunk written to a file records what made its
vectors: the embedder's name and dimension, or "no embedder (keyword only)". A store
opened with a different embedder is refused with ``EmbeddingMismatchError`` (a store
opened without an embedder may still run keyword searches on any file), and so is a
write that would mix vectors of another kind into the file. A file without chunks
has no identity yet. Likewise the keyword analysis (``knowledge.ranking.analysis.ANALYSIS``): a file
whose chunks were analysed otherwise is refused with ``AnalysisMismatchError``
(``schema.check_analysis``).

**Concurrency**: one read transaction per search, batched write transactions, a pool of
connections (``connections``).

**Resources.** When a write session ends, the caches of what it replaced are dropped,
and the file is maintained (``maintenance``): free pages are cut off it in short steps
once they are many, a long WAL is cut back, and freed heap is handed back to the system.
``maintain()`` does all of it at once.
"""

from __future__ import annotations

import functools
import logging
import os
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final

from knowledge.core.chunk_listing import (
    DEFAULT_CHUNKS_LIMIT,
    ChunkPage,
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
from knowledge.core.errors import (
    ConfigurationError,
    EmbeddingMismatchError,
    StoreError,
    UnsupportedModeError,
    ValidationError,
)
from knowledge.core.model import IndexStatus, SearchMode, SearchQuery, SearchResult
from knowledge.core.rank_weights import NEUTRAL
from knowledge.core.scope import KnowledgeScope
from knowledge.core.scope_summary import ScopeSummary
from knowledge.ranking.fusion import (
    DEFAULT_RRF_K,
    HYBRID_CANDIDATES,
    Fused,
    above_floor,
    candidate_count,
    fuse_rrf,
    hybrid_weights,
)
from knowledge.ranking.fusion import relevance_floor as fusion_floor
from knowledge.ranking.headings import DEFAULT_HEADINGS_WEIGHT, check_headings_weight
from knowledge.ranking.page_signal import PAGE_WEIGHT
from knowledge.ranking.relevance import (
    Calibration,
    Judged,
    QueryWeights,
    judge,
    query_weights,
)
from knowledge.ranking.relevance import calibration as relevance_calibration
from knowledge.ranking.synonym_expansion import compiled, expand
from knowledge.ranking.vector_side import searched_mode
from knowledge.ranking.weighted_page import weighted_page
from knowledge.stores.protocol import StoredDocument

from .agent_scopes import read_agent_scopes
from .candidates import Candidate, ChunkKey, candidate_facts, chunk_rows
from .chunk_listing import read_chunks
from .connections import MEMORY, ConnectionPool, damage_advice, is_damage
from .deeper_bound import unread_added
from .keyword_index import DEFAULT_ISOLATION, ISOLATION_MODES, KeywordIndex, scope_synonyms
from .listing import read_document, read_documents, read_scopes
from .maintenance import Maintenance, MaintenanceReport
from .opening import mismatch_error, open_file
from .page_index import page_table
from .ranked_rows import SearchReads
from .ranking import (
    DEEPEST,
    Fusion,
    answering_term_sets,
    deeper_read_same,
    document_of,
    judged_by_terms,
    may_answer,
    read_deeper,
    scores_read,
    search_results,
    unit_query_vector,
)
from .schema import Identity, generation, identity_of
from .scope_sources import read_scope_source, write_scope_source
from .status import damaged_status, scope_status
from .term_statistics import TermStatistics
from .vector_search import DEFAULT_VECTOR_CACHE_BYTES, VectorCache, vector_candidates
from .write_session import (
    DEFAULT_BATCH_DOCUMENTS,
    DEFAULT_BATCH_SECONDS,
    EmbeddedWriteSession,
    SessionStore,
    check_batches,
    require_count,
)

if TYPE_CHECKING:
    from knowledge.embedding.base import EmbeddingClient

__all__ = ["FUSION_METHODS", "EmbeddedKnowledgeStore"]

FUSION_METHODS: Final = ("weighted", "rrf")
"""Hybrid fusion: the weighted linear default ("Score contract") or reciprocal rank fusion."""

_STORE_NAME: Final = "embedded"


logger = logging.getLogger(__name__)


class EmbeddedKnowledgeStore:
    """``KnowledgeStore`` in one SQLite file (package docstring); the local default.

    ``path`` is the file (its folder is created) or ``":memory:"``. Without an
    ``embedder`` only keyword search is supported. ``default_mode`` defaults to hybrid
    with an embedder, keyword without. ``fusion`` is ``"weighted"`` (``keyword_weight``,
    ``vector_weight``) or ``"rrf"`` (``rrf_k``). ``isolation`` is ``"shared"`` (keyword
    statistics over the whole file) or ``"agent"`` (per agent: no agent's scores depend
    on another's documents; ``keyword_index``). Writes commit every ``batch_documents``
    documents or ``batch_seconds`` seconds (``write_session``). ``relevance_floor`` (unit
    score) drops weaker vector candidates; ``None`` takes the embedder's calibrated floor
    (``fusion.relevance_floor``). ``headings_weight`` is the BM25 weight of the title and
    heading terms next to the text's (``knowledge.ranking.headings``), ``page_weight``
    that of a page's own score next to its chunk's (``knowledge.ranking.page_signal``).

    Raises ``EmbeddingMismatchError`` when the file was built with another embedder,
    ``AnalysisMismatchError`` when its keyword terms were made by another analysis,
    ``ConfigurationError`` when the file is not a usable index (another database, a
    damaged file: the message names it and says that deleting it rebuilds the index),
    ``ValidationError`` for bad options. The embedder is the caller's:
    ``close()`` never closes them.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        embedder: EmbeddingClient | None = None,
        *,
        default_mode: SearchMode | str | None = None,
        keyword_weight: float | None = None,
        vector_weight: float | None = None,
        fusion: str = "weighted",
        rrf_k: int = DEFAULT_RRF_K,
        vector_cache_bytes: int = DEFAULT_VECTOR_CACHE_BYTES,
        isolation: str = DEFAULT_ISOLATION,
        batch_documents: int = DEFAULT_BATCH_DOCUMENTS,
        batch_seconds: float = DEFAULT_BATCH_SECONDS,
        relevance_floor: float | None = None,
        headings_weight: float = DEFAULT_HEADINGS_WEIGHT,
        page_weight: float = PAGE_WEIGHT,
    ) -> None:
        target = os.fspath(path)
        if not isinstance(target, str) or not target:
            raise ValidationError("path", "must be a file path or ':memory:'")
        if fusion not in FUSION_METHODS:
            raise ValidationError(
                "fusion", f"{fusion!r} is not one of: {', '.join(FUSION_METHODS)}"
            )
        if isolation not in ISOLATION_MODES:
            raise ValidationError(
                "isolation", f"{isolation!r} is not one of: {', '.join(ISOLATION_MODES)}"
            )
        # Validated now; resolved per query (fusion.hybrid_weights: the embedder's default
        # where none are given, which may depend on the query's script).
        hybrid_weights(None if embedder is None else embedder.name, keyword_weight, vector_weight)
        fuse_rrf([], [], rrf_k)  # validates rrf_k exactly as every search will, but now
        require_count("vector_cache_bytes", vector_cache_bytes, minimum=0)
        weight = check_headings_weight(headings_weight)
        check_batches(batch_documents, batch_seconds)
        with_vectors = embedder is not None
        self._modes = frozenset(SearchMode) if with_vectors else frozenset({SearchMode.KEYWORD})
        self._default_mode = self._supported(
            SearchMode.parse(default_mode, "default_mode")
            if default_mode is not None
            else (SearchMode.HYBRID if with_vectors else SearchMode.KEYWORD)
        )
        self._embedder = embedder
        self._identity = identity_of(embedder)
        # Vector candidates below it are none (fusion.above_floor); None: the embedder's.
        if relevance_floor is None:
            self._floor = fusion_floor(embedder.name) if embedder is not None else 0.0
        else:
            above_floor({}, relevance_floor)  # validates it, as every search would
            self._floor = float(relevance_floor)
        self._fusion = Fusion(
            fusion,
            rrf_k,
            self._floor,
            keyword_weight,
            vector_weight,
            None if embedder is None else embedder.name,
        )
        self._display = target
        self._keywords = KeywordIndex(isolation, weight, page_weight)
        self._batch_documents = batch_documents
        self._batch_seconds = float(batch_seconds)
        self._writing: Counter[KnowledgeScope] = Counter()
        self._writing_lock = threading.Lock()
        self._damage: str | None = None
        # Not for ":memory:": there a read inside a session's thread sees uncommitted rows.
        self._vectors = VectorCache(0 if target == MEMORY else vector_cache_bytes)
        self._statistics = TermStatistics()
        if target != MEMORY:
            try:
                Path(target).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigurationError(
                    f"cannot create the folder of the index file {target}: {exc.strerror}"
                ) from exc
        try:
            self._pool = ConnectionPool(target)
        except StoreError as exc:
            raise ConfigurationError(str(exc)) from exc
        self._maintenance = Maintenance(self._pool, self._any_writing)
        try:
            open_file(
                self._pool,
                target,
                self._keywords,
                self._identity,
                with_vectors=embedder is not None,
            )
        except StoreError as exc:
            self._pool.close()
            raise ConfigurationError(str(exc)) from exc
        except BaseException:
            self._pool.close()
            raise

    # --- KnowledgeStore --------------------------------------------------------------

    @property
    def name(self) -> str:
        return _STORE_NAME

    @property
    def embedder(self) -> EmbeddingClient | None:
        """The embedder the file's vectors were made with (``None``: keyword-only)."""
        return self._embedder

    @property
    def supported_modes(self) -> frozenset[SearchMode]:
        return self._modes

    @property
    def default_mode(self) -> SearchMode:
        return self._default_mode

    @property
    def path(self) -> str:
        """The index file as given (``":memory:"`` for an in-memory store)."""
        return self._display

    @property
    def isolation(self) -> str:
        """``"shared"`` or ``"agent"``: whose documents keyword statistics are taken over."""
        return self._keywords.isolation

    def search(self, scope: KnowledgeScope, query: SearchQuery) -> list[SearchResult]:
        """Rank the scope's chunks for ``query`` (module docstring); ``[]`` when none match."""
        # Keyword when the embedder cannot read the query (ranking.vector_side).
        searched = searched_mode(
            self._supported(query.mode or self._default_mode),
            None if self._embedder is None else self._embedder.name,
            query.text,
        )
        mode = searched.mode
        keyword_side = mode is not SearchMode.VECTOR
        query_vector = (
            unit_query_vector(self._embedder, self._identity, query.text)
            if self._embedder is not None and mode is not SearchMode.KEYWORD
            else None
        )
        # Enough candidates for the page after the per-document cap (fusion.select); hybrid
        # fuses a fixed depth, so that every page is a slice of one order.
        # A grouped search reads the deepest depth for every page (ranking.grouping).
        limit = (
            HYBRID_CANDIDATES
            if mode is SearchMode.HYBRID
            else DEEPEST
            if query.group_by is not None
            else candidate_count(query.offset + query.max_results)
        )
        with self._reading() as conn:
            self._keywords.check(conn, self._display)
            # The scope's own synonyms (ranking.synonym_expansion), never another's.
            terms = expand(query.text, compiled(scope_synonyms(conn, scope)))
            # The absolute scores' term weights, over the searched scopes (ranking.relevance).
            chunk_total, frequencies = self._keywords.scope_statistics(
                conn, scope, query, terms.typed, self._statistics
            )
            relevance_weights = query_weights(terms, frequencies, chunk_total)
            scale = relevance_calibration(None if self._embedder is None else self._embedder.name)
            if mode is SearchMode.KEYWORD and not may_answer(
                relevance_weights, scale, query, frequencies
            ):
                return []  # no chunk holds enough of the query (ranking.may_answer)
            reads = SearchReads()  # a deeper read reuses the first's reads (ranked_rows)
            while True:
                keyword: list[Candidate] = []
                vector: list[Candidate] = []
                pages = None  # the keyword side's two parts (ranking.page_signal)
                if keyword_side:
                    keyword, pages = self._keywords.side(
                        conn, scope, query, terms, limit, reads=reads
                    )
                if query_vector is not None:
                    vector = vector_candidates(
                        conn,
                        self._vectors,
                        scope,
                        query,
                        query_vector=query_vector,
                        limit=limit,
                        display=self._display,
                    )
                facts = candidate_facts(
                    conn, keyword, vector, weights=query.weights, known=reads.facts
                )
                page = weighted_page(  # weights, page, extras (ranking.weighted_page)
                    self._fusion.fuse(mode, keyword, vector),
                    facts,
                    query,
                    document_of=document_of,
                    judge=functools.partial(
                        self._judge,
                        conn,
                        mode=mode,
                        weights=relevance_weights,
                        scale=scale,
                        sides=(keyword, vector),
                        reads=reads,
                        page_of=(query, facts),
                    ),
                    trace=searched.tracing(
                        functools.partial(
                            self._fusion.trace,
                            scope,
                            query,
                            mode,
                            (keyword, vector),
                            pages=pages,
                            synonyms=terms if keyword_side else None,
                        )
                    ),
                )
                deeper = read_deeper(
                    mode,
                    query,
                    limit=limit,
                    chosen=page.page_size,
                    fused=page.ranked,
                    keyword=keyword,
                    vector=vector,
                )
                if not deeper:
                    break
                if mode is SearchMode.KEYWORD and pages is not None:
                    # An empty page stays empty if no chunk holds enough of the query.
                    if not page.chosen:
                        sets = answering_term_sets(relevance_weights, scale, query, frequencies)
                        if sets is not None and not self._keywords.holds_any(
                            conn, scope, query, sets
                        ):
                            break
                    # Read deeper only if the chunks it adds could change the page: first
                    # bounded without reading them (deeper_bound), else read.
                    bounded = unread_added(conn, scope, query, page, pages)
                    if bounded is not None and deeper_read_same(page, pages, *bounded, query):
                        break
                    more = self._keywords.candidates(
                        conn, scope, query, terms, DEEPEST, reads=reads
                    )
                    read = {c.key for c in keyword}
                    added = [c for c in more if c.key not in read]
                    if len(more) - len(added) == len(read) and deeper_read_same(
                        page,
                        pages,
                        added,
                        candidate_facts(conn, more, weights=query.weights, known=reads.facts),
                        query,
                    ):
                        break
                limit = DEEPEST
            rowids = {c.key: c.rowid for c in (*keyword, *vector)}
            rows = chunk_rows(conn, [rowids[f.key] for f in page.chosen])
        return search_results(page, rowids, rows, scope, query.shared_libraries)

    def _judge(
        self,
        conn: sqlite3.Connection,
        candidates: list[Fused[ChunkKey]],
        *,
        mode: SearchMode,
        weights: QueryWeights,
        scale: Calibration,
        sides: tuple[list[Candidate], list[Candidate]],
        reads: SearchReads | None = None,
        page_of: tuple[SearchQuery, Callable[[ChunkKey], tuple[object, bool]]] | None = None,
    ) -> Judged[ChunkKey]:
        """The candidates' absolute scores (``ranking.relevance``): their chunks' terms (the
        query's only: what the coverage asks about), and the vector side's unit scores
        before its floor. Without vector scores a candidate's evidence is its held terms
        alone, so each set of terms held is judged once (``judged_by_terms``), and with
        ``page_of`` (the search's query and its candidates' facts) only the page's
        candidates (``ranking.scores_read``) if their best reaches the evidence floor:
        no other candidate's score is read then, nor its chunk's terms."""
        keyword, vector = sides
        by_key = {c.key: c for c in (*keyword, *vector)}

        def terms_of(items: list[Fused[ChunkKey]]) -> dict[ChunkKey, AbstractSet[str]]:
            return self._keywords.chunk_terms(
                conn, [by_key[item.key] for item in items], wanted=weights.terms, reads=reads
            )

        if not vector:
            if page_of is not None:
                query, facts = page_of
                # Lesson cards may be appended only if the weights are not inert (``weigh``
                # then read every candidate's facts).
                lessons = not (query.weights or NEUTRAL).inert and any(
                    facts(item.key)[1] for item in candidates
                )
                page = scores_read(candidates, query, lessons=lessons)
                if page:
                    judged = judged_by_terms(mode, weights, scale, page, terms_of(page))
                    if judged.passing(page, query):
                        return judged
            return judged_by_terms(mode, weights, scale, candidates, terms_of(candidates))
        units = {c.key: c.score for c in vector}
        return judge(mode, weights, scale, candidates, terms_of=terms_of(candidates), vector=units)

    def list_scopes(self) -> list[KnowledgeScope]:
        """Every scope with at least one document or problem, sorted (index-only queries)."""
        with self._reading() as conn:
            return read_scopes(conn)

    def list_documents(
        self,
        scope: KnowledgeScope,
        *,
        limit: int = DEFAULT_DOCUMENTS_LIMIT,
        cursor: str | None = None,
    ) -> DocumentPage:
        """A page of exactly this scope's documents and problems, by path (``listing``)."""
        validate_documents_limit(limit)
        after = decode_cursor(scope, cursor)
        with self._reading() as conn:
            documents = read_documents(conn, scope, after, limit + 1)
        return document_page(scope, documents, limit)

    def get_document(self, scope: KnowledgeScope, path: str) -> IndexedDocument | None:
        with self._reading() as conn:
            return read_document(conn, scope, path)

    def list_chunks(
        self,
        scope: KnowledgeScope,
        path: str,
        *,
        limit: int = DEFAULT_CHUNKS_LIMIT,
        cursor: str | None = None,
    ) -> ChunkPage | None:
        """A page of the chunks of one document of exactly this scope (``chunk_listing``)."""
        validate_chunks_limit(limit)
        after = decode_chunk_cursor(scope, path, cursor)
        with self._reading() as conn:
            chunks = read_chunks(conn, scope, path, after, limit + 1)
        return None if chunks is None else chunk_page(scope, path, chunks, limit)

    def agent_scopes(self, agent: str) -> list[ScopeSummary]:
        """Every context of ``agent`` with its counts and state (``agent_scopes``)."""
        with self._writing_lock:
            writing = {s.context for s, n in self._writing.items() if s.agent == agent and n > 0}
        with self._reading() as conn:
            return read_agent_scopes(conn, agent, writing)

    def status(self, scope: KnowledgeScope) -> IndexStatus:
        """Counts, last indexed time, state and problems of exactly this scope (``status``):
        INDEXING while this process has a write session open on it, ERROR once the file
        was found damaged."""
        with self._writing_lock:
            writing = self._writing[scope] > 0
        counted: IndexStatus | None = None
        try:
            with self._reading() as conn:
                counted = scope_status(conn, scope, writing=writing)
        except StoreError:
            if self._damage is None:
                raise
        if self._damage is not None:
            # The file's name only: the status is an HTTP answer, the folder is the server's.
            return damaged_status(damage_advice(self._pool.name), counted)
        assert counted is not None
        return counted

    # --- ScopeSources ------------------------------------------------------------------

    def scope_source(self, scope: KnowledgeScope) -> str | None:
        """Where ``scope`` was last indexed from (``knowledge.stores.protocol.ScopeSources``)."""
        with self._reading() as conn:
            return read_scope_source(conn, scope)

    def set_scope_source(self, scope: KnowledgeScope, source: str) -> None:
        """Record where ``scope`` is indexed from (a row of ``meta``)."""
        write_scope_source(self._pool, self._display, scope, source)

    def maintain(self) -> MaintenanceReport:
        """Give back what large writes left (class docstring): drop cached vectors and
        counts no search can use, cut every free page off the file, cut the WAL to
        nothing, hand freed heap back. Cheap when there is nothing to do; a server can
        call it when idle (every write session's end already runs it when needed)."""
        with self._reading() as conn:
            current = {agent: generation(conn, agent) for agent in self._vectors.agents()}
        for agent, value in current.items():
            self._vectors.drop_stale(agent, value)
            self._statistics.drop_stale(agent, value)
        return self._maintenance.run()

    def maintenance_due(self) -> bool:
        """Whether ``maintain`` has work the write sessions' ends left undone (a session
        still open, a search holding the WAL: ``Maintenance.due``). Cheap: a server asks
        it whenever it is idle."""
        return self._maintenance.due()

    def close(self) -> None:
        """Release the file. Idempotent; the embedder is left alone."""
        self._pool.close()
        self._vectors.clear()
        self._statistics.clear()

    def __repr__(self) -> str:
        return f"EmbeddedKnowledgeStore({self._display!r}, embedder={self._embedder!r})"

    # --- IndexWriter -----------------------------------------------------------------

    def stored_documents(self, scope: KnowledgeScope) -> dict[str, StoredDocument]:
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT path, content_hash, version, chunk_count FROM documents"
                " WHERE agent = ? AND context = ? ORDER BY path",
                (scope.agent, scope.context),
            ).fetchall()
        return {row[0]: StoredDocument(*row) for row in rows}

    def problem_paths(self, scope: KnowledgeScope) -> set[str]:
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT path FROM problems WHERE agent = ? AND context = ?",
                (scope.agent, scope.context),
            ).fetchall()
        return {row[0] for row in rows}

    def stored_document(self, scope: KnowledgeScope, path: str) -> StoredDocument | None:
        with self._reading() as conn:
            row = conn.execute(
                "SELECT path, content_hash, version, chunk_count FROM documents"
                " WHERE agent = ? AND context = ? AND path = ?",
                (scope.agent, scope.context, path),
            ).fetchone()
        return None if row is None else StoredDocument(*row)

    def write_session(
        self, scope: KnowledgeScope, *, replace_scope: bool = False
    ) -> EmbeddedWriteSession:
        """A write batch on ``scope`` in batched transactions (``write_session``)."""
        return EmbeddedWriteSession(
            SessionStore(
                path=self._display,
                pool=self._pool,
                keywords=self._keywords,
                identity=self._identity,
                with_vectors=self._embedder is not None,
                mismatch=self._mismatch,
                damaged=self._damaged,
                started=self._session_started,
                ended=self._session_ended,
            ),
            scope,
            replace_scope=replace_scope,
            batch_documents=self._batch_documents,
            batch_seconds=self._batch_seconds,
        )

    # --- internals -------------------------------------------------------------------

    def _supported(self, mode: SearchMode) -> SearchMode:
        if mode not in self._modes:
            supported = ", ".join(m.value for m in SearchMode if m in self._modes)
            raise UnsupportedModeError(mode.value, f"{_STORE_NAME} (no embedder)", supported)
        return mode

    def _mismatch(self, recorded: Identity, wanted: Identity) -> EmbeddingMismatchError:
        return mismatch_error(self._display, recorded, wanted)

    def _damaged(self, exc: sqlite3.Error) -> None:
        """Remember that the file is damaged: from now on the status says ERROR."""
        if self._damage is None:
            logger.error("index %s is damaged: %s", self._display, exc)
        self._damage = str(exc)

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A connection inside one read transaction: a consistent snapshot of the file."""
        conn = self._pool.acquire()
        began = False
        try:
            # Already in a transaction only on ":memory:", inside this thread's write session.
            if not conn.in_transaction:
                conn.execute("BEGIN")
                began = True
            yield conn
        except sqlite3.Error as exc:
            if is_damage(exc):
                self._damaged(exc)
                raise StoreError(f"index {self._display}: {damage_advice(self._display)}") from exc
            raise StoreError(f"index {self._display}: {exc}") from exc
        finally:
            if began and conn.in_transaction:
                conn.execute("ROLLBACK")
            self._pool.release(conn)

    def _session_started(self, scope: KnowledgeScope) -> None:
        with self._writing_lock:
            self._writing[scope] += 1

    def _session_ended(self, scope: KnowledgeScope) -> None:
        with self._writing_lock:
            self._writing[scope] -= 1
            if self._writing[scope] <= 0:
                del self._writing[scope]
        self._after_write(scope)

    def _any_writing(self) -> bool:
        with self._writing_lock:
            return bool(self._writing)

    def _after_write(self, scope: KnowledgeScope) -> None:
        """Drop the agent's cached vectors and counts of the versions its write replaced,
        and maintain the file and the scope's keyword tables (``maintenance``). Never
        raises (it runs as the session ends, its writes committed or rolled back): what is
        left undone is done after the next write."""
        if self._display == MEMORY:
            return
        try:
            with self._reading() as conn:
                current = generation(conn, scope.agent)
                table = self._keywords.table(conn, scope.agent, scope.context, create=False)
            dropped = self._vectors.drop_stale(scope.agent, current)
            self._statistics.drop_stale(scope.agent, current)
            tables = () if table is None else (table, page_table(table))
            self._maintenance.after_write(tables, dropped)
        except (sqlite3.Error, StoreError, OSError) as exc:
            logger.warning("index %s: cannot tidy up after a write: %s", self._display, exc)
        except Exception:
            logger.exception("index %s: tidying up after a write failed", self._display)
