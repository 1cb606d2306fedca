"""OpenSearchKnowledgeStore against a real OpenSearch node: failure paths, isolation, CJK,
metadata, file patterns and the Serverless code path.

Every test has its own index (``test_<uuid>``) in the session's node, so tests can run in
any order or in parallel. The shared contract suite (tests/contract) also runs against
this node.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

import pytest
from opensearch_index import NodeIndex, http_json

from knowledge.core.errors import EmbeddingMismatchError, StoreUnavailableError
from knowledge.core.identity import document_id
from knowledge.core.model import DocumentChunk, FileProblem, SearchMode, SearchQuery
from knowledge.core.path_filters import matches_file_patterns
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.embedding.base import Embedding
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import delete_document, index_source
from knowledge.stores.opensearch import (
    OpenSearchConfig,
    OpenSearchKnowledgeStore,
    RetryPolicy,
    request_filters,
)
from knowledge.stores.opensearch import store as store_module
from knowledge.stores.opensearch.hits import INCOMPLETE_HASH
from knowledge.stores.opensearch.read import queries
from knowledge.stores.opensearch.write import serverless as serverless_module
from knowledge.stores.protocol import DocumentHeader, EmbeddedChunk

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]

DIMS = 32
ALL_MODES = tuple(SearchMode)
FAST_RETRY = RetryPolicy(max_retries=1, initial_backoff=0.01, max_backoff=0.02)


# --- helpers --------------------------------------------------------------------------------


@pytest.fixture
def make_store(node: NodeIndex) -> Iterator[Callable[..., OpenSearchKnowledgeStore]]:
    made: list[OpenSearchKnowledgeStore] = []

    def make(
        embedder: Any = "default", config: OpenSearchConfig | None = None, **settings: Any
    ) -> OpenSearchKnowledgeStore:
        store = OpenSearchKnowledgeStore(
            config or node.config(**settings),
            embedder=HashingEmbedder(DIMS) if embedder == "default" else embedder,
            retry=FAST_RETRY,
        )
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


class Source:
    """An in-memory ``DocumentSource``; ``on_read`` runs when a document's bytes are read."""

    def __init__(
        self,
        documents: Mapping[str, str],
        on_read: Callable[[str], None] | None = None,
        metadata: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.documents_by_path = dict(documents)
        self.on_read = on_read
        self.metadata = metadata or {}

    def documents(self, scope: KnowledgeScope, options: object) -> Iterator[SourceDocument]:
        for path, text in sorted(self.documents_by_path.items()):
            data = text.encode("utf-8")

            def read(path: str = path, data: bytes = data) -> bytes:
                if self.on_read is not None:
                    self.on_read(path)
                return data

            yield SourceDocument(
                path=path, size=len(data), read=read, metadata=self.metadata.get(path, {})
            )


def _paths(results: Iterable[Any]) -> set[str]:
    return {r.document_path for r in results}


# --- embedding mismatch ---------------------------------------------------------------------


def test_an_index_with_another_vector_dimension_is_refused(make_store, node: NodeIndex) -> None:
    scope = KnowledgeScope("a1", "c1")
    first = make_store()
    assert index_source(first, scope, Source({"a.md": "deploy the service"})).ok
    before = node.records()

    other = make_store(embedder=HashingEmbedder(DIMS * 2))
    with pytest.raises(EmbeddingMismatchError, match=rf"'{node.index}' stores {DIMS}-dimension"):
        index_source(other, scope, Source({"b.md": "other text"}))
    with pytest.raises(EmbeddingMismatchError):
        other.search(scope, SearchQuery("deploy", mode="vector"))
    assert node.records() == before  # nothing was mixed in


@dataclass
class _RenamedEmbedder:
    """Same vectors and dimension as the hashing embedder, another model name."""

    inner: HashingEmbedder = field(default_factory=lambda: HashingEmbedder(DIMS))

    @property
    def name(self) -> str:
        return "another-model"

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    def embed(self, text: str) -> Embedding:
        return self.inner.embed(text)

    def embed_batch(self, texts: list[str]) -> list[Embedding]:
        return self.inner.embed_batch(texts)


def test_an_index_built_by_another_embedder_of_the_same_dimension_is_refused(
    make_store, node: NodeIndex
) -> None:
    scope = KnowledgeScope("a1", "c1")
    assert index_source(make_store(), scope, Source({"a.md": "deploy"})).ok
    with pytest.raises(EmbeddingMismatchError, match="'hashing', not 'another-model'"):
        index_source(make_store(embedder=_RenamedEmbedder()), scope, Source({"b.md": "x"}))


# --- the node unreachable -------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_nothing_listening_is_a_clear_unavailable_error(make_store, node: NodeIndex) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    store = make_store(config=node.config(url=url, timeout=2))
    scope = KnowledgeScope("a1", "c1")
    for call in (
        lambda: index_source(store, scope, Source({"a.md": "text"})),
        lambda: store.search(scope, SearchQuery("text")),
        lambda: store.status(scope),
    ):
        with pytest.raises(StoreUnavailableError, match=rf"^OpenSearch at {url} is unreachable"):
            call()


class TcpProxy:
    """A TCP forwarder on 127.0.0.1 to the node, that the test can cut at any moment."""

    def __init__(self, target_url: str) -> None:
        host_port = target_url.rsplit("//", 1)[1]
        self._target = (host_port.rsplit(":", 1)[0], int(host_port.rsplit(":", 1)[1]))
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._stopped = False
        self._start(self._accept)

    def _start(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return  # stopped
            upstream = socket.create_connection(self._target)
            with self._lock:
                if self._stopped:
                    client.close()
                    upstream.close()
                    return
                self._sockets += [client, upstream]
                self._start(self._pump, client, upstream)
                self._start(self._pump, upstream, client)

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass

    def stop(self) -> None:
        """Close the listening socket and every forwarded connection, now."""
        with self._lock:
            self._stopped = True
            sockets, self._sockets = self._sockets, []
        self._server.close()
        for sock in sockets:
            with contextlib.suppress(OSError):  # already closed by the other side
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=5)


@pytest.fixture
def proxy(node: NodeIndex) -> Iterator[TcpProxy]:
    forwarder = TcpProxy(node.url)
    yield forwarder
    forwarder.stop()


def test_node_lost_mid_run_reports_nothing_that_was_not_indexed(
    make_store, node: NodeIndex, proxy: TcpProxy
) -> None:
    scope = KnowledgeScope("a1", "c1")
    documents = {f"doc{i}.md": f"# Doc {i}\n\nmarker{i} text about deploys" for i in range(1, 6)}

    def cut_on_third(path: str) -> None:
        if path == "doc3.md":
            proxy.stop()  # the node is gone between reading doc3 and writing it

    # One request per document (a chunk and its record), so whole documents go out
    # while the next ones are read.
    store = make_store(config=node.config(url=proxy.url, timeout=30, bulk_chunk_size=2))
    with pytest.raises(StoreUnavailableError, match=rf"OpenSearch at {proxy.url} is unreachable"):
        index_source(store, scope, Source(documents, on_read=cut_on_third))

    # What the node holds: complete documents read before the cut, nothing of the others
    # (writes are buffered and sent in the background: how many got through varies).
    # The aborted run never refreshed the index: make what reached the node visible.
    node.refresh()
    direct = make_store()
    stored = direct.stored_documents(scope)
    assert set(stored) <= {"doc1.md", "doc2.md"}
    assert all(doc.content_hash != INCOMPLETE_HASH for doc in stored.values())
    assert {r["document_path"] for r in node.records()} == set(stored)
    assert direct.search(scope, SearchQuery("marker3")) == []

    # The next run (node back) indexes the rest and skips what was done.
    result = index_source(direct, scope, Source(documents))
    assert result.indexed_documents == 5 - len(stored)
    assert {p.path for p in result.skipped} == set(stored)


# --- per-item bulk failures -----------------------------------------------------------------


def _header(scope: KnowledgeScope, path: str, **extra: Any) -> DocumentHeader:
    return DocumentHeader(
        path=path,
        document_id=document_id(scope, path),
        content_hash=f"hash-{path}",
        indexed_at=datetime.now(UTC),
        **extra,
    )


def _embedded(path: str, texts: list[str], bad: int | None = None) -> list[EmbeddedChunk]:
    embedder = HashingEmbedder(DIMS)
    chunks = []
    for i, text in enumerate(texts):
        vector = list(embedder.embed(text).vector)
        if i == bad:
            vector = vector[:-1]  # one dimension short: the node rejects this chunk
        chunks.append(EmbeddedChunk(DocumentChunk(path, i, text), vector))
    return chunks


def test_a_rejected_chunk_fails_its_document_only(make_store, node: NodeIndex) -> None:
    scope = KnowledgeScope("a1", "c1")
    store = make_store()
    with store.write_session(scope) as session:
        assert session.put_document(_header(scope, "a.md"), _embedded("a.md", ["alpha one"])) == 1
        # Buffered with the others: the rejection is known when the request comes back.
        session.put_document(
            _header(scope, "b.md"),
            _embedded("b.md", ["beta one", "beta two", "beta three"], bad=1),
        )
        assert session.put_document(_header(scope, "c.md"), _embedded("c.md", ["gamma"])) == 1
    [failure] = session.failures
    assert failure.path == "b.md"
    assert "chunk 1:" in failure.reason
    assert "dimension" in failure.reason
    assert set(store.stored_documents(scope)) == {"a.md", "c.md"}
    assert store.stored_document(scope, "b.md") is None
    assert {r["document_path"] for r in node.records()} == {"a.md", "c.md"}
    for mode in ALL_MODES:
        assert _paths(store.search(scope, SearchQuery("beta", mode=mode))) <= {"a.md", "c.md"}
    status = store.status(scope)
    assert (status.document_count, status.chunk_count) == (2, 2)


class _CorruptingStore(OpenSearchKnowledgeStore):
    """Cuts one dimension off the vector of the chunks of ``victim`` on their way in."""

    victim = "b.md"

    def write_session(self, scope: KnowledgeScope, *, replace_scope: bool = False) -> Any:
        return _CorruptingSession(super().write_session(scope, replace_scope=replace_scope))


class _CorruptingSession:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __enter__(self) -> _CorruptingSession:
        self.inner.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.inner.__exit__(exc_type, exc, tb)

    @property
    def failures(self) -> tuple[FileProblem, ...]:
        return tuple(self.inner.failures)

    def delete_document(self, path: str) -> bool:
        return bool(self.inner.delete_document(path))

    def record_problem(self, path: str, reason: str) -> None:
        self.inner.record_problem(path, reason)

    def record_unread(self, counts: Mapping[str, int]) -> None:
        self.inner.record_unread(counts)

    def put_synonyms(self, text: str | None) -> None:
        self.inner.put_synonyms(text)

    def stored_vectors(self, path: str) -> Mapping[str, Sequence[float]]:
        return dict(self.inner.stored_vectors(path))

    def put_document(self, header: DocumentHeader, chunks: Iterable[EmbeddedChunk]) -> int:
        if header.path == _CorruptingStore.victim:
            chunks = (
                EmbeddedChunk(c.chunk, None if c.vector is None else list(c.vector)[:-1])
                for c in chunks
            )
        return int(self.inner.put_document(header, chunks))


def test_a_rejected_document_is_an_error_of_the_run_not_an_indexed_one(node: NodeIndex) -> None:
    scope = KnowledgeScope("a1", "c1")
    with _CorruptingStore(node.config(), embedder=HashingEmbedder(DIMS)) as store:
        result = index_source(
            store, scope, Source({"a.md": "alpha", "b.md": "beta words", "c.md": "gamma"})
        )
        assert result.indexed_documents == 2
        assert [e.path for e in result.errors] == ["b.md"]
        assert "rejected by OpenSearch" in result.errors[0].reason
        assert set(store.stored_documents(scope)) == {"a.md", "c.md"}
        # Known only at the commit, the rejection is still recorded as the file's problem.
        problems = store.status(scope).problems
        assert [(p.path, p.reason) for p in problems] == [("b.md", result.errors[0].reason)]


# --- scope isolation ------------------------------------------------------------------------

A1_C1 = KnowledgeScope("agent-1", "ctx-1")
A1_C2 = KnowledgeScope("agent-1", "ctx-2")
A2_C1 = KnowledgeScope("agent-2", "ctx-1")


@pytest.fixture
def three_scopes(make_store) -> OpenSearchKnowledgeStore:
    store = make_store()
    for scope in (A1_C1, A1_C2, A2_C1):
        tag = f"{scope.agent}-{scope.context}"
        result = index_source(
            store,
            scope,
            Source(
                {
                    "shared.md": f"# Shared\n\nrollback procedure for {tag}",
                    f"{tag}.md": f"# Own\n\nrollback notes only {tag} has",
                }
            ),
        )
        assert result.ok, result.errors
    return store


@pytest.mark.parametrize("mode", ALL_MODES, ids=lambda m: m.value)
def test_each_scope_sees_only_its_own_chunks(three_scopes, mode: SearchMode) -> None:
    store = three_scopes
    for scope in (A1_C1, A1_C2, A2_C1):
        results = store.search(scope, SearchQuery("rollback procedure", mode=mode, max_results=50))
        tag = f"{scope.agent}-{scope.context}"
        assert _paths(results) == {"shared.md", f"{tag}.md"}
        assert all(tag in r.content for r in results)


@pytest.mark.parametrize("mode", ALL_MODES, ids=lambda m: m.value)
def test_cross_context_spans_the_agent_and_never_another_agent(
    three_scopes, mode: SearchMode
) -> None:
    query = SearchQuery("rollback", mode=mode, max_results=50, cross_context=True)
    results = three_scopes.search(A1_C1, query)
    contents = " ".join(r.content for r in results)
    assert "agent-1-ctx-1" in contents
    assert "agent-1-ctx-2" in contents
    assert "agent-2" not in contents
    assert len(results) == 4  # two documents in each of the agent's two contexts


def test_a_small_scope_still_gets_k_neighbours(make_store) -> None:
    """The scope filter is inside the knn clause: the engine filters while it searches,
    so the nearest chunks of a big neighbour scope do not use up the k results."""
    store = make_store()
    big, small = KnowledgeScope("big", "c1"), KnowledgeScope("small", "c1")
    index_source(
        store, big, Source({f"d{i}.md": f"kubernetes rollout number {i}" for i in range(60)})
    )
    index_source(store, small, Source({"x.md": "payroll export", "y.md": "holiday calendar"}))
    for mode in (SearchMode.VECTOR, SearchMode.HYBRID):
        # min_score 0: neither of the small scope's documents answers the query.
        query = SearchQuery("kubernetes rollout", mode=mode, max_results=2, min_score=0.0)
        assert _paths(store.search(small, query)) == {"x.md", "y.md"}


def test_status_and_stored_documents_are_per_scope(three_scopes) -> None:
    store = three_scopes
    for scope in (A1_C1, A1_C2, A2_C1):
        status = store.status(scope)
        assert (status.document_count, status.chunk_count) == (2, 2)
        assert set(store.stored_documents(scope)) == {
            "shared.md",
            f"{scope.agent}-{scope.context}.md",
        }
    assert store.status(KnowledgeScope("agent-1", "ctx-3")).document_count == 0
    assert delete_document(store, A1_C2, "shared.md") is True
    assert store.stored_document(A1_C1, "shared.md") is not None
    assert store.stored_document(A2_C1, "shared.md") is not None


def test_stored_documents_pages_through_many_documents(
    make_store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "_STORED_DOCUMENTS_PAGE", 2)
    scope = KnowledgeScope("a1", "c1")
    store = make_store()
    documents = {f"d{i}.md": f"text {i}" for i in range(7)}
    assert index_source(store, scope, Source(documents)).indexed_documents == 7
    # A record without chunks (an empty file indexed by a version before round 8).
    with store.write_session(scope) as session:
        session.put_document(_header(scope, "empty.md"), [])
    stored = store.stored_documents(scope)
    assert set(stored) == {*documents, "empty.md"}
    assert stored["empty.md"].chunk_count == 0
    assert index_source(store, scope, Source(documents)).indexed_documents == 0  # all unchanged


# --- text analysis, metadata and file patterns ---------------------------------------------------


@pytest.mark.parametrize(
    ("document", "query"),
    [("배포실패 시 롤백", "배포 실패"), ("배포 실패 시 롤백", "배포실패")],
)
def test_korean_compounds_match_with_or_without_spaces(make_store, document, query) -> None:
    scope = KnowledgeScope("a1", "c1")
    store = make_store()
    index_source(store, scope, Source({"ko.md": document, "en.md": "deploy failure rollback"}))
    results = store.search(scope, SearchQuery(query, mode="keyword"))
    assert [r.document_path for r in results] == ["ko.md"]
    assert results[0].rank_score == 1.0
    assert results[0].strength == "strong"  # every term of the query is in the chunk


def test_metadata_filters_match_like_knowledge_filters(make_store) -> None:
    scope = KnowledgeScope("a1", "c1")
    store = make_store()
    metadata = {
        "a.md": {"team": "ops", "tags": ["k8s", "deploy"], "tier": 1, "public": True},
        "b.md": {"team": "dev", "tags": ["deploy"], "tier": 2, "public": False},
    }
    index_source(
        store, scope, Source({"a.md": "deploy guide", "b.md": "deploy notes"}, metadata=metadata)
    )
    cases = {
        ("team", "ops"): {"a.md"},
        ("tags", "deploy"): {"a.md", "b.md"},
        ("tags", "k8s"): {"a.md"},
        ("tier", "2"): {"b.md"},
        ("public", "true"): {"a.md"},
        ("public", "false"): {"b.md"},
        ("team", "nobody"): set(),
    }
    for (key, value), expected in cases.items():
        for mode in ALL_MODES:
            found = store.search(scope, SearchQuery("deploy", mode=mode, metadata={key: value}))
            assert _paths(found) == expected, (key, value, mode)


PATTERN_PATHS = ["deploy.md", "runbooks/deploy.md", "runbooks/db.txt", "a1.txt", "docs/b2.md"]


@pytest.mark.parametrize(
    "pattern", ["*.md", "runbooks/*", "deploy.md", "[ab]?.txt", "[!r]*", "*/b?.md", "x*"]
)
def test_file_patterns_on_the_node_follow_knowledge_filters(make_store, pattern: str) -> None:
    scope = KnowledgeScope("a1", "c1")
    store = make_store()
    index_source(store, scope, Source({p: f"common words in {p}" for p in PATTERN_PATHS}))
    expected = {p for p in PATTERN_PATHS if matches_file_patterns(p, [pattern])}
    for mode in ALL_MODES:
        query = SearchQuery("common words", mode=mode, max_results=20, file_patterns=(pattern,))
        assert _paths(store.search(scope, query)) == expected, mode


def test_hybrid_is_the_same_with_one_msearch_or_two_searches(make_store, node: NodeIndex) -> None:
    scope = KnowledgeScope("a1", "c1")
    store = make_store()
    index_source(store, scope, Source({p: f"common words in {p}" for p in PATTERN_PATHS}))
    two = make_store(config=node.config(use_msearch=False))
    query = SearchQuery("common words deploy", mode="hybrid", max_results=10)
    assert store.search(scope, query) == two.search(scope, query)


class _RecordingClient:
    """A real ``opensearchpy.OpenSearch`` that keeps the search bodies and the answers."""

    def __init__(self, url: str) -> None:
        from opensearchpy import OpenSearch

        self.client = OpenSearch(hosts=[url], timeout=30)
        self.sent: list[tuple[str, Any, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def search(self, *args: Any, **kwargs: Any) -> Any:
        answer = self.client.search(*args, **kwargs)
        self.sent.append(("search", kwargs.get("body"), answer))
        return answer

    def msearch(self, *args: Any, **kwargs: Any) -> Any:
        answer = self.client.msearch(*args, **kwargs)
        self.sent.append(("msearch", kwargs.get("body"), answer))
        return answer


def test_hybrid_reads_the_text_of_the_chosen_chunks_only(make_store, node: NodeIndex) -> None:
    """The 2 x 100 hybrid candidates come as ids and scores only (the store's ids say the
    document, generation and chunk), without their stored source or doc values; the page's
    chunks are read with their text afterwards."""
    scope = KnowledgeScope("a1", "c1")
    texts = {f"doc{i:02}.md": f"# Doc {i}\n\ncommon words and deploy notes {i}" for i in range(30)}
    index_source(make_store(), scope, Source(texts))
    recording = _RecordingClient(node.url)
    store = OpenSearchKnowledgeStore(
        node.config(), HashingEmbedder(DIMS), client=recording, retry=FAST_RETRY
    )
    try:
        results = store.search(scope, SearchQuery("deploy notes", mode="hybrid", max_results=4))
    finally:
        store.close()
        recording.client.close()
    assert len(results) == 4
    for result in results:
        assert result.content == texts[result.document_path]
        assert result.metadata["title"] == f"Doc {int(result.document_path[3:5])}"
    candidates = [r for r in recording.sent if r[0] == "msearch"]
    (lines, answer) = candidates[0][1], candidates[0][2]
    for body in lines[1::2]:
        assert body["_source"] is False
    # The two sides; the third answer is the scope's term statistics (ranking.relevance).
    hits = [h for response in answer["responses"][:2] for h in response["hits"]["hits"]]
    assert len(hits) > 4
    # Only what fusion reads (and the query terms a hit holds, for its absolute score):
    # no source, no index name, no doc values.
    assert all(set(h) <= {"_id", "_score", "matched_queries"} for h in hits)
    assert {h["_id"].split(":")[0] for h in hits} == {document_id(scope, path) for path in texts}
    searches = [r for r in recording.sent if r[0] == "search"]
    # The scope's chunk count (read once, for ef_search: scope_size), the page rows of the
    # keyword candidates' documents (ranking.page_signal: inside the scope, at most one
    # hit per document, ids as doc values), then the page read.
    counts = [r for r in searches if r[1].get("track_total_hits") is True]
    assert len(counts) == 1
    pages = [r for r in searches if r[1].get("docvalue_fields") == ["document_id"]]
    assert len(pages) == 1
    assert pages[0][1]["query"]["bool"]["filter"][:3] == [
        {"term": {"agent": "a1"}},
        {"term": {"context": "c1"}},
        {"term": {"record": "document"}},
    ]
    assert pages[0][1]["size"] == len(texts)  # every candidate's document, no more
    # The scope's synonyms (ranking.synonym_expansion: one read, then cached).
    synonyms = [r for r in searches if r[1].get("_source") == {"includes": ["synonyms"]}]
    assert len(synonyms) == 1
    page = [r for r in searches if r not in counts and r not in pages and r not in synonyms]
    assert len(page) == 1
    assert page[0][1]["query"]["bool"]["filter"][:2] == [
        {"term": {"agent": "a1"}},
        {"term": {"context": "c1"}},
    ]
    assert len(page[0][2]["hits"]["hits"]) == 4


def test_the_trimmed_candidate_answer_keeps_a_side_error(make_store, node: NodeIndex) -> None:
    """``CANDIDATES_FILTER_PATH`` on the real node: a failing side still says why."""
    scope = KnowledgeScope("a1", "c1")
    index_source(make_store(), scope, Source({"a.md": "deploy notes"}))
    filters = request_filters.query_filters(scope)
    lines = queries.msearch_body(
        [
            queries.keyword_search_body("deploy", filters, 10, candidates=True),
            queries.vector_search_body([0.5] * (DIMS + 1), filters, 10, candidates=True),
        ]
    )
    payload = "".join(json.dumps(line) + "\n" for line in lines).encode("utf-8")
    request = urllib.request.Request(
        f"{node.url}/{node.index}/_msearch?filter_path={queries.CANDIDATES_FILTER_PATH}",
        data=payload,
        method="POST",
        headers={"Content-Type": "application/x-ndjson"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.loads(response.read())
    keyword, vector = answer["responses"]
    assert [h["fields"]["document_id"] for h in keyword["hits"]["hits"]] == [
        [document_id(scope, "a.md")]
    ]
    assert vector["status"] == 400
    assert "dimension" in json.dumps(vector["error"])


# --- commit records -------------------------------------------------------------------------


def test_a_long_write_session_keeps_every_generation_it_committed(node: NodeIndex) -> None:
    """A session that runs longer than the orphan age (a big reindex) must not remove, at
    its end, the generations it committed at its start."""
    scope = KnowledgeScope("a1", "c1")
    now = [time.time_ns()]
    store = OpenSearchKnowledgeStore(
        node.config(), HashingEmbedder(DIMS), retry=FAST_RETRY, clock=lambda: now[0]
    )
    try:
        index_source(
            store, scope, Source({"a.md": "first version of a", "b.md": "first version of b"})
        )

        def twenty_minutes_pass(path: str) -> None:
            if path == "b.md":  # read after a.md's new version was written
                now[0] += 20 * 60 * 10**9

        second = Source(
            {"a.md": "second version of a", "b.md": "second version of b"},
            on_read=twenty_minutes_pass,
        )
        result = index_source(store, scope, second)
        assert result.indexed_documents == 2
        node.refresh()
        records = {r["document_path"]: r for r in node.records(record="document")}
        chunks = Counter(
            (c["document_path"], c["generation"]) for c in node.records(record="chunk")
        )
        assert chunks == {(path, records[path]["generation"]): 1 for path in ("a.md", "b.md")}
        found = store.search(scope, SearchQuery("second version", mode="keyword"))
        assert sorted(r.document_path for r in found) == ["a.md", "b.md"]
    finally:
        store.close()


def test_a_document_whose_write_died_half_way_is_written_again(make_store, node: NodeIndex) -> None:
    scope = KnowledgeScope("a1", "c1")
    store = make_store()
    source = Source({"a.md": "# A\n\nalpha", "b.md": "# B\n\nbeta"})
    index_source(store, scope, source)
    # A crash between the chunks and the document record leaves chunks without a record.
    status, body = http_json(
        "DELETE", f"{node.url}/{node.index}/_doc/{document_id(scope, 'b.md')}?refresh=true"
    )
    assert status == 200, body
    assert store.stored_document(scope, "b.md").content_hash == INCOMPLETE_HASH
    result = index_source(store, scope, source)
    assert result.indexed_documents == 1
    assert [p.path for p in result.skipped] == ["a.md"]
    assert store.stored_document(scope, "b.md").content_hash != INCOMPLETE_HASH


# --- request counts -----------------------------------------------------------------------


class _CountingClient:
    """A real ``opensearchpy.OpenSearch`` that counts the write requests it is asked for."""

    def __init__(self, url: str) -> None:
        from opensearchpy import OpenSearch

        self.client = OpenSearch(hosts=[url], timeout=30)
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def bulk(self, *args: Any, **kwargs: Any) -> Any:
        self.calls["bulk"] += 1
        return self.client.bulk(*args, **kwargs)

    def delete_by_query(self, *args: Any, **kwargs: Any) -> Any:
        self.calls["delete_by_query"] += 1
        return self.client.delete_by_query(*args, **kwargs)


def test_documents_share_bulk_requests_and_an_overwrite_removes_the_old_chunks_by_id(
    node: NodeIndex,
) -> None:
    scope = KnowledgeScope("a1", "c1")
    long = {
        f"doc{i:02}.md": "\n\n".join(f"# Part {part}\n\nsection {part} of {i}" for part in range(4))
        for i in range(30)
    }
    counting = _CountingClient(node.url)
    store = OpenSearchKnowledgeStore(
        node.config(bulk_chunk_size=50), HashingEmbedder(DIMS), client=counting, retry=FAST_RETRY
    )
    try:
        assert index_source(store, scope, Source(long)).indexed_documents == 30
        # 120 chunks in requests of 50; after each, the records of the documents it
        # completes; nothing to delete.
        assert counting.calls == {"bulk": 6}
        assert len(node.records(record="chunk")) == 120

        counting.calls.clear()
        short = {path: f"# Short\n\nnow short {path}" for path in long}
        assert index_source(store, scope, Source(short)).indexed_documents == 30
        # 30 chunks, their 30 records, then the 120 replaced chunks deleted by id; then
        # one request for the stale generations of the replaced documents (write/session.py).
        assert counting.calls == {"bulk": 3, "delete_by_query": 1}
        chunks = node.records(record="chunk")
        assert sorted((c["document_path"], c["chunk_index"]) for c in chunks) == [
            (path, 0) for path in sorted(short)
        ]
        assert all(doc.chunk_count == 1 for doc in store.stored_documents(scope).values())
    finally:
        store.close()
        counting.client.close()


# --- the Serverless code path on a local node --------------------------------------------------


def test_serverless_mode_keeps_the_contract_without_ids_refresh_or_delete_by_query(
    make_store, node: NodeIndex, fake_aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """service='aoss' on the local node (it ignores the SigV4 headers): server-made ids,
    deletes by search + bulk, no refresh. The test refreshes where Serverless would on its
    own schedule."""
    monkeypatch.setattr(serverless_module, "_FIND_IDS_PAGE", 2)  # page the id lookups
    store = make_store(
        config=node.config(auth="sigv4", service="aoss", region="us-east-1", vector_engine="lucene")
    )
    scope = KnowledgeScope("a1", "c1")
    long_doc = "\n\n".join(f"# Part {i}\n\n" + f"section {i} words " * 40 for i in range(6))
    assert index_source(store, scope, Source({"a.md": long_doc, "b.md": "# B\n\nbeta"})).ok
    node.refresh()
    chunks = node.records(document_path="a.md", record="chunk")
    assert len(chunks) > 2
    ids = {hit_id for hit_id in _ids(node, "a.md")}
    assert not any(":" in i for i in ids)  # server-generated, not <doc id>:<n>

    result = index_source(store, scope, Source({"a.md": "# A\n\nnow short", "b.md": "# B\n\nbeta"}))
    assert result.indexed_documents == 1
    node.refresh()
    assert [c["content"] for c in node.records(document_path="a.md", record="chunk")] == [
        "# A\n\nnow short"
    ]
    assert len(node.records(document_path="a.md", record="document")) == 1
    for mode in ALL_MODES:
        assert _paths(store.search(scope, SearchQuery("short", mode=mode))) >= {"a.md"}

    assert delete_document(store, scope, "b.md") is True
    node.refresh()
    assert node.records(document_path="b.md") == []
    assert set(store.stored_documents(scope)) == {"a.md"}


def test_serverless_hybrid_caps_chunks_per_document_by_doc_values(
    make_store, node: NodeIndex, fake_aws: None
) -> None:
    """Server-made ids say nothing of a chunk, so the hybrid candidates carry their
    document as a doc value: the per-document cap still holds."""
    store = make_store(
        config=node.config(auth="sigv4", service="aoss", region="us-east-1", vector_engine="lucene")
    )
    scope = KnowledgeScope("a1", "c1")
    long_doc = "\n\n".join(f"# Part {i}\n\n" + "deploy notes " * 60 for i in range(8))
    texts = {"long.md": long_doc, **{f"s{i}.md": f"deploy notes {i}" for i in range(6)}}
    assert index_source(store, scope, Source(texts)).ok
    node.refresh()
    assert len(node.records(document_path="long.md", record="chunk")) >= 6
    results = store.search(
        scope, SearchQuery("deploy notes", mode="hybrid", max_results=9, max_chunks_per_document=2)
    )
    paths = [r.document_path for r in results]
    assert paths.count("long.md") == 2
    assert len(results) == 8  # the two of long.md and the six short documents


def test_serverless_mode_replaces_and_clears_problem_records(
    make_store, node: NodeIndex, fake_aws: None
) -> None:
    """Without client ids a problem is merged into the document's record (found by a
    search), never written beside it; a later successful write clears it."""
    store = make_store(
        config=node.config(auth="sigv4", service="aoss", region="us-east-1", vector_engine="lucene")
    )
    scope = KnowledgeScope("a1", "c1")
    assert index_source(store, scope, Source({"a.md": "# A\n\nfirst"})).ok
    node.refresh()
    with store.write_session(scope) as session:
        session.record_problem("a.md", "corrupt file: first try")
    node.refresh()
    with store.write_session(scope) as session:
        session.record_problem("a.md", "too large: second try")
    node.refresh()
    assert node.records(document_path="a.md", record="problem") == []  # no record of its own
    status = store.status(scope)
    assert [(p.path, p.reason) for p in status.problems] == [("a.md", "too large: second try")]
    assert status.document_count == 1  # the indexed version stays
    assert index_source(store, scope, Source({"a.md": "# A\n\nsecond"})).indexed_documents == 1
    node.refresh()
    assert node.records(document_path="a.md", record="problem") == []
    assert store.status(scope).problems == ()


def _ids(node: NodeIndex, path: str) -> list[str]:
    query = {"size": 1000, "query": {"term": {"document_path": path}}, "_source": False}
    status, body = http_json("POST", f"{node.url}/{node.index}/_search", query)
    assert status == 200, body
    return [hit["_id"] for hit in body["hits"]["hits"]]


# --- requests too big for the node are the caller's 400, not a 500 ---------------------------


def _two_letter_words() -> str:
    """1,296 distinct terms in under 4,096 characters: more clauses than the node's
    default ``indices.query.bool.max_clause_count`` (1,024) accepts in one query."""
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    return " ".join(a + b for a in alphabet for b in alphabet)


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_query_with_more_terms_than_the_node_accepts_is_a_400_naming_the_query(
    make_store, mode: str
) -> None:
    from knowledge.service.api import KnowledgeApi

    store = make_store(wait_for_refresh=True)
    scope = KnowledgeScope("a1", "c1")
    assert index_source(store, scope, Source({"a.md": "deploy the service"})).ok
    answer = KnowledgeApi(store).search("a1", "c1", {"query": _two_letter_words(), "mode": mode})
    assert (answer.status, answer.body["field"]) == (400, "query"), answer.body
    assert "1024" not in answer.body["error"] or "terms" in answer.body["error"]
    assert node_free(answer.body["error"])


def node_free(message: str) -> bool:
    """No endpoint, index name or node exception name in what the caller reads."""
    return "http" not in message and "test_" not in message and "exception" not in message


def test_many_file_patterns_are_a_400_naming_the_field_on_every_store(make_store) -> None:
    from knowledge.service.api import KnowledgeApi

    store = make_store(wait_for_refresh=True)
    scope = KnowledgeScope("a1", "c1")
    assert index_source(store, scope, Source({"a.md": "deploy the service"})).ok
    patterns = [f"docs/{i}/*.md" for i in range(1000)]
    answer = KnowledgeApi(store).search("a1", "c1", {"query": "deploy", "file_patterns": patterns})
    assert (answer.status, answer.body["field"]) == (400, "file_patterns"), answer.body


def test_orphaned_generations_go_on_a_domain_that_refuses_keyword_ranges(
    node: NodeIndex, no_expensive_queries: str
) -> None:
    """With ``search.allow_expensive_queries: false`` the node refuses a ``range`` on a
    keyword field; the end-of-session sweep of orphaned generations (a writer that died
    after its chunks were accepted) must still remove them, and never the committed one."""
    scope = KnowledgeScope("a1", "c1")
    minute = 60 * 10**9
    now = [time.time_ns() - 40 * minute]
    store = OpenSearchKnowledgeStore(
        node.config(), HashingEmbedder(DIMS), retry=FAST_RETRY, clock=lambda: now[0]
    )
    try:
        index_source(
            store, scope, Source({"a.md": "first version of a", "b.md": "first version of b"})
        )
        # A writer that died 20 minutes ago: its chunk of a.md was accepted, its record never.
        (chunk,) = node.records(record="chunk", document_path="a.md")
        orphan = f"{now[0] + 20 * minute:019d}-deadbeef"
        orphan_id = f"{chunk['document_id']}:{orphan}:0"
        status, body = http_json(
            "PUT",
            f"{node.url}/{node.index}/_doc/{orphan_id}?refresh=true",
            {**chunk, "generation": orphan, "content": "orphaned words of a dead writer"},
        )
        assert status == 201, body
        now[0] += 40 * minute
        result = index_source(
            store, scope, Source({"a.md": "second version of a", "b.md": "b again"})
        )
        assert result.indexed_documents == 2
        records = {r["document_path"]: r for r in node.records(record="document")}
        chunks = Counter(
            (c["document_path"], c["generation"]) for c in node.records(record="chunk")
        )
        assert chunks == {(path, records[path]["generation"]): 1 for path in ("a.md", "b.md")}
        assert store.search(scope, SearchQuery("orphaned dead writer", mode="keyword")) == []
    finally:
        store.close()


def test_file_patterns_naming_files_work_where_wildcards_are_refused(
    make_store, no_expensive_queries: str
) -> None:
    """A file pattern without glob characters names a path or a base name: the domain that
    refuses wildcard queries (``search.allow_expensive_queries: false``) still answers it."""
    scope = KnowledgeScope("a1", "c1")
    store = make_store()
    index_source(store, scope, Source({p: f"common words in {p}" for p in PATTERN_PATHS}))
    for patterns in (("deploy.md",), ("runbooks/db.txt", "a1.txt"), ("[x",)):
        expected = {p for p in PATTERN_PATHS if matches_file_patterns(p, list(patterns))}
        for mode in ALL_MODES:
            query = SearchQuery("common words", mode=mode, max_results=20, file_patterns=patterns)
            assert _paths(store.search(scope, query)) == expected, (patterns, mode)
