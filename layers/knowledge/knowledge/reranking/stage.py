"""Where reranking runs in a search, on what, for how long, and what a failure does.

``RerankingStage.search(store, scope, query)``:

1. asks the store for ``max(top_n, offset + max_results)`` results from the top
   (``offset`` 0; ``min_score`` 0 when the query has one: that cut is made here; without
   one the store's default floor applies, so an unanswerable question is not reranked),
   the same candidates in the same order every page of the query sees;
2. reranks the first ``top_n`` of them (``RERANK_TOP_N``, default 20): each becomes
   ``rank_score = rerank_score`` (the reranker's, in [0, 1]), ``search_score`` keeps the
   store's ``rank_score`` (its fused score) and ``score`` (the absolute relevance,
   ``knowledge.ranking.relevance``), ``keyword_score`` and ``vector_score`` stay as they
   were; ties keep the search order. Candidates past ``top_n`` follow in search order
   with ``rerank_score`` null and ``rank_score = min(search_score, the lowest rerank
   score)``, so the list stays sorted by ``rank_score``;
3. drops results whose absolute ``score`` is below ``min_score`` (as a store does), in
   the reranked order, and returns the page ``[offset, offset + max_results)``, with a
   ``RerankReport`` (the response's ``rerank`` field); a first
   page gets the lesson cards past it (``origin_weights.pick_extra_lessons``), picked
   from the reranked order, and, inside ``explain.explaining()``, each result's
   explanation says its move (``explain_moves``).

The reranker gets ``timeout`` seconds, less when the request's deadline
(``knowledge.core.deadline``) is nearer. If it fails, answers something unusable or is late,
the search order stands (``reranked`` false, logged as a warning with the reason); the
caller never sees an error from it. A late call finishes in the background (the Bedrock
client's own timeouts end it).
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import functools
import logging
import math
import time
from dataclasses import dataclass, replace
from typing import Any

from knowledge.core.deadline import current_deadline
from knowledge.core.errors import ValidationError
from knowledge.core.model import MAX_MAX_RESULTS, SearchQuery, SearchResult
from knowledge.core.scope import KnowledgeScope
from knowledge.ranking import explain
from knowledge.ranking.origin_weights import pick_extra_lessons
from knowledge.reranking.base import Reranker
from knowledge.stores.protocol import KnowledgeStore

__all__ = [
    "DEFAULT_RERANK_TIMEOUT",
    "DEFAULT_RERANK_TOP_N",
    "MAX_RERANK_TOP_N",
    "RerankReport",
    "RerankingStage",
]

logger = logging.getLogger(__name__)

DEFAULT_RERANK_TOP_N = 20
"""Candidates reranked by default: a page of 5 with room for 3 more pages."""
MAX_RERANK_TOP_N = MAX_MAX_RESULTS
DEFAULT_RERANK_TIMEOUT = 3.0
"""Seconds a rerank call may take (less when the request's deadline is nearer)."""


@functools.cache
def _pool() -> concurrent.futures.ThreadPoolExecutor:
    """Threads the rerank calls run on, so a search can stop waiting at its time limit."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="rerank")


@dataclass(frozen=True, slots=True)
class RerankReport:
    """What the stage did: ``reranked`` is false when the search order stands, with the
    ``reason`` (``failed``, ``timeout``, ``no time left``, ``no candidates``)."""

    reranker: str
    reranked: bool
    candidates: int
    took_ms: float
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "reranker": self.reranker,
            "reranked": self.reranked,
            "candidates": self.candidates,
            "took_ms": round(self.took_ms, 1),
            "reason": self.reason,
        }


class RerankingStage:
    """Reranks the top ``top_n`` candidates of a search with ``reranker`` (module
    docstring). ``timeout`` bounds one rerank call."""

    def __init__(
        self,
        reranker: Reranker,
        *,
        top_n: int = DEFAULT_RERANK_TOP_N,
        timeout: float = DEFAULT_RERANK_TIMEOUT,
    ) -> None:
        if isinstance(top_n, bool) or not isinstance(top_n, int):
            raise ValidationError("rerank_top_n", f"must be an integer, got {top_n!r}")
        if not 1 <= top_n <= MAX_RERANK_TOP_N:
            raise ValidationError(
                "rerank_top_n", f"must be between 1 and {MAX_RERANK_TOP_N}, got {top_n}"
            )
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise ValidationError("rerank_timeout", f"must be a positive number, got {timeout!r}")
        self._reranker = reranker
        self._top_n = top_n
        self._timeout = float(timeout)

    @property
    def reranker(self) -> Reranker:
        return self._reranker

    @property
    def top_n(self) -> int:
        return self._top_n

    @property
    def timeout(self) -> float:
        return self._timeout

    def search(
        self, store: KnowledgeStore, scope: KnowledgeScope, query: SearchQuery
    ) -> tuple[list[SearchResult], RerankReport]:
        """The page ``query`` asks for, reranked (module docstring)."""
        needed = query.offset + query.max_results
        depth = max(self._top_n, needed)
        # Without min_score the store's default floor decides whether the scope has
        # anything to say; a caller's min_score is applied below, in the reranked order.
        floor = None if query.min_score is None else 0.0
        found = store.search(scope, replace(query, offset=0, max_results=depth, min_score=floor))
        candidates = [r for r in found if not r.extra]
        ranked, report = self.rerank(query.text, candidates)
        if report.reranked and explain.current() is not None:
            ranked = explain_moves(candidates, ranked, report.to_dict())
        kept = [r for r in ranked if r.score >= query.result_floor]
        page = kept[query.offset : needed]
        # Lesson cards past a first chunk-level page (ranking.origin_weights, weighted_page).
        if query.offset == 0 and query.group_by is None:
            rest = [
                *kept[needed:],
                *(r for r in found if r.extra and r.score >= query.result_floor),
            ]
            page += pick_extra_lessons(page, rest, query.weights)
        return page, report

    def rerank(
        self, text: str, candidates: list[SearchResult]
    ) -> tuple[list[SearchResult], RerankReport]:
        """``candidates`` (in rank order) with the first ``top_n`` reranked, or as they
        are when the reranker fails or is late."""
        head, tail = candidates[: self._top_n], candidates[self._top_n :]
        name = self._reranker.name
        if not head:
            return candidates, RerankReport(name, False, 0, 0.0, "no candidates")
        deadline = current_deadline()
        budget = self._timeout if deadline is None else deadline.timeout(self._timeout)
        started = time.perf_counter()

        def fallback(reason: str, detail: str) -> tuple[list[SearchResult], RerankReport]:
            took_ms = (time.perf_counter() - started) * 1000.0
            logger.warning(
                "reranking skipped, results in search order: %s",
                detail,
                extra={"reranker": name, "reason": reason, "candidates": len(head)},
            )
            return candidates, RerankReport(name, False, len(head), took_ms, reason)

        if budget <= 0.0:
            return fallback("no time left", "the request's deadline has passed")
        passages = [r.content for r in head]
        context = contextvars.copy_context()
        future = _pool().submit(context.run, self._reranker.rerank, text, passages)
        try:
            scores = future.result(timeout=budget)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return fallback("timeout", f"no answer within {budget:.3f} s")
        except Exception as exc:
            return fallback("failed", f"{type(exc).__name__}: {exc}")
        if len(scores) != len(head) or not all(
            isinstance(s, int | float) and math.isfinite(s) and 0.0 <= s <= 1.0 for s in scores
        ):
            return fallback(
                "failed",
                f"{len(scores)} scores for {len(head)} passages, or a score outside [0, 1]",
            )
        took_ms = (time.perf_counter() - started) * 1000.0
        order = sorted(range(len(head)), key=lambda i: (-scores[i], i))
        reranked = [
            replace(
                head[i],
                rank_score=float(scores[i]),
                rerank_score=float(scores[i]),
                search_score=_searched(head[i]),
            )
            for i in order
        ]
        lowest = min(float(s) for s in scores)
        rest = [
            replace(r, rank_score=min(_searched(r), lowest), search_score=_searched(r))
            for r in tail
        ]
        return reranked + rest, RerankReport(name, True, len(head), took_ms)


def _searched(result: SearchResult) -> float:
    """The score the store ranked ``result`` by (its ``score`` when it has no
    ``rank_score``)."""
    return result.score if result.rank_score is None else result.rank_score


def explain_moves(
    before: list[SearchResult], after: list[SearchResult], report: dict[str, Any]
) -> list[SearchResult]:
    """``after`` with each result's explanation saying its rerank (``knowledge.ranking.explain``):
    its rank before and after, its rerank score (``None`` past the reranked ones) and
    the lowest rerank score; the stage's report and moves recorded with the request."""
    rank_of = {(r.document_path, r.chunk_index, id(r.explanation)): i for i, r in enumerate(before)}
    scores = [r.rerank_score for r in after if r.rerank_score is not None]
    lowest = min(scores) if scores else None
    moves: list[dict[str, Any]] = []
    explained: list[SearchResult] = []
    for rank, result in enumerate(after):
        earlier = rank_of.get((result.document_path, result.chunk_index, id(result.explanation)))
        move = {
            "document_path": result.document_path,
            "chunk_index": result.chunk_index,
            "from_rank": None if earlier is None else earlier + 1,
            "to_rank": rank + 1,
            "rerank_score": result.rerank_score,
            "lowest_rerank_score": lowest,
        }
        if result.rerank_score is not None:
            moves.append(move)
        if result.explanation is None:
            explained.append(result)
        else:
            explanation = {**result.explanation, "rerank": move}
            explained.append(replace(result, explanation=explanation))
    explain.record_rerank(report, moves)
    return explained
