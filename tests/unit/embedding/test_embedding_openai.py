from __future__ import annotations

import base64
import json
import os
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx2
import openai
import pytest
from json_http import JsonHandler, serving

from knowledge.core.errors import ConfigurationError, EmbeddingError, ValidationError
from knowledge.embedding.base import EmbeddingClient
from knowledge.embedding.openai import (
    OpenAIEmbeddingClient,
    is_openai_throttle,
    is_retryable_openai_error,
    split_token_count,
)

# --- a tiny OpenAI-compatible embeddings server on 127.0.0.1 -----------------------------


def _marker(text: str) -> float:
    """What the fake server puts in a text's first vector component, to check order."""
    return float(sum(map(ord, text)))


@dataclass
class FakeEmbeddingsAPI:
    """Answers POST /v1/embeddings; ``script`` holds canned failures, consumed in order."""

    url: str = ""
    dimensions: int = 1536
    script: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    reverse_data: bool = False
    prompt_tokens: int | None = None  # default: total characters of the inputs
    wrong_dimensions: bool = False

    def respond(self, body: dict[str, Any]) -> tuple[int, dict[str, str], dict[str, Any]]:
        if self.script:
            status, headers = self.script.pop(0)
            error = {"error": {"message": f"canned {status}", "type": "test", "code": None}}
            return status, headers, error
        inputs = body["input"]
        size = body.get("dimensions", self.dimensions) + (1 if self.wrong_dimensions else 0)
        data = []
        for index, text in enumerate(inputs):
            vector = [_marker(text)] + [0.0] * (size - 1)
            encoded: Any = vector
            if body.get("encoding_format") == "base64":
                encoded = base64.b64encode(struct.pack(f"<{size}f", *vector)).decode()
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        if self.reverse_data:
            data.reverse()
        tokens = self.prompt_tokens
        if tokens is None:
            tokens = sum(len(text) for text in inputs)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return 200, {}, {"object": "list", "data": data, "model": body["model"], "usage": usage}


def _handler(api: FakeEmbeddingsAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length))
            api.requests.append(
                {
                    "path": self.path,
                    "body": body,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                }
            )
            status, headers, payload = api.respond(body)
            self.send_json(status, payload, headers)

    return Handler


@pytest.fixture
def api() -> Iterator[FakeEmbeddingsAPI]:
    fake = FakeEmbeddingsAPI()
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))) as url:
        fake.url = f"{url}/v1"
        yield fake


@pytest.fixture
def sdk(api: FakeEmbeddingsAPI) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(base_url=api.url, api_key="test", max_retries=0)
    yield client
    client.close()


def _embedder(sdk: openai.OpenAI, sleeps: list[float], **options: Any) -> OpenAIEmbeddingClient:
    return OpenAIEmbeddingClient(client=sdk, sleep=sleeps.append, **options)


# --- behaviour through the real SDK ------------------------------------------------------


def test_is_an_embedding_client_with_known_dimensions() -> None:
    small = OpenAIEmbeddingClient()
    assert isinstance(small, EmbeddingClient)
    assert (small.name, small.dimensions) == ("openai:text-embedding-3-small", 1536)
    assert OpenAIEmbeddingClient("text-embedding-3-large").dimensions == 3072
    assert OpenAIEmbeddingClient("text-embedding-ada-002").dimensions == 1536
    assert OpenAIEmbeddingClient("text-embedding-3-large", 256).dimensions == 256


def test_embeds_through_the_sdk(api: FakeEmbeddingsAPI, sdk: openai.OpenAI) -> None:
    sleeps: list[float] = []
    embedding = _embedder(sdk, sleeps).embed("hello world")
    assert len(embedding.vector) == 1536
    assert embedding.vector[0] == _marker("hello world")
    assert embedding.token_count == len("hello world")
    assert [r["path"] for r in api.requests] == ["/v1/embeddings"]
    assert api.requests[0]["body"]["model"] == "text-embedding-3-small"
    assert "dimensions" not in api.requests[0]["body"]
    assert sleeps == []


def test_batches_keep_input_order(api: FakeEmbeddingsAPI, sdk: openai.OpenAI) -> None:
    api.reverse_data = True  # the API's "index" field, not list order, is authoritative
    texts = [f"text number {i}" * (i + 1) for i in range(5)]
    embeddings = _embedder(sdk, [], batch_size=2).embed_batch(texts)
    assert [e.vector[0] for e in embeddings] == [_marker(t) for t in texts]
    # the requests go out concurrently: they may arrive in any order
    batches = sorted(r["body"]["input"] for r in api.requests)
    assert batches == sorted([texts[0:2], texts[2:4], texts[4:5]])


def test_token_total_is_split_over_the_batch(api: FakeEmbeddingsAPI, sdk: openai.OpenAI) -> None:
    api.prompt_tokens = 10
    embeddings = _embedder(sdk, []).embed_batch(["aaaa", "a", "aaaaa"])
    counts = [e.token_count for e in embeddings]
    assert sum(counts) == 10
    assert counts == [4, 1, 5]


