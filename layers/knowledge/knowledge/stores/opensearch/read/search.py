"""The read side of the OpenSearch store: searches inside a scope, within a time budget.

``search`` sends what ``queries`` builds and reads the answers:

- keyword: BM25 on the query's terms (``terms``: with the scope's synonyms, the store
  reads them) divided by the best hit's score;
- vector: the engine's cosine score ``(1 + cos) / 2``;
- hybrid: both sides in one ``_msearch`` (or two searches), ``fusion.HYBRID_CANDIDATES``
  each whatever the page (every page of a query is a slice of one order), fused
  client-side with ``fusion.fuse_weighted`` (weights: the configured ones, else the
  embedder's, ``fusion.hybrid_weights``). A candidate is its ``_id`` and score (the id
  says its document, generation and chunk: ``queries.CANDIDATE_FIELDS``; doc values where
  ids are the server's), no ``_source``, the answer trimmed by
  ``queries.CANDIDATES_FILTER_PATH``; a second ``_search``
  (``queries.chunks_by_id_body``, same filters) reads ``content`` and ``metadata`` of the
  page's chunks only: the node parsing the stored source (vector included) of 200
  candidates cost more than that round trip (bench/REPORT.md, 3b). A chunk gone between
  the two reads (its document replaced meanwhile) is left out.

Vector and hybrid drop vector candidates below the floor (``fusion.relevance_floor``);
a query the embedder cannot read runs as a keyword search (``ranking.vector_side``).
Every hit also gets its absolute score (``ranking.relevance``: its ``score``; the one it
is ranked by is its ``rank_score``), from the scope's term statistics, read with the
first search, and the query terms its named clauses say it holds (``relevance_side``);
``min_score`` applies to it.

A single-mode side asks for at least twice the results the page needs (``offset +
max_results``, and ``fusion.candidate_count`` of it, room for the per-document cap) and
keeps, per document, only the hits of its newest generation
(``answers.newest_generations``): a document being replaced, or an older generation that
Serverless still shows, never appears twice. Only then does ``fusion.select`` cap the
chunks per document and cut the page at ``offset``, so a stale generation's hits never
take a place on the page or count against the cap. A page that depends on hits past that
depth, because it is left short (the cap, stale generations, ``min_score``) or its last
result ties with the weakest hit (the engine cuts equal scores in its own order), is
read again at the depth of the deepest page (``_DEEPEST``), so pages of one query never
repeat or skip a result whatever their size. ``min_score`` never stops that read: the
absolute score does not follow the rank order, so a hit past the depth may pass it.

Time: every request is a ``Connection.read`` (per-request timeout, at most one retry,
inside the caller's deadline); the query embedding runs inside the same deadline
(``query_embedding.embed_query``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from knowledge.core.model import MAX_MAX_RESULTS, SearchMode, SearchQuery, SearchResult
from knowledge.core.path_filters import matches_file_patterns
from knowledge.core.rank_weights import RankWeights
from knowledge.core.scope import KnowledgeScope
from knowledge.core.scope_set import library_hit, marked
from knowledge.embedding.base import EmbeddingClient
from knowledge.ranking.fusion import (
    HYBRID_CANDIDATES,
    Fused,
    above_floor,
    candidate_count,
    fuse_weighted,
    hybrid_weights,
    keyword_only,
    relevance_floor,
    vector_only,
)
from knowledge.ranking.origin_weights import NEUTRAL
from knowledge.ranking.page_signal import PageScores
from knowledge.ranking.relevance import QueryWeights, calibration, query_terms, query_weights
from knowledge.ranking.synonym_expansion import QueryTerms
from knowledge.ranking.vector_side import SearchedMode, searched_mode
from knowledge.ranking.weighted_page import Page, weighted_page
from knowledge.stores.opensearch import request_filters
from knowledge.stores.opensearch.connection import Connection
from knowledge.stores.opensearch.hits import Hit, parse_hits
from knowledge.stores.opensearch.mapping import (
    AGENT,
    CHUNK_INDEX,
    CONTENT,
    CONTEXT,
    DOCUMENT_ID,
    DOCUMENT_PATH,
    METADATA,
)
from knowledge.stores.opensearch.read import answers, queries
from knowledge.stores.opensearch.read.both_sides import Search, search_together
from knowledge.stores.opensearch.read.named_clauses import facts, named_clauses, term_clauses
from knowledge.stores.opensearch.read.page_side import page_scores
from knowledge.stores.opensearch.read.query_embedding import embed_query
from knowledge.stores.opensearch.read.relevance_side import (
    STATISTICS_FILTER_PATH,
    judge_candidates,
    parse_statistics,
    statistics_body,
)
from knowledge.stores.opensearch.read.scope_size import (
    ScopeSizes,
    ef_search_for,
    exact_for,
    parse_chunk_total,
    scope_chunks_body,
)

__all__ = ["search"]

_OVERFETCH = 2
_DEEPEST = max(MAX_MAX_RESULTS * _OVERFETCH, candidate_count(MAX_MAX_RESULTS))
"""The depth of a single-mode search's deepest page (``offset + max_results`` at most
``MAX_MAX_RESULTS``); a page that depends on hits past its own depth reads again at it."""


def search(
    connection: Connection,
    index: str,
    *,
    metadata_pairs: bool,
    scope_sizes: ScopeSizes,
    embedder: EmbeddingClient | None,
    scope: KnowledgeScope,
    query: SearchQuery,
    mode: SearchMode,
    terms: QueryTerms,
) -> list[SearchResult]:
    """Search one scope (or every context of its agent with ``cross_context``) and the
    query's shared libraries (``knowledge.core.scope_set``) of ``index`` (with per-agent
    indexes, the caller's and each granted library's, comma-separated: one request over
    all); the indexes exist and ``mode`` is supported. ``metadata_pairs``: how the
    indexes hold metadata (``Indexes.metadata_pairs``); ``scope_sizes``: the store's
    counts of its scopes' chunks (``scope_size``).

    The steps, in the order they run: the plan (mode, filters, query vector, term
    statistics, walk or exact scoring), the first request (one side, or both hybrid
    sides; with the term statistics), the page side and the relevance inputs of the
    candidates read, the page (``ranking.weighted_page``; a single-mode page read again
    deeper when it depends on hits past its depth), and the page's chunks with their
    text when only ids and scores were read."""
    run = _plan(
        connection,
        index,
        metadata_pairs=metadata_pairs,
        scope_sizes=scope_sizes,
        embedder=embedder,
        scope=scope,
        query=query,
        mode=mode,
        terms=terms,
    )
    if run.mode is SearchMode.HYBRID:
        page = _hybrid_page(run)
    elif run.mode is SearchMode.VECTOR and run.vector is None:
        return []
    else:
        page = _single_mode_page(run)
    return _results(run, page)


@dataclass(eq=False)
class _Run:
    """One search as it runs: what its plan fixed (``_plan``), and what its reads found
    (the candidates' sources, the sides' scores, the page part) for the page and its
    trace."""

    connection: Connection
    index: str
    scope: KnowledgeScope
    query: SearchQuery
    terms: QueryTerms
    embedder: EmbeddingClient | None
    searched: SearchedMode
    pairs: bool
    filters: list[dict[str, Any]]
    vector: Sequence[float] | None
    action: str
    floor: float
    """Vector candidates below it are none (``fusion.above_floor``): the embedder's."""
    ef_search: int
    exact: bool
    wanted: list[str]
    """Every term a hit's clauses report (the absolute scores' weights are the typed ones')."""
    relevance: QueryWeights
    statistics: list[Search]
    """The scope's term statistics, sent with the first request (none once read)."""
    sources: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    keyword: Mapping[str, float] | None = None
    vector_scores: Mapping[str, float] | None = None
    vector_found: int = 0
    pages: PageScores[str, str] | None = None
    pair: tuple[float, float] | None = None

    @property
    def mode(self) -> SearchMode:
        return self.searched.mode

    @property
    def weights(self) -> RankWeights:
        return self.query.weights or NEUTRAL

    def send(self, searches: list[Search]) -> list[dict[str, Any]]:
        """The searches' answers; the first request also carries the scope's term
        statistics, which set the absolute scores' term weights."""
        answered = search_together(
            self.connection, self.index, self.action, [*searches, *self.statistics]
        )
        if self.statistics:
            chunk_total, df = parse_statistics(answered[len(searches)], self.terms.typed)
            self.relevance = query_weights(self.terms, df, chunk_total)
            self.statistics.clear()
        return answered[: len(searches)]

    def scores_of(self, hits: Sequence[Hit]) -> dict[str, float]:
        """The hits' scores by id, of each document's newest generation only; their
        sources kept for the page."""
        scores: dict[str, float] = {}
        patterns = self.query.file_patterns
        for hit in answers.newest_generations(hits):
            # The engine filtered already; this keeps the glob semantics exact.
            if patterns and not matches_file_patterns(
                str(hit.source.get(DOCUMENT_PATH, "")), patterns
            ):
                continue
            scores[hit.id] = hit.score
            self.sources[hit.id] = hit.source
        return scores

    def keyword_side(self, chunks: Mapping[str, float]) -> Mapping[str, float]:
        """The keyword side's scores with its page part (``ranking.page_signal``), in
        keyword and hybrid alike."""
        self.pages = page_scores(
            self.connection,
            self.index,
            action=self.action,
            scope=self.scope,
            query=self.query,
            terms=self.terms,
            chunks=chunks,
            sources=self.sources,
        )
        self.keyword = combined = self.pages.combined()
        return combined

    def page_of(self, fused: list[Fused[str]], vector_units: Mapping[str, float]) -> Page[str]:
        """The page of ``fused`` (``ranking.weighted_page``): after the newest-generation
        dedupe in ``scores_of``, so the cap and offset see one version; then the weights,
        the absolute scores and ``min_score`` on them, the page and the lesson extras.
        ``vector_units``: the vector side's unit scores before the floor
        (``relevance.judge``)."""
        sources = self.sources
        return weighted_page(
            fused,
            lambda key: facts(sources[key]),
            self.query,
            document_of=lambda key: _document_of(sources[key]),
            judge=functools.partial(
                judge_candidates,
                mode=self.mode,
                weights=self.relevance,
                scale=calibration(None if self.embedder is None else self.embedder.name),
                terms=self.wanted,
                sources=sources,
                vector=vector_units,
            ),
            trace=self.searched.tracing(self.trace),
        )

    def trace(self) -> dict[str, Any]:
        """The store's part of an explained search's record."""
        hybrid = self.mode is SearchMode.HYBRID
        return {
            "store": "opensearch",
            "scope": f"{self.scope.agent}/*" if self.query.cross_context else self.scope.key,
            "mode": self.mode.value,
            "fusion": "weighted" if hybrid else self.mode.value,
            "keyword": self.keyword,
            "vector": self.vector_scores,
            "vector_found": self.vector_found,
            "floor": self.floor,
            "hybrid_weights": self.pair if hybrid else None,
            "page": self.pages,
            "synonyms": None if self.mode is SearchMode.VECTOR else self.terms,
        }

    def lean(self) -> dict[str, Any]:
        """The candidate form of a search body: ids and scores, no ``_source`` (the id
        says the chunk; server-made ids, on Serverless, carry its facts as doc values),
        the document path only for the exact glob check, and the named clauses that say
        a candidate's origin, kind and the query terms it holds (``named_clauses``)."""
        return {
            "candidates": True,
            "candidate_path": bool(self.query.file_patterns),
            "candidate_facts": not self.connection.config.client_ids,
            "named": named_clauses(self.weights, self.pairs, self.wanted),
        }


