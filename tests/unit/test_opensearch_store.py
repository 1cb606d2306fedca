"""OpenSearchKnowledgeStore without a node: lazy client, no I/O at construction, and the
requests it sends (managed domain vs Serverless), recorded by a fake client.

The behaviour against a real node is in tests/integration/test_opensearch_store_live.py and
in the contract suite.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from opensearchpy.exceptions import NotFoundError
from opensearchpy.serializer import JSONSerializer

from knowledge.embedding.hashing import HashingEmbedder
from knowledge.errors import (
    ConfigurationError,
    EmbeddingMismatchError,
    StoreError,
    StoreUnavailableError,
    UnsupportedModeError,
)
from knowledge.model import DocumentChunk, SearchMode, SearchQuery
from knowledge.scope import KnowledgeScope
from knowledge.store import DocumentHeader, EmbeddedChunk, IndexWriter, KnowledgeStore
from knowledge.stores import opensearch as package
from knowledge.stores.opensearch import OpenSearchConfig, OpenSearchKnowledgeStore, RetryPolicy
from knowledge.stores.opensearch import store as store_module
from knowledge.stores.opensearch.mapping import index_body

SCOPE = KnowledgeScope("ops-bot", "runbooks")
NO_RETRY = RetryPolicy(max_retries=0)


def test_package_exports() -> None:
    assert package.__all__ == [
        "OpenSearchConfig",
        "OpenSearchKnowledgeStore",
        "OpenSearchWriteSession",
        "RetryPolicy",
        "build_store",
    ]
    for name in package.__all__:
        assert hasattr(package, name)


def test_importing_the_store_does_not_import_opensearchpy_or_boto3() -> None:
    code = (
        "import sys\n"
        "import knowledge.stores.opensearch\n"
        "import knowledge.stores.opensearch.store\n"
        "heavy = sorted(m for m in sys.modules"
        " if m.split('.')[0] in ('opensearchpy', 'boto3', 'botocore', 'requests'))\n"
        "print(heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_construction_does_no_io_and_first_use_reports_the_endpoint() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    store = OpenSearchKnowledgeStore(
        OpenSearchConfig(url=url, timeout=2), embedder=HashingEmbedder(8), retry=NO_RETRY
    )  # nothing listens there, and constructing succeeds
    assert isinstance(store, KnowledgeStore)
    assert isinstance(store, IndexWriter)
    with pytest.raises(StoreUnavailableError, match=rf"OpenSearch at {url} is unreachable"):
        store.search(SCOPE, SearchQuery("deploy"))
    store.close()


def test_client_is_created_once_and_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeOpenSearch()
    made: list[OpenSearchConfig] = []

    def create_client(config: OpenSearchConfig, *, session: Any = None) -> FakeOpenSearch:
        made.append(config)
        return fake

    monkeypatch.setattr(store_module, "create_client", create_client)
    store = OpenSearchKnowledgeStore(OpenSearchConfig(url="http://localhost:9200"))
    assert made == []
    store.search(SCOPE, SearchQuery("one"))
    store.search(SCOPE, SearchQuery("two"))
    store.status(SCOPE)
    assert len(made) == 1
    store.close()
    assert fake.closed  # created by the store, so closed by it


# --- a fake opensearchpy client -------------------------------------------------------------


class _Indices:
    def __init__(self, client: FakeOpenSearch) -> None:
        self.client = client

    def get_mapping(self, index: str) -> dict[str, Any]:
        self.client.calls.append(("get_mapping", index))
        if self.client.mapping is None:
            raise NotFoundError(404, "index_not_found_exception", {})
        return {index: {"mappings": self.client.mapping}}

    def create(self, index: str, body: dict[str, Any]) -> dict[str, Any]:
        self.client.calls.append(("create", index))
        self.client.created = body
        self.client.mapping = body["mappings"]
        return {"acknowledged": True}

    def refresh(self, index: str) -> dict[str, Any]:
        self.client.calls.append(("refresh", index))
        return {}


class _Transport:
    serializer = JSONSerializer()


class FakeOpenSearch:
    """Records requests; answers searches with ``search_hits`` and bulks with success."""

    def __init__(self, mapping: dict[str, Any] | None = None) -> None:
        self.mapping = mapping
        self.created: dict[str, Any] | None = None
        self.calls: list[tuple[str, Any]] = []
        self.bulk_lines: list[dict[str, Any]] = []
        self.search_hits: list[dict[str, Any]] = []
        self.msearch_responses: list[dict[str, Any]] | None = None
        self.indices = _Indices(self)
        self.transport = _Transport()
        self.closed = False
        self._next_id = 0

    def search(self, index: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("search", body))
        return {"hits": {"hits": self.search_hits}, "aggregations": {}}

    def msearch(self, body: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls.append(("msearch", body))
        if self.msearch_responses is not None:
            return {"responses": self.msearch_responses}
        return {"responses": [{"hits": {"hits": []}}, {"hits": {"hits": []}}]}

    def delete_by_query(self, index: str, body: dict[str, Any], **params: Any) -> dict[str, Any]:
        self.calls.append(("delete_by_query", {"body": body, **params}))
        return {"deleted": 0, "failures": []}

    def bulk(self, body: str, **params: Any) -> dict[str, Any]:
        lines = [json.loads(line) for line in body.strip().split("\n")]
        self.calls.append(("bulk", lines))
        items = []
        i = 0
        while i < len(lines):
            op, meta = next(iter(lines[i].items()))
            self.bulk_lines.append(lines[i])
            if op == "delete":
                items.append({op: {"_id": meta["_id"], "status": 404, "result": "not_found"}})
                i += 1
                continue
            doc_id = meta.get("_id")
            if doc_id is None:
                self._next_id += 1
                doc_id = f"server-{self._next_id}"
            items.append({op: {"_id": doc_id, "status": 201, "result": "created"}})
            i += 2
        return {"errors": False, "items": items}

    def close(self) -> None:
        self.closed = True

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


def _header(path: str = "deploy.md") -> DocumentHeader:
    return DocumentHeader(path, "doc1", "hash1", datetime(2025, 1, 1, tzinfo=UTC), "0A")


def _chunks(n: int, dims: int = 8) -> Iterator[EmbeddedChunk]:
    for i in range(n):
        vector = [0.0] * dims
        vector[i % dims] = 1.0
        yield EmbeddedChunk(DocumentChunk("deploy.md", i, f"chunk {i}"), vector)


def _store(fake: FakeOpenSearch, **config: Any) -> OpenSearchKnowledgeStore:
    settings: dict[str, Any] = {"url": "http://localhost:9200", "index_name": "kb", **config}
    return OpenSearchKnowledgeStore(
        OpenSearchConfig(**settings), embedder=HashingEmbedder(8), client=fake, retry=NO_RETRY
    )


def test_managed_domain_writes_with_our_ids_then_trims_and_refreshes() -> None:
    fake = FakeOpenSearch()
    store = _store(fake)
    with store.write_session(SCOPE) as session:
        assert session.put_document(_header(), _chunks(2)) == 2
    assert fake.created is not None  # created on first write, with the vector field
    assert fake.created["mappings"]["properties"]["embedding"]["dimension"] == 8
    assert fake.bulk_lines == [
        {"delete": {"_index": "kb", "_id": "doc1"}},  # the old document record first
        {"index": {"_index": "kb", "_id": "doc1:0"}},
        {"index": {"_index": "kb", "_id": "doc1:1"}},
        {"index": {"_index": "kb", "_id": "doc1"}},  # the new record last: the commit
    ]
    trims = [args for name, args in fake.calls if name == "delete_by_query"]
    assert trims == [
        {
            "body": {
                "query": {
                    "bool": {
                        "filter": [
                            {"term": {"agent": "ops-bot"}},
                            {"term": {"context": "runbooks"}},
                            {"term": {"record": "chunk"}},
                            {"term": {"document_id": "doc1"}},
                            {"range": {"chunk_index": {"gte": 2}}},
                        ]
                    }
                }
            },
            "conflicts": "proceed",
            "refresh": False,
        }
    ]
    assert fake.names()[-1] == "refresh"
    assert session.failures == ()


def _serverless_store(fake: FakeOpenSearch) -> OpenSearchKnowledgeStore:
    config = OpenSearchConfig(
        url="https://abc.us-east-1.aoss.amazonaws.com",
        index_name="kb",
        auth="sigv4",
        service="aoss",
        region="us-east-1",
    )
    return OpenSearchKnowledgeStore(
        config, embedder=HashingEmbedder(8), client=fake, retry=NO_RETRY
    )


def test_serverless_writes_without_ids_refresh_or_delete_by_query() -> None:
    fake = FakeOpenSearch()
    store = _serverless_store(fake)
    # The previous version's records, found by a search before writing.
    fake.search_hits = [{"_id": "old-1", "sort": ["doc1", 0, 1]}, {"_id": "old-2", "sort": [1]}]
    with store.write_session(SCOPE) as session:
        assert session.put_document(_header(), _chunks(2)) == 2
    index_lines = [line for line in fake.bulk_lines if "index" in line]
    assert index_lines == [{"index": {"_index": "kb"}}] * 3  # two chunks and the record
    delete_lines = [line for line in fake.bulk_lines if "delete" in line]
    assert delete_lines == [
        {"delete": {"_index": "kb", "_id": "old-1"}},
        {"delete": {"_index": "kb", "_id": "old-2"}},
    ]
    assert "refresh" not in fake.names()
    assert "delete_by_query" not in fake.names()
    assert fake.created is not None
    assert fake.created["settings"]["index"] == {"knn": True}
    assert fake.created["mappings"]["properties"]["embedding"]["method"]["engine"] == "faiss"
    lookup = next(body for name, body in fake.calls if name == "search")
    assert lookup["_source"] is False
    assert {"term": {"document_path": "deploy.md"}} in lookup["query"]["bool"]["filter"]


def test_serverless_reindex_clears_the_scope_by_search_and_bulk_delete() -> None:
    fake = FakeOpenSearch(mapping=None)
    store = _serverless_store(fake)
    fake.search_hits = [{"_id": "a", "sort": [0]}]
    with store.write_session(SCOPE, replace_scope=True):
        pass
    assert fake.bulk_lines == [{"delete": {"_index": "kb", "_id": "a"}}]
    assert "delete_by_query" not in fake.names()
    lookup = next(body for name, body in fake.calls if name == "search")
    assert lookup["query"] == {
        "bool": {"filter": [{"term": {"agent": "ops-bot"}}, {"term": {"context": "runbooks"}}]}
    }


def test_hybrid_sends_one_msearch_and_errors_name_the_side() -> None:
    fake = FakeOpenSearch(mapping=_vector_mapping(8))
    store = _store(fake)
    assert store.search(SCOPE, SearchQuery("deploy", mode="hybrid")) == []
    assert fake.names().count("msearch") == 1
    assert "search" not in fake.names()
    fake.msearch_responses = [
        {"hits": {"hits": []}},
        {"error": {"type": "illegal_argument_exception", "reason": "bad knn"}, "status": 400},
    ]
    with pytest.raises(StoreError, match=r"vector side, 400\): illegal_argument_exception"):
        store.search(SCOPE, SearchQuery("deploy", mode="hybrid"))


def test_hybrid_without_msearch_sends_two_searches() -> None:
    fake = FakeOpenSearch(mapping=_vector_mapping(8))
    store = _store(fake, use_msearch=False)
    store.search(SCOPE, SearchQuery("deploy", mode="hybrid"))
    assert fake.names().count("search") == 2
    assert "msearch" not in fake.names()


def test_a_text_without_terms_has_no_vector_side() -> None:
    fake = FakeOpenSearch(mapping=_vector_mapping(8))
    store = _store(fake)
    assert store.search(SCOPE, SearchQuery("!!!", mode="vector")) == []
    assert "search" not in fake.names()  # a zero vector is never sent
    store.search(SCOPE, SearchQuery("???", mode="hybrid"))
    assert fake.names().count("search") == 1  # the keyword side only


def _vector_mapping(dims: int) -> dict[str, Any]:
    return index_body(vector_dimensions=dims, embedding_model="hashing")["mappings"]


def test_search_on_a_missing_index_is_empty_and_creates_nothing() -> None:
    fake = FakeOpenSearch(mapping=None)
    store = _store(fake)
    for mode in ("keyword", "vector", "hybrid"):
        assert store.search(SCOPE, SearchQuery("deploy", mode=mode)) == []
    assert store.stored_documents(SCOPE) == {}
    assert store.stored_document(SCOPE, "a.md") is None
    assert store.status(SCOPE).document_count == 0
    assert "create" not in fake.names()


def test_an_index_of_another_dimension_is_refused_before_any_write() -> None:
    fake = FakeOpenSearch(mapping=_vector_mapping(16))
    store = _store(fake)
    with pytest.raises(EmbeddingMismatchError, match=r"16-dimension.*produces 8"):
        store.write_session(SCOPE).__enter__()
    with pytest.raises(EmbeddingMismatchError):
        store.search(SCOPE, SearchQuery("deploy"))
    assert fake.bulk_lines == []


def test_keyword_only_store_reads_a_vector_index_but_does_not_write_to_it() -> None:
    fake = FakeOpenSearch(mapping=_vector_mapping(8))
    store = OpenSearchKnowledgeStore(
        OpenSearchConfig(url="http://localhost:9200"), client=fake, retry=NO_RETRY
    )
    assert store.supported_modes == frozenset({SearchMode.KEYWORD})
    assert store.search(SCOPE, SearchQuery("deploy")) == []
    with pytest.raises(UnsupportedModeError, match="'vector' is not supported"):
        store.search(SCOPE, SearchQuery("deploy", mode="vector"))
    with pytest.raises(EmbeddingMismatchError, match="no embedder"):
        store.write_session(SCOPE).__enter__()


@pytest.mark.parametrize(
    ("kwargs", "embedder", "error"),
    [
        ({"default_mode": "hybrid"}, None, ConfigurationError),
        ({"vector_dimensions": 16}, HashingEmbedder(8), EmbeddingMismatchError),
    ],
)
def test_settings_that_do_not_fit_the_embedder(kwargs, embedder, error) -> None:
    with pytest.raises(error):
        OpenSearchKnowledgeStore(
            OpenSearchConfig(url="http://localhost:9200", **kwargs), embedder=embedder
        )


def test_close_is_idempotent_and_leaves_an_injected_client_open() -> None:
    fake = FakeOpenSearch()
    store = _store(fake)
    store.close()
    store.close()
    assert not fake.closed
    with pytest.raises(StoreError, match="closed"):
        store.search(SCOPE, SearchQuery("deploy"))


def test_a_session_is_used_in_a_with_block() -> None:
    store = _store(FakeOpenSearch())
    session = store.write_session(SCOPE)
    with pytest.raises(StoreError, match="'with' block"):
        session.put_document(_header(), _chunks(1))


def test_build_store_for_kb_takes_the_url_and_the_rest_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from knowledge.config import open_store

    monkeypatch.setenv("OPENSEARCH_INDEX", "kb-local")
    monkeypatch.setenv("OPENSEARCH_KEYWORD_WEIGHT", "0.5")
    store = open_store(
        "opensearch", opensearch_url="http://127.0.0.1:9200", embedder_name="none", environ={}
    )
    assert isinstance(store, OpenSearchKnowledgeStore)
    assert store.config.url == "http://127.0.0.1:9200"
    assert store.config.index_name == "kb-local"
    assert store.config.keyword_weight == 0.5
    assert store.supported_modes == frozenset({SearchMode.KEYWORD})
    store.close()
    hashing = open_store(
        "opensearch", opensearch_url="http://127.0.0.1:9200", default_mode="hybrid", environ={}
    )
    assert isinstance(hashing, OpenSearchKnowledgeStore)
    assert hashing.default_mode is SearchMode.HYBRID
    assert hashing.supported_modes == frozenset(SearchMode)
    hashing.close()
