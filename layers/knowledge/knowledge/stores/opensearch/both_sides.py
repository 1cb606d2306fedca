"""Both hybrid searches of the OpenSearch store in one ``_msearch`` round trip (or two
searches when ``OpenSearchConfig.use_msearch`` is off)."""

from __future__ import annotations

from typing import Any

from knowledge.core.errors import StoreError
from knowledge.stores.opensearch import queries
from knowledge.stores.opensearch.answers import item_reason
from knowledge.stores.opensearch.connection import Connection

__all__ = ["search_both"]


def search_both(
    connection: Connection,
    index: str,
    action: str,
    keyword_body: dict[str, Any],
    vector_body: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both hybrid searches: one ``/<index>/_msearch`` round trip, or two searches if disabled."""
    config = connection.config
    if not config.use_msearch:
        trim = queries.CANDIDATES_FILTER_PATH
        return (
            connection.search(index, action, keyword_body, filter_path=trim),
            connection.search(index, action, vector_body, filter_path=trim),
        )
    lines = queries.msearch_body([keyword_body, vector_body])
    response = connection.msearch(index, action, lines, filter_path=queries.CANDIDATES_FILTER_PATH)
    answers = response.get("responses", [])
    if len(answers) != 2:
        raise StoreError(
            f"OpenSearch at {config.url} failed to {action}: _msearch returned "
            f"{len(answers)} responses for 2 searches"
        )
    for answer in answers:
        if "error" in answer:
            side = "keyword" if answer is answers[0] else "vector"
            raise StoreError(
                f"OpenSearch at {config.url} failed to {action} ({side} side, "
                f"{answer.get('status')}): {item_reason(answer)}"
            )
    return answers[0], answers[1]