def _plan(
    connection: Connection,
    index: str,
    *,
    metadata_pairs: bool,
    scope_sizes: ScopeSizes,
    embedder: EmbeddingClient | None,
    scope: KnowledgeScope,
    query: SearchQuery,
    mode: SearchMode,
    terms: QueryTerms,
) -> _Run:
    """What the search runs: the mode (keyword when the embedder cannot read the query,
    ``ranking.vector_side``), the filters, the query vector (inside the deadline), the
    term statistics to read with the first request (none without terms), and how the
    vector side walks the graph: a mid-size scope scored exactly, a big one walked with a
    longer candidate list (``scope_size.exact_for``, ``ef_search_for``)."""
    config = connection.config
    searched = searched_mode(mode, None if embedder is None else embedder.name, query.text)
    filters = request_filters.query_filters(
        scope,
        cross_context=query.cross_context,
        file_patterns=query.file_patterns,
        metadata=query.metadata,
        search_filter=query.filter,
        metadata_pairs=metadata_pairs,
        libraries=query.shared_libraries,
    )
    vector: Sequence[float] | None = None
    if searched.mode is not SearchMode.KEYWORD:
        assert embedder is not None  # the store checked the mode
        vector = embed_query(embedder, query.text)
    action = f"search {scope}" + (" (all contexts)" if query.cross_context else "")
    if query.shared_libraries:
        action += f" and {len(query.shared_libraries)} shared library scope(s)"
    statistics: list[Search] = []
    if terms.typed:
        body = statistics_body(
            scope,
            cross_context=query.cross_context,
            libraries=query.shared_libraries,
            terms=terms.typed,
        )
        statistics.append(
            Search("term statistics", body, STATISTICS_FILTER_PATH, f"{action}: term statistics")
        )
    ef_search, exact = config.ef_search, False
    if vector is not None and ef_search > 0:
        chunks = _scope_chunks(
            connection, scope_sizes, index, scope=scope, query=query, action=action
        )
        exact = exact_for(chunks, serverless=config.serverless)
        ef_search = ef_search_for(ef_search, chunks)
    return _Run(
        connection=connection,
        index=index,
        scope=scope,
        query=query,
        terms=terms,
        embedder=embedder,
        searched=searched,
        pairs=metadata_pairs,
        filters=filters,
        vector=vector,
        action=action,
        floor=0.0 if embedder is None else relevance_floor(embedder.name),
        ef_search=ef_search,
        exact=exact,
        wanted=query_terms(terms),
        relevance=query_weights(terms, {}, 0),
        statistics=statistics,
    )


