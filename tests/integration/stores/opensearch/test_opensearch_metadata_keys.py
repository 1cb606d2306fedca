"""Metadata keys on the real node: one tenant's keys never use up or clash with another's.

Every scope shares one index, and OpenSearch caps the fields of a mapping (1,000 by
default). These tests failed while each metadata key was a mapping field of its own: a
tenant whose documents carried a few hundred distinct keys made the index refuse every
other tenant's next new key, and a key ``team`` in one scope made ``team.lead`` in
another a rejected write. An index of an older schema (one field per key) still filters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from opensearch_index import NodeIndex, http_json

from knowledge.core.filter_language import parse_filter
from knowledge.core.model import SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import index_source
from knowledge.stores.opensearch import OpenSearchConfig, OpenSearchKnowledgeStore
from knowledge.stores.opensearch.mapping import SCHEMA3_METADATA_TEMPLATES, index_body

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]

DIMS = 16


class Source:
    """In-memory documents with their metadata (what a sidecar gives)."""

    def __init__(self, documents: Mapping[str, tuple[str, Mapping[str, Any]]]) -> None:
        self.items = dict(documents)

    def documents(self, scope: KnowledgeScope, options: object) -> Iterator[SourceDocument]:
        for path, (text, metadata) in sorted(self.items.items()):
            data = text.encode("utf-8")
            yield SourceDocument(
                path=path, size=len(data), read=lambda data=data: data, metadata=metadata
            )


@pytest.fixture
def make_store(node: NodeIndex) -> Iterator[Callable[[], OpenSearchKnowledgeStore]]:
    made: list[OpenSearchKnowledgeStore] = []

    def make() -> OpenSearchKnowledgeStore:
        store = OpenSearchKnowledgeStore(node.config(), embedder=HashingEmbedder(DIMS))
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


def _found(store: OpenSearchKnowledgeStore, scope: KnowledgeScope, filter_json: Any) -> set[str]:
    query = SearchQuery("report", mode=SearchMode.KEYWORD, filter=parse_filter(filter_json))
    return {r.document_path for r in store.search(scope, query)}


def test_one_tenants_many_keys_leave_every_other_tenant_its_own(make_store) -> None:
    store = make_store()
    noisy, other = KnowledgeScope("noisy", "c"), KnowledgeScope("quiet", "c")
    # 1,500 distinct keys over three documents: more than the node's default field limit.
    many = {f"d{d}.md": ("a report", {f"k{d}_{i}": str(i) for i in range(500)}) for d in range(3)}
    assert index_source(store, noisy, Source(many)).errors == ()
    result = index_source(
        store, other, Source({"q.md": ("the quarterly report", {"team": "blue"})})
    )
    assert result.errors == ()
    assert result.indexed_documents == 1
    assert _found(store, other, {"field": "team", "op": "eq", "value": "blue"}) == {"q.md"}
    assert _found(store, noisy, {"field": "k2_499", "op": "gte", "value": 499}) == {"d2.md"}


def test_a_key_and_a_dotted_key_in_two_scopes_do_not_clash(make_store) -> None:
    store = make_store()
    first, second = KnowledgeScope("a1", "c"), KnowledgeScope("a2", "c")
    assert index_source(store, first, Source({"a.md": ("a report", {"team": "blue"})})).errors == ()
    result = index_source(store, second, Source({"b.md": ("a report", {"team.lead": "kim"})}))
    assert result.errors == ()
    assert _found(store, first, {"field": "team", "op": "eq", "value": "blue"}) == {"a.md"}
    assert _found(store, second, {"field": "team.lead", "op": "eq", "value": "kim"}) == {"b.md"}
    assert _found(store, second, {"field": "team", "op": "eq", "value": "blue"}) == set()


def test_the_index_mapping_does_not_grow_with_metadata_keys(make_store, node: NodeIndex) -> None:
    store = make_store()
    scope = KnowledgeScope("a", "c")
    index_source(store, scope, Source({"a.md": ("a report", {"x": "1"})}))
    status, before = http_json("GET", f"{node.url}/{node.index}/_mapping")
    assert status == 200
    keys = {f"key{i}": "v" for i in range(50)}
    assert index_source(store, scope, Source({"b.md": ("a report", keys)})).errors == ()
    status, after = http_json("GET", f"{node.url}/{node.index}/_mapping")
    assert after == before


def test_an_index_of_schema_3_keeps_filtering_with_its_fields(node: NodeIndex) -> None:
    # Built as schema 3 did: one dynamic field per metadata key (and its number sub-field).
    old = index_body(vector_dimensions=DIMS, embedding_model=HashingEmbedder(DIMS).name)
    mappings = old["mappings"]
    for name in ("metadata_terms", "metadata_numbers"):
        del mappings["properties"][name]
    mappings["properties"]["metadata"] = {"type": "object", "dynamic": True}
    mappings["dynamic_templates"] = SCHEMA3_METADATA_TEMPLATES
    mappings["date_detection"] = False
    mappings["_meta"]["knowledge"]["schema_version"] = 3
    status, body = http_json("PUT", f"{node.url}/{node.index}", old)
    assert status == 200, body
    config: OpenSearchConfig = node.config()
    store = OpenSearchKnowledgeStore(config, embedder=HashingEmbedder(DIMS))
    try:
        scope = KnowledgeScope("a", "c")
        documents = {
            "a.md": ("a report", {"year": "2023", "team": "blue"}),
            "b.md": ("a report", {"year": "2025", "team": "red"}),
        }
        assert index_source(store, scope, Source(documents)).errors == ()
        assert _found(store, scope, {"field": "year", "op": "gt", "value": 2024}) == {"b.md"}
        assert _found(store, scope, {"field": "team", "op": "eq", "value": "blue"}) == {"a.md"}
        query = SearchQuery("report", mode=SearchMode.HYBRID, metadata={"team": "red"})
        assert {r.document_path for r in store.search(scope, query)} == {"b.md"}
        status, mapping = http_json("GET", f"{node.url}/{node.index}/_mapping")
        (entry,) = mapping.values()
        assert "metadata_terms" not in entry["mappings"]["properties"]  # left as it was
    finally:
        store.close()
