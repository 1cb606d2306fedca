"""The OpenSearch store's absolute scores (``knowledge.ranking.relevance``), on the node.

The scores need two facts the ranking does not, both read without pulling a single
candidate's text:

- the searched scope's statistics (``statistics_body``): how many chunks a search of the
  scope covers and, per query term, how many of them hold it in ``content_terms`` (their
  text and heading terms, the keyword side's one field): the terms' weights. Over the
  scope only, as the embedded store counts them: the caller's scope (every context of
  its agent with ``cross_context``) and the query's shared libraries, chunk records only
  (``scope_size.scope_chunks_body``), without the query's file patterns, metadata or
  filter, which choose hits, not what a term weighs. One request of no hits:
  ``track_total_hits`` for the chunk count and a ``filters`` aggregation of one ``term``
  bucket per query term (``parse_statistics``). A hybrid search sends it in the sides'
  ``_msearch``, a single-mode one with its first read (``both_sides.search_together``);
  a query without terms sends none (it covers nothing: every coverage is 0).
- which of the query's terms each candidate holds: the named term clauses every search
  carries (``named_clauses.term_clauses``), so each hit says it in ``matched_queries``.

``judge_candidates`` then calls ``relevance.judge`` exactly as the embedded store does:
the calibration of the store's embedder, and the vector side's unit scores as the
engine returned them (``(1 + cos) / 2``), before the relevance floor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from knowledge.core.model import SearchMode
from knowledge.core.scope import KnowledgeScope
from knowledge.ranking.fusion import Fused
from knowledge.ranking.relevance import Calibration, Judged, QueryWeights, judge
from knowledge.stores.opensearch.hits import MATCHED
from knowledge.stores.opensearch.mapping import CONTENT_TERMS
from knowledge.stores.opensearch.read.named_clauses import matched_terms
from knowledge.stores.opensearch.read.scope_size import parse_chunk_total, scope_chunks_body

__all__ = [
    "STATISTICS_FILTER_PATH",
    "judge_candidates",
    "parse_statistics",
    "statistics_body",
]

_TERMS_AGGREGATION: Final = "terms"

STATISTICS_FILTER_PATH: Final = "error,took,hits.total,aggregations"
"""``filter_path`` of the statistics request sent on its own: the count and the buckets
(and ``took``, for the benchmark)."""


def statistics_body(
    scope: KnowledgeScope,
    *,
    cross_context: bool,
    libraries: Sequence[KnowledgeScope],
    terms: Sequence[str],
) -> dict[str, Any]:
    """The searched scope's chunk count and each of ``terms``' document frequency among
    those chunks (module docstring), its buckets named by the term's position."""
    body = scope_chunks_body(scope, cross_context=cross_context, libraries=libraries)
    body["_source"] = False
    filters = {str(i): {"term": {CONTENT_TERMS: term}} for i, term in enumerate(terms)}
    body["aggs"] = {_TERMS_AGGREGATION: {"filters": {"filters": filters}}}
    return body


def parse_statistics(
    response: Mapping[str, Any], terms: Sequence[str]
) -> tuple[int, dict[str, int]]:
    """``(chunks, df)`` from the answer to ``statistics_body(..., terms=terms)``; a part
    the answer lacks counts 0."""
    chunks = parse_chunk_total(response) or 0
    aggregations = response.get("aggregations")
    buckets: Any = {}
    if isinstance(aggregations, Mapping):
        buckets = aggregations.get(_TERMS_AGGREGATION, {}).get("buckets", {})
    df: dict[str, int] = {}
    for i, term in enumerate(terms):
        bucket = buckets.get(str(i)) if isinstance(buckets, Mapping) else None
        count = bucket.get("doc_count") if isinstance(bucket, Mapping) else None
        df[term] = count if isinstance(count, int) and not isinstance(count, bool) else 0
    return chunks, df


def judge_candidates(
    candidates: list[Fused[str]],
    *,
    mode: SearchMode,
    weights: QueryWeights,
    scale: Calibration,
    terms: Sequence[str],
    sources: Mapping[str, Mapping[str, Any]],
    vector: Mapping[str, float],
) -> Judged[str]:
    """The candidates' absolute scores: the query ``terms`` each one's named clauses say
    its chunk holds (``sources``: what each candidate says of itself), and ``vector``,
    the vector side's unit scores before its floor (empty in keyword mode)."""
    empty: tuple[str, ...] = ()
    terms_of = {
        item.key: matched_terms(sources[item.key].get(MATCHED, empty), terms)
        for item in candidates
        if item.key in sources
    }
    return judge(mode, weights, scale, candidates, terms_of=terms_of, vector=vector)