def test_blank_texts_are_not_sent(api: FakeEmbeddingsAPI, sdk: openai.OpenAI) -> None:
    embeddings = _embedder(sdk, []).embed_batch(["", "real text", "   "])
    assert api.requests[0]["body"]["input"] == ["real text"]
    assert embeddings[0].vector == (0.0,) * 1536
    assert embeddings[0].token_count == 0
    assert embeddings[1].vector[0] == _marker("real text")
    assert embeddings[2].vector == (0.0,) * 1536
    api.requests.clear()
    assert _embedder(sdk, []).embed_batch(["", " "])[1].token_count == 0
    assert api.requests == []


def test_dimensions_parameter_is_sent_for_v3_models(
    api: FakeEmbeddingsAPI, sdk: openai.OpenAI
) -> None:
    embedding = _embedder(sdk, [], dimensions=8).embed("short")
    assert api.requests[0]["body"]["dimensions"] == 8
    assert len(embedding.vector) == 8


def test_dimensions_declares_the_size_for_other_models(
    api: FakeEmbeddingsAPI, sdk: openai.OpenAI
) -> None:
    api.dimensions = 4
    embedder = _embedder(sdk, [], model="nomic-embed-text", dimensions=4)
    assert len(embedder.embed("x y").vector) == 4
    assert "dimensions" not in api.requests[0]["body"]


def test_unexpected_vector_size_is_an_error(api: FakeEmbeddingsAPI, sdk: openai.OpenAI) -> None:
    api.wrong_dimensions = True
    with pytest.raises(EmbeddingError, match="1537-dimensional"):
        _embedder(sdk, []).embed("text")


def test_429_is_retried_honouring_retry_after(api: FakeEmbeddingsAPI, sdk: openai.OpenAI) -> None:
    api.script = [(429, {"retry-after": "2"})]
    sleeps: list[float] = []
    embedding = _embedder(sdk, sleeps).embed("after the rate limit")
    assert embedding.vector[0] == _marker("after the rate limit")
    assert len(api.requests) == 2
    # the wait goes through the pool's gate: Retry-After from when the 429 was read
    assert len(sleeps) == 1
    # 2 s less the moments between closing the gate and waiting on it (which a loaded
    # machine can stretch): more than any jittered first backoff (0.5 s at most)
    assert 0.5 < sleeps[0] <= 2.0


def test_500_is_retried(api: FakeEmbeddingsAPI, sdk: openai.OpenAI) -> None:
    api.script = [(500, {}), (503, {})]
    sleeps: list[float] = []
    assert _embedder(sdk, sleeps).embed("eventually").token_count == len("eventually")
    assert len(api.requests) == 3
    assert len(sleeps) == 2
    assert all(0.0 <= delay <= 20.0 for delay in sleeps)


@pytest.mark.parametrize("status", [400, 404, 422])
def test_client_errors_fail_at_once(
    api: FakeEmbeddingsAPI, sdk: openai.OpenAI, status: int
) -> None:
    api.script = [(status, {})]
    sleeps: list[float] = []
    with pytest.raises(EmbeddingError, match=f"HTTP {status}") as info:
        _embedder(sdk, sleeps).embed("bad")
    assert isinstance(info.value.__cause__, openai.APIStatusError)
    assert len(api.requests) == 1
    assert sleeps == []


def test_401_fails_at_once_and_points_at_the_key(
    api: FakeEmbeddingsAPI, sdk: openai.OpenAI
) -> None:
    api.script = [(401, {})]
    with pytest.raises(EmbeddingError, match="OPENAI_API_KEY"):
        _embedder(sdk, []).embed("text")
    assert len(api.requests) == 1


def test_gives_up_after_max_retries(api: FakeEmbeddingsAPI, sdk: openai.OpenAI) -> None:
    api.script = [(503, {})] * 5
    sleeps: list[float] = []
    with pytest.raises(EmbeddingError, match="HTTP 503"):
        _embedder(sdk, sleeps, max_retries=2).embed("text")
    assert len(api.requests) == 3
    assert len(sleeps) == 2


def test_connection_errors_are_retried() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # nothing listens on the port now: every attempt is refused
    sdk = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="t", max_retries=0)
    sleeps: list[float] = []
    try:
        with pytest.raises(EmbeddingError, match="cannot reach"):
            _embedder(sdk, sleeps, max_retries=2).embed("text")
    finally:
        sdk.close()
    assert len(sleeps) == 2


# --- the SDK client it builds itself -----------------------------------------------------


