"""Why a search ranked what it did: the per-stage trace of ``"explain": true``.

The design's pipeline logs every stage (``fusionLog``). Here a request that asks for it
runs its search inside ``explaining()``; while it does, every store search records one
*search* (``record_search``: the query's terms after analysis, what each side found,
the normalisation bounds, weights and per-query confidence, the relevance floor,
``min_score`` and the per-document cap, the origin and lesson weights) and gives each
result its own explanation (``SearchResult.explanation``: its raw side scores and ranks,
normalised scores, fused score, origin and lesson weights). A reranking stage adds its
moves (``record_rerank``), a token budget what it dropped (``record_budget``). A
search with the shared library is one store query (``knowledge.core.scope_set``): one
search record naming the ``libraries``, its library hits weighted and normalised with
the rest.

**The numbers recompute every score** (``recompute``; ``tests/contract`` does it on
every store and mode): with ``e`` a result's explanation and ``s`` its search,

- the keyword side's ``raw`` is ``e.keyword.chunk / s.keyword.chunk_max +
  s.keyword.page_weight * e.keyword.page / s.keyword.page_max`` (a chunk's own score
  and its page's, ``knowledge.ranking.page_signal``; the page part 0 when ``page_max``
  is 0);
- keyword mode: ``fused = e.keyword.raw / s.keyword.max``;
- vector mode: ``fused = e.vector.raw`` (the unit score ``(1 + cos) / 2``);
- hybrid, weighted: each side ``n = (raw - min) / (max - min)`` (1.0 when the side's
  scores are all equal; 0 for a side that did not return the chunk), ``fused =
  (keyword.effective_weight * n_kw + vector.effective_weight * n_vec) / fusion.divisor``
  where ``effective_weight = weight * confidence`` (the configured weights when both
  would be 0);
- hybrid, RRF: ``fused = ((k + 1) / (k + rank_kw) + (k + 1) / (k + rank_vec)) /
  fusion.divisor`` (a side without the chunk adds 0);
- then ``searched = fused * origin_weight * lesson_weight / weights.divisor``
  (``knowledge.ranking.origin_weights``), which is ``rank_score`` unless a reranker ran:
  then the reranked ones score their ``rerank_score`` and the rest ``min(searched,
  lowest rerank score)``;
- the absolute ``score`` (``knowledge.ranking.relevance``): the result's
  ``relevance.coverage`` and ``relevance.vector``, with the search's ``relevance.script``,
  through the search's ``relevance.calibration`` (``recompute_relevance``).

Nothing is recorded, and nothing costs anything, outside ``explaining()``.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from knowledge.core.errors import ValidationError
from knowledge.core.model import SearchMode, SearchQuery
from knowledge.ranking.analysis import ANALYSIS, keyword_terms
from knowledge.ranking.explain_format import format_trace
from knowledge.ranking.fusion import CONFIDENCE_RANK, Fused, K, min_max, side_confidence
from knowledge.ranking.origin_weights import RankWeights, Weighing
from knowledge.ranking.page_signal import PageScores, recombine
from knowledge.ranking.relevance import Calibration, Evidence, Judged, Script
from knowledge.ranking.synonym_expansion import QueryTerms

__all__ = [
    "Explanation",
    "current",
    "explaining",
    "format_trace",
    "recompute",
    "recompute_relevance",
    "record_budget",
    "record_rerank",
    "record_search",
    "requested",
]


_ACTIVE: contextvars.ContextVar[Explanation | None] = contextvars.ContextVar(
    "knowledge_explain", default=None
)


@dataclass(slots=True)
class Explanation:
    """What one request's searches recorded (module docstring)."""

    searches: list[dict[str, Any]] = field(default_factory=list)
    rerank: dict[str, Any] | None = None
    budget: dict[str, Any] | None = None

    def to_dict(self, results: Sequence[Any]) -> dict[str, Any]:
        """The response's ``explain`` field: the searches, each result's explanation in
        result order (``None`` for a result no store explained), the reranker's and the
        budget's records when there were any."""
        body: dict[str, Any] = {
            "searches": self.searches,
            "results": [getattr(r, "explanation", None) for r in results],
        }
        if self.rerank is not None:
            body["rerank"] = self.rerank
        if self.budget is not None:
            body["budget"] = self.budget
        return body


