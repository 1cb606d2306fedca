"""The providers' concurrent embedding pool, seen from a real loopback server.

The clients are the real Bedrock (boto3) and OpenAI (openai SDK) providers, talking HTTP
to ``fake_embeddings`` on 127.0.0.1; what they did is read from the server's own record
(arrival times, requests in flight), never from the code under test.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import openai
import pytest
from botocore.config import Config
from fake_embeddings import FakeEmbeddingServer, Profile, fake_embedding_server, vector_for

from knowledge.deadline import time_budget
from knowledge.embedding.base import EmbeddingClient
from knowledge.embedding.bedrock import BedrockEmbeddingClient
from knowledge.embedding.openai import OpenAIEmbeddingClient
from knowledge.embedding.pool import EmbeddingDeadlineError, EmbeddingPool, RateGate
from knowledge.errors import EmbeddingError, ValidationError

DIMENSIONS = 256
Factory = Callable[[FakeEmbeddingServer, int], EmbeddingClient]
_OPEN: list[Any] = []  # SDK clients made by a test, closed after it


def _bedrock(server: FakeEmbeddingServer, concurrency: int) -> EmbeddingClient:
    runtime = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=server.url,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"total_max_attempts": 1}, max_pool_connections=32),
    )
    _OPEN.append(runtime)
    return BedrockEmbeddingClient(dimensions=DIMENSIONS, client=runtime, concurrency=concurrency)


def _openai(server: FakeEmbeddingServer, concurrency: int) -> EmbeddingClient:
    sdk = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    _OPEN.append(sdk)
    return OpenAIEmbeddingClient(
        dimensions=DIMENSIONS, client=sdk, batch_size=1, concurrency=concurrency
    )


PROVIDERS = pytest.mark.parametrize("make", [_bedrock, _openai], ids=["bedrock", "openai"])


@pytest.fixture
def serve() -> Iterator[Callable[[Profile], FakeEmbeddingServer]]:
    servers: list[Any] = []

    def start(profile: Profile) -> FakeEmbeddingServer:
        context = fake_embedding_server(profile)
        servers.append(context)
        return context.__enter__()

    yield start
    while _OPEN:
        _OPEN.pop().close()
    for context in reversed(servers):
        context.__exit__(None, None, None)


def _texts(n: int) -> list[str]:
    return [f"text number {i} " + "word " * (i % 7) for i in range(n)]


@PROVIDERS
def test_order_is_kept_with_calls_in_flight_at_once(
    make: Factory, serve: Callable[[Profile], FakeEmbeddingServer]
) -> None:
    # per-text latency: the longer texts answer later, so answers come back out of order
    server = serve(Profile(latency_per_call=0.02, latency_per_text=0.0, dimensions=DIMENSIONS))
    texts = _texts(40)
    embeddings = make(server, 8).embed_batch(texts)
    assert [list(e.vector) for e in embeddings] == [vector_for(t, DIMENSIONS) for t in texts]
    assert server.texts_embedded == 40
    assert 2 <= server.max_in_flight <= 8


@PROVIDERS
def test_concurrency_one_sends_one_call_at_a_time(
    make: Factory, serve: Callable[[Profile], FakeEmbeddingServer]
) -> None:
    server = serve(Profile(latency_per_call=0.005, dimensions=DIMENSIONS))
    texts = _texts(6)
    embeddings = make(server, 1).embed_batch(texts)
    assert [e.vector[0] for e in embeddings] == [vector_for(t, DIMENSIONS)[0] for t in texts]
    assert server.max_in_flight == 1


@PROVIDERS
def test_retry_after_holds_back_every_worker(
    make: Factory, serve: Callable[[Profile], FakeEmbeddingServer]
) -> None:
    # The 5th request is throttled for 1 s: no worker may send anything meanwhile.
    server = serve(
        Profile(
            latency_per_call=0.05,
            dimensions=DIMENSIONS,
            retry_after="1",
            throttle_requests=frozenset({4}),
        )
    )
    texts = _texts(24)
    embeddings = make(server, 4).embed_batch(texts)
    assert [e.vector[0] for e in embeddings] == [vector_for(t, DIMENSIONS)[0] for t in texts]
    assert server.texts_embedded == 24  # nothing lost: the throttled text was sent again
    throttled = [call for call in server.calls if call.status == 429]
    assert len(throttled) == 1
    answered = throttled[0].ended
    later = sorted(call.started for call in server.calls if call.started > answered)
    assert len(later) >= 8, "work remained after the 429"
    # Requests the other workers had sent before the client read the 429 may still
    # arrive just after it (the client's own lag); after that, none until Retry-After
    # has passed. Without a shared gate they would keep arriving every ~50 ms.
    held_back = [t for t in later if answered + 0.3 < t < answered + 0.95]
    assert held_back == []
    assert max(later) > answered + 0.95
    assert server.max_in_flight >= 2


@PROVIDERS
def test_no_call_starts_past_the_deadline(
    make: Factory, serve: Callable[[Profile], FakeEmbeddingServer]
) -> None:
    server = serve(Profile(latency_per_call=0.05, dimensions=DIMENSIONS))
    embedder = make(server, 2)
    with pytest.raises(EmbeddingDeadlineError, match="time budget"), time_budget(0.3) as deadline:
        embedder.embed_batch(_texts(40))  # 20 rounds of 50 ms: about 1 s
    time.sleep(0.3)  # calls already in flight finish
    assert 2 <= len(server.calls) < 30
    # a call the client began just before the deadline may reach the server a little
    # after it (the client's own lag); without the check calls go on for ~0.7 s more
    assert max(call.started for call in server.calls) <= deadline.at + 0.2


@PROVIDERS
def test_a_retry_after_past_the_deadline_fails_at_once(
    make: Factory, serve: Callable[[Profile], FakeEmbeddingServer]
) -> None:
    server = serve(
        Profile(dimensions=DIMENSIONS, retry_after="30", throttle_requests=frozenset({0}))
    )
    embedder = make(server, 1)
    began = time.monotonic()
    with pytest.raises(EmbeddingDeadlineError), time_budget(2.0):
        embedder.embed_batch(_texts(3))
    assert time.monotonic() - began < 1.5
    assert len(server.calls) == 1  # the throttled one; nothing sent after it


@PROVIDERS
def test_an_error_is_raised_and_later_calls_are_not_started(
    make: Factory, serve: Callable[[Profile], FakeEmbeddingServer]
) -> None:
    texts = _texts(60)
    server = serve(
        Profile(latency_per_call=0.02, dimensions=DIMENSIONS, reject_texts=frozenset({texts[3]}))
    )
    with pytest.raises(EmbeddingError, match=r"400|ValidationException") as info:
        make(server, 4).embed_batch(texts)
    assert not isinstance(info.value, EmbeddingDeadlineError)
    time.sleep(0.1)
    assert len(server.calls) < 20  # the rest were never sent


def test_pool_map_keeps_order_and_bounds_threads() -> None:
    import threading

    running = 0
    most = 0
    lock = threading.Lock()

    def work(n: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.01 * (n % 3))
        with lock:
            running -= 1
        return n * n

    pool = EmbeddingPool(3)
    try:
        assert pool.map(work, list(range(20))) == [n * n for n in range(20)]
    finally:
        pool.close()
    assert 2 <= most <= 3


def test_gate_waits_for_the_latest_pause() -> None:
    now = [100.0]
    gate = RateGate(clock=lambda: now[0])
    gate.pause(2.0)
    gate.pause(1.0)  # an earlier reopening does not shorten the pause
    assert gate.closed_for() == 2.0
    slept: list[float] = []
    gate.wait(slept.append)
    assert slept == [2.0]


@pytest.mark.parametrize("value", [0, -1, 65, True, "4", 2.5])
def test_concurrency_is_validated(value: Any) -> None:
    with pytest.raises(ValidationError, match="concurrency"):
        EmbeddingPool(value)
    with pytest.raises(ValidationError, match="concurrency"):
        BedrockEmbeddingClient(concurrency=value)
    with pytest.raises(ValidationError, match="concurrency"):
        OpenAIEmbeddingClient(api_key="k", concurrency=value)
