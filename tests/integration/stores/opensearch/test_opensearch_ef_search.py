"""How a vector search walks a scope, by the scope's size (``stores.opensearch.scope_size``),
on the real node, seen at the wire: a proxy (``faults.FaultProxy``) records what the store
sends. A small scope (up to ``LARGE_SCOPE_CHUNKS``) is walked with the configured 200; a
scope of more than ``LARGE_SCOPE_CHUNKS`` chunks is scored exactly (``script_score``),
from a count of its chunks read once (and kept) from the index. The rule's values:
tests/unit/stores/opensearch/test_opensearch_scope_size.py."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from faults import FaultProxy
from opensearch_index import NodeIndex, http_json

from knowledge.core.model import SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.sources.folders import LocalDirectorySource
from knowledge.stores.opensearch import OpenSearchKnowledgeStore, RetryPolicy
from knowledge.stores.opensearch.mapping import AGENT, CONTEXT, RECORD, RECORD_CHUNK
from knowledge.stores.opensearch.read.scope_size import LARGE_SCOPE_CHUNKS, exact_for

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]

DIMS = 32
SMALL = KnowledgeScope("team-a", "notes")
BIG = KnowledgeScope("team-b", "handbook")


def _vector_queries(node_proxy: FaultProxy) -> list[str]:
    """Each vector query sent: ``knn <ef_search>`` or ``exact``."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if "knn" in value and isinstance(value["knn"], dict):
                for clause in value["knn"].values():
                    ef = clause.get("method_parameters", {}).get("ef_search", 0)
                    found.append(f"knn {ef}")
            if value.get("script", {}).get("source") == "knn_score":
                found.append("exact")
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for body in node_proxy.search_bodies:
        for line in body.decode("utf-8").splitlines():
            if line.strip():
                walk(json.loads(line))
    return found


def _bulk_chunks(node: NodeIndex, scope: KnowledgeScope, count: int) -> None:
    """``count`` bare chunk documents of ``scope`` (no vector: the count is what matters)."""
    lines = []
    for n in range(count):
        lines.append(json.dumps({"index": {"_index": node.index, "_id": f"bulk-{n}"}}))
        lines.append(json.dumps({AGENT: scope.agent, CONTEXT: scope.context, RECORD: RECORD_CHUNK}))
    request = urllib.request.Request(
        f"{node.url}/_bulk?refresh=true",
        data=("\n".join(lines) + "\n").encode("utf-8"),
        method="POST",
        headers={"Content-Type": "application/x-ndjson"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        assert json.loads(response.read())["errors"] is False


def test_bigger_scopes_are_scored_exactly(
    node: NodeIndex, node_proxy: FaultProxy, tmp_path: Any
) -> None:
    for name in ("a.md", "b.md"):
        (tmp_path / name).write_text(f"# {name}\n\nrollback steps for {name}\n", "utf-8")
    store = OpenSearchKnowledgeStore(
        node.config(url=node_proxy.url, ef_search=200),
        embedder=HashingEmbedder(DIMS),
        retry=RetryPolicy(max_retries=1, initial_backoff=0.01, max_backoff=0.02),
    )
    try:
        for scope in (SMALL, BIG):
            result = index_source(store, scope, LocalDirectorySource(tmp_path))
            assert result.errors == ()
        big = LARGE_SCOPE_CHUNKS + 1000
        _bulk_chunks(node, BIG, big)
        chunks = {}
        for scope in (SMALL, BIG):
            status, counted = http_json(
                "POST",
                f"{node.url}/{node.index}/_count",
                {"query": {"bool": {"filter": [
                    {"term": {AGENT: scope.agent}}, {"term": {CONTEXT: scope.context}},
                    {"term": {RECORD: RECORD_CHUNK}},
                ]}}},
            )  # fmt: skip
            assert status == 200, counted
            chunks[scope] = counted["count"]
        assert chunks[SMALL] == 2
        assert chunks[BIG] == big + 2
        assert exact_for(big + 2)
        assert not exact_for(2)
        for mode in (SearchMode.VECTOR, SearchMode.HYBRID):
            for scope in (SMALL, BIG):
                node_proxy.search_bodies.clear()
                hits = store.search(scope, SearchQuery(text="rollback steps", mode=mode))
                # The node answered the exact body: the same two chunks (the bare ones
                # have no vector), with the knn query's scores.
                assert {hit.document_path for hit in hits} == {"a.md", "b.md"}
                expected = "knn 200" if scope == SMALL else "exact"
                assert _vector_queries(node_proxy) == [expected], (mode, scope)
        # Each scope's size was read once, then kept (four searches, two counts).
        counts = [path for _, path in node_proxy.requests if "filter_path=hits.total" in path]
        assert len(counts) == 2, counts
        # Same scores either way: the exact body scores as the knn query does.
        small = store.search(SMALL, SearchQuery(text="rollback steps", mode=SearchMode.VECTOR))
        big_hits = store.search(BIG, SearchQuery(text="rollback steps", mode=SearchMode.VECTOR))
        assert sorted((h.document_path, round(h.score, 6)) for h in small) == sorted(
            (h.document_path, round(h.score, 6)) for h in big_hits
        )
    finally:
        store.close()