@contextlib.contextmanager
def explaining() -> Iterator[Explanation]:
    """Record the searches run inside the block (module docstring)."""
    explanation = Explanation()
    token = _ACTIVE.set(explanation)
    try:
        yield explanation
    finally:
        _ACTIVE.reset(token)


def requested(data: Mapping[str, Any]) -> bool:
    """Whether a search body asks for the trace (``"explain": true``; ``null``: no)."""
    value = data.get("explain")
    if value is not None and not isinstance(value, bool):
        raise ValidationError("explain", "must be true or false")
    return value is True


def current() -> Explanation | None:
    """The request's ``Explanation`` while one is being recorded, else ``None``."""
    return _ACTIVE.get()


def _clean(score: float) -> float:
    return score if math.isfinite(score) and score > 0.0 else 0.0


def _side(
    scores: Mapping[K, float] | None, weight: float | None
) -> tuple[dict[str, Any] | None, dict[K, float], dict[K, int]]:
    """A side's record, its normalised scores and its ranks (1-based, by raw score)."""
    if scores is None:
        return None, {}, {}
    cleaned = {key: _clean(score) for key, score in scores.items()}
    ranks = {
        key: rank
        for rank, key in enumerate(sorted(cleaned, key=lambda k: (-cleaned[k], k)), start=1)
    }
    record: dict[str, Any] = {
        "candidates": len(cleaned),
        "max": max(cleaned.values(), default=0.0),
        "min": min(cleaned.values(), default=0.0),
    }
    if weight is not None:
        record["weight"] = weight
        record["confidence"] = side_confidence(cleaned, CONFIDENCE_RANK)
    return record, min_max(cleaned), ranks


def record_search(
    *,
    store: str,
    scope: str,
    text: str,
    mode: str,
    fusion: str,
    keyword: Mapping[K, float] | None,
    vector: Mapping[K, float] | None,
    vector_found: int = 0,
    floor: float = 0.0,
    hybrid_weights: tuple[float, float] | None = None,
    rrf_k: int | None = None,
    orders: tuple[Sequence[K], Sequence[K]] | None = None,
    ranked: Sequence[Fused[K]],
    weighing: Weighing,
    weights: RankWeights,
    min_score: float,
    max_chunks_per_document: int,
    document_of: Callable[[K], Hashable],
    offset: int,
    max_results: int,
    returned: int,
    extras: int,
    group_by: str | None = None,
    libraries: Sequence[str] = (),
    page: PageScores[K, Any] | None = None,
    synonyms: QueryTerms | None = None,
    judged: Judged[K] | None = None,
    query: SearchQuery | None = None,
    vector_side: str | None = None,
) -> Callable[[K, bool], dict[str, Any]]:
    """Record one store search in the request's ``Explanation`` and return the function
    that explains one of its results (``explain(key, extra)``). ``keyword``/``vector`` are
    the side's raw candidate scores as fusion got them (``vector`` above the floor,
    ``vector_found`` how many there were before it); ``ranked`` the candidates after
    the weights (best first), ``weighing`` what ``origin_weights.weigh`` did; ``orders``
    the two sides' candidate orders RRF ranked (keyword, vector); ``page`` the keyword
    side's two parts (``ranking.page_signal``: ``keyword`` is their combination);
    ``synonyms`` the keyword side's terms with what the scope's synonyms added
    (``query.synonyms``: each added term and its weight; both keyword parts, chunk and
    page, already hold them, so the formulas are the same); ``vector_side`` why a vector or
    hybrid search ran on the keyword side alone (``ranking.vector_side``: ``mode`` is the
    one asked for, ``fusion`` says ``keyword``)."""
    explanation = current()
    assert explanation is not None  # the stores call this only inside explaining()
    kw_side, vec_side = _side_records(
        keyword,
        vector,
        hybrid_weights=hybrid_weights,
        orders=orders,
        page=page,
        vector_found=vector_found,
        floor=floor,
    )
    fusion_record = _fusion_record(fusion, len(ranked), rrf_k, kw_side, vec_side)
    number = len(explanation.searches)
    sides: dict[str, Any] = {} if vector_side is None else {"vector_side": vector_side}
    explanation.searches.append(
        {
            "search": number,
            "store": store,
            "scope": scope,
            "libraries": list(libraries),
            "mode": mode,
            **sides,
            "query": _query_record(text, synonyms),
            "keyword": kw_side[0],
            "vector": vec_side[0],
            "fusion": fusion_record,
            "weights": {
                **weights.to_dict(),
                "divisor": weighing.divisor,
                "weighted": len(weighing.factors),
                "lessons": len(weighing.lessons),
            },
            **_selection_records(
                ranked,
                judged,
                query,
                min_score=min_score,
                max_chunks_per_document=max_chunks_per_document,
                document_of=document_of,
                wanted=offset + max_results,
            ),
            "page": {
                "offset": offset,
                "max_results": max_results,
                "returned": returned,
                "extra_lessons": extras,
                "group_by": group_by,
            },
        }
    )

    return _result_explainer(
        number, keyword, vector, kw_side, vec_side, weighing=weighing, page=page, judged=judged
    )


