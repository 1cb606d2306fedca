"""``kb search`` against a deployed API (``--api-url``), and how an answer is printed:
the results, then, with ``--explain``, the trace as text (``knowledge.ranking.explain``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from contextlib import closing
from typing import Any

from knowledge.core.model import SearchQuery, SearchResult
from knowledge.core.scope import KnowledgeScope
from knowledge.local.cli_open import open_client
from knowledge.ranking import explain
from knowledge.search.tool import format_search_results
from knowledge.service.api import search_response_body

__all__ = ["print_search", "remote_search"]


def remote_search(
    args: argparse.Namespace, scope: KnowledgeScope, query: SearchQuery, ranking: dict[str, Any]
) -> int:
    """``kb search --api-url``: the deployed API searches, reranks, weighs and explains."""
    with closing(open_client(args)) as client:
        response = client.search_response(
            scope,
            query,
            explain=args.explain,
            origin_weights=ranking.get("origin_weights"),
            lesson_weight=ranking.get("lesson_weight"),
        )
    body = search_response_body(query, response.mode, response.results, response.took_ms)
    if response.explain is not None:
        body["explain"] = response.explain
    print_search(args, body, list(response.results))
    return 0


def print_search(
    args: argparse.Namespace, body: dict[str, Any], results: Sequence[SearchResult]
) -> None:
    """The answer as JSON (``--json``, the API's body) or as the tool's text, then the trace."""
    if args.json:
        json.dump(body, sys.stdout, ensure_ascii=False, indent=2)
        sys.stdout.write("\n")
        return
    print(format_search_results(body["query"], results))
    if "explain" in body:
        print("\n--- explain ---")
        print(explain.format_trace(body["explain"], body["results"]))
