"""How the embedded store ranks: fusing its two sides, and when a page reads deeper.

``Fusion`` holds the store's fusion settings (``"weighted"`` with its weights, or
``"rrf"`` with its ``k``; the vector side's relevance floor) and fuses one search's
candidates (``fusion.keyword_only``, ``vector_only``, ``fuse_weighted``, ``fuse_rrf``).
``read_deeper`` says when a single-mode page left short by the per-document cap is read
again at ``DEEPEST``, and ``deeper_read_same`` when that read would answer the same
keyword page; ``judged_by_terms`` judges a keyword page's candidates once per
set of terms they hold, ``scores_read`` says which of them a page reads the absolute
scores of, ``may_answer`` whether any chunk could pass the evidence floor at all and
``answering_term_sets`` which sets of terms a chunk must hold to pass it;
``unit_query_vector`` is the query's unit vector, and
``search_results`` the chosen page as results. Pure functions
over candidates, no SQL.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from knowledge.core.errors import EmbeddingError
from knowledge.core.model import MAX_MAX_RESULTS, SearchMode, SearchQuery, SearchResult
from knowledge.core.rank_weights import NEUTRAL
from knowledge.core.scope import KnowledgeScope
from knowledge.core.scope_set import library_hit, marked
from knowledge.embedding.base import EmbeddingClient
from knowledge.ranking import explain
from knowledge.ranking.fusion import (
    Fused,
    above_floor,
    candidate_count,
    fuse_rrf,
    fuse_weighted,
    hybrid_weights,
    keyword_only,
    vector_only,
)
from knowledge.ranking.grouping import select_page
from knowledge.ranking.origin_weights import weigh
from knowledge.ranking.page_signal import PageScores, with_pages
from knowledge.ranking.relevance import Calibration, Judged, QueryWeights, judge
from knowledge.ranking.synonym_expansion import QueryTerms
from knowledge.ranking.weighted_page import Page

from .candidates import Candidate, ChunkKey
from .schema import Identity, load_json

__all__ = [
    "ANSWERING_TERMS",
    "DEEPEST",
    "Fusion",
    "answering_term_sets",
    "deeper_read_same",
    "document_of",
    "judged_by_terms",
    "may_answer",
    "read_deeper",
    "scores_read",
    "search_results",
    "unit_query_vector",
]


def document_of(key: ChunkKey) -> tuple[str, str, str]:
    """The document of a candidate key ``(path, chunk_index, context, agent)``."""
    return key[3], key[2], key[0]


DEEPEST = candidate_count(MAX_MAX_RESULTS)
"""The candidate depth of a single-mode search's deepest page (``offset + max_results``
at its maximum)."""


def read_deeper(
    mode: SearchMode,
    query: SearchQuery,
    *,
    limit: int,
    chosen: int,
    fused: list[Fused[ChunkKey]],
    keyword: list[Candidate],
    vector: list[Candidate],
) -> bool:
    """Whether a single-mode page left short (by the per-document cap) must be read again
    at ``DEEPEST``: only if the side returned ``limit`` candidates (more exist) and its
    weakest still counted (above the floor; ``min_score`` is on the absolute scale,
    which does not follow the rank order, so a candidate past the depth may pass it), so
    that every page of a query is a slice of the order its deepest page sees. Hybrid
    has one fixed depth."""
    side = keyword if mode is SearchMode.KEYWORD else vector
    return (
        mode is not SearchMode.HYBRID
        and chosen < query.max_results
        and limit < DEEPEST
        and len(side) == limit
        and len(fused) == limit
        and min(item.score for item in fused) > 0.0
    )


def deeper_read_same(
    page: Page[ChunkKey],
    parts: PageScores[ChunkKey, Any],
    added: Sequence[Candidate],
    facts: Callable[[ChunkKey], tuple[object, bool]],
    query: SearchQuery,
) -> bool:
    """Whether a keyword page that ``read_deeper`` would read again at ``DEEPEST`` is
    already the page that read answers, so that it need not be made: ``added`` are the
    chunks the deeper read adds (by raw score, best first: each scores no more than this
    read's weakest), ``parts`` this read's two keyword parts (``KeywordIndex.side``),
    ``facts`` the ``(origin, is_lesson)`` of every candidate.

    So when the page starts at offset 0, the document of every added chunk already has
    ``max_chunks_per_document`` chunks on it, and for each document a stand-in scoring
    as its best added chunk, with the facts of any of its added chunks, ranks strictly
    below that document's last chunk on the page, while this read's candidates keep
    their scores and ``weigh``'s divisor does not move (the deeper read's lies between
    this read's and the stand-ins'; the stand-ins' documents are this read's, so the
    page scores' maximum does not move either). Every score is monotonic in the raw
    score and the weights, so no added chunk can then take a place on the page, move a
    score or be appended as a lesson (its document is full), and the page being
    non-empty, the search answers at either depth; each chunk's absolute score is its
    own. Without added chunks the deeper read has this read's candidates. Never while
    explaining (the record lists every candidate)."""
    if not added:
        return True
    cap = query.max_chunks_per_document
    if explain.current() is not None or query.offset != 0 or cap is None:
        return False
    count: dict[tuple[str, str, str], int] = {}
    last: dict[tuple[str, str, str], float] = {}
    for item in page.chosen:
        if item.key not in page.extras:
            document = document_of(item.key)
            count[document] = count.get(document, 0) + 1
            last[document] = item.score
    raw = dict(parts.chunks)
    stand_ins: dict[tuple[tuple[str, str, str], tuple[object, bool]], ChunkKey] = {}
    for chunk in added:
        document = document_of(chunk.key)
        if count.get(document, 0) < cap:
            return False
        found = facts(chunk.key)
        if (document, found) not in stand_ins:  # the first is the best of its kind
            key = (chunk.key[0], -1 - len(stand_ins), chunk.key[2], chunk.key[3])
            stand_ins[document, found] = key
            raw[key] = chunk.score
    weights = query.weights or NEUTRAL
    facts_of = {key: found for (_, found), key in stand_ins.items()}
    _, read = weigh(keyword_only(parts.combined()), facts, weights)
    fused = keyword_only(with_pages(raw, parts.pages, parts.document_of, parts.weight).combined())
    ranked, weighing = weigh(fused, lambda key: facts_of.get(key) or facts(key), weights)
    scores = {item.key: item.score for item in ranked}
    if weighing.divisor != read.divisor or any(
        scores[item.key] != item.score for item in page.ranked
    ):
        return False
    return all(scores[key] < last[document] for (document, _), key in stand_ins.items())


@dataclass(frozen=True, slots=True)
class Fusion:
    """A store's fusion settings (module docstring); ``embedder_name`` picks the default
    hybrid weights (``fusion.hybrid_weights``) where none are given."""

    method: str
    rrf_k: int
    floor: float
    keyword_weight: float | None
    vector_weight: float | None
    embedder_name: str | None

    def fuse(
        self,
        mode: SearchMode,
        keyword: list[Candidate],
        vector: list[Candidate],
    ) -> list[Fused[ChunkKey]]:
        if mode is SearchMode.KEYWORD:
            return keyword_only({c.key: c.score for c in keyword})
        kept = above_floor({c.key: c.score for c in vector}, self.floor)
        vector = [c for c in vector if c.key in kept]
        if mode is SearchMode.VECTOR:
            return vector_only({c.key: c.score for c in vector})
        if self.method == "rrf":
            return fuse_rrf([c.key for c in keyword], [c.key for c in vector], self.rrf_k)
        return fuse_weighted(
            {c.key: c.score for c in keyword},
            {c.key: c.score for c in vector},
            *hybrid_weights(self.embedder_name, self.keyword_weight, self.vector_weight),
        )

    def trace(
        self,
        scope: KnowledgeScope,
        query: SearchQuery,
        mode: SearchMode,
        sides: tuple[list[Candidate], list[Candidate]],
        *,
        pages: PageScores[ChunkKey, Any] | None = None,
        synonyms: QueryTerms | None = None,
    ) -> dict[str, Any]:
        """The store's part of an explained search (``ranking.explain.record_search``):
        the sides as ``fuse`` got them, the keyword side's two parts (``pages``), the
        floor, the weights or RRF's ``k``."""
        keyword, vector = sides
        above = above_floor({c.key: c.score for c in vector}, self.floor)
        kept = [c for c in vector if c.key in above]
        hybrid = mode is SearchMode.HYBRID
        weighted = hybrid and self.method != "rrf"
        pair = None
        if weighted:
            pair = hybrid_weights(self.embedder_name, self.keyword_weight, self.vector_weight)
        return {
            "store": "embedded",
            "scope": f"{scope.agent}/*" if query.cross_context else scope.key,
            "mode": mode.value,
            "fusion": self.method if hybrid else mode.value,
            "keyword": None if mode is SearchMode.VECTOR else {c.key: c.score for c in keyword},
            "page": None if mode is SearchMode.VECTOR else pages,
            "vector": None if mode is SearchMode.KEYWORD else {c.key: c.score for c in kept},
            "vector_found": len(vector),
            "floor": self.floor,
            "hybrid_weights": pair,
            "rrf_k": self.rrf_k if hybrid and not weighted else None,
            "orders": (
                ([c.key for c in keyword], [c.key for c in kept])
                if hybrid and not weighted
                else None
            ),
            "synonyms": synonyms,
        }


def judged_by_terms(
    mode: SearchMode,
    weights: QueryWeights,
    scale: Calibration,
    candidates: Sequence[Fused[ChunkKey]],
    terms_of: Mapping[ChunkKey, AbstractSet[str]],
) -> Judged[ChunkKey]:
    """``relevance.judge`` of ``candidates`` without vector scores, where a candidate's
    evidence is its coverage alone: each distinct set of held terms (``terms_of``, none
    for a candidate missing there) is judged once, by its first candidate, and every
    candidate holding that set gets the same evidence and score. A long page's
    candidates hold few distinct sets of a query's terms."""
    empty: frozenset[str] = frozenset()
    first: dict[AbstractSet[str], Fused[ChunkKey]] = {}
    for item in candidates:
        first.setdefault(terms_of.get(item.key, empty), item)
    judged = judge(mode, weights, scale, list(first.values()), terms_of=terms_of)
    evidence, scores = {}, {}
    for item in candidates:
        by = first[terms_of.get(item.key, empty)].key
        evidence[item.key] = judged.evidence[by]
        scores[item.key] = judged.scores[by]
    return Judged(mode, weights, scale, evidence, scores)


def may_answer(
    weights: QueryWeights, scale: Calibration, query: SearchQuery, frequencies: Mapping[str, int]
) -> bool:
    """Whether a keyword search could answer anything (``Judged.passing``): whether a
    chunk holding every term of the query that a searched chunk may hold (all but the
    typed terms none holds: ``frequencies`` counts them, ``TermStatistics``) would reach
    the evidence floor. Coverage only grows with the terms a chunk holds, and the score
    with the coverage (a keyword calibration's coefficient of coverage is positive), so
    no candidate scores more: if that chunk would not, the search answers nothing at
    any depth, and need not read a candidate. Always while a search is explained (its
    record lists the candidates)."""
    if explain.current() is not None or scale.keyword[1] < 0.0:
        return True
    held = frozenset(
        term for term in weights.terms if term not in weights.typed or frequencies.get(term, 0)
    )
    best = Fused(("", 0, "", ""), 1.0, 1.0, None)
    judged = judged_by_terms(SearchMode.KEYWORD, weights, scale, [best], {best.key: held})
    return bool(judged.passing([best], query))


ANSWERING_TERMS = 8
"""The most distinct terms ``answering_term_sets`` enumerates the sets of (256)."""


def answering_term_sets(
    weights: QueryWeights, scale: Calibration, query: SearchQuery, frequencies: Mapping[str, int]
) -> list[frozenset[str]] | None:
    """The smallest sets of the query's terms a keyword search's chunk must hold every
    term of to reach the evidence floor (``Judged.passing``), fewest terms first; an
    empty set when a chunk holding none does. A chunk holding none of them answers
    nothing, as ``may_answer`` reasons (coverage only grows with the terms held, the
    score with the coverage): so if no chunk of the searched scopes holds every term of
    one of them (``KeywordIndex.holds_any``), the search answers nothing at any depth.
    Only the typed terms some searched chunk holds (``frequencies``) are enumerated.
    ``None`` when it cannot tell: while a search is explained (its record lists the
    candidates), with synonyms (a typed term's credit then also comes from the terms
    added for it), a keyword calibration whose coefficient of coverage is negative, or
    more than ``ANSWERING_TERMS`` such terms."""
    if explain.current() is not None or scale.keyword[1] < 0.0 or weights.synonyms:
        return None
    held = sorted(term for term in weights.typed if frequencies.get(term, 0))
    if len(held) > ANSWERING_TERMS:
        return None
    sets = [
        frozenset(c) for size in range(len(held) + 1) for c in itertools.combinations(held, size)
    ]
    stand_ins = [Fused(("", n, "", ""), 1.0, 1.0, None) for n in range(len(sets))]
    terms_of = {item.key: terms for item, terms in zip(stand_ins, sets, strict=True)}
    judged = judged_by_terms(SearchMode.KEYWORD, weights, scale, stand_ins, terms_of)
    answering: list[frozenset[str]] = []
    for item, terms in zip(stand_ins, sets, strict=True):  # fewest terms first
        alone = Judged(
            judged.mode,
            judged.weights,
            judged.calibration,
            {item.key: judged.evidence[item.key]},
            {item.key: judged.scores[item.key]},
        )
        # Alone, it passes when it reaches the evidence floor (the result floor is no
        # higher): what the search's best candidate must do for it to answer anything.
        if alone.passing([item], query) and not any(smaller <= terms for smaller in answering):
            answering.append(terms)
    return answering


def scores_read(
    ranked: list[Fused[ChunkKey]], query: SearchQuery, *, lessons: bool
) -> list[Fused[ChunkKey]] | None:
    """The candidates of ``ranked`` (best first, weighed) whose absolute scores a keyword
    page reads, if the search answers: the page itself (``grouping.select_page``), when
    every candidate passes the result floor (``result_floor`` 0: no ``min_score``) so
    that the page is cut from them all; ``None`` (every candidate's is read) for a
    grouped page, when lesson cards may be appended (``lessons``) or while a search is
    explained (the record holds the best score of them all). Whether the search answers
    at all is the best score's, of every candidate (``Judged.passing``); the page's best
    reaching the evidence floor says so for them all (a store judges them all
    otherwise)."""
    if (
        lessons
        or query.result_floor > 0.0
        or query.group_by is not None
        or explain.current() is not None
    ):
        return None
    page, _ = select_page(ranked, query, document_of)
    return page


def unit_query_vector(
    embedder: EmbeddingClient, identity: Identity, text: str
) -> list[float] | None:
    """The query's unit vector, or ``None`` when it is the zero vector (no signal)."""
    vector = list(embedder.embed(text).vector)
    if len(vector) != identity.dimensions:
        raise EmbeddingError(
            f"embedder {identity.name} returned {len(vector)} dimensions for the "
            f"query; it declares {identity.dimensions}"
        )
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if not math.isfinite(norm):
        raise EmbeddingError(f"embedder {identity.name} returned a non-finite vector")
    if norm == 0.0:
        return None
    return [x / norm for x in vector]


def search_results(
    page: Page[ChunkKey],
    rowids: dict[ChunkKey, int],
    rows: dict[int, tuple[str, int, str, str]],
    scope: KnowledgeScope,
    libraries: tuple[KnowledgeScope, ...],
) -> list[SearchResult]:
    """The page's candidates (``ranking.weighted_page``) as results, from their chunk rows
    (``candidates.chunk_rows``); a hit of one of the query's shared ``libraries`` names it
    (``core.scope_set.marked``); a grouped search's ``matching_chunks``
    (``ranking.grouping``), the lesson extras marked, each with its explanation
    (``ranking.explain``)."""
    explained = page.explanations()
    results = []
    for fused in page.chosen:
        path, chunk_index, content, metadata = rows[rowids[fused.key]]
        library = library_hit(scope, libraries, fused.key[3], fused.key[2])
        results.append(
            SearchResult(
                document_path=path,
                chunk_index=chunk_index,
                content=content,
                score=page.score(fused.key),
                rank_score=fused.score,
                keyword_score=fused.keyword_score,
                vector_score=fused.vector_score,
                metadata=marked(load_json(metadata), library),
                matching_chunks=page.counts.get(fused.key),
                extra=fused.key in page.extras,
                explanation=explained(fused.key),
            )
        )
    return results
