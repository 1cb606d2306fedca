"""The providers' concurrent embedding pool, seen from a real loopback server.

The clients are the real Bedrock (boto3) and OpenAI (openai SDK) providers, talking HTTP
to ``fake_embeddings`` on 127.0.0.1; what they did is read from the server's own record
(arrival times, requests in flight), never from the code under test.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from fake_embeddings import (
    RESET,
    FakeEmbeddingServer,
    Profile,
    bedrock_runtime,
    fake_embedding_server,
    openai_sdk,
    vector_for,
)

from knowledge.core.deadline import time_budget
from knowledge.core.errors import EmbeddingError, ValidationError
from knowledge.embedding.base import EmbeddingClient
from knowledge.embedding.bedrock import BedrockEmbeddingClient
from knowledge.embedding.openai import OpenAIEmbeddingClient
from knowledge.embedding.pool import EmbeddingDeadlineError, EmbeddingPool, RateGate

DIMENSIONS = 256
WAIT = 30.0  # seconds a test waits for another thread before it fails
Sleep = Callable[[float], None]
Factory = Callable[..., EmbeddingClient]  # (server, concurrency, sleep=time.sleep)
_OPEN: list[Any] = []  # SDK clients made by a test, closed after it


def _bedrock(
    server: FakeEmbeddingServer, concurrency: int, sleep: Sleep = time.sleep
) -> EmbeddingClient:
    runtime = bedrock_runtime(server, timeout=WAIT)
    _OPEN.append(runtime)
    return BedrockEmbeddingClient(
        dimensions=DIMENSIONS, client=runtime, concurrency=concurrency, sleep=sleep
    )


def _openai(
    server: FakeEmbeddingServer, concurrency: int, sleep: Sleep = time.sleep
) -> EmbeddingClient:
    sdk = openai_sdk(server, timeout=WAIT)
    _OPEN.append(sdk)
    return OpenAIEmbeddingClient(
        dimensions=DIMENSIONS, client=sdk, batch_size=1, concurrency=concurrency, sleep=sleep
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


def _both_in_flight(number: int, texts: list[str], barrier: threading.Barrier) -> None:
    """``on_arrival``: hold the first ``barrier.parties`` requests until all of them are
    in flight at once (a client that sends one at a time fails here after ``WAIT``)."""
    if number < barrier.parties:
        barrier.wait()


@PROVIDERS
def test_order_is_kept_with_calls_in_flight_at_once(
    make: Factory, serve: Callable[[Profile], FakeEmbeddingServer]
) -> None:
    # the first two requests are held until both are in flight: never one at a time,
    # however slowly the machine runs the client's threads
    barrier = threading.Barrier(2, timeout=WAIT)
    server = serve(
        Profile(
            latency_per_call=0.02,
            dimensions=DIMENSIONS,
            on_arrival=lambda number, texts: _both_in_flight(number, texts, barrier),
        )
    )
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


class _ParkedSleep:
    """An injected ``sleep`` that records each wait and holds the waiting worker until
    ``release`` is set (instead of sleeping): while a worker is parked here it sends
    nothing, so what the server saw meanwhile is exact, not a matter of timing."""

    def __init__(self) -> None:
        self.waits: list[tuple[str, float]] = []
        self.release = threading.Event()
        self._changed = threading.Condition()

    def __call__(self, seconds: float) -> None:
        with self._changed:
            self.waits.append((threading.current_thread().name, seconds))
            self._changed.notify_all()
        if not self.release.wait(WAIT):
            raise AssertionError("the test never released the parked worker")

    def wait_for(self, count: int) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: len(self.waits) >= count, timeout=WAIT)


def _in_thread(function: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = function()
        except BaseException as error:  # handed to the test
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


@PROVIDERS
def test_retry_after_holds_back_every_worker(
    make: Factory, serve: Callable[[Profile], FakeEmbeddingServer]
) -> None:
    # The 5th request is throttled with Retry-After 20 s (the providers' cap): every
    # worker, not only the one that got the 429, must wait for the gate before its next
    # request. The waits go to a sleep that parks the worker, so the test sees all four
    # workers waiting at once and the server idle; without a shared gate the other
    # workers never wait and send the rest of the batch (the test fails after WAIT).
    server = serve(
        Profile(
            latency_per_call=0.05,
            dimensions=DIMENSIONS,
            retry_after="20",
            throttle_requests=frozenset({4}),
        )
    )
    parked = _ParkedSleep()
    texts = _texts(24)
    thread, outcome = _in_thread(lambda: make(server, 4, sleep=parked).embed_batch(texts))
    try:
        assert parked.wait_for(4), f"not every worker waited for the gate: {parked.waits}"
        held_at = server.arrivals
        assert server.in_flight == 0  # every worker is at the gate, none on the wire
        assert len({name for name, _ in parked.waits}) == 4
        assert all(0 < seconds <= 20 for _, seconds in parked.waits), parked.waits
        assert server.throttled == 1
        assert held_at < 24, "work remained after the 429"
    finally:
        parked.release.set()
        thread.join(WAIT)
    assert not thread.is_alive()
    assert "error" not in outcome, outcome
    embeddings = outcome["value"]
    assert [e.vector[0] for e in embeddings] == [vector_for(t, DIMENSIONS)[0] for t in texts]
    assert server.texts_embedded == 24  # nothing lost: the throttled text was sent again
    assert server.throttled == 1
    assert server.max_in_flight >= 2


@PROVIDERS
def test_no_call_starts_past_the_deadline(
    make: Factory, serve: Callable[[Profile], FakeEmbeddingServer]
) -> None:
    # The deadline runs on a clock the test moves: once both workers' first requests
    # are on the server, the clock passes the deadline, then they are answered. Every
    # request after those two would have started past the deadline.
    now = [0.0]

    def pass_the_deadline() -> None:
        now[0] = 61.0

    barrier = threading.Barrier(2, action=pass_the_deadline, timeout=WAIT)
    server = serve(
        Profile(
            dimensions=DIMENSIONS,
            on_arrival=lambda number, texts: _both_in_flight(number, texts, barrier),
        )
    )
    embedder = make(server, 2)
    with (
        pytest.raises(EmbeddingDeadlineError, match="time budget"),
        time_budget(60.0, clock=lambda: now[0]),
    ):
        embedder.embed_batch(_texts(40))
    # The pool stops waiting at the deadline, so the two calls in flight may still be
    # finishing: the server records a call after it has sent the answer.
    settle = time.monotonic() + WAIT
    while len(server.calls) < 2 and time.monotonic() < settle:
        time.sleep(0.01)
    assert server.arrivals == 2
    assert server.texts_embedded == 2


@PROVIDERS
def test_a_retry_after_past_the_deadline_fails_at_once(
    make: Factory, serve: Callable[[Profile], FakeEmbeddingServer]
) -> None:
    server = serve(
        Profile(dimensions=DIMENSIONS, retry_after="30", throttle_requests=frozenset({0}))
    )
    waits: list[float] = []
    embedder = make(server, 1, sleep=waits.append)
    # the budget's clock stands still: 2 s left however slowly the test runs
    with pytest.raises(EmbeddingDeadlineError), time_budget(2.0, clock=lambda: 0.0):
        embedder.embed_batch(_texts(3))
    assert waits == []  # failed at once: it did not wait out the Retry-After
    assert len(server.calls) == 1  # the throttled one; nothing sent after it


@PROVIDERS
def test_an_error_is_raised_and_later_calls_are_not_started(
    make: Factory, serve: Callable[[Profile], FakeEmbeddingServer]
) -> None:
    # Texts 0-2 are held on the server until the client has raised the 400 of text 3, so
    # every later text comes up after the error. A second batch then has to run on all
    # four workers at once (a barrier): by then every worker has taken its last item of
    # the first batch, so what the server got of it is final.
    texts = _texts(60)
    released = threading.Event()
    barrier = threading.Barrier(4, timeout=WAIT)
    later = [f"second batch {i}" for i in range(4)]
    arrived: list[str] = []
    lock = threading.Lock()

    def on_arrival(number: int, sent: list[str]) -> None:
        with lock:
            arrived.extend(sent)
        if sent[0] in later:
            barrier.wait()
        elif sent[0] != texts[3]:
            assert released.wait(WAIT)

    server = serve(
        Profile(dimensions=DIMENSIONS, reject_texts=frozenset({texts[3]}), on_arrival=on_arrival)
    )
    embedder = make(server, 4)
    try:
        with pytest.raises(EmbeddingError, match=r"400|ValidationException") as info:
            embedder.embed_batch(texts)
    finally:
        released.set()
    assert not isinstance(info.value, EmbeddingDeadlineError)
    assert len(embedder.embed_batch(later)) == 4
    with lock:
        assert sorted(t for t in arrived if t in texts) == sorted(texts[:4])  # no more


def test_pool_map_keeps_order_and_bounds_threads() -> None:
    running = 0
    most = 0
    lock = threading.Lock()
    barrier = threading.Barrier(3, timeout=WAIT)  # the first three run at once

    def work(n: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        if n < 3:
            barrier.wait()
        else:
            time.sleep(0.01 * (n % 3))
        with lock:
            running -= 1
        return n * n

    pool = EmbeddingPool(3)
    try:
        assert pool.map(work, list(range(20))) == [n * n for n in range(20)]
    finally:
        pool.close()
    assert most == 3


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


# --- round 7: what production throws at the pool ------------------------------------------


def _http_date(seconds_from_now: float) -> str:
    moment = datetime.now(UTC) + timedelta(seconds=seconds_from_now)
    return format_datetime(moment, usegmt=True)


@PROVIDERS
@pytest.mark.parametrize(
    ("retry_after", "expected"),
    [
        (lambda: _http_date(3600), 20.0),  # an HTTP-date an hour ahead: the cap
        (lambda: "1e400", 20.0),  # huge (inf): the cap
        (lambda: "7", 7.0),
    ],
    ids=["http-date", "huge", "seconds"],
)
def test_every_form_of_retry_after_closes_the_gate(
    make: Factory,
    serve: Callable[[Profile], FakeEmbeddingServer],
    retry_after: Callable[[], str],
    expected: float,
) -> None:
    # The first request is throttled; the client must wait what the server said (capped
    # at 20 s), on the pool's gate. An HTTP-date taken as "no hint" gives a jittered
    # wait of at most 0.5 s instead.
    server = serve(
        Profile(dimensions=DIMENSIONS, retry_after=retry_after(), throttle_requests=frozenset({0}))
    )
    waits: list[float] = []
    embeddings = make(server, 1, sleep=waits.append).embed_batch(_texts(2))
    assert len(embeddings) == 2
    # (the injected sleep does not pass time, so the next call may wait on the gate too)
    assert expected - 1.0 < waits[0] <= expected
    assert server.throttled == 1
    assert server.texts_embedded == 2


@PROVIDERS
@pytest.mark.parametrize("retry_after", ["soon", "-5", "nan", "Wed, 99 Foo 2020 99:99:99 GMT"])
def test_a_garbage_retry_after_falls_back_to_backoff(
    make: Factory, serve: Callable[[Profile], FakeEmbeddingServer], retry_after: str
) -> None:
    server = serve(
        Profile(dimensions=DIMENSIONS, retry_after=retry_after, throttle_requests=frozenset({0}))
    )
    waits: list[float] = []
    embeddings = make(server, 1, sleep=waits.append).embed_batch(_texts(2))
    assert [e.vector[0] for e in embeddings] == [vector_for(t, DIMENSIONS)[0] for t in _texts(2)]
    # the first jittered backoff (the injected sleep passes no time, so the next call
    # may find the gate still closed and wait again)
    assert 0 <= waits[0] <= 0.5


@PROVIDERS
@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_a_non_finite_vector_is_an_error(
    make: Factory, serve: Callable[[Profile], FakeEmbeddingServer], value: float
) -> None:
    texts = _texts(5)

    def vectors(text: str, dimensions: int) -> list[float]:
        vector = vector_for(text, dimensions)
        return [value, *vector[1:]] if text == texts[2] else vector

    server = serve(Profile(dimensions=DIMENSIONS, vectors=vectors))
    with pytest.raises(EmbeddingError, match="not finite"):
        make(server, 2).embed_batch(texts)


@pytest.mark.parametrize(
    "rewrite",
    [
        lambda data: [{**item, "index": 0} for item in data],  # every item says index 0
        lambda data: [*data[:-1], {**data[0]}],  # the first twice, the last missing
        lambda data: [{**item, "index": item["index"] + 1} for item in data],  # off by one
    ],
    ids=["all-zero", "duplicate", "shifted"],
)
def test_openai_answer_must_cover_each_input_once(
    serve: Callable[[Profile], FakeEmbeddingServer],
    rewrite: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
) -> None:
    # The right number of vectors, but not one per input: taking them by position
    # would give some texts another text's vector.
    server = serve(Profile(dimensions=DIMENSIONS, openai_data=rewrite))
    sdk = openai_sdk(server, timeout=WAIT)
    _OPEN.append(sdk)
    embedder = OpenAIEmbeddingClient(dimensions=DIMENSIONS, client=sdk, batch_size=4)
    with pytest.raises(EmbeddingError, match="index"):
        embedder.embed_batch(_texts(4))


@PROVIDERS
def test_a_hung_call_fails_at_the_deadline(
    make: Factory, serve: Callable[[Profile], FakeEmbeddingServer]
) -> None:
    # Every request is held on the server until the test ends; the SDK clients here
    # wait minutes for an answer. The pool must give up when the caller's time is up
    # (2 s) with EmbeddingDeadlineError, not wait for the SDK's read timeout.
    released = threading.Event()
    server = serve(
        Profile(dimensions=DIMENSIONS, on_arrival=lambda number, texts: released.wait(300))
    )
    embedder = make(server, 4)

    def run() -> Any:
        with time_budget(2.0):
            return embedder.embed_batch(_texts(8))

    thread, outcome = _in_thread(run)
    try:
        thread.join(WAIT)
        assert not thread.is_alive(), "embed_batch waited past its deadline for a hung call"
    finally:
        released.set()
    assert isinstance(outcome.get("error"), EmbeddingDeadlineError), outcome
    assert server.arrivals >= 1


@PROVIDERS
def test_after_a_failure_no_worker_keeps_retrying(
    make: Factory, serve: Callable[[Profile], FakeEmbeddingServer]
) -> None:
    # Text 0 is refused (400) once text 1's first request is on the server, held there
    # until the batch has failed; then
    # text 1 is answered 503 again and again. The batch has failed: its other worker
    # must not go on retrying (5 retries of a document nobody waits for, against the
    # account's quota and beside the next document's calls). A second batch needing
    # both workers at once (a barrier) shows that the first batch's work is over.
    texts = ["refused text", "unavailable text"]
    released = threading.Event()
    barrier = threading.Barrier(2, timeout=WAIT)
    later = ["second batch 0", "second batch 1"]

    second_arrived = threading.Event()

    def on_arrival(number: int, sent: list[str]) -> None:
        if sent[0] in later:
            barrier.wait()
        elif sent[0] == texts[0]:
            assert second_arrived.wait(WAIT)  # both on the wire before the 400
        elif sent[0] == texts[1] and not second_arrived.is_set():
            second_arrived.set()
            assert released.wait(WAIT)

    server = serve(
        Profile(
            dimensions=DIMENSIONS,
            reject_texts=frozenset({texts[0]}),
            error_texts=frozenset({texts[1]}),
            on_arrival=on_arrival,
        )
    )
    embedder = make(server, 2, sleep=lambda seconds: None)
    try:
        with pytest.raises(EmbeddingError, match=r"400|ValidationException"):
            embedder.embed_batch(texts)
    finally:
        released.set()
    assert len(embedder.embed_batch(later)) == 2
    sent = [call for call in server.calls if call.status == 503]
    assert len(sent) == 1, f"text 1 was retried {len(sent) - 1} times after the batch failed"


@PROVIDERS
def test_connections_reset_mid_batch_lose_nothing(
    make: Factory, serve: Callable[[Profile], FakeEmbeddingServer]
) -> None:
    # Three requests of the batch have their connection reset (no answer): each is
    # sent again, and every text comes back once, in order.
    server = serve(Profile(dimensions=DIMENSIONS, reset_requests=frozenset({1, 2, 5})))
    texts = _texts(12)
    embeddings = make(server, 4, sleep=lambda seconds: None).embed_batch(texts)
    assert [e.vector[0] for e in embeddings] == [vector_for(t, DIMENSIONS)[0] for t in texts]
    assert sum(1 for call in server.calls if call.status == RESET) == 3
    assert server.texts_embedded == 12
