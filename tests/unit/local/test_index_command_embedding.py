"""``kb index`` with a remote embedder against the fake Titan-like service on loopback:
the embedder's client is made while the command lists the folder and opens the pipeline
(``knowledge.embedding.base.prepare_in_background``), and under the provider's quota
every stored vector is its own chunk's."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_embeddings import FakeEmbeddingServer, Profile, fake_embedding_server, vector_for

from knowledge.core.errors import ConfigurationError
from knowledge.core.identity import embedding_key
from knowledge.core.scope import KnowledgeScope
from knowledge.embedding.base import prepare_in_background
from knowledge.embedding.bedrock import BedrockEmbeddingClient
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.chunking import MarkdownSectionChunker, embedding_text
from knowledge.local.cli import main
from knowledge.stores.embedded import EmbeddedKnowledgeStore

SCOPE = KnowledgeScope("agent-a", "docs")
MODEL = "amazon.titan-embed-text-v2:0"
DIMENSIONS = 1024  # kb index asks Titan v2 for its default


@pytest.fixture
def quota() -> Iterator[FakeEmbeddingServer]:
    # 6 calls in flight at most, throttled beyond without Retry-After (Bedrock's 429).
    profile = Profile(latency_per_call=0.02, dimensions=DIMENSIONS, max_in_flight=6, retry_after="")
    with fake_embedding_server(profile) as server:
        yield server


@pytest.fixture
def bedrock_env(quota: FakeEmbeddingServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", quota.url)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")


def _documents(folder: Path, count: int, sections: int) -> None:
    folder.mkdir(parents=True)
    for n in range(count):
        body = "\n\n".join(
            f"## Part {s}\n\nDocument {n} section {s} says something of its own."
            for s in range(sections)
        )
        (folder / f"doc-{n:02d}.md").write_text(f"# Document {n}\n\n{body}\n", encoding="utf-8")


def test_kb_index_under_a_quota_stores_every_chunks_own_vector(
    tmp_path: Path,
    quota: FakeEmbeddingServer,
    bedrock_env: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    docs = tmp_path / "docs"
    _documents(docs, 20, 5)
    db = tmp_path / "kb.db"
    argv = ["index", str(docs), "--agent", SCOPE.agent, "--context", SCOPE.context]
    code = main([*argv, "--db", str(db), "--embedder", "bedrock", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    assert result["errors"] == []
    assert result["indexed_documents"] == 20
    assert result["embedded_chunks"] == 120 == quota.texts_embedded
    # From 16 in flight (slow start: more) against a quota of 6: throttled, and every
    # throttled text sent again until answered.
    assert quota.throttled > 0
    embedder = BedrockEmbeddingClient(MODEL, DIMENSIONS, region="us-east-1")  # makes no call
    chunker = MarkdownSectionChunker()
    store = EmbeddedKnowledgeStore(db, embedder)
    try:
        with store.write_session(SCOPE) as session:
            for path in sorted(docs.iterdir()):
                stored = session.stored_vectors(path.name)
                chunks = list(chunker.chunk(path.name, path.read_text(encoding="utf-8")))
                assert len(stored) == len(chunks) == 6
                for chunk in chunks:
                    text = embedding_text(chunk)
                    expected = vector_for(text, DIMENSIONS)
                    norm = math.sqrt(sum(x * x for x in expected))
                    vector = stored[embedding_key(embedder.name, DIMENSIONS, text)]
                    assert vector[0] == pytest.approx(expected[0] / norm, rel=1e-5)
    finally:
        store.close()


def test_prepare_makes_the_client_without_sending_a_call(quota: FakeEmbeddingServer) -> None:
    embedder = BedrockEmbeddingClient(MODEL, DIMENSIONS, region="us-east-1", endpoint_url=quota.url)
    thread = prepare_in_background(embedder)
    assert thread is not None
    thread.join(30)
    assert not thread.is_alive()
    assert embedder._client is not None
    assert quota.arrivals == 0


def test_a_failed_prepare_is_raised_by_the_first_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    embedder = BedrockEmbeddingClient(MODEL, DIMENSIONS)
    thread = prepare_in_background(embedder)
    assert thread is not None
    thread.join(30)  # no region: nothing raised on the thread, no client made
    assert embedder._client is None
    with pytest.raises(ConfigurationError, match="no AWS region"):
        embedder.embed_batch(["a text"])


def test_an_embedder_with_nothing_to_prepare_starts_no_thread() -> None:
    assert prepare_in_background(None) is None
    assert prepare_in_background(HashingEmbedder()) is None
