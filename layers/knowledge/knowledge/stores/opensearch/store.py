"""``OpenSearchKnowledgeStore``: the scope as term filters in one shared index (or, with
``index_per_agent``, in the agent's own index).

This module is the facade: it puts together the parts, each in its own module,

- ``connection``: the lazy client, retried calls, the search path's time budget, and
  the indexes (checked against the store, created when a write needs one);
- ``session``: the write session (a new generation beside the old, a conditional
  record, then the old generation removed: ``generations``; the requests sent by
  ``sender``, on Serverless by ``serverless``);
- ``bulk``: bulk sending (throttled items again, the background sender);
- ``search``: searches and the query embedding, inside the caller's deadline;
- ``queries``: every request body and response reader, pure functions;
- ``listing``: the documents listing's bodies and reader, pure functions.

Construction does no I/O; ``opensearchpy`` is imported on first use.
"""

# opensearchpy loads on first use, not at import (Lambda cold start)

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

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
from knowledge.core.filter_language import AllOf, AnyOf, FilterNode, Not
from knowledge.core.identity import document_id
from knowledge.core.model import (
    MAX_STATUS_PROBLEMS,
    FileProblem,
    IndexState,
    IndexStatus,
    SearchMode,
    SearchQuery,
    SearchResult,
)
from knowledge.core.scope import KnowledgeScope
from knowledge.core.scope_set import SHARED_AGENT
from knowledge.core.scope_summary import ScopeSummary
from knowledge.embedding.base import EmbeddingClient
from knowledge.ranking.analysis import keyword_terms
from knowledge.ranking.fusion import hybrid_weights
from knowledge.ranking.synonym_expansion import compiled, expand
from knowledge.stores.opensearch.client import RetryPolicy, refused_as_expensive
from knowledge.stores.opensearch.connection import Connection
from knowledge.stores.opensearch.indexes import Indexes
from knowledge.stores.opensearch.read import agent_scopes, answers, chunk_listing, listing, queries
from knowledge.stores.opensearch.read import search as searching
from knowledge.stores.opensearch.read.scope_size import ScopeSizes
from knowledge.stores.opensearch.settings import OpenSearchConfig
from knowledge.stores.opensearch.write import records
from knowledge.stores.opensearch.write.generations import record_states
from knowledge.stores.opensearch.write.session import OpenSearchWriteSession
from knowledge.stores.opensearch.write.synonym_records import SynonymCache
from knowledge.stores.protocol import StoredDocument

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

__all__ = ["OpenSearchKnowledgeStore", "OpenSearchWriteSession"]

_STORED_DOCUMENTS_PAGE = 500
_TOO_MANY_CLAUSES = re.compile(r"maxClauseCount|too_many_clauses|too_many_nested_clauses")
"""How OpenSearch (Lucene) says a query expands to more clauses than it accepts."""
_SCOPES_PAGE = 500
_PROBLEM_PATHS = 10_000
"""Problems read by ``problem_paths``, most recent first (one search: the node's
default ``max_result_window``); status lists the most recent ``MAX_STATUS_PROBLEMS``."""


_EXPENSIVE_HINT = (
    "which this deployment's OpenSearch domain refuses (its cluster setting "
    "search.allow_expensive_queries is false)"
)


def _filter_ops(node: FilterNode | None) -> set[str]:
    if node is None:
        return set()
    if isinstance(node, AllOf | AnyOf):
        return set().union(*(_filter_ops(child) for child in node.children))
    if isinstance(node, Not):
        return _filter_ops(node.child)
    return {node.op}


