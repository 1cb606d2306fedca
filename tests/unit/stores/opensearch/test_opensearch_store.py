"""OpenSearchKnowledgeStore without a node: lazy client, no I/O at construction, and the
requests it sends (managed domain vs Serverless), recorded by a fake client.

The behaviour against a real node is in
tests/integration/stores/opensearch/test_opensearch_store_live.py and
in the contract suite.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from opensearchpy.exceptions import ConnectionError as OSConnectionError
from opensearchpy.exceptions import NotFoundError, RequestError
from opensearchpy.serializer import JSONSerializer

from knowledge.core.errors import (
    ConfigurationError,
    EmbeddingError,
    EmbeddingMismatchError,
    StoreError,
    StoreUnavailableError,
    UnsupportedModeError,
    ValidationError,
)
from knowledge.core.identity import document_id
from knowledge.core.model import DocumentChunk, IndexState, SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.stores import opensearch as package
from knowledge.stores.opensearch import OpenSearchConfig, OpenSearchKnowledgeStore, RetryPolicy
from knowledge.stores.opensearch import connection as connection_module
from knowledge.stores.opensearch.mapping import index_body
from knowledge.stores.protocol import DocumentHeader, EmbeddedChunk, IndexWriter, KnowledgeStore

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


def test_an_agent_wide_search_of_the_shared_owner_is_refused_with_an_index_per_library() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    config = OpenSearchConfig(url=url, timeout=2, index_per_agent=True)
    store = OpenSearchKnowledgeStore(config, retry=NO_RETRY)
    library = KnowledgeScope("_shared", "playbooks")
    try:
        # Every library has its own index: "every context of _shared" names no one index,
        # and the store never searches a pattern. A 400 naming the field, before any I/O.
        with pytest.raises(ValidationError) as refused:
            store.search(library, SearchQuery("x", cross_context=True))
        assert refused.value.field == "cross_context"
        assert store.index_name(library) == "knowledge-agent-__shared_-playbooks"
        with pytest.raises(StoreUnavailableError):  # one library: searched as any scope
            store.search(library, SearchQuery("x"))
    finally:
        store.close()


def test_client_is_created_once_and_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeOpenSearch()
    made: list[OpenSearchConfig] = []

    def create_client(config: OpenSearchConfig, *, session: Any = None) -> FakeOpenSearch:
        made.append(config)
        return fake

    monkeypatch.setattr(connection_module, "create_client", create_client)
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

    def get_mapping(self, index: str, **params: Any) -> dict[str, Any]:
        self.client.calls.append(("get_mapping", index))
        if self.client.mapping is None:
            raise NotFoundError(404, "index_not_found_exception", {})
        return {index: {"mappings": self.client.mapping}}

    def create(self, index: str, body: dict[str, Any], **params: Any) -> dict[str, Any]:
        self.client.calls.append(("create", index))
        self.client.created = body
        self.client.mapping = body["mappings"]
        return {"acknowledged": True}

    def refresh(self, index: str, **params: Any) -> dict[str, Any]:
        self.client.calls.append(("refresh", index))
        return {}

    def put_mapping(self, index: str, body: dict[str, Any], **params: Any) -> dict[str, Any]:
        self.client.calls.append(("put_mapping", index))
        return {"acknowledged": True}


class _Transport:
    serializer = JSONSerializer()


def generic(doc_id: str | None) -> str | None:
    """A chunk id with its generation written ``G`` (generations are random)."""
    if doc_id is None or doc_id.count(":") != 2:
        return doc_id
    document, _, index = doc_id.split(":")
    return f"{document}:G:{index}"


class FakeOpenSearch:
    """Records requests; answers searches with ``search_hits``, keeps document records
    (ids without ``:``) with sequence numbers so conditional writes and ``_mget`` behave as
    on a node, and answers other bulk items with success."""

    def __init__(self, mapping: dict[str, Any] | None = None) -> None:
        self.mapping = mapping
        self.created: dict[str, Any] | None = None
        self.calls: list[tuple[str, Any]] = []
        self.bulk_lines: list[dict[str, Any]] = []  # the action lines it accepted
        self.bulk_params: list[dict[str, Any]] = []
        self.request_indexes: list[str] = []  # the index in each _bulk/_msearch path
        self.search_hits: list[dict[str, Any]] = []
        self.search_aggregations: dict[str, Any] = {}
        self.msearch_responses: list[dict[str, Any]] | None = None
        # Document records by id: (seq_no, source).
        self.records: dict[str, tuple[int, dict[str, Any]]] = {}
        self._seq = 0
        # Another writer's record, put in place just before the next record write.
        self.interleave: dict[str, dict[str, Any]] = {}
        # Bulk behaviour: item errors by generic id, ids throttled (429) once, whole-request
        # errors (raised by the n-th bulk call, 0-based), and a gate a bulk call waits at.
        self.item_errors: dict[str, dict[str, Any]] = {}
        self.throttle_once: set[str] = set()
        self.bulk_errors: dict[int, Exception] = {}
        self.bulk_gate: threading.Event | None = None
        self.bulk_entered = threading.Event()
        self.gate_timed_out = False
        self.indices = _Indices(self)
        self.transport = _Transport()
        self.closed = False
        self._next_id = 0

    def put_record(self, doc_id: str, source: dict[str, Any]) -> None:
        self._seq += 1
        self.records[doc_id] = (self._seq, source)

    def search(self, index: str, body: dict[str, Any], **params: Any) -> dict[str, Any]:
        self.calls.append(("search", body))
        return {"hits": {"hits": self.search_hits}, "aggregations": self.search_aggregations}

    def msearch(self, body: list[dict[str, Any]], index: str, **params: Any) -> dict[str, Any]:
        self.calls.append(("msearch", body))
        self.request_indexes.append(index)
        if self.msearch_responses is not None:
            return {"responses": self.msearch_responses}
        # One answer per search of the request (its bodies are header, body pairs).
        return {"responses": [{"hits": {"hits": []}} for _ in body[1::2]]}

    def mget(self, index: str, body: dict[str, Any], **params: Any) -> dict[str, Any]:
        self.calls.append(("mget", body))
        docs: list[dict[str, Any]] = []
        for doc_id in body["ids"]:
            if doc_id in self.records:
                seq, source = self.records[doc_id]
                docs.append(
                    {
                        "_id": doc_id,
                        "found": True,
                        "_seq_no": seq,
                        "_primary_term": 1,
                        "_source": source,
                    }
                )
            else:
                docs.append({"_id": doc_id, "found": False})
        return {"docs": docs}

    def delete_by_query(self, index: str, body: dict[str, Any], **params: Any) -> dict[str, Any]:
        self.calls.append(("delete_by_query", {"body": body, **params}))
        return {"deleted": 0, "failures": []}

    def bulk(
        self, body: str, index: str, params: dict[str, Any] | None = None, **options: Any
    ) -> dict[str, Any]:
        lines = [json.loads(line) for line in body.strip().split("\n")]
        number = self.names().count("bulk")
        self.calls.append(("bulk", lines))
        self.request_indexes.append(index)
        self.bulk_params.append(dict(params or {}))
        self.bulk_entered.set()
        if self.bulk_gate is not None and not self.bulk_gate.wait(timeout=60):
            self.gate_timed_out = True
        if number in self.bulk_errors:
            raise self.bulk_errors[number]
        items = []
        i = 0
        while i < len(lines):
            line = lines[i]
            op, meta = next(iter(line.items()))
            doc_id = meta.get("_id")
            source = lines[i + 1] if op != "delete" else None
            i += 1 if op == "delete" else 2
            key = generic(doc_id)
            if key is not None and key in self.throttle_once:
                self.throttle_once.discard(key)
                items.append({op: {"_id": doc_id, "status": 429, "error": {"type": "rejected"}}})
                continue
            if key is not None and key in self.item_errors and op in ("index", "create"):
                items.append({op: {"_id": doc_id, **self.item_errors[key]}})
                continue
            if doc_id in self.interleave and op in ("index", "create"):
                self.put_record(doc_id, self.interleave.pop(doc_id))
            if op in ("index", "create") and doc_id is not None and ":" not in doc_id:
                current = self.records.get(doc_id)
                conflict = (op == "create" and current is not None) or (
                    "if_seq_no" in meta and (current is None or current[0] != meta["if_seq_no"])
                )
                if conflict:
                    items.append(
                        {op: {"_id": doc_id, "status": 409, "error": {"type": "conflict"}}}
                    )
                    continue
                assert source is not None
                self.put_record(doc_id, source)
            self.bulk_lines.append(line)
            if op == "delete":
                found = self.records.pop(doc_id, None) is not None
                items.append({op: {"_id": doc_id, "status": 200 if found else 404}})
                continue
            if doc_id is None:
                self._next_id += 1
                doc_id = f"server-{self._next_id}"
            items.append({op: {"_id": doc_id, "status": 201, "result": "created"}})
        return {"errors": False, "items": items}

    def close(self) -> None:
        self.closed = True

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


def _header(path: str = "deploy.md", document_id: str = "doc1") -> DocumentHeader:
    return DocumentHeader(path, document_id, "hash1", datetime(2025, 1, 1, tzinfo=UTC), "0A")


def _chunks(n: int, dims: int = 8, path: str = "deploy.md") -> Iterator[EmbeddedChunk]:
    for i in range(n):
        vector = [0.0] * dims
        vector[i % dims] = 1.0
        yield EmbeddedChunk(DocumentChunk(path, i, f"chunk {i}"), vector)


def _store(fake: FakeOpenSearch, **config: Any) -> OpenSearchKnowledgeStore:
    settings: dict[str, Any] = {"url": "http://localhost:9200", "index_name": "kb", **config}
    return OpenSearchKnowledgeStore(
        OpenSearchConfig(**settings), embedder=HashingEmbedder(8), client=fake, retry=NO_RETRY
    )


def _index_lines(fake: FakeOpenSearch) -> list[str]:
    """The ids of the bulk lines the fake accepted, as ``op id``."""
    return [
        f"{op} {generic(meta.get('_id'))}" for line in fake.bulk_lines for op, meta in line.items()
    ]


OLD_RECORD = {"version": "09", "generation": "g-old", "chunk_count": 3, "record": "document"}


def test_a_new_document_is_its_chunks_then_its_record_created_and_no_delete() -> None:
    fake = FakeOpenSearch(mapping=None)
    store = _store(fake, wait_for_refresh=True)
    with store.write_session(SCOPE) as session:
        assert session.put_document(_header(), _chunks(2)) == 2
    assert fake.created is not None  # created on first write, with the vector field
    assert fake.created["mappings"]["properties"]["embedding"]["dimension"] == 8
    assert fake.created["settings"]["index"]["refresh_interval"] == "1s"
    # The record last, created only if there is none: nothing to delete, nothing to look up.
    assert _index_lines(fake) == ["index doc1:G:0", "index doc1:G:1", "create doc1"]
    assert "search" not in fake.names()
    assert "delete_by_query" not in fake.names()
    assert "refresh" not in fake.names()  # the last request waits for the scheduled one
    assert fake.bulk_params[-1] == {"refresh": "wait_for"}
    assert fake.names().count("mget") == 1
    assert session.failures == ()
    # By default nothing waits: searchable within the index's refresh interval.
    fake = FakeOpenSearch(mapping=None)
    with _store(fake).write_session(SCOPE) as session:
        session.put_document(_header(), _chunks(2))
    assert all(params == {} for params in fake.bulk_params)
    assert "refresh" not in fake.names()


def test_an_overwrite_writes_beside_the_old_version_and_then_removes_it_by_id() -> None:
    fake = FakeOpenSearch(mapping=_vector_mapping(8))
    fake.put_record("doc1", OLD_RECORD)
    store = _store(fake, wait_for_refresh=True)
    with store.write_session(SCOPE) as session:
        assert session.put_document(_header(), _chunks(2)) == 2
    assert _index_lines(fake) == [
        "index doc1:G:0",
        "index doc1:G:1",
        "index doc1",  # only if still what was read (if_seq_no)
        *(["delete doc1:G:0", "delete doc1:G:1", "delete doc1:G:2"]),
    ]
    deleted = [line["delete"]["_id"] for line in fake.bulk_lines if "delete" in line]
    assert deleted == [f"doc1:g-old:{i}" for i in range(3)]
    record_line = next(
        line for line in fake.bulk_lines if line.get("index", {}).get("_id") == "doc1"
    )
    assert record_line["index"]["if_seq_no"] == 1
    assert fake.records["doc1"][1]["chunk_count"] == 2
    # Then, once per session that replaced a version: the stale generations (step 4).
    assert [n for n in fake.names() if n in ("bulk", "delete_by_query")][-1] == "delete_by_query"
    assert fake.names().count("delete_by_query") == 1
    assert fake.bulk_params[-1] == {"refresh": "wait_for"}  # the removal is the last request


def test_a_newer_indexed_version_wins_and_the_new_chunks_are_removed() -> None:
    fake = FakeOpenSearch(mapping=_vector_mapping(8))
    fake.put_record("doc1", {**OLD_RECORD, "version": "0B"})  # newer than the header's 0A
    store = _store(fake)
    with store.write_session(SCOPE) as session:
        session.put_document(_header(), _chunks(2))
    assert [(f.path, f.reason) for f in session.failures] == [
        ("deploy.md", "stale version: 0A is older than the indexed 0B")
    ]
    assert _index_lines(fake) == [
        "index doc1:G:0",
        "index doc1:G:1",
        "delete doc1:G:0",
        "delete doc1:G:1",
    ]
    assert fake.records["doc1"][1]["version"] == "0B"


def test_a_record_changed_by_another_writer_is_read_and_decided_again() -> None:
    fake = FakeOpenSearch(mapping=_vector_mapping(8))
    fake.put_record("doc1", OLD_RECORD)
    # Between this session's read and its write, another writer commits version 0C.
    fake.interleave["doc1"] = {**OLD_RECORD, "version": "0C", "generation": "g-other"}
    store = _store(fake)
    with store.write_session(SCOPE) as session:
        session.put_document(_header(), _chunks(2))
    assert [f.reason for f in session.failures] == [
        "stale version: 0A is older than the indexed 0C"
    ]
    assert fake.names().count("mget") == 2  # read again after the 409
    assert fake.records["doc1"][1]["generation"] == "g-other"


@pytest.mark.parametrize("existing", [False, True], ids=["new index", "existing index"])
def test_many_documents_share_few_bulk_requests_and_no_delete_by_query(existing: bool) -> None:
    fake = FakeOpenSearch(mapping=_vector_mapping(8) if existing else None)
    store = _store(fake, bulk_chunk_size=25)
    with store.write_session(SCOPE) as session:
        for n in range(40):
            path = f"doc{n}.md"
            session.put_document(_header(path, f"id{n}"), _chunks(2, path=path))
    chunk_requests = -(-40 * 2 // 25)
    # Per chunk request: the chunks, then the records of the documents it completes.
    assert fake.names().count("bulk") == 2 * chunk_requests
    assert fake.names().count("mget") == chunk_requests
    assert len(fake.bulk_lines) == 40 * 3
    assert not [line for line in fake.bulk_lines if "delete" in line]
    assert "delete_by_query" not in fake.names()
    assert "search" not in fake.names()


def test_a_rejected_chunk_in_a_shared_request_fails_only_its_document() -> None:
    fake = FakeOpenSearch()
    fake.put_record("id-b", {**OLD_RECORD, "version": "01"})
    fake.item_errors["id-b:G:1"] = {
        "status": 400,
        "error": {"type": "mapper_parsing_exception", "reason": "wrong vector dimension"},
    }
    store = _store(fake)
    with store.write_session(SCOPE) as session:
        for name in "abc":
            assert session.put_document(_header(f"{name}.md", f"id-{name}"), _chunks(2)) == 2
    [failure] = session.failures
    assert failure.path == "b.md"
    assert failure.reason == (
        "rejected by OpenSearch: chunk 1: mapper_parsing_exception: wrong vector dimension; "
        "not indexed (the previously indexed version, if any, is kept)"
    )
    # Only b's new chunk is removed; its previous version (record and chunks) stays.
    assert [line for line in _index_lines(fake) if "id-b" in line] == [
        "index id-b:G:0",
        "delete id-b:G:0",
        "delete id-b:G:1",
    ]
    assert fake.records["id-b"][1]["generation"] == "g-old"
    assert "delete_by_query" not in fake.names()


def test_a_rejected_record_is_named_in_the_failure() -> None:
    fake = FakeOpenSearch()
    fake.item_errors["doc1"] = {"status": 400, "error": {"type": "x", "reason": "bad record"}}
    store = _store(fake)
    with store.write_session(SCOPE) as session:
        session.put_document(_header(), _chunks(1))
    assert [f.reason for f in session.failures] == [
        "rejected by OpenSearch: document record: x: bad record; not indexed "
        "(the previously indexed version, if any, is kept)"
    ]
    assert _index_lines(fake)[-1] == "delete doc1:G:0"


def test_throttled_items_are_sent_again_after_a_pause() -> None:
    fake = FakeOpenSearch()
    fake.throttle_once.add("doc1:G:1")
    pauses: list[float] = []
    store = OpenSearchKnowledgeStore(
        OpenSearchConfig(url="http://localhost:9200", index_name="kb"),
        embedder=HashingEmbedder(8),
        client=fake,
        retry=RetryPolicy(max_retries=2, initial_backoff=0.25, sleep=pauses.append),
    )
    with store.write_session(SCOPE) as session:
        session.put_document(_header(), _chunks(2))
    bulks = [lines for name, lines in fake.calls if name == "bulk"]
    assert len(bulks) == 3  # the chunks, the throttled one again, the record
    assert bulks[1] == bulks[0][2:]
    assert len(pauses) == 1
    assert session.failures == ()


def test_a_request_refused_as_a_whole_fails_its_documents_only() -> None:
    fake = FakeOpenSearch()
    fake.bulk_errors[0] = RequestError(400, "illegal_argument_exception", {})
    store = _store(fake, bulk_chunk_size=4)
    with store.write_session(SCOPE) as session:
        for name in "abc":  # a and b fill the first request, c is in the second
            session.put_document(_header(f"{name}.md", f"id-{name}"), _chunks(2))
    assert [f.path for f in session.failures] == ["a.md", "b.md"]
    assert "illegal_argument_exception" in session.failures[0].reason
    assert [line for line in _index_lines(fake) if "id-c" in line] == [
        "index id-c:G:0",
        "index id-c:G:1",
        "create id-c",
    ]
    assert "id-a" not in fake.records
    assert "id-b" not in fake.records


def test_a_lost_node_stops_the_session_and_is_raised_in_the_callers_thread() -> None:
    fake = FakeOpenSearch()
    fake.bulk_errors[0] = OSConnectionError("N/A", "connection refused", ConnectionRefusedError())
    store = _store(fake, bulk_chunk_size=2)
    session = store.write_session(SCOPE).__enter__()
    session.put_document(_header("a.md", "id-a"), _chunks(2))
    session.put_document(_header("b.md", "id-b"), _chunks(2))  # sends a's request
    with pytest.raises(StoreUnavailableError, match="unreachable"):
        session.delete_document("c.md")  # waits for the sender: its error surfaces
    with pytest.raises(StoreUnavailableError, match="unreachable"):
        session.put_document(_header("c.md", "id-c"), _chunks(2))
    with pytest.raises(StoreUnavailableError, match="unreachable"):
        session.__exit__(None, None, None)
    assert fake.names().count("bulk") == 1  # b was never sent

    fake.bulk_errors[1] = fake.bulk_errors[0]
    session = store.write_session(SCOPE).__enter__()
    session.put_document(_header("a.md", "id-a"), _chunks(1))
    with pytest.raises(StoreUnavailableError, match="unreachable"):
        session.__exit__(None, None, None)  # the commit sends the buffer
    assert fake.names().count("bulk") == 2
    assert store.status(SCOPE).state is IndexState.EMPTY  # both sessions are closed


def test_a_failing_chunk_stream_leaves_nothing_of_its_generation() -> None:
    def failing() -> Iterator[EmbeddedChunk]:
        yield from _chunks(1, path="b.md")
        raise EmbeddingError("the embedder failed")

    fake = FakeOpenSearch()
    store = _store(fake)
    with store.write_session(SCOPE) as session:
        session.put_document(_header("a.md", "id-a"), _chunks(1))
        with pytest.raises(EmbeddingError):
            session.put_document(_header("b.md", "id-b"), failing())
        session.put_document(_header("c.md", "id-c"), _chunks(1))
    assert _index_lines(fake) == ["index id-a:G:0", "index id-c:G:0", "create id-a", "create id-c"]


def test_a_failing_chunk_stream_deletes_what_of_it_was_sent_already() -> None:
    def failing() -> Iterator[EmbeddedChunk]:
        yield from _chunks(3, path="b.md")
        raise EmbeddingError("the embedder failed")

    fake = FakeOpenSearch()
    store = _store(fake, bulk_chunk_size=2)
    with store.write_session(SCOPE) as session, pytest.raises(EmbeddingError):
        session.put_document(_header("b.md", "id-b"), failing())
    assert _index_lines(fake) == [
        "index id-b:G:0",
        "index id-b:G:1",
        "delete id-b:G:0",
        "delete id-b:G:1",
        "delete id-b:G:2",
    ]
    assert "id-b" not in fake.records


def test_documents_are_prepared_while_a_request_is_on_the_wire() -> None:
    fake = FakeOpenSearch()
    fake.bulk_gate = threading.Event()
    store = _store(fake, bulk_chunk_size=2)  # one document's two chunks per request
    with store.write_session(SCOPE) as session:
        session.put_document(_header("a.md", "id-a"), _chunks(2))
        session.put_document(_header("b.md", "id-b"), _chunks(2))  # hands a to the sender
        assert fake.bulk_entered.wait(timeout=30)  # a is on the wire and not answered...
        session.put_document(_header("c.md", "id-c"), _chunks(2))  # ...b waits in the queue
        # A fourth document would be a third request in flight: it waits for a's answer.
        fourth = threading.Thread(
            target=session.put_document, args=(_header("d.md", "id-d"), _chunks(2))
        )
        fourth.start()
        fourth.join(timeout=0.5)
        assert fourth.is_alive()
        fake.bulk_gate.set()
        fourth.join(timeout=30)
        assert not fourth.is_alive()
    assert not fake.gate_timed_out
    assert fake.names().count("bulk") == 8  # four of chunks, four of records
    assert session.failures == ()


def test_a_delete_in_the_session_sends_the_buffer_first() -> None:
    fake = FakeOpenSearch()
    store = _store(fake)
    doc = document_id(SCOPE, "deploy.md")
    with store.write_session(SCOPE) as session:
        session.put_document(_header(document_id=doc), _chunks(2))
        assert session.delete_document("deploy.md") is True
        assert session.delete_document("never.md") is False
    assert [line.replace(doc, "doc1") for line in _index_lines(fake)] == [
        "index doc1:G:0",
        "index doc1:G:1",
        "create doc1",
        "delete doc1:G:0",
        "delete doc1:G:1",
        "delete doc1",
    ]
    assert fake.records == {}


def test_a_problem_is_kept_in_the_record_and_the_indexed_version_stays() -> None:
    fake = FakeOpenSearch(mapping=_vector_mapping(8))
    store = _store(fake)
    with store.write_session(SCOPE) as session:
        session.record_problem("deploy.md", "encrypted PDF")
    [meta, update] = fake.calls[-1][1]
    doc = document_id(SCOPE, "deploy.md")
    assert meta == {"update": {"_id": doc, "retry_on_conflict": 3}}  # the index: in the path
    assert fake.request_indexes == ["kb"]
    assert update["doc"]["problem"] == "encrypted PDF"
    assert update["upsert"]["document_path"] == "deploy.md"
    assert "generation" not in update["upsert"]  # a problem alone is no indexed document


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
    # The older generations' records, found by a search once the new one is written.
    fake.search_hits = [{"_id": "old-1", "sort": ["doc1", 0, 1]}, {"_id": "old-2", "sort": [1]}]
    with store.write_session(SCOPE) as session:
        assert session.put_document(_header(), _chunks(2)) == 2
    index_lines = [line for line in fake.bulk_lines if "index" in line]
    assert index_lines == [{"index": {}}] * 3  # two chunks and the record
    delete_lines = [line for line in fake.bulk_lines if "delete" in line]
    assert delete_lines == [{"delete": {"_id": "old-1"}}, {"delete": {"_id": "old-2"}}]
    assert set(fake.request_indexes) == {"kb"}
    assert "refresh" not in fake.names()
    assert "delete_by_query" not in fake.names()
    assert "mget" not in fake.names()
    assert all(params == {} for params in fake.bulk_params)  # no refresh=wait_for either
    assert fake.created is not None
    assert fake.created["settings"]["index"] == {"knn": True}
    assert fake.created["mappings"]["properties"]["embedding"]["method"]["engine"] == "faiss"
    lookup = next(body for name, body in fake.calls if name == "search")
    assert lookup["_source"] is False
    assert {"term": {"document_id": "doc1"}} in lookup["query"]["bool"]["filter"]
    # Only older generations (or none): never what a newer writer wrote.
    assert lookup["query"]["bool"]["should"][0]["range"]["generation"]["lt"]


def test_serverless_delete_in_the_session_removes_what_the_session_wrote() -> None:
    fake = FakeOpenSearch()
    store = _serverless_store(fake)
    with store.write_session(SCOPE) as session:
        session.put_document(_header(), _chunks(2))
        assert session.delete_document("deploy.md") is True  # nothing searchable yet
    deleted = [line["delete"]["_id"] for line in fake.bulk_lines if "delete" in line]
    assert sorted(deleted) == ["server-1", "server-2", "server-3"]  # two chunks, the record


def test_serverless_reindex_removes_what_it_did_not_write_by_search_and_bulk_delete() -> None:
    fake = FakeOpenSearch(mapping=None)
    store = _serverless_store(fake)
    fake.search_hits = [{"_id": "a", "sort": [0]}]
    with store.write_session(SCOPE, replace_scope=True):
        pass
    assert fake.bulk_lines == [{"delete": {"_id": "a"}}]
    assert fake.request_indexes == ["kb"]
    assert "delete_by_query" not in fake.names()
    lookup = next(body for name, body in fake.calls if name == "search")
    query = lookup["query"]["bool"]
    assert query["filter"] == [{"term": {"agent": "ops-bot"}}, {"term": {"context": "runbooks"}}]
    assert "indexed_at" in query["should"][0]["range"]


def test_hybrid_sends_one_msearch_and_errors_name_the_side() -> None:
    fake = FakeOpenSearch(mapping=_vector_mapping(8))
    store = _store(fake)
    assert store.search(SCOPE, SearchQuery("deploy", mode="hybrid")) == []
    # The first vector search of a scope counts its chunks (scope_size: ef_search), once;
    # the first keyword side reads the scope's synonyms, cached (opensearch.synonym_records).
    assert fake.names().count("search") == 2
    fake.calls.clear()
    assert store.search(SCOPE, SearchQuery("deploy", mode="hybrid")) == []
    assert fake.names().count("msearch") == 1
    assert "search" not in fake.names()
    fake.msearch_responses = [
        {"hits": {"hits": []}},
        {"error": {"type": "illegal_argument_exception", "reason": "bad knn"}, "status": 400},
        {"hits": {"hits": []}},  # the scope's term statistics (ranking.relevance)
    ]
    with pytest.raises(StoreError, match=r"vector side, 400\): illegal_argument_exception"):
        store.search(SCOPE, SearchQuery("deploy", mode="hybrid"))


def test_hybrid_without_msearch_sends_two_searches() -> None:
    fake = FakeOpenSearch(mapping=_vector_mapping(8))
    store = _store(fake, use_msearch=False)
    store.search(SCOPE, SearchQuery("deploy", mode="hybrid"))
    # The first also counts the scope's chunks and reads its synonyms (both cached); each
    # reads the scope's term statistics for the absolute scores (ranking.relevance).
    assert fake.names().count("search") == 5
    fake.calls.clear()
    store.search(SCOPE, SearchQuery("deploy", mode="hybrid"))
    assert fake.names().count("search") == 3
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