def _scope_chunks(
    connection: Connection,
    sizes: ScopeSizes,
    index: str,
    *,
    scope: KnowledgeScope,
    query: SearchQuery,
    action: str,
) -> int | None:
    """The chunks a search of ``scope`` (and the query's shared libraries) filters to,
    read from the index (kept a while in ``sizes``)."""
    cross, libraries = query.cross_context, query.shared_libraries

    def count() -> int | None:
        body = scope_chunks_body(scope, cross_context=cross, libraries=libraries)
        return parse_chunk_total(
            connection.search(index, f"{action}: count", body, filter_path="hits.total")
        )

    return sizes.get((index, scope, cross, libraries), count)


def _single_mode_page(run: _Run) -> Page[str]:
    """A keyword or vector page: at least twice the hits the page needs (room for the
    newest-generation dedupe and the per-document cap, module docstring), read again at
    ``_DEEPEST`` when the page depends on hits past that depth. A grouped search reads
    its deep candidate list as ids and scores, then only the page's chunks, as hybrid
    does (bench/results/grouping.json); every hit's named clauses say which query terms
    its chunk holds (``named_clauses``)."""
    query, mode = run.query, run.mode
    needed = query.offset + query.max_results
    size = max(needed * _OVERFETCH, candidate_count(needed))
    lean: dict[str, Any] = {"named": term_clauses(run.wanted)}
    trim: str | None = None
    if query.group_by is not None:  # every page of a grouped search at one depth (grouping)
        size = _DEEPEST
        lean = run.lean()
        trim = queries.CANDIDATES_FILTER_PATH
    while True:
        if mode is SearchMode.KEYWORD:
            body = queries.keyword_search_body(run.terms, run.filters, size, **lean)
        else:
            assert run.vector is not None
            body = queries.vector_search_body(
                run.vector, run.filters, size, ef_search=run.ef_search, exact=run.exact, **lean
            )
        (answer,) = run.send([Search(mode.value, body, trim)])
        hits = (parse_hits if trim is None else answers.parse_candidates)(answer)
        raw = run.scores_of(hits)
        if mode is SearchMode.KEYWORD:  # with the page part (ranking.page_signal)
            combined = run.keyword_side(raw)
            page = run.page_of(keyword_only(combined), {})
        else:
            run.vector_found = len(raw)
            run.vector_scores = kept = above_floor(raw, run.floor)
            page = run.page_of(vector_only(kept), raw)
        shown = page.chosen[: page.page_size]
        if not _read_deeper(
            query, size=size, hits=hits, raw=raw, chosen=shown, floor=run.floor, mode=mode
        ):
            return page
        size = _DEEPEST


