"""HNSW parameters and small-scope exactness on the real node (issue 13 item 3).

- the index a store creates carries the configured ``m`` and ``ef_construction`` (read
  back from the node's own ``_mapping``), and with ``vector_derived_source`` the k-NN
  derived-source setting, its vectors still readable from ``_source`` (the reuse tests
  of ``test_embedding_reuse`` also run on such an index);
- every vector query (vector and hybrid modes) carries the configured ``ef_search``
  (seen at the wire, by the loopback proxy of ``faults``) and the node accepts it;
- a small scope inside a bigger shared index gets exact results: the store's vector
  results are the brute-force cosine top 10 computed here with numpy over the scope's
  stored vectors (read from the node's ``_source``, not through the store).
"""

from __future__ import annotations

import contextlib
import json
import random
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from faults import FaultProxy

from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import index_source
from knowledge.stores.opensearch import OpenSearchConfig, OpenSearchKnowledgeStore

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]

SMALL = KnowledgeScope("tenant-small", "notes")
BIG = KnowledgeScope("tenant-big", "notes")
WORDS = [f"w{n:03d}" for n in range(400)]


class WordsSource:
    """``documents`` one-chunk documents of random words (seeded), as bytes in memory."""

    def __init__(self, documents: int, seed: int) -> None:
        rng = random.Random(seed)
        self._texts = [" ".join(rng.choices(WORDS, k=12)) for _ in range(documents)]

    def documents(self, scope: KnowledgeScope, options: IndexOptions) -> Iterator[SourceDocument]:
        for number, text in enumerate(self._texts):
            data = text.encode()
            yield SourceDocument(path=f"d{number:04d}.md", size=len(data), read=lambda d=data: d)


def _get(url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        result: dict[str, Any] = json.loads(response.read())
        return result


def _store(url: str, index: str, **settings: Any) -> OpenSearchKnowledgeStore:
    config = OpenSearchConfig(url=url, index_name=index, wait_for_refresh=True, **settings)
    return OpenSearchKnowledgeStore(config, embedder=HashingEmbedder(64))


@pytest.fixture
def index_name(opensearch_url: str) -> Iterator[str]:
    name = f"hnsw-{uuid.uuid4().hex[:10]}"
    yield name
    request = urllib.request.Request(f"{opensearch_url}/{name}", method="DELETE")
    with contextlib.suppress(OSError):
        urllib.request.urlopen(request, timeout=60).close()


def test_the_created_index_carries_the_configured_hnsw_parameters(
    opensearch_url: str, index_name: str
) -> None:
    store = _store(opensearch_url, index_name, hnsw_m=24, hnsw_ef_construction=64)
    try:
        index_source(store, SMALL, WordsSource(3, seed=1))
    finally:
        store.close()
    mapping = _get(f"{opensearch_url}/{index_name}/_mapping")[index_name]["mappings"]
    method = mapping["properties"]["embedding"]["method"]
    assert method["parameters"] == {"m": 24, "ef_construction": 64}


def test_derived_source_keeps_vectors_out_of_source_yet_readable(
    opensearch_url: str, index_name: str
) -> None:
    store = _store(opensearch_url, index_name, vector_derived_source=True)
    try:
        index_source(store, SMALL, WordsSource(3, seed=1))
    finally:
        store.close()
    flat = f"{opensearch_url}/{index_name}/_settings?flat_settings=true"
    settings = _get(flat)[index_name]["settings"]
    assert settings["index.knn.derived_source.enabled"] == "true"
    hits = _get(
        f"{opensearch_url}/{index_name}/_search",
        {"query": {"exists": {"field": "embedding"}}, "_source": ["embedding"]},
    )["hits"]["hits"]
    assert len(hits) == 3
    assert all(len(hit["_source"]["embedding"]) == 64 for hit in hits)


@pytest.mark.parametrize("mode", [SearchMode.VECTOR, SearchMode.HYBRID])
def test_vector_queries_carry_ef_search_and_the_node_accepts_it(
    opensearch_url: str, index_name: str, mode: SearchMode
) -> None:
    with FaultProxy(opensearch_url) as proxy:
        store = _store(proxy.url, index_name, ef_search=77)
        try:
            index_source(store, SMALL, WordsSource(5, seed=2))
            proxy.search_bodies.clear()
            text = WordsSource(5, seed=2)._texts[0]
            results = store.search(SMALL, SearchQuery(text=text, mode=mode))
        finally:
            store.close()
    assert results, "the node answered the query with ef_search"
    sent = b"\n".join(proxy.search_bodies).decode()
    knn = [json.loads(line) for line in sent.splitlines() if '"knn"' in line]
    assert len(knn) == 1
    # The knn clause may sit inside a bool (hybrid's named origin/lesson clauses wrap it).
    clause = _knn_clause(knn[0]["query"])["embedding"]
    assert clause["method_parameters"] == {"ef_search": 77}


def _knn_clause(query: Any) -> dict[str, Any]:
    """The one ``knn`` clause of a query body, wherever it is nested."""
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "knn" in node:
                found.append(node["knn"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(query)
    assert len(found) == 1, query
    return found[0]


@pytest.mark.parametrize("ef_search", [0, 100])
def test_a_small_scope_in_a_shared_index_gets_the_exact_top_10(
    opensearch_url: str, index_name: str, ef_search: int
) -> None:
    store = _store(opensearch_url, index_name, ef_search=ef_search)
    try:
        index_source(store, BIG, WordsSource(600, seed=3))
        index_source(store, SMALL, WordsSource(60, seed=4))
        # The scope's vectors as the node stores them, read without the store.
        stored = _get(
            f"{opensearch_url}/{index_name}/_search",
            {
                "size": 1000,
                "_source": ["document_path", "embedding"],
                "query": {
                    "bool": {
                        "filter": [
                            {"term": {"agent": SMALL.agent}},
                            {"term": {"context": SMALL.context}},
                            {"exists": {"field": "embedding"}},
                        ]
                    }
                },
            },
        )["hits"]["hits"]
        assert len(stored) == 60
        paths = [hit["_source"]["document_path"] for hit in stored]
        matrix = np.array([hit["_source"]["embedding"] for hit in stored], dtype=np.float64)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        rng = random.Random(5)
        for _ in range(5):
            text = " ".join(rng.choices(WORDS, k=6))
            query = np.array(HashingEmbedder(64).embed(text).vector, dtype=np.float64)
            cosine = matrix @ (query / np.linalg.norm(query))
            # The engine's score is (1 + cos) / 2 (ties broken either way: compare scores).
            exact = sorted(((1.0 + c) / 2.0 for c in cosine), reverse=True)[:10]
            found = store.search(
                SMALL,
                SearchQuery(text=text, mode=SearchMode.VECTOR, max_results=10, min_score=0.0),
            )
            assert len(found) == 10
            assert [r.rank_score for r in found] == pytest.approx(exact, abs=1e-4)
            assert {r.document_path for r in found} <= set(paths)
    finally:
        store.close()