def test_builds_its_sdk_client_lazily_with_the_key_and_without_sdk_retries(
    api: FakeEmbeddingsAPI,
) -> None:
    calls: list[int] = []

    def read_key() -> str:
        calls.append(1)
        return "from-callable"

    api.script = [(500, {})]
    embedder = OpenAIEmbeddingClient(api_key=read_key, base_url=api.url, max_retries=0)
    assert calls == []  # nothing is read or built at construction
    try:
        # max_retries=0 here and none in the SDK: exactly one request reaches the server
        with pytest.raises(EmbeddingError, match="HTTP 500"):
            embedder.embed("text")
        assert len(api.requests) == 1
        assert api.requests[0]["headers"]["authorization"] == "Bearer from-callable"
        assert embedder.embed("second").vector[0] == _marker("second")
        assert calls == [1]  # the key is read once
    finally:
        embedder.close()
        embedder.close()


def test_missing_key_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    embedder = OpenAIEmbeddingClient(base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY is not set"):
        embedder.embed("text")
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY is not set"):
        OpenAIEmbeddingClient(api_key=lambda: "  ").embed("text")


def test_failing_key_reader_is_a_configuration_error() -> None:
    def broken() -> str:
        raise RuntimeError("secret not found")

    with pytest.raises(ConfigurationError, match="secret not found"):
        OpenAIEmbeddingClient(api_key=broken).embed("text")


def test_key_from_the_environment(api: FakeEmbeddingsAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    embedder = OpenAIEmbeddingClient(base_url=api.url)
    try:
        embedder.embed("text")
    finally:
        embedder.close()
    assert api.requests[0]["headers"]["authorization"] == "Bearer env-key"


def test_importing_the_module_does_not_import_openai() -> None:
    script = (
        "import sys\n"
        "import knowledge.embedding\n"
        "import knowledge.embedding.openai as m\n"
        "m.OpenAIEmbeddingClient(api_key='k')\n"
        "assert 'openai' not in sys.modules, 'openai imported'\n"
        "print('clean')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSTARTUP"}
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "clean"


# --- pure parts --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"model": " "}, "model"),
        ({"model": "my-model"}, "dimensions"),
        ({"dimensions": 0}, "dimensions"),
        ({"dimensions": 2000}, "dimensions"),
        ({"model": "text-embedding-ada-002", "dimensions": 512}, "dimensions"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 5000}, "batch_size"),
        ({"max_retries": -1}, "max_retries"),
        ({"timeout": 0}, "timeout"),
    ],
)
def test_rejects_bad_configuration(options: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        OpenAIEmbeddingClient(**options)
    assert info.value.field == field


@pytest.mark.parametrize(
    ("total", "texts", "expected"),
    [
        (10, ["aaaa", "a", "aaaaa"], [4, 1, 5]),
        (3, ["ab", "ab", "ab"], [1, 1, 1]),
        (4, ["ab", "ab", "ab"], [2, 1, 1]),
        (7, ["x"], [7]),
        (0, ["abc", "d"], [0, 0]),
        (5, [], []),
        (1, ["a" * 100, "b"], [1, 0]),
    ],
)
def test_split_token_count(total: int, texts: list[str], expected: list[int]) -> None:
    assert split_token_count(total, texts) == expected


def _status_error(status: int) -> openai.APIStatusError:
    request = httpx2.Request("POST", "http://127.0.0.1/v1/embeddings")
    return openai.APIStatusError("x", response=httpx2.Response(status, request=request), body=None)


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (422, False),
        (408, True),
        (429, True),
        (500, True),
        (502, True),
        (503, True),
    ],
)
def test_retryable_statuses(status: int, retryable: bool) -> None:
    assert is_retryable_openai_error(_status_error(status)) is retryable
    # Only a throttle backs off the whole pool (with or without Retry-After).
    assert is_openai_throttle(_status_error(status)) is (status == 429)


def test_connection_and_other_errors() -> None:
    request = httpx2.Request("POST", "http://127.0.0.1/v1/embeddings")
    assert is_retryable_openai_error(openai.APIConnectionError(request=request))
    assert is_retryable_openai_error(openai.APITimeoutError(request=request))
    assert not is_retryable_openai_error(ValueError("parse"))


def test_a_pipeline_batch_fills_the_pool(api: FakeEmbeddingsAPI, sdk: openai.OpenAI) -> None:
    # The indexer hands the embedder DEFAULT_EMBED_BATCH_SIZE texts at a time: with the
    # default request size they go out as one request per pool worker (with 256 they
    # were one request, and the pool had nothing to run beside it).
    from knowledge.embedding.pool import DEFAULT_OPENAI_INITIAL_CONCURRENCY
    from knowledge.ingest.pipeline import DEFAULT_EMBED_BATCH_SIZE

    embedder = OpenAIEmbeddingClient(client=sdk)
    texts = [f"text {n}" for n in range(DEFAULT_EMBED_BATCH_SIZE)]
    embedder.embed_batch(texts)
    assert len(api.requests) == DEFAULT_OPENAI_INITIAL_CONCURRENCY
    assert sorted(len(r["body"]["input"]) for r in api.requests) == [16, 16, 16, 16]