def _hybrid_page(run: _Run) -> Page[str]:
    """A hybrid page: both sides' candidates at a fixed depth (``HYBRID_CANDIDATES``, at
    least ``MAX_MAX_RESULTS``, so that every page is a slice of one order) in one
    request, the keyword side with its page part, fused with the configured weights,
    else the embedder's (``fusion.hybrid_weights``)."""
    config = run.connection.config
    size = HYBRID_CANDIDATES
    lean = run.lean()
    trim = queries.CANDIDATES_FILTER_PATH
    body = queries.keyword_search_body(run.terms, run.filters, size, **lean)
    searches = [Search("keyword", body, trim)]
    if run.vector is not None:
        body = queries.vector_search_body(
            run.vector, run.filters, size, ef_search=run.ef_search, exact=run.exact, **lean
        )
        searches.append(Search("vector", body, trim))
    keyword_response, *rest = run.send(searches)
    vector_response: Mapping[str, Any] = rest[0] if rest else {}
    embedder_name = None if run.embedder is None else run.embedder.name
    run.pair = pair = hybrid_weights(embedder_name, config.keyword_weight, config.vector_weight)
    keyword_raw = run.scores_of(answers.parse_candidates(keyword_response))
    keyword = run.keyword_side(keyword_raw)
    vector_raw = run.scores_of(answers.parse_candidates(vector_response))
    run.vector_found = len(vector_raw)
    run.vector_scores = vector_kept = above_floor(vector_raw, run.floor)
    return run.page_of(fuse_weighted(keyword, vector_kept, *pair), vector_raw)


