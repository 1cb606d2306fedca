"""The OpenSearch keyword side's page part (``knowledge.ranking.page_signal``).

After the keyword candidates are read, one bounded request (``queries.page_search_body``)
scores the document records of the candidates' documents on ``page_terms``, inside the
search's scope filters (the caller's scope and its shared libraries, never wider); the
candidates' raw scores become ``chunk / chunk_max + page_weight * page / page_max``.
A weight of 0 sends no request. Which document a candidate is of is the
``document_id`` it carries (its ``_source``, or what its ``_id`` says).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from knowledge.core.model import SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.ranking.page_signal import PageScores, with_pages
from knowledge.ranking.synonym_expansion import QueryTerms
from knowledge.stores.opensearch import request_filters
from knowledge.stores.opensearch.connection import Connection
from knowledge.stores.opensearch.hits import Hit, parse_hits
from knowledge.stores.opensearch.mapping import DOCUMENT_ID
from knowledge.stores.opensearch.read import queries

__all__ = ["page_scores"]


def page_scores(
    connection: Connection,
    index: str,
    *,
    action: str,
    scope: KnowledgeScope,
    query: SearchQuery,
    terms: QueryTerms,
    chunks: Mapping[str, float],
    sources: Mapping[str, Mapping[str, Any]],
) -> PageScores[str, str]:
    """The keyword side's two parts for the candidates ``chunks`` (raw scores by id;
    ``sources`` what each candidate says of itself); the pages scored for the same
    ``terms`` as the chunks (a synonym's added terms at ``SYNONYM_WEIGHT``)."""
    weight = connection.config.page_weight

    def document_of(key: str) -> str:
        return str(sources[key].get(DOCUMENT_ID, ""))

    documents = sorted({document_of(key) for key in chunks} - {""})
    pages: dict[str, float] = {}
    if weight > 0.0 and documents:
        filters = request_filters.searched_scope_filters(
            scope, cross_context=query.cross_context, libraries=query.shared_libraries
        )
        body = queries.page_search_body(terms, filters, documents)
        pages = _parse(parse_hits(connection.search(index, f"{action}: pages", body)))
    return with_pages(chunks, pages, document_of, weight)


def _parse(hits: Sequence[Hit]) -> dict[str, float]:
    pages: dict[str, float] = {}
    for hit in hits:
        document = hit.source.get(DOCUMENT_ID)
        if isinstance(document, str):
            pages[document] = max(pages.get(document, 0.0), hit.score)
    return pages