_SideParts: TypeAlias = tuple[dict[str, Any] | None, dict[K, float], dict[K, int]]
"""A side's record, its normalised scores and its ranks (``_side``)."""


def _side_records(
    keyword: Mapping[K, float] | None,
    vector: Mapping[K, float] | None,
    *,
    hybrid_weights: tuple[float, float] | None,
    orders: tuple[Sequence[K], Sequence[K]] | None,
    page: PageScores[K, Any] | None,
    vector_found: int,
    floor: float,
) -> tuple[_SideParts[K], _SideParts[K]]:
    """Each side's record, normalised scores and ranks (``_side``): RRF's ranks as the
    store listed the sides, the keyword side's two parts, the vector side's floor."""
    kw_weight, vec_weight = hybrid_weights if hybrid_weights is not None else (None, None)
    kw_record, kw_norm, kw_rank = _side(keyword, kw_weight)
    vec_record, vec_norm, vec_rank = _side(vector, vec_weight)
    if orders is not None:  # RRF ranks as the store listed the sides
        kw_rank, vec_rank = _ranks(orders[0]), _ranks(orders[1])
    if kw_record is not None and page is not None:
        kw_record.update(page.record())
    if vec_record is not None:
        vec_record["found"] = vector_found
        vec_record["floor"] = floor
        vec_record["below_floor"] = vector_found - vec_record["candidates"]
    return (kw_record, kw_norm, kw_rank), (vec_record, vec_norm, vec_rank)


def _fusion_record(
    fusion: str,
    candidates: int,
    rrf_k: int | None,
    keyword: _SideParts[K],
    vector: _SideParts[K],
) -> dict[str, Any]:
    """The fusion stage's record: its method, its candidates and the divisor that brings
    its best fused score to 1 (module docstring). A weighted hybrid's side records get
    their ``effective_weight`` here."""
    kw_record, kw_norm, kw_rank = keyword
    vec_record, vec_norm, vec_rank = vector
    record: dict[str, Any] = {"method": fusion, "candidates": candidates}
    if fusion == "weighted" and kw_record is not None and vec_record is not None:
        kw_eff = kw_record["weight"] * kw_record["confidence"]
        vec_eff = vec_record["weight"] * vec_record["confidence"]
        if kw_eff + vec_eff <= 0.0:
            kw_eff, vec_eff = kw_record["weight"], vec_record["weight"]
        kw_record["effective_weight"] = kw_eff
        vec_record["effective_weight"] = vec_eff
        totals = [
            kw_eff * kw_norm.get(key, 0.0) + vec_eff * vec_norm.get(key, 0.0)
            for key in kw_norm.keys() | vec_norm.keys()
        ]
        record["divisor"] = max(totals, default=0.0)
    elif fusion == "rrf":
        k = rrf_k or 0
        record["k"] = k
        totals = [
            (k + 1) / (k + kw_rank[key]) * (key in kw_rank)
            + (k + 1) / (k + vec_rank[key]) * (key in vec_rank)
            for key in kw_rank.keys() | vec_rank.keys()
        ]
        record["divisor"] = max(totals, default=0.0)
    elif fusion == "keyword" and kw_record is not None:
        record["divisor"] = kw_record["max"]
    return record


