"""Chunk-level embedding reuse (issue 13 item 2) on every store that keeps vectors: the
embedded store (its SQLite file) and the OpenSearch store on the real node.

The embedder is a counting wrapper around the hashing embedder (injected, nothing
patched) whose vectors drift a little with every call, the way a remote model's may: a
reused vector is then told apart from a re-embedded one. What each store holds is read
with its own tools (``sqlite3``; OpenSearch's HTTP API), not through the store.
"""

from __future__ import annotations

import json
import math
import random
import sqlite3
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opensearch_index import NodeIndex

from knowledge.core.errors import EmbeddingError
from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.embedding.base import Embedding
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.chunking import MarkdownSectionChunker
from knowledge.ingest.pipeline import Indexer, delete_document, index_source, upsert_document
from knowledge.stores.protocol import KnowledgeStore

SCOPE = KnowledgeScope("reuse-agent", "docs")
DIMS = 256
PATH = "guide.md"


class CountingEmbedder:
    """The hashing embedder, counting every text it is sent; each call's vectors drift by
    a call-dependent amount. ``fail_on``: a batch with a text containing it fails;
    ``nan_on``: a text containing it gets a vector with a NaN (a broken model)."""

    def __init__(self, name: str = "counting:hashing", fail_on: str | None = None) -> None:
        self._inner = HashingEmbedder(DIMS)
        self._name = name
        self.fail_on = fail_on
        self.nan_on: str | None = None
        self.texts: list[str] = []
        self.calls = 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimensions(self) -> int:
        return DIMS

    def embed(self, text: str) -> Embedding:
        return self._inner.embed(text)  # queries: not counted

    def embed_batch(self, texts: Sequence[str]) -> list[Embedding]:
        if self.fail_on is not None and any(self.fail_on in text for text in texts):
            raise EmbeddingError("provider failed after retries")
        self.calls += 1
        self.texts.extend(texts)
        drift = 0.01 * self.calls
        return [
            Embedding(
                (math.nan, *e.vector[1:])
                if self.nan_on is not None and self.nan_on in text
                else tuple(x + drift for x in e.vector),
                e.token_count,
            )
            for text, e in zip(texts, self._inner.embed_batch(texts), strict=True)
        ]


def sections(count: int, edited: Sequence[int] = ()) -> str:
    return "\n\n".join(
        f"## Part {i}\n\n{'Rewritten' if i in edited else 'Original'} paragraph {i} about "
        f"topic{i} and its settings."
        for i in range(count)
    )


def document(text: str) -> SourceDocument:
    data = text.encode()
    return SourceDocument(PATH, len(data), lambda: data)


class OneDocument:
    def __init__(self, text: str) -> None:
        self.text = text

    def documents(self, scope: KnowledgeScope, options: IndexOptions) -> Iterator[SourceDocument]:
        yield document(self.text)


@dataclass
class Backend:
    """A store with a given embedder, and a way to read what it holds for ``PATH``."""

    open: Callable[[CountingEmbedder], KnowledgeStore]
    vectors: Callable[[], dict[int, tuple[str, tuple[float, ...]]]]  # index -> (content, vec)
    settle: Callable[[], None] = lambda: None  # make every write visible to a read


def _embedded(tmp_path: Path) -> Backend:
    from knowledge.stores.embedded import EmbeddedKnowledgeStore

    db = tmp_path / "kb.db"

    def open_store(embedder: CountingEmbedder) -> KnowledgeStore:
        return EmbeddedKnowledgeStore(db, embedder=embedder)

    def vectors() -> dict[int, tuple[str, tuple[float, ...]]]:
        import numpy as np

        conn = sqlite3.connect(db)
        try:
            rows = conn.execute(
                "SELECT chunk_index, content, vector FROM chunks WHERE path = ?", (PATH,)
            ).fetchall()
        finally:
            conn.close()
        return {
            i: (content, tuple(float(x) for x in np.frombuffer(blob, dtype="<f4")))
            for i, content, blob in rows
        }

    return Backend(open_store, vectors)


