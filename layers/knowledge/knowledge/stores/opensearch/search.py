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
(``embed_query``). The ``hashing`` embedder (arithmetic that cannot hang) runs in the
caller's thread: a hand-off to the embedding pool would cost more than the embedding.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import functools
from collections.abc import Mapping, Sequence
from typing import Any

from knowledge.core.deadline import Deadline, current_deadline
from knowledge.core.errors import EmbeddingError, EmbeddingMismatchError, StoreError
from knowledge.core.model import MAX_MAX_RESULTS, SearchMode, SearchQuery, SearchResult
from knowledge.core.path_filters import matches_file_patterns
from knowledge.core.scope import KnowledgeScope
from knowledge.core.scope_set import library_hit, marked
from knowledge.embedding.base import EmbeddingClient
from knowledge.embedding.hashing import HashingEmbedder
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
from knowledge.ranking.relevance import calibration, query_terms, query_weights
from knowledge.ranking.synonym_expansion import QueryTerms
from knowledge.ranking.vector_side import searched_mode
from knowledge.ranking.weighted_page import Page, weighted_page
from knowledge.stores.opensearch import answers, queries, request_filters
from knowledge.stores.opensearch.both_sides import Search, search_together
from knowledge.stores.opensearch.connection import Connection
from knowledge.stores.opensearch.mapping import (
    AGENT,
    CHUNK_INDEX,
    CONTENT,
    CONTEXT,
    DOCUMENT_ID,
    DOCUMENT_PATH,
    METADATA,
    is_zero_vector,
)
from knowledge.stores.opensearch.named_clauses import facts, named_clauses, term_clauses
from knowledge.stores.opensearch.page_side import page_scores
from knowledge.stores.opensearch.relevance_side import (
    STATISTICS_FILTER_PATH,
    judge_candidates,
    parse_statistics,
    statistics_body,
)
from knowledge.stores.opensearch.scope_size import (
    ef_search_for,
    exact_for,
    parse_chunk_total,
    scope_chunks_body,
)

__all__ = ["DEFAULT_EMBED_TIMEOUT", "embed_query", "search"]

DEFAULT_EMBED_TIMEOUT = 5.0
"""Seconds a query embedding may take when the caller set no deadline."""

_OVERFETCH = 2
_DEEPEST = max(MAX_MAX_RESULTS * _OVERFETCH, candidate_count(MAX_MAX_RESULTS))
"""The depth of a single-mode search's deepest page (``offset + max_results`` at most
``MAX_MAX_RESULTS``); a page that depends on hits past its own depth reads again at it."""


@functools.cache
def _embed_pool() -> concurrent.futures.ThreadPoolExecutor:
    """Threads the query embeddings run on, so a caller can stop waiting at its deadline."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="query-embed")


def embed_query(
    embedder: EmbeddingClient, text: str, *, deadline: Deadline | None = None
) -> Sequence[float] | None:
    """The query's vector, or ``EmbeddingError`` once ``deadline`` (else the current one,
    else ``DEFAULT_EMBED_TIMEOUT``) passes, whatever the provider does meanwhile (its
    call finishes in the background; retries inside it see the same deadline). ``None``
    for a text without terms (a zero vector has no direction). The ``hashing`` embedder
    runs in the caller's thread (module docstring)."""
    if isinstance(embedder, HashingEmbedder):
        return _checked(embedder, embedder.embed(text).vector)
    deadline = deadline or current_deadline() or Deadline.after(DEFAULT_EMBED_TIMEOUT)
    context = contextvars.copy_context()
    future = _embed_pool().submit(context.run, embedder.embed, text)
    try:
        embedding = future.result(timeout=deadline.remaining())
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise EmbeddingError(
            f"the embedding provider '{embedder.name}' did not answer within the time "
            "budget of the request"
        ) from None
    return _checked(embedder, embedding.vector)


def _checked(embedder: EmbeddingClient, vector: Sequence[float]) -> Sequence[float] | None:
    if len(vector) != embedder.dimensions:
        raise EmbeddingMismatchError(
            f"the embedder '{embedder.name}' returned a {len(vector)}-dimension query "
            f"vector, expected {embedder.dimensions}"
        )
    return None if is_zero_vector(vector) else vector


def _scope_chunks(
    connection: Connection, index: str, scope: KnowledgeScope, query: SearchQuery, action: str
) -> int | None:
    """The chunks a search of ``scope`` (and the query's shared libraries) filters to,
    read from the index (kept a while)."""
    cross, libraries = query.cross_context, query.shared_libraries

    def count() -> int | None:
        body = scope_chunks_body(scope, cross_context=cross, libraries=libraries)
        return parse_chunk_total(
            connection.search(index, f"{action}: count", body, filter_path="hits.total")
        )

    return connection.scope_sizes.get((index, scope, cross, libraries), count)


def _metadata_pairs(connection: Connection, index: str) -> bool:
    """Whether the searched index (or every one of a comma-separated list: a per-agent
    index and the shared library's) holds metadata as key/value terms; indexes of two
    schemas are refused, since one filter could not match both."""
    kinds = {connection.metadata_pairs(name) for name in index.split(",")}
    if len(kinds) > 1:
        raise StoreError(
            f"indexes {index} hold metadata in two layouts; reindex the older one "
            "(docs/deploy.md) before searching them together"
        )
    return kinds.pop()