def _query_record(text: str, synonyms: QueryTerms | None) -> dict[str, Any]:
    """The query as the keyword side read it: its terms after analysis, and what the
    scope's synonyms added."""
    record: dict[str, Any] = {"text": text, "terms": keyword_terms(text), "analysis": ANALYSIS}
    if synonyms is not None and synonyms.expanded:
        record["synonyms"] = synonyms.to_dict()
    return record


def _selection_records(
    ranked: Sequence[Fused[K]],
    judged: Judged[K] | None,
    query: SearchQuery | None,
    *,
    min_score: float,
    max_chunks_per_document: int,
    document_of: Callable[[K], Hashable],
    wanted: int,
) -> dict[str, Any]:
    """What chose the page from the weighted candidates: ``min_score`` (or the relevance
    floor, with ``judged``) and what it dropped, the relevance record, and the
    per-document cap with the candidates it passed over."""
    passing = list(ranked) if judged is None or query is None else judged.passing(ranked, query)
    return {
        "min_score": {
            "value": min_score if query is None else query.min_score,
            "dropped": (
                sum(1 for item in ranked if item.score + 1e-12 < min_score)
                if judged is None
                else len(ranked) - len(passing)
            ),
        },
        "relevance": None if judged is None or query is None else judged.record(query),
        "cap": {
            "max_chunks_per_document": max_chunks_per_document,
            "dropped": count_cap_drops(
                passing,
                min_score if judged is None else 0.0,
                max_chunks_per_document,
                document_of,
                wanted,
            ),
        },
    }


def _result_explainer(
    number: int,
    keyword: Mapping[K, float] | None,
    vector: Mapping[K, float] | None,
    kw_side: _SideParts[K],
    vec_side: _SideParts[K],
    *,
    weighing: Weighing,
    page: PageScores[K, Any] | None,
    judged: Judged[K] | None,
) -> Callable[[K, bool], dict[str, Any]]:
    """The function that explains one result of search ``number`` (``explain(key,
    extra)``, ``SearchResult.explanation``): its side scores and ranks, fused score,
    weights and relevance evidence."""
    _, kw_norm, kw_rank = kw_side
    _, vec_norm, vec_rank = vec_side

    def explain(key: K, extra: bool) -> dict[str, Any]:
        origin_weight, lesson_weight = weighing.factor(key)
        before = weighing.before.get(key, 0.0)
        kw_entry = _side_entry(keyword, kw_norm, kw_rank, key)
        if kw_entry is not None and page is not None and kw_entry["raw"] is not None:
            kw_entry.update(page.entry(key))
        entry: dict[str, Any] = {
            "search": number,
            "keyword": kw_entry,
            "vector": _side_entry(vector, vec_norm, vec_rank, key),
            "fused": before,
            "origin_weight": origin_weight,
            "lesson": key in weighing.lessons,
            "lesson_weight": lesson_weight,
            "weighted": before * origin_weight * lesson_weight,
            "searched": min(1.0, before * origin_weight * lesson_weight / weighing.divisor),
            "extra": extra,
        }
        if judged is not None:
            entry["relevance"] = judged.entry(key)
        return entry

    return explain


def _ranks(order: Sequence[K]) -> dict[K, int]:
    ranks: dict[K, int] = {}
    for rank, key in enumerate(order, start=1):
        ranks.setdefault(key, rank)
    return ranks


def _side_entry(
    raw: Mapping[K, float] | None, norm: Mapping[K, float], ranks: Mapping[K, int], key: K
) -> dict[str, Any] | None:
    if raw is None:
        return None
    if key not in raw:
        return {"raw": None, "rank": None, "normalised": 0.0}
    return {"raw": _clean(raw[key]), "rank": ranks[key], "normalised": norm.get(key, 0.0)}