def _http(method: str, url: str, body: Any = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        result: dict[str, Any] = json.loads(response.read() or b"{}")
        return result


def _opensearch(request: pytest.FixtureRequest, *, derived_source: bool = False) -> Backend:
    from knowledge.stores.opensearch import OpenSearchKnowledgeStore

    node = NodeIndex(request.getfixturevalue("opensearch_url"))
    request.addfinalizer(node.delete)
    url, index = node.url, node.index
    config = node.config(refresh_interval="100ms", vector_derived_source=derived_source)

    def open_store(embedder: CountingEmbedder) -> KnowledgeStore:
        return OpenSearchKnowledgeStore(config, embedder=embedder)

    def vectors() -> dict[int, tuple[str, tuple[float, ...]]]:
        _http("POST", f"{url}/{index}/_refresh")
        body = {
            "size": 10_000,
            "query": {
                "bool": {
                    "filter": [
                        {"term": {"document_path": PATH}},
                        {"term": {"record": "chunk"}},
                    ]
                }
            },
        }
        hits = _http("POST", f"{url}/{index}/_search", body)["hits"]["hits"]
        newest = max(h["_source"]["generation"] for h in hits)
        return {
            h["_source"]["chunk_index"]: (
                h["_source"]["content"],
                tuple(h["_source"]["embedding"]),
            )
            for h in hits
            if h["_source"]["generation"] == newest
        }

    return Backend(open_store, vectors, lambda: _http("POST", f"{url}/{index}/_refresh") and None)


@pytest.fixture(
    params=[
        pytest.param("embedded", id="embedded"),
        pytest.param(
            "opensearch",
            id="opensearch",
            marks=(pytest.mark.opensearch, pytest.mark.integration),
        ),
        # Vectors not stored in _source but rebuilt from the vector index on read
        # (index.knn.derived_source.enabled): reuse reads them back all the same.
        pytest.param(
            "opensearch-derived-source",
            id="opensearch-derived-source",
            marks=(pytest.mark.opensearch, pytest.mark.integration),
        ),
    ]
)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "embedded":
        return _embedded(tmp_path)
    return _opensearch(request, derived_source=request.param == "opensearch-derived-source")


def test_an_edit_embeds_only_the_changed_chunk_and_keeps_the_others_vectors(
    backend: Backend,
) -> None:
    embedder = CountingEmbedder()
    store = backend.open(embedder)
    try:
        first = upsert_document(store, SCOPE, document(sections(20)))
        assert (first.indexed_chunks, first.embedded_chunks, first.reused_chunks) == (20, 20, 0)
        before = backend.vectors()
        embedder.texts.clear()

        second = upsert_document(store, SCOPE, document(sections(20, edited=[7])))

        # What was embedded: the title and heading in front (embed_context, on by default).
        assert embedder.texts == [
            "guide > Part 7\n\n## Part 7\n\nRewritten paragraph 7 about topic7 and its settings."
        ]
        assert (second.indexed_chunks, second.embedded_chunks, second.reused_chunks) == (20, 1, 19)
        after = backend.vectors()
        assert sorted(after) == list(range(20))
        for index in range(20):
            if index == 7:
                assert after[7][0].startswith("## Part 7\n\nRewritten")
                assert after[7][1] != before[7][1]
            else:
                assert after[index] == before[index]  # the very same stored vector
        # The reused vectors still find their chunks.
        found = store.search(
            SCOPE, SearchQuery("topic12 settings", mode=SearchMode.VECTOR, max_results=1)
        )
        assert [r.chunk_index for r in found] == [12]
    finally:
        store.close()


def test_a_changed_embedder_reuses_nothing(backend: Backend) -> None:
    embedder = CountingEmbedder()
    store = backend.open(embedder)
    try:
        upsert_document(store, SCOPE, document(sections(8)))
        # Same dimension, other model: the pipeline must not take the stored vectors.
        other = CountingEmbedder(name="counting:another-model")
        result = Indexer(MarkdownSectionChunker(), other).upsert(
            store,  # type: ignore[arg-type]  # every store is its own IndexWriter
            SCOPE,
            document(sections(8, edited=[2])),
        )
        assert (len(other.texts), result.embedded_chunks, result.reused_chunks) == (8, 8, 0)
        # And back: the chunks now carry the other model's keys, so nothing is reused.
        embedder.texts.clear()
        back = upsert_document(store, SCOPE, document(sections(8, edited=[3])))
        assert (len(embedder.texts), back.reused_chunks) == (8, 0)
    finally:
        store.close()


def test_a_failed_write_keeps_the_previous_version_and_its_vectors(backend: Backend) -> None:
    embedder = CountingEmbedder()
    store = backend.open(embedder)
    try:
        upsert_document(store, SCOPE, document(sections(10)))
        before = backend.vectors()
        embedder.fail_on = "Rewritten paragraph 4"
        failed = upsert_document(store, SCOPE, document(sections(10, edited=[4])))
        assert [e.path for e in failed.errors] == [PATH]
        assert backend.vectors() == before  # the previous version, untouched

        embedder.fail_on = None
        embedder.texts.clear()
        retried = upsert_document(store, SCOPE, document(sections(10, edited=[4])))
        assert retried.ok
        # What was embedded: the title and heading in front (embed_context, on by default).
        assert embedder.texts == [
            "guide > Part 4\n\n## Part 4\n\nRewritten paragraph 4 about topic4 and its settings."
        ]
        assert retried.reused_chunks == 9
    finally:
        store.close()


def test_a_nan_vector_fails_the_document_and_keeps_the_previous_version(
    backend: Backend,
) -> None:
    # A model answering NaN for one chunk: the document is not indexed with it (a NaN
    # poisons every vector score it takes part in); the previous version stays, and the
    # next write embeds the chunk again.
    embedder = CountingEmbedder()
    store = backend.open(embedder)
    try:
        upsert_document(store, SCOPE, document(sections(6)))
        before = backend.vectors()
        embedder.nan_on = "Rewritten paragraph 2"
        failed = upsert_document(store, SCOPE, document(sections(6, edited=[2])))
        assert [e.path for e in failed.errors] == [PATH]
        assert "not finite" in failed.errors[0].reason
        assert backend.vectors() == before
        embedder.nan_on = None
        retried = upsert_document(store, SCOPE, document(sections(6, edited=[2])))
        assert retried.ok
        assert (retried.embedded_chunks, retried.reused_chunks) == (1, 5)
        assert all(math.isfinite(x) for _, vector in backend.vectors().values() for x in vector)
    finally:
        store.close()


def _guide(edit: Callable[[str], str] | None = None) -> str:
    """A 200-chunk Markdown guide (default chunker: 500 characters): 40 sections of six
    4-line paragraphs. ``edit`` rewrites the fourth paragraph of section 20."""
    rng = random.Random(7)
    words = [
        *("deploy", "rollback", "cluster", "node", "drain", "service", "config"),
        *("restart", "upgrade", "volume", "network", "pod", "secret", "token"),
    ]
    sections = []
    for s in range(40):
        paragraphs = [
            "\n".join(" ".join(rng.choice(words) for _ in range(12)) for _ in range(4))
            for _ in range(6)
        ]
        if s == 20 and edit is not None:
            paragraphs[3] = edit(paragraphs[3])
        sections.append("\n\n".join([f"## Section {s}", *paragraphs]))
    return "\n\n".join(sections)


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda p: "rollout" + p[6:], id="word-replaced"),
        pytest.param(
            lambda p: p + " and then check the rollout status again.", id="sentence-added"
        ),
        pytest.param(
            lambda p: p + "\nthen check the rollout status of every node", id="line-added"
        ),
    ],
)
def test_benchmark_editing_one_paragraph_of_a_200_chunk_document(
    backend: Backend, edit: Callable[[str], str]
) -> None:
    """Issue 13's figure: at most 3 texts sent to the embedder (sync path, ``index``).
    The edit moves the cut points of the rest of its section, not of other sections."""
    embedder = CountingEmbedder()
    store = backend.open(embedder)
    try:
        first = index_source(store, SCOPE, OneDocument(_guide()))
        assert (first.indexed_chunks, first.embedded_chunks) == (200, 200)
        embedder.texts.clear()
        edited = index_source(store, SCOPE, OneDocument(_guide(edit)))
        sent = len(embedder.texts)
        print(f"\nedit one paragraph of a 200-chunk document: {sent} of 200 texts embedded")
        assert edited.indexed_chunks == 200
        assert 1 <= sent <= 3
        assert (edited.embedded_chunks, edited.reused_chunks) == (sent, 200 - sent)
    finally:
        store.close()


