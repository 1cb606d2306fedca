"""``kb search`` and ``kb context`` against a deployed API (``--api-url``), and how a search
answer is printed: the results, then, with ``--explain``, the trace as text
(``knowledge.ranking.explain``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from contextlib import closing
from typing import Any

from knowledge.agent_tools.tool import format_search_results
from knowledge.core.model import SearchMode, SearchQuery, SearchResult
from knowledge.core.scope import KnowledgeScope
from knowledge.local.cli_open import open_client
from knowledge.ranking import explain

__all__ = ["print_search", "remote_search"]


def remote_search(
    args: argparse.Namespace,
    scope: KnowledgeScope,
    query: SearchQuery,
    ranking: dict[str, Any],
    *,
    with_trace: bool = False,
) -> tuple[SearchMode, list[SearchResult], float, Mapping[str, Any] | None, str | None]:
    """``kb search`` / ``kb context`` with ``--api-url``: the deployed API searches,
    reranks, weighs and explains; its mode, results, time, trace (``with_trace``) and
    ``vector_side`` (``knowledge.ranking.vector_side``)."""
    with closing(open_client(args)) as client:
        response = client.search_response(
            scope,
            query,
            explain=with_trace,
            origin_weights=ranking.get("origin_weights"),
            lesson_weight=ranking.get("lesson_weight"),
        )
    return (
        response.mode,
        list(response.results),
        response.took_ms,
        response.explain,
        response.vector_side,
    )


def print_search(
    args: argparse.Namespace, body: dict[str, Any], results: Sequence[SearchResult]
) -> None:
    """The answer as JSON (``--json``, the API's body, ``vector_side`` included) or as the
    tool's text, then the trace."""
    if args.json:
        json.dump(body, sys.stdout, ensure_ascii=False, indent=2)
        sys.stdout.write("\n")
        return
    print(format_search_results(body["query"], results, vector_side=body.get("vector_side")))
    if "explain" in body:
        print("\n--- explain ---")
        print(explain.format_trace(body["explain"], body["results"]))