def count_cap_drops(
    ranked: Sequence[Fused[K]],
    min_score: float,
    per_document: int,
    document_of: Callable[[K], Hashable],
    wanted: int,
) -> int:
    """Candidates the per-document cap skipped (in the weighted order, above
    ``min_score``) before ``wanted`` results were taken, as ``fusion.select`` does."""
    taken: dict[Hashable, int] = {}
    kept = dropped = 0
    for item in ranked:
        if kept == wanted:
            break
        if item.score + 1e-12 < min_score:
            continue
        document = document_of(item.key)
        if taken.get(document, 0) < per_document:
            taken[document] = taken.get(document, 0) + 1
            kept += 1
        else:
            dropped += 1
    return dropped


def record_rerank(report: Mapping[str, Any], moves: list[dict[str, Any]]) -> None:
    """A reranking stage's report and each reranked candidate's move."""
    explanation = current()
    if explanation is not None:
        explanation.rerank = {**report, "moves": moves}


def record_budget(record: Mapping[str, Any]) -> None:
    """A token budget's cut (``knowledge.agent_tools.results.budget_record``: the budget, the
    tokens used, the passages kept, each passage dropped)."""
    explanation = current()
    if explanation is not None:
        explanation.budget = dict(record)


def recompute_relevance(explain: Mapping[str, Any], index: int) -> float:
    """Result ``index``'s absolute ``score`` computed again from the trace alone: its
    ``relevance`` evidence through its search's calibration (``ranking.relevance``)."""
    entry = explain["results"][index]
    search = explain["searches"][entry["search"]]
    recorded = search["relevance"]["calibration"]
    scale = Calibration.from_dict(recorded["family"], recorded)
    script = Script(search["relevance"].get("script", Script.OTHER))
    evidence = Evidence(entry["relevance"]["coverage"], entry["relevance"]["vector"], script)
    return scale.score(SearchMode(search["mode"]), evidence)


def recompute(result: Mapping[str, Any], explain: Mapping[str, Any], index: int) -> float:
    """A result's ``rank_score`` (the score its list is ordered by) computed again from
    the trace alone (module docstring): ``result`` is the response's result ``index``,
    ``explain`` the response's trace. Its absolute ``score``: ``recompute_relevance``."""
    entry = explain["results"][index]
    search = explain["searches"][entry["search"]]
    method = search["fusion"]["method"]
    own = entry.get("keyword")
    if own is not None and own["raw"] is not None and "page_weight" in search["keyword"]:
        # The keyword raw score from its two parts (ranking.page_signal).
        entry = {**entry, "keyword": {**own, "raw": recombine(search["keyword"], own)}}
    if method == "keyword":
        fused = entry["keyword"]["raw"] / search["keyword"]["max"]
    elif method == "vector":
        fused = entry["vector"]["raw"]
    elif method == "weighted":
        total = 0.0
        for side in ("keyword", "vector"):
            record, own = search[side], entry[side]
            if own["raw"] is None:
                continue
            span = record["max"] - record["min"]
            flat = span <= 1e-12 * record["max"]
            normalised = (
                (1.0 if record["max"] > 0 else 0.0)
                if flat
                else ((own["raw"] - record["min"]) / span)
            )
            total += record["effective_weight"] * min(1.0, max(0.0, normalised))
        fused = min(1.0, total / search["fusion"]["divisor"])
    else:  # rrf
        k = search["fusion"]["k"]
        total = sum(
            (k + 1) / (k + entry[side]["rank"])
            for side in ("keyword", "vector")
            if entry[side]["rank"] is not None
        )
        fused = min(1.0, total / search["fusion"]["divisor"])
    weights = search["weights"]
    factor = entry["origin_weight"] * entry["lesson_weight"]
    searched = float(min(1.0, fused * factor / weights["divisor"]))
    rerank = entry.get("rerank")
    if rerank is None:
        return float(searched)
    if rerank["rerank_score"] is not None:
        return float(rerank["rerank_score"])
    return min(searched, float(rerank["lowest_rerank_score"]))
