"""The adaptive embedding concurrency (knowledge.embedding.aimd) and the indexer's
lookahead (knowledge.ingest.lookahead), against the fake embedding service on loopback: a
provider that throttles beyond a number of calls in flight, as Titan's quota does."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_embeddings import (
    FakeEmbeddingServer,
    Profile,
    bedrock_runtime,
    fake_embedding_server,
    vector_for,
)

from knowledge.core.deadline import Deadline
from knowledge.core.errors import ValidationError
from knowledge.core.identity import embedding_key
from knowledge.core.model import IndexOptions
from knowledge.core.scope import KnowledgeScope
from knowledge.embedding.aimd import DECREASE_FACTOR, AdaptiveLimit
from knowledge.embedding.bedrock import BedrockEmbeddingClient
from knowledge.embedding.pool import EmbeddingDeadlineError
from knowledge.ingest.chunking import MarkdownSectionChunker, embedding_text
from knowledge.ingest.pipeline import Indexer, index_source
from knowledge.ingest.sources.folders import LocalDirectorySource
from knowledge.stores.embedded import EmbeddedKnowledgeStore

DIMENSIONS = 256
WAIT = 10.0
SCOPE = KnowledgeScope("agent-a", "docs")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _answer(limit: AdaptiveLimit, tickets: list[float], count: int) -> None:
    """``count`` answers with the limit in use (as under a queue of work): before each,
    as many calls in flight as the limit allows."""
    for _ in range(count):
        while len(tickets) < limit.limit:
            tickets.append(limit.acquire())
        limit.release(tickets.pop(0), throttled=False)


def test_the_limit_grows_while_in_use_and_not_while_idle() -> None:
    clock = Clock()
    limit = AdaptiveLimit(2, 8, clock=clock)
    # Idle: one call at a time under a limit of 2 says nothing about the provider.
    for _ in range(10):
        limit.release(limit.acquire(), throttled=False)
    assert limit.limit == 2
    # In use: until the first throttle each answer adds 1 (slow start: the limit doubles
    # per round trip).
    tickets: list[float] = []
    _answer(limit, tickets, 3)
    assert limit.limit == 5
    _answer(limit, tickets, 200)
    assert limit.limit == 8  # never past the ceiling


def test_after_a_throttle_the_limit_grows_by_one_per_round_of_answers() -> None:
    clock = Clock()
    limit = AdaptiveLimit(10, 64, clock=clock)
    limit.release(limit.acquire(), throttled=True)  # 10 -> 7: slow start is over
    assert limit.limit == 7
    tickets: list[float] = []
    _answer(limit, tickets, 7)  # one round of answers: 7 + 1/7 + ... about 8
    assert limit.limit == 7
    _answer(limit, tickets, 1)
    assert limit.limit == 8
    _answer(limit, tickets, 8 * 4)  # four more rounds, about one more call each
    assert 11 <= limit.limit <= 12


def test_slow_start_finds_a_quota_far_above_the_start_in_a_few_round_trips(
    quota_of_40: FakeEmbeddingServer,
) -> None:
    # 400 texts against a quota of 40 calls in flight, from 16: with one more call per
    # round of answers the limit would still be near 30 after them (16 -> about 30 in
    # 400 answers); doubling per round trip it reaches the quota and is cut at it.
    embedder = _bedrock(quota_of_40)
    texts = [f"text {n}" for n in range(400)]
    embeddings = embedder.embed_batch(texts)
    assert [e.vector[0] for e in embeddings] == [vector_for(t, DIMENSIONS)[0] for t in texts]
    assert quota_of_40.max_in_flight > 36
    assert embedder._pool.limit.max_in_flight > 36


@pytest.fixture
def quota_of_40() -> Iterator[FakeEmbeddingServer]:
    profile = Profile(
        latency_per_call=0.05, dimensions=DIMENSIONS, max_in_flight=40, retry_after=""
    )
    with fake_embedding_server(profile) as server:
        yield server


def test_a_throttle_cuts_the_limit_once_per_round_trip() -> None:
    clock = Clock()
    limit = AdaptiveLimit(10, 16, clock=clock)
    tickets = [limit.acquire() for _ in range(10)]  # sent at t=0
    clock.now = 1.0
    for ticket in tickets[:4]:  # a burst of throttles of calls sent at the same limit
        limit.release(ticket, throttled=True)
    assert limit.limit == int(10 * DECREASE_FACTOR)
    assert limit.decreases == 1
    later = limit.acquire()  # sent after the cut: its throttle cuts again
    limit.release(later, throttled=True)
    assert limit.limit == int(10 * DECREASE_FACTOR * DECREASE_FACTOR)
    for ticket in tickets[4:]:  # sent before both cuts: no further cut
        limit.release(ticket, throttled=True)
    assert limit.decreases == 2
    for _ in range(20):
        limit.release(limit.acquire(), throttled=True)
        clock.now += 1.0
    assert limit.limit == 1  # the floor: one call still goes out


def test_waiting_for_room_stops_at_the_deadline() -> None:
    limit = AdaptiveLimit(1, 1)
    limit.acquire()
    with pytest.raises(EmbeddingDeadlineError, match="time budget"):
        limit.acquire(Deadline.after(0.05))


@pytest.fixture
def titan() -> Iterator[FakeEmbeddingServer]:
    # 6 calls in flight at most, throttled beyond (no Retry-After: Bedrock's usual 429).
    # Calls slow enough (50 ms) that the client's own work never bounds what is in flight.
    profile = Profile(latency_per_call=0.05, dimensions=DIMENSIONS, max_in_flight=6, retry_after="")
    with fake_embedding_server(profile) as server:
        yield server


def _bedrock(server: FakeEmbeddingServer, concurrency: int = 64) -> BedrockEmbeddingClient:
    runtime = bedrock_runtime(server, timeout=WAIT, connections=concurrency)
    return BedrockEmbeddingClient(
        dimensions=DIMENSIONS, client=runtime, concurrency=concurrency, max_retries=8
    )


def test_the_pool_finds_the_quota_and_loses_nothing(titan: FakeEmbeddingServer) -> None:
    embedder = _bedrock(titan)
    texts = [f"text {n}" for n in range(120)]
    embeddings = embedder.embed_batch(texts)
    assert [e.vector[0] for e in embeddings] == [vector_for(t, DIMENSIONS)[0] for t in texts]
    limit = embedder._pool.limit
    # It started at 16, over the quota of 6: throttled, it backed off, and every text
    # throttled was sent again until answered.
    assert titan.throttled > 0
    assert limit.decreases >= 1
    assert titan.texts_embedded == len(texts)
    assert limit.limit <= 16


def test_the_limit_grows_to_the_quota(serve_unlimited: FakeEmbeddingServer) -> None:
    embedder = _bedrock(serve_unlimited)
    embedder.embed_batch([f"text {n}" for n in range(120)])
    # From 16, one more per round of answers while all were in use.
    assert serve_unlimited.max_in_flight > 16
    assert embedder._pool.limit.limit > 16
    assert serve_unlimited.throttled == 0


@pytest.fixture
def serve_unlimited() -> Iterator[FakeEmbeddingServer]:
    with fake_embedding_server(Profile(latency_per_call=0.15, dimensions=DIMENSIONS)) as server:
        yield server


def _write_documents(folder: Path, count: int, sections: int) -> None:
    for n in range(count):
        body = "\n\n".join(
            f"## Part {s}\n\nDocument {n} section {s} says something of its own."
            for s in range(sections)
        )
        (folder / f"doc-{n:02d}.md").write_text(f"# Document {n}\n\n{body}\n", encoding="utf-8")


def test_indexing_embeds_the_next_documents_while_one_is_written(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    _write_documents(docs, 12, 3)
    others = threading.Event()

    def hold_the_first(number: int, texts: list[str]) -> None:
        # Document 0's calls are answered only once another document's call has arrived:
        # one document after another, that never happens (the test then fails: a text of
        # document 0 is answered only after WAIT, and nothing else was in flight).
        if any("Document 0 " in text for text in texts):
            others.wait(WAIT)
        else:
            others.set()

    profile = Profile(latency_per_call=0.02, dimensions=DIMENSIONS, on_arrival=hold_the_first)
    with fake_embedding_server(profile) as server:
        embedder = _bedrock(server)
        store = EmbeddedKnowledgeStore(tmp_path / "kb.db", embedder)
        try:
            result = index_source(store, SCOPE, LocalDirectorySource(docs), IndexOptions())
            vectors = _stored_vectors(store, [f"doc-{n:02d}.md" for n in range(12)])
        finally:
            store.close()
    assert others.is_set()
    assert result.errors == ()
    assert result.indexed_documents == 12
    # Calls of several documents were in flight together (each has 4 chunks).
    assert server.max_in_flight > 4
    assert result.embedded_chunks == server.texts_embedded == 48
    # Every chunk has the vector of its own text (embedded ahead, written in order).
    chunker = MarkdownSectionChunker()
    for path, stored in vectors.items():
        text = (docs / path).read_text(encoding="utf-8")
        expected = {
            embedding_key(embedder.name, DIMENSIONS, embedding_text(chunk)): _unit(
                vector_for(embedding_text(chunk), DIMENSIONS)
            )[0]
            for chunk in chunker.chunk(path, text)
        }
        assert {key: vector[0] for key, vector in stored.items()} == pytest.approx(
            expected, rel=1e-5
        )


def _unit(vector: list[float]) -> list[float]:
    """As the store keeps a vector: unit length."""
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


def _stored_vectors(
    store: EmbeddedKnowledgeStore, paths: list[str]
) -> dict[str, dict[str, list[float]]]:
    with store.write_session(SCOPE) as session:
        return {
            path: {k: list(v) for k, v in session.stored_vectors(path).items()} for path in paths
        }


def test_no_lookahead_without_concurrent_calls() -> None:
    assert Indexer(MarkdownSectionChunker())._lookahead == 0
    with pytest.raises(ValidationError, match="lookahead"):
        Indexer(MarkdownSectionChunker(), lookahead=-1)


def test_a_throttle_without_retry_after_cuts_the_limit_not_the_whole_pool() -> None:
    # With an adaptive limit, a 429 without Retry-After (a concurrency quota) cuts the
    # limit; the gate stays open for the other workers, the throttled one waits its backoff.
    from knowledge.embedding.pool import RateGate
    from knowledge.embedding.retry import call_with_retries

    class Throttled(Exception):
        pass

    limit = AdaptiveLimit(10, 16)
    gate = RateGate(clock=lambda: 100.0, limit=limit)
    failures = [Throttled()]
    sleeps: list[float] = []

    def operation() -> str:
        if failures:
            raise failures.pop()
        return "ok"

    result = call_with_retries(
        operation,
        is_retryable=lambda exc: True,
        is_throttle=lambda exc: isinstance(exc, Throttled),
        sleep=sleeps.append,
        rand=lambda: 0.5,
        gate=gate,
    )
    assert result == "ok"
    assert sleeps == [0.25]
    assert gate.closed_for() == 0.0
    assert limit.limit == 7
    assert limit.decreases == 1