def _results(run: _Run, page: Page[str]) -> list[SearchResult]:
    """The page's results. When only ids and scores were read (hybrid, grouped), the
    page's chunks with their ``_source`` in one more search (same filters; the
    candidates' own facts stay for the trace); a chunk gone between the two reads (its
    document replaced meanwhile) is left out."""
    query = run.query
    chosen = page.chosen
    page_sources = run.sources
    if (run.mode is SearchMode.HYBRID or query.group_by is not None) and chosen:
        ids = [item.key for item in chosen]
        body = queries.chunks_by_id_body(ids, run.filters)
        answer = run.connection.search(run.index, run.action, body)
        page_sources = {hit.id: hit.source for hit in parse_hits(answer)}
        chosen = [item for item in chosen if item.key in page_sources]
    explained = page.explanations()
    return [
        _result(
            page_sources[item.key],
            item,
            run.scope,
            query.shared_libraries,
            score=page.score(item.key),
            extra=item.key in page.extras,
            explanation=explained(item.key),
            matching_chunks=page.counts.get(item.key),
        )
        for item in chosen
    ]


def _read_deeper(
    query: SearchQuery,
    *,
    size: int,
    hits: Sequence[Hit],
    raw: Mapping[str, float],
    chosen: Sequence[Fused[str]],
    floor: float,
    mode: SearchMode,
) -> bool:
    """Whether a single-mode page must be read again at ``_DEEPEST`` (module docstring).

    Only when the engine returned ``size`` hits (more exist) whose weakest still counts
    (a vector hit above the floor), and the page depends on what lies past them: it is
    short (the per-document cap, stale generations, ``min_score``), or its last result
    ties with the weakest hit (the engine cut equal scores in its own order, not the
    page's). ``min_score`` applies to the absolute score, which does not follow the
    rank order: a hit past the depth may pass it where the weakest read did not, so it
    never stops a deeper read."""
    if size >= _DEEPEST or len(hits) < size or not hits or not raw:
        return False
    if mode is SearchMode.VECTOR and hits[-1].score < floor:
        return False
    boundary = hits[-1].score
    return len(chosen) < query.max_results or raw[chosen[-1].key] <= boundary


def _document_of(source: Mapping[str, Any]) -> object:
    """Which document a hit is of, for the per-document cap: its ``document_id`` (one
    document of one scope; what a candidate carries), else context and path."""
    document_id = source.get(DOCUMENT_ID)
    if isinstance(document_id, str):
        return document_id
    return (str(source.get(CONTEXT, "")), str(source.get(DOCUMENT_PATH, "")))


def _result(
    source: Mapping[str, Any],
    item: Fused[str],
    scope: KnowledgeScope,
    libraries: tuple[KnowledgeScope, ...],
    *,
    score: float,
    extra: bool = False,
    explanation: Mapping[str, Any] | None = None,
    matching_chunks: int | None = None,
) -> SearchResult:
    """One result: ``score`` its absolute score (ranking.relevance), ``rank_score`` the
    one it was ranked by."""
    metadata = source.get(METADATA)
    library = library_hit(scope, libraries, str(source.get(AGENT)), str(source.get(CONTEXT)))
    return SearchResult(
        document_path=str(source.get(DOCUMENT_PATH, "")),
        chunk_index=int(source.get(CHUNK_INDEX, 0)),
        content=str(source.get(CONTENT, "")),
        score=score,
        rank_score=item.score,
        keyword_score=item.keyword_score,
        vector_score=item.vector_score,
        metadata=marked(metadata if isinstance(metadata, Mapping) else {}, library),
        matching_chunks=matching_chunks,
        extra=extra,
        explanation=explanation,
    )
