"""The OpenSearch store's searches that go together: in one ``_msearch`` round trip (or
one search each when ``OpenSearchConfig.use_msearch`` is off).

Both hybrid sides, and the searched scope's term statistics (``relevance_side``) with
the first read of a search: the node runs the searches of one ``_msearch`` side by
side, so the statistics cost no round trip of their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from knowledge.core.errors import StoreError
from knowledge.stores.opensearch.connection import Connection
from knowledge.stores.opensearch.hits import item_reason
from knowledge.stores.opensearch.read import queries

__all__ = ["Search", "search_together"]


class Search(NamedTuple):
    """One search of ``search_together``: ``side`` names it in an error of its answer,
    ``filter_path`` trims its answer (``None``: untrimmed), ``action`` what a failure of
    it sent alone says the store tried (``None``: the caller's action)."""

    side: str
    body: Mapping[str, Any]
    filter_path: str | None = None
    action: str | None = None


def _msearch_filter_path(searches: Sequence[Search]) -> str | None:
    """The ``_msearch`` answer's ``filter_path``: every search's paths under
    ``responses``, with each answer's error and status; none if one is untrimmed."""
    if any(search.filter_path is None for search in searches):
        return None
    paths: dict[str, None] = {"responses.error": None, "responses.status": None}
    for search in searches:
        assert search.filter_path is not None
        for path in search.filter_path.split(","):
            paths[path if path.startswith("responses.") else f"responses.{path}"] = None
    return ",".join(paths)


def search_together(
    connection: Connection, index: str, action: str, searches: Sequence[Search]
) -> list[dict[str, Any]]:
    """The answers of ``searches``, in order: one ``/<index>/_msearch`` round trip, or
    one search each (a single search, or ``_msearch`` disabled). A search that failed
    inside the ``_msearch`` is a ``StoreError`` naming its side."""
    config = connection.config
    if len(searches) == 1 or not config.use_msearch:
        return [
            connection.search(
                index, search.action or action, search.body, filter_path=search.filter_path
            )
            for search in searches
        ]
    lines = queries.msearch_body([search.body for search in searches])
    response = connection.msearch(index, action, lines, filter_path=_msearch_filter_path(searches))
    answers = response.get("responses", [])
    if len(answers) != len(searches):
        raise StoreError(
            f"OpenSearch at {config.url} failed to {action}: _msearch returned "
            f"{len(answers)} responses for {len(searches)} searches"
        )
    for search, answer in zip(searches, answers, strict=True):
        if "error" in answer:
            raise StoreError(
                f"OpenSearch at {config.url} failed to {action} ({search.side} side, "
                f"{answer.get('status')}): {item_reason(answer)}"
            )
    return [dict(answer) for answer in answers]