@pytest.mark.opensearch
@pytest.mark.integration
def test_an_index_made_before_embedding_keys_gets_the_field_and_then_reuses(
    request: pytest.FixtureRequest,
) -> None:
    """An index of schema 2 (strict mapping, no ``embedding_key``) takes the new chunks:
    the field is added when the store opens it for writing; its old chunks have no key,
    so their document is embedded in full once, and reused from then on."""
    from knowledge.stores.opensearch.mapping import index_body

    backend = _opensearch(request)
    url = request.getfixturevalue("opensearch_url")
    probe = backend.open(CountingEmbedder())
    index = probe.index_name(SCOPE)  # type: ignore[attr-defined]
    probe.close()
    old = index_body(vector_dimensions=DIMS, embedding_model="counting:hashing")
    del old["mappings"]["properties"]["embedding_key"]
    old["mappings"]["_meta"]["knowledge"]["schema_version"] = 2
    _http("PUT", f"{url}/{index}", old)
    old_chunk = {
        "record": "chunk",
        "agent": SCOPE.agent,
        "context": SCOPE.context,
        "document_id": "old",
        "document_path": "old.md",
        "chunk_index": 0,
        "content": "written by schema 2",
        "embedding": [1.0] + [0.0] * (DIMS - 1),
    }
    _http("PUT", f"{url}/{index}/_doc/old:0?refresh=true", old_chunk)

    embedder = CountingEmbedder()
    store = backend.open(embedder)
    try:
        first = upsert_document(store, SCOPE, document(sections(5)))
        assert first.ok
        assert first.embedded_chunks == 5
        mapping = _http("GET", f"{url}/{index}/_mapping")
        (entry,) = mapping.values()
        assert "embedding_key" in entry["mappings"]["properties"]
        embedder.texts.clear()
        second = upsert_document(store, SCOPE, document(sections(5, edited=[0])))
        assert (len(embedder.texts), second.reused_chunks) == (1, 4)
    finally:
        store.close()