def _expensive_query_error(query: SearchQuery, refused: str) -> ValidationError:
    """The 400 for a search the domain refused as expensive (``refused``: the query kind
    the node named), naming the part of the request that needs that kind of query."""
    ops = _filter_ops(query.filter)
    if refused in ("wildcard", "regexp") and query.file_patterns and "contains" not in ops:
        return ValidationError(
            "file_patterns",
            f"file patterns need {refused} queries, {_EXPENSIVE_HINT}; search without "
            "file_patterns, or filter on document_path with eq/in",
        )
    needs = {
        "prefix": "'starts_with' needs a prefix query",
        "wildcard": "'contains' needs a wildcard query",
        "range": "an order comparison (gt, gte, lt, lte) on a metadata key or on "
        "document_path needs a range query on a keyword field",
    }.get(refused, f"this filter needs {refused} queries")
    return ValidationError(
        "filter",
        f"{needs}, {_EXPENSIVE_HINT}; use eq, ne, in or nin (order comparisons on indexed_at work)",
    )


class OpenSearchKnowledgeStore:
    """``KnowledgeStore`` on an OpenSearch index (a managed domain, Serverless, or a node).

    Without an ``embedder`` only keyword search is supported and ``config.default_mode``
    must be keyword. ``client`` injects an ``opensearchpy.OpenSearch`` (then ``close()``
    leaves it open); ``aws_session`` a ``boto3.Session`` for SigV4 and secrets; ``clock``
    the time (nanoseconds since the epoch) generation ids and their ages are read from.
    Raises ``ConfigurationError`` for settings that do not fit together; never does I/O.
    """

    def __init__(
        self,
        config: OpenSearchConfig,
        embedder: EmbeddingClient | None = None,
        *,
        client: OpenSearch | None = None,
        aws_session: Any = None,
        retry: RetryPolicy | None = None,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        if embedder is None and config.default_mode is not SearchMode.KEYWORD:
            raise ConfigurationError(
                f"opensearch default mode: '{config.default_mode.value}' needs an embedder; "
                "configure one or use the keyword mode"
            )
        if (
            embedder is not None
            and config.vector_dimensions is not None
            and config.vector_dimensions != embedder.dimensions
        ):
            raise EmbeddingMismatchError(
                f"opensearch vector dimensions: configured {config.vector_dimensions}, but the "
                f"embedder '{embedder.name}' produces {embedder.dimensions}"
            )
        self._config = config
        self._clock = clock  # nanoseconds since the epoch: generation ids, session ages
        self._embedder = embedder
        # Validated now (the configured hybrid weights, else the embedder's); resolved per
        # query in search (fusion.hybrid_weights).
        hybrid_weights(
            None if embedder is None else embedder.name,
            config.keyword_weight,
            config.vector_weight,
        )
        self._connection = Connection(
            config,
            client=client,
            aws_session=aws_session,
            retry=retry or RetryPolicy.from_config(config),
        )
        self._indexes = Indexes(
            self._connection,
            dimensions=None if embedder is None else embedder.dimensions,
            embedding_model=None if embedder is None else embedder.name,
        )
        self._scope_sizes = ScopeSizes()
        """Scopes' chunk counts, for ``ef_search`` (``read.scope_size``)."""
        self._lock = threading.Lock()
        self._synonyms = SynonymCache()
        self._open_sessions: Counter[str] = Counter()

    # --- identity ----------------------------------------------------------------------

    @property
    def name(self) -> str:
        return "opensearch"

    @property
    def embedder(self) -> EmbeddingClient | None:
        """The embedder of the index's vectors (``None``: keyword-only)."""
        return self._embedder

    @property
    def config(self) -> OpenSearchConfig:
        return self._config

    @property
    def supported_modes(self) -> frozenset[SearchMode]:
        if self._embedder is None:
            return frozenset({SearchMode.KEYWORD})
        return frozenset(SearchMode)

    @property
    def default_mode(self) -> SearchMode:
        return self._config.default_mode

    def index_name(self, scope: KnowledgeScope) -> str:
        """The index holding ``scope`` (``OpenSearchConfig.index_for``)."""
        return self._config.index_for(scope.agent, scope.context)

    # --- IndexWriter ---------------------------------------------------------------------

    def problem_paths(self, scope: KnowledgeScope) -> set[str]:
        """The paths of the scope's most recent ``_PROBLEM_PATHS`` problems (one search)."""
        index = self.index_name(scope)
        if not self._indexes.open(index, create=False):
            return set()
        found = self._connection.search(
            index, f"read the problems of {scope}", records.problems_body(scope, _PROBLEM_PATHS)
        )
        return {path for path, _ in records.parse_problems(found, _PROBLEM_PATHS)}

    def stored_documents(self, scope: KnowledgeScope) -> dict[str, StoredDocument]:
        """Every document of exactly this scope, by path, from a composite aggregation."""
        index = self.index_name(scope)
        if not self._indexes.open(index, create=False):
            return {}
        documents: dict[str, StoredDocument] = {}
        after: dict[str, Any] | None = None
        while True:
            body = queries.stored_documents_body(scope, _STORED_DOCUMENTS_PAGE, after)
            page, after = answers.parse_stored_documents(
                self._connection.search(index, f"list the documents of {scope}", body)
            )
            documents.update(page)
            if after is None or not page:
                return documents

    def stored_document(self, scope: KnowledgeScope, path: str) -> StoredDocument | None:
        """The document as searches show it, checked against its record read in real
        time (``records.as_of_record``): a search lags up to a refresh interval behind
        the writes, and an upsert decided on it ("unchanged", its ``Precondition``) must
        see what the node holds now. On Serverless (no record ids) the search alone."""
        index = self.index_name(scope)
        if not self._indexes.open(index, create=False):
            return None
        body = queries.stored_document_body(scope, path)
        searched = answers.parse_stored_document(
            self._connection.search(index, f"read document '{path}' of {scope}", body), path
        )
        if not self._config.client_ids:
            return searched
        record_id = document_id(scope, path)
        record = record_states(self._connection, index, [record_id]).get(record_id)
        return records.as_of_record(searched, record, path)

    def write_session(
        self, scope: KnowledgeScope, *, replace_scope: bool = False
    ) -> OpenSearchWriteSession:
        """A batch of writes to ``scope``. ``replace_scope`` (a reindex) removes, at the end,
        what the session did not write. Creates the index if it is missing."""
        index = self.index_name(scope)
        self._indexes.open(index, create=True)
        with self._lock:
            self._open_sessions[scope.key] += 1

        def ended() -> None:
            self._synonyms.forget(scope)
            with self._lock:
                self._open_sessions[scope.key] -= 1
                if self._open_sessions[scope.key] <= 0:
                    del self._open_sessions[scope.key]

        return OpenSearchWriteSession(
            self._connection,
            self._indexes,
            scope,
            index,
            replace_scope=replace_scope,
            on_close=ended,
            clock=self._clock,
        )

    # --- search ------------------------------------------------------------------------

    def search(self, scope: KnowledgeScope, query: SearchQuery) -> list[SearchResult]:
        """Search one scope (or every context of its agent with ``cross_context``); see
        ``search.search``. Inside the current deadline (``knowledge.core.deadline``); a node
        that does not answer in time is a ``StoreUnavailableError``. No match is ``[]``."""
        mode = query.mode or self.default_mode
        if mode not in self.supported_modes:
            supported = ", ".join(sorted(m.value for m in self.supported_modes))
            raise UnsupportedModeError(mode.value, self.name, supported)
        index = self._searched_indexes(scope, query)
        if not index:
            return []
        # The query's terms with the scope's own synonyms (ranking.synonym_expansion), in every
        # mode: the keyword side searches them, and every mode's absolute scores weigh them
        # (ranking.relevance).
        own = self.index_name(scope)
        found = own in index.split(",") and bool(keyword_terms(query.text))
        synonyms = self._synonyms.text(self._connection, own, scope) if found else None
        terms = expand(query.text, compiled(synonyms))
        try:
            return searching.search(
                self._connection,
                index,
                metadata_pairs=self._indexes.metadata_pairs(index),
                scope_sizes=self._scope_sizes,
                embedder=self._embedder,
                scope=scope,
                query=query,
                mode=mode,
                terms=terms,
            )
        except StoreError as exc:
            refused = refused_as_expensive(exc)
            if refused is not None:
                raise _expensive_query_error(query, refused) from None
            if _TOO_MANY_CLAUSES.search(str(exc)) is None:
                raise
            # The caller's query, not the node, is at fault: a 400 naming it.
            raise ValidationError(
                "query",
                "has more distinct terms than the index matches in one query (OpenSearch's "
                "max clause count, 1,024 by default); shorten it",
            ) from None

    def _searched_indexes(self, scope: KnowledgeScope, query: SearchQuery) -> str:
        """The existing indexes a search reads, comma-separated ("": none): the scope's,
        and with per-agent indexes each granted library's own too (one request over all,
        each index with its own term statistics; an explicit list, never a pattern)."""
        config = self._config
        if config.index_per_agent and scope.agent == SHARED_AGENT and query.cross_context:
            raise ValidationError(
                "cross_context",
                f"'{SHARED_AGENT}' has an index per library here: search one library "
                "(its context) at a time",
            )
        wanted = [self.index_name(scope)]
        wanted += [config.index_for(lib.agent, lib.context) for lib in query.shared_libraries]
        found = [name for name in dict.fromkeys(wanted) if self._indexes.open(name, create=False)]
        return ",".join(found)

    # --- status and lifecycle ----------------------------------------------------------

    def status(self, scope: KnowledgeScope) -> IndexStatus:
        """Counts from the index itself (chunks, documents, last indexed time) and the
        documents whose latest attempt failed; ``INDEXING`` while this store has a write
        session open on the scope."""
        with self._lock:
            indexing = self._open_sessions[scope.key] > 0
        index = self.index_name(scope)
        problems: tuple[FileProblem, ...] = ()
        if not self._indexes.open(index, create=False):
            stats = answers.ScopeStats(0, 0, None)
        else:
            connection = self._connection
            stats = answers.parse_scope_stats(
                connection.search(
                    index, f"read the status of {scope}", queries.scope_stats_body(scope)
                )
            )
            found = connection.search(
                index,
                f"read the problems of {scope}",
                records.problems_body(scope, MAX_STATUS_PROBLEMS * 2),
            )
            problems = tuple(
                FileProblem(path, reason)
                for path, reason in records.parse_problems(found, MAX_STATUS_PROBLEMS)
            )
        if indexing:
            state = IndexState.INDEXING
        else:
            state = IndexState.READY if stats.document_count else IndexState.EMPTY
        return IndexStatus(
            document_count=stats.document_count,
            chunk_count=stats.chunk_count,
            last_indexed_at=stats.last_indexed_at,
            state=state,
            problems=problems,
            embedded_chunks=stats.embedded_chunks,
            reused_chunks=stats.reused_chunks,
            unread_files=stats.unread_files,
        )

    def list_scopes(self) -> list[KnowledgeScope]:
        """Every scope with at least one record (a document or a problem) in the store's
        index(es), sorted: a composite aggregation on (agent, context), page by page."""
        if self._config.index_per_agent:
            target = f"{self._config.index_name}-agent-*"  # no agent index yet: no hits
        elif self._indexes.open(self._config.index_name, create=False):
            target = self._config.index_name
        else:
            return []
        scopes: list[KnowledgeScope] = []
        after: dict[str, Any] | None = None
        while True:
            body = queries.scopes_page_body(_SCOPES_PAGE, after)
            page, after = answers.parse_scopes_page(
                self._connection.search(target, "list the scopes", body)
            )
            scopes.extend(page)
            if after is None or not page:
                return sorted(set(scopes), key=lambda scope: (scope.agent, scope.context))

    def list_documents(
        self,
        scope: KnowledgeScope,
        *,
        limit: int = DEFAULT_DOCUMENTS_LIMIT,
        cursor: str | None = None,
    ) -> DocumentPage:
        """A page of exactly this scope's document records, by path (``listing``); a page
        with records that replaced a generation costs a second, size-0 request."""
        validate_documents_limit(limit)
        after = decode_cursor(scope, cursor)
        index = self.index_name(scope)
        if not self._indexes.open(index, create=False):
            return DocumentPage(())
        body = listing.documents_page_body(scope, limit + 1, after)
        found = self._connection.search(index, f"list the documents of {scope}", body)
        replaced = listing.replaced_generations(found)
        shown = None
        if replaced:
            shown = self._connection.search(
                index,
                f"check the replaced versions listed in {scope}",
                listing.replaced_shown_body(scope, replaced),
            )
        return document_page(scope, listing.parse_documents(found, shown), limit)

    def get_document(self, scope: KnowledgeScope, path: str) -> IndexedDocument | None:
        index = self.index_name(scope)
        if not self._indexes.open(index, create=False):
            return None
        body = listing.document_record_body(scope, path)
        return listing.parse_document_record(
            self._connection.search(index, f"read the record of '{path}' in {scope}", body)
        )

    def list_chunks(
        self,
        scope: KnowledgeScope,
        path: str,
        *,
        limit: int = DEFAULT_CHUNKS_LIMIT,
        cursor: str | None = None,
    ) -> ChunkPage | None:
        """A page of the chunks of the generation the document's record names
        (``chunk_listing``): the record's read, then the page's."""
        validate_chunks_limit(limit)
        after = decode_chunk_cursor(scope, path, cursor)
        index = self.index_name(scope)
        if not self._indexes.open(index, create=False):
            return None
        record = listing.document_record_body(scope, path)
        generation = chunk_listing.indexed_generation(
            self._connection.search(index, f"read the record of '{path}' in {scope}", record)
        )
        if generation is None:
            return None
        body = chunk_listing.chunks_page_body(scope, path, generation, limit + 1, after)
        found = self._connection.search(index, f"list the chunks of '{path}' in {scope}", body)
        return chunk_page(scope, path, chunk_listing.parse_chunks(found), limit)

    def agent_scopes(self, agent: str) -> list[ScopeSummary]:
        """Every context of ``agent`` with its counts (``agent_scopes``: a composite
        aggregation, page by page), in the agent's index or, for the shared library's
        owner with an index per agent, its libraries' indexes."""
        if not self._config.index_per_agent:
            target = self._config.index_name
            if not self._indexes.open(target, create=False):
                return []
        elif agent == SHARED_AGENT:  # an index per library: every agent index, filtered
            target = f"{self._config.index_name}-agent-*"
        else:
            target = self._config.index_for(agent)
            if not self._indexes.open(target, create=False):
                return []
        with self._lock:
            open_keys = [key for key, n in self._open_sessions.items() if n > 0]
        prefix = f"{agent}/"  # a scope's key is agent/context (no '/' in either)
        writing = frozenset(k[len(prefix) :] for k in open_keys if k.startswith(prefix))
        found: list[ScopeSummary] = []
        after: dict[str, Any] | None = None
        while True:
            body = agent_scopes.agent_scopes_body(agent, _SCOPES_PAGE, after)
            response = self._connection.search(target, f"list the contexts of {agent}", body)
            page, after = agent_scopes.parse_agent_scopes(response, writing)
            found.extend(page)
            if after is None:
                return sorted(found, key=lambda summary: summary.context)

    def close(self) -> None:
        """Close the client if this store created it. Idempotent; later calls raise
        ``StoreError``; an injected client and embedder stay open."""
        self._connection.close()

    def __enter__(self) -> OpenSearchKnowledgeStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