def search(
    connection: Connection,
    index: str,
    *,
    embedder: EmbeddingClient | None,
    scope: KnowledgeScope,
    query: SearchQuery,
    mode: SearchMode,
    terms: QueryTerms,
) -> list[SearchResult]:
    """Search one scope (or every context of its agent with ``cross_context``) and the
    query's shared libraries (``knowledge.core.scope_set``) of ``index`` (with per-agent
    indexes, the caller's and each granted library's, comma-separated: one request over
    all); the indexes exist and ``mode`` is supported."""
    config = connection.config
    # Keyword when the embedder cannot read the query (ranking.vector_side).
    searched = searched_mode(mode, None if embedder is None else embedder.name, query.text)
    mode = searched.mode
    pairs = _metadata_pairs(connection, index)
    filters = request_filters.query_filters(
        scope,
        cross_context=query.cross_context,
        file_patterns=query.file_patterns,
        metadata=query.metadata,
        search_filter=query.filter,
        metadata_pairs=pairs,
        libraries=query.shared_libraries,
    )
    vector: Sequence[float] | None = None
    if mode is not SearchMode.KEYWORD:
        assert embedder is not None  # the store checked the mode
        vector = embed_query(embedder, query.text)
    action = f"search {scope}" + (" (all contexts)" if query.cross_context else "")
    if query.shared_libraries:
        action += f" and {len(query.shared_libraries)} shared library scope(s)"
    libraries = query.shared_libraries
    sources: dict[str, Mapping[str, Any]] = {}

    def scores_of(hits: Sequence[answers.Hit]) -> dict[str, float]:
        scores: dict[str, float] = {}
        patterns = query.file_patterns
        for hit in answers.newest_generations(hits):
            # The engine filtered already; this keeps the glob semantics exact.
            if patterns and not matches_file_patterns(
                str(hit.source.get(DOCUMENT_PATH, "")), patterns
            ):
                continue
            scores[hit.id] = hit.score
            sources[hit.id] = hit.source
        return scores

    weights = query.weights or NEUTRAL
    sides: dict[str, Mapping[str, float] | None] = {"keyword": None, "vector": None}
    found: dict[str, int] = {"vector": 0}
    parts: dict[str, PageScores[str, str] | None] = {"pages": None}
    # The absolute scores (ranking.relevance, relevance_side): the query's terms' weights
    # over the searched scope, read with the first search; none to read without terms.
    # ``wanted``: every term a hit's clauses report; the weights are the typed ones'.
    wanted = query_terms(terms)
    relevance = {"weights": query_weights(terms, {}, 0)}
    statistics: list[Search] = []
    if terms.typed:
        body = statistics_body(
            scope, cross_context=query.cross_context, libraries=libraries, terms=terms.typed
        )
        statistics.append(
            Search("term statistics", body, STATISTICS_FILTER_PATH, f"{action}: term statistics")
        )
    scale = calibration(None if embedder is None else embedder.name)

    def send(searches: list[Search]) -> list[dict[str, Any]]:
        # The searches' answers; the first also carries the scope's term statistics.
        answered = search_together(connection, index, action, [*searches, *statistics])
        if statistics:
            chunk_total, df = parse_statistics(answered[len(searches)], terms.typed)
            relevance["weights"] = query_weights(terms, df, chunk_total)
            statistics.clear()
        return answered[: len(searches)]

    def trace() -> dict[str, Any]:
        hybrid = mode is SearchMode.HYBRID
        return {
            "store": "opensearch",
            "scope": f"{scope.agent}/*" if query.cross_context else scope.key,
            "mode": mode.value,
            "fusion": "weighted" if hybrid else mode.value,
            "keyword": sides["keyword"],
            "vector": sides["vector"],
            "vector_found": found["vector"],
            "floor": floor,
            "hybrid_weights": pair if hybrid else None,
            "page": parts["pages"],
            "synonyms": None if mode is SearchMode.VECTOR else terms,
        }

    def page_of(fused: list[Fused[str]], vector_units: Mapping[str, float]) -> Page[str]:
        # After the newest-generation dedupe in scores_of: the cap and offset see one version;
        # then the weights, the absolute scores and min_score on them, the page and the
        # lesson extras (ranking.weighted_page). ``vector_units``: the vector side's unit
        # scores before the floor (relevance.judge).
        return weighted_page(
            fused,
            lambda key: facts(sources[key]),
            query,
            document_of=lambda key: _document_of(sources[key]),
            judge=functools.partial(
                judge_candidates,
                mode=mode,
                weights=relevance["weights"],
                scale=scale,
                terms=wanted,
                sources=sources,
                vector=vector_units,
            ),
            trace=searched.tracing(trace),
        )

    def with_pages(chunks: Mapping[str, float]) -> PageScores[str, str]:
        # The keyword side's page part (ranking.page_signal), in keyword and hybrid alike.
        return page_scores(
            connection,
            index,
            action=action,
            scope=scope,
            query=query,
            terms=terms,
            chunks=chunks,
            sources=sources,
        )

    # A mid-size scope is scored exactly, a big one walked with a longer candidate list
    # (scope_size.exact_for, ef_search_for).
    ef_search, exact = config.ef_search, False
    if vector is not None and ef_search > 0:
        chunks = _scope_chunks(connection, index, scope, query, action)
        exact = exact_for(chunks, serverless=config.serverless)
        ef_search = ef_search_for(ef_search, chunks)
    # Vector candidates below it are none (fusion.above_floor): the embedder's floor.
    floor = 0.0 if embedder is None else relevance_floor(embedder.name)
    needed = query.offset + query.max_results
    # Room for the newest-generation dedupe and the per-document cap (module docstring).
    size = max(needed * _OVERFETCH, candidate_count(needed))
    pair: tuple[float, float] | None = None
    if query.group_by is not None:  # every page of a grouped search at one depth (grouping)
        size = _DEEPEST
    if mode is not SearchMode.HYBRID:
        if mode is SearchMode.VECTOR and vector is None:
            return []
        # A grouped search reads its deep candidate list as ids and scores, then only the
        # page's chunks, as hybrid does (bench/results/grouping.json).
        # Such a candidate has no _source: the named clauses say its origin and kind.
        # Every hit's named clauses say which query terms its chunk holds (named_clauses).
        lean: dict[str, Any] = {"named": term_clauses(wanted)}
        if query.group_by is not None:
            lean = {
                "candidates": True,
                "candidate_path": bool(query.file_patterns),
                "candidate_facts": not config.client_ids,
                "named": named_clauses(weights, pairs, wanted),
            }
        trim = queries.CANDIDATES_FILTER_PATH if query.group_by is not None else None
        while True:
            if mode is SearchMode.KEYWORD:
                body = queries.keyword_search_body(terms, filters, size, **lean)
            else:
                assert vector is not None
                body = queries.vector_search_body(
                    vector, filters, size, ef_search=ef_search, exact=exact, **lean
                )
            (answer,) = send([Search(mode.value, body, trim)])
            hits = (answers.parse_hits if trim is None else answers.parse_candidates)(answer)
            raw = scores_of(hits)
            if mode is SearchMode.KEYWORD:  # with the page part (ranking.page_signal)
                parts["pages"] = pages = with_pages(raw)
                sides["keyword"] = combined = pages.combined()
                page = page_of(keyword_only(combined), {})
            else:
                found["vector"] = len(raw)
                sides["vector"] = kept = above_floor(raw, floor)
                page = page_of(vector_only(kept), raw)
            shown = page.chosen[: page.page_size]
            if not _read_deeper(
                query, size=size, hits=hits, raw=raw, chosen=shown, floor=floor, mode=mode
            ):
                break
            size = _DEEPEST
    else:
        # A fixed depth (>= MAX_MAX_RESULTS), so that every page is a slice of one order.
        size = HYBRID_CANDIDATES
        with_path = bool(query.file_patterns)  # for the exact glob check in scores_of
        # Server-made ids (Serverless) say nothing of the chunk: its facts as doc values.
        lean = {
            "candidates": True,
            "candidate_path": with_path,
            "candidate_facts": not config.client_ids,
            "named": named_clauses(weights, pairs, wanted),
        }
        trim = queries.CANDIDATES_FILTER_PATH
        body = queries.keyword_search_body(terms, filters, size, **lean)
        searches = [Search("keyword", body, trim)]
        if vector is not None:
            body = queries.vector_search_body(
                vector, filters, size, ef_search=ef_search, exact=exact, **lean
            )
            searches.append(Search("vector", body, trim))
        keyword_response, *rest = send(searches)
        vector_response: Mapping[str, Any] = rest[0] if rest else {}
        pair = hybrid_weights(
            None if embedder is None else embedder.name,
            config.keyword_weight,
            config.vector_weight,
        )
        keyword_raw = scores_of(answers.parse_candidates(keyword_response))
        parts["pages"] = pages = with_pages(keyword_raw)
        sides["keyword"] = keyword_raw = pages.combined()
        vector_raw = scores_of(answers.parse_candidates(vector_response))
        found["vector"] = len(vector_raw)
        sides["vector"] = vector_kept = above_floor(vector_raw, floor)
        page = page_of(fuse_weighted(keyword_raw, vector_kept, *pair), vector_raw)
    chosen = page.chosen
    # The page's chunks with their _source; the candidates' own stay for the trace.
    page_sources = sources
    if (mode is SearchMode.HYBRID or query.group_by is not None) and chosen:
        ids = [item.key for item in chosen]
        answer = connection.search(index, action, queries.chunks_by_id_body(ids, filters))
        page_sources = {hit.id: hit.source for hit in answers.parse_hits(answer)}
        chosen = [item for item in chosen if item.key in page_sources]
    explained = page.explanations()
    return [
        _result(
            page_sources[item.key],
            item,
            scope,
            libraries,
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
    hits: Sequence[answers.Hit],
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