def test_the_status_counts_the_chunks_embedded_and_those_that_kept_their_vector(
    backend: Backend,
) -> None:
    embedder = CountingEmbedder()
    store = backend.open(embedder)
    try:
        upsert_document(store, SCOPE, document(sections(20)))
        other = "other.md"
        data = sections(5).encode()
        upsert_document(store, SCOPE, SourceDocument(other, len(data), lambda: data))
        backend.settle()
        status = store.status(SCOPE)
        assert (status.chunk_count, status.embedded_chunks, status.reused_chunks) == (25, 25, 0)

        upsert_document(store, SCOPE, document(sections(20, edited=[3, 9])))
        backend.settle()
        status = store.status(SCOPE)
        # guide.md: 2 embedded, 18 kept; other.md as it was.
        assert (status.chunk_count, status.embedded_chunks, status.reused_chunks) == (25, 7, 18)
        assert status.to_dict()["embedded_chunks"] == 7
        assert status.to_dict()["reused_chunks"] == 18

        delete_document(store, SCOPE, other)
        backend.settle()
        status = store.status(SCOPE)
        assert (status.chunk_count, status.embedded_chunks, status.reused_chunks) == (20, 2, 18)
    finally:
        store.close()


@pytest.mark.opensearch
@pytest.mark.integration
def test_an_index_made_before_the_counts_reads_its_status_and_gets_the_fields_on_a_write(
    request: pytest.FixtureRequest,
) -> None:
    """Records written before the counts have none: the status reads them as 0 (before and
    after the fields are added), and a write adds the fields and counts its chunks."""
    from knowledge.stores.opensearch.mapping import index_body

    backend = _opensearch(request)
    url = request.getfixturevalue("opensearch_url")
    probe = backend.open(CountingEmbedder())
    index = probe.index_name(SCOPE)  # type: ignore[attr-defined]
    probe.close()
    old = index_body(vector_dimensions=DIMS, embedding_model="counting:hashing")
    for name in ("embedded_chunks", "reused_chunks"):
        del old["mappings"]["properties"][name]
    _http("PUT", f"{url}/{index}", old)

    store = backend.open(CountingEmbedder())
    try:
        status = store.status(SCOPE)  # the fields are not in the mapping yet
        assert (status.state.value, status.embedded_chunks, status.reused_chunks) == (
            "EMPTY",
            0,
            0,
        )
        upsert_document(store, SCOPE, document(sections(4)))
        upsert_document(store, SCOPE, document(sections(4, edited=[1])))
        backend.settle()
        status = store.status(SCOPE)
        assert (status.chunk_count, status.embedded_chunks, status.reused_chunks) == (4, 1, 3)
        mapping = _http("GET", f"{url}/{index}/_mapping")
        (entry,) = mapping.values()
        assert {"embedded_chunks", "reused_chunks"} <= set(entry["mappings"]["properties"])
    finally:
        store.close()


def test_an_embedded_file_made_before_the_counts_gets_the_columns(tmp_path: Path) -> None:
    """A version 3 file without the count columns (made by an older release) opens, counts
    its old documents as neither, and counts what is written from then on."""
    backend = _embedded(tmp_path)
    store = backend.open(CountingEmbedder())
    data = sections(3).encode()
    upsert_document(store, SCOPE, SourceDocument("old.md", len(data), lambda: data))
    store.close()
    conn = sqlite3.connect(tmp_path / "kb.db")
    try:
        for column in ("embedded_chunks", "reused_chunks"):
            conn.execute(f"ALTER TABLE documents DROP COLUMN {column}")
        conn.commit()
    finally:
        conn.close()

    store = backend.open(CountingEmbedder())
    try:
        status = store.status(SCOPE)
        assert (status.chunk_count, status.embedded_chunks, status.reused_chunks) == (3, 0, 0)
        upsert_document(store, SCOPE, document(sections(4)))
        upsert_document(store, SCOPE, document(sections(4, edited=[2])))
        status = store.status(SCOPE)
        assert (status.chunk_count, status.embedded_chunks, status.reused_chunks) == (7, 1, 3)
    finally:
        store.close()
