from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError
from botocore.response import StreamingBody
from botocore.stub import Stubber

from knowledge.core.errors import ConfigurationError, EmbeddingError, ValidationError
from knowledge.embedding.base import EmbeddingClient
from knowledge.embedding.bedrock import (
    BedrockEmbeddingClient,
    is_bedrock_throttle,
    is_retryable_bedrock_error,
)

MODEL = "amazon.titan-embed-text-v2:0"


@pytest.fixture
def runtime() -> Iterator[Any]:
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    yield client
    client.close()


@pytest.fixture
def stubber(runtime: Any) -> Iterator[Stubber]:
    with Stubber(runtime) as stub:
        yield stub
        stub.assert_no_pending_responses()


def _request(text: str, dimensions: int = 1024) -> dict[str, Any]:
    body = json.dumps({"inputText": text, "dimensions": dimensions, "normalize": True})
    return {
        "modelId": MODEL,
        "body": body,
        "contentType": "application/json",
        "accept": "application/json",
    }


def _response(vector: list[float], tokens: int) -> dict[str, Any]:
    raw = json.dumps({"embedding": vector, "inputTextTokenCount": tokens}).encode()
    return {"body": StreamingBody(io.BytesIO(raw), len(raw)), "contentType": "application/json"}


def _vector(first: float, dimensions: int = 1024) -> list[float]:
    return [first] + [0.0] * (dimensions - 1)


def _error(stubber: Stubber, code: str, status: int) -> None:
    stubber.add_client_error(
        "invoke_model",
        service_error_code=code,
        service_message=f"canned {code}",
        http_status_code=status,
    )


def test_is_an_embedding_client() -> None:
    embedder = BedrockEmbeddingClient()
    assert isinstance(embedder, EmbeddingClient)
    assert (embedder.name, embedder.dimensions) == (f"bedrock:{MODEL}", 1024)


def test_embeds_one_text_per_call_in_order(runtime: Any, stubber: Stubber) -> None:
    texts = ["first text", "second", "third one"]
    for i, text in enumerate(texts):
        stubber.add_response("invoke_model", _response(_vector(float(i)), 10 + i), _request(text))
    sleeps: list[float] = []
    # the Stubber answers in call order: one call at a time (concurrency: test_embedding_pool)
    embedder = BedrockEmbeddingClient(client=runtime, sleep=sleeps.append, concurrency=1)
    embeddings = embedder.embed_batch(texts)
    assert [e.vector[0] for e in embeddings] == [0.0, 1.0, 2.0]
    assert [e.token_count for e in embeddings] == [10, 11, 12]
    assert all(len(e.vector) == 1024 for e in embeddings)
    assert sleeps == []


def test_smaller_dimension_is_requested(runtime: Any, stubber: Stubber) -> None:
    stubber.add_response("invoke_model", _response(_vector(1.0, 256), 3), _request("x y", 256))
    embedding = BedrockEmbeddingClient(dimensions=256, client=runtime).embed("x y")
    assert len(embedding.vector) == 256


def test_titan_v1_sends_only_the_text(runtime: Any, stubber: Stubber) -> None:
    model = "amazon.titan-embed-text-v1"
    expected = {
        "modelId": model,
        "body": json.dumps({"inputText": "hello"}),
        "contentType": "application/json",
        "accept": "application/json",
    }
    stubber.add_response("invoke_model", _response(_vector(1.0, 1536), 2), expected)
    embedder = BedrockEmbeddingClient(model, client=runtime)
    assert embedder.dimensions == 1536
    assert embedder.embed("hello").token_count == 2


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("ThrottlingException", 429),
        ("ServiceUnavailableException", 503),
        ("InternalServerException", 500),
        ("ModelNotReadyException", 429),
        ("ModelTimeoutException", 408),
    ],
)
def test_transient_errors_are_retried(
    runtime: Any, stubber: Stubber, code: str, status: int
) -> None:
    _error(stubber, code, status)
    stubber.add_response("invoke_model", _response(_vector(5.0), 4), _request("retry me"))
    sleeps: list[float] = []
    embedding = BedrockEmbeddingClient(client=runtime, sleep=sleeps.append).embed("retry me")
    assert embedding.vector[0] == 5.0
    assert len(sleeps) == 1


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("ValidationException", 400),
        ("AccessDeniedException", 403),
        ("ResourceNotFoundException", 404),
    ],
)
def test_client_errors_fail_at_once(runtime: Any, stubber: Stubber, code: str, status: int) -> None:
    _error(stubber, code, status)
    sleeps: list[float] = []
    with pytest.raises(EmbeddingError, match=code) as info:
        BedrockEmbeddingClient(client=runtime, sleep=sleeps.append).embed("bad")
    assert isinstance(info.value.__cause__, ClientError)
    assert sleeps == []


def test_gives_up_after_max_retries(runtime: Any, stubber: Stubber) -> None:
    for _ in range(3):
        _error(stubber, "ThrottlingException", 429)
    sleeps: list[float] = []
    embedder = BedrockEmbeddingClient(client=runtime, max_retries=2, sleep=sleeps.append)
    with pytest.raises(EmbeddingError, match="ThrottlingException"):
        embedder.embed("text")
    assert len(sleeps) == 2


def test_wrong_vector_size_is_an_error(runtime: Any, stubber: Stubber) -> None:
    stubber.add_response("invoke_model", _response(_vector(1.0, 512), 1), _request("text"))
    with pytest.raises(EmbeddingError, match="512-dimensional"):
        BedrockEmbeddingClient(client=runtime).embed("text")


def test_blank_text_is_not_sent(runtime: Any, stubber: Stubber) -> None:
    embedding = BedrockEmbeddingClient(client=runtime).embed("  ")
    assert embedding.vector == (0.0,) * 1024
    assert embedding.token_count == 0


class ScriptedClient:
    """A bedrock-runtime stand-in that raises the scripted errors, then answers."""

    def __init__(self, errors: list[Exception]) -> None:
        self.errors = errors
        self.calls = 0

    def invoke_model(self, **request: Any) -> dict[str, Any]:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return _response(_vector(1.0), 1)


def test_connection_errors_are_retried() -> None:
    client = ScriptedClient([EndpointConnectionError(endpoint_url="https://bedrock.invalid")])
    sleeps: list[float] = []
    BedrockEmbeddingClient(client=client, sleep=sleeps.append).embed("text")
    assert client.calls == 2
    assert len(sleeps) == 1


def test_missing_credentials_is_a_configuration_error() -> None:
    client = ScriptedClient([NoCredentialsError()])
    with pytest.raises(ConfigurationError, match="credentials"):
        BedrockEmbeddingClient(client=client, sleep=lambda _: None).embed("text")
    assert client.calls == 1


def test_missing_region_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(ConfigurationError, match="region"):
        BedrockEmbeddingClient().embed("text")


def test_its_own_client_has_botocore_retries_switched_off() -> None:
    embedder = BedrockEmbeddingClient(region="eu-west-1")
    client = embedder._get_client()
    try:
        assert client.meta.region_name == "eu-west-1"
        assert client.meta.config.retries["total_max_attempts"] == 1
        # a hung call ends in 30 s (botocore's default: 60 s to connect, 60 s per read)
        assert client.meta.config.read_timeout == 30.0
        assert client.meta.config.connect_timeout == 30.0
        assert embedder._get_client() is client  # created once, reused
    finally:
        client.close()


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"dimensions": 300}, "dimensions"),
        ({"model_id": "amazon.titan-embed-text-v1", "dimensions": 1024}, "dimensions"),
        ({"model_id": "cohere.embed-english-v3"}, "model_id"),
        ({"model_id": ""}, "model_id"),
        ({"max_retries": -1}, "max_retries"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": "5"}, "timeout"),
    ],
)
def test_rejects_bad_configuration(options: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        BedrockEmbeddingClient(**options)
    assert info.value.field == field


def test_retryable_classification() -> None:
    def client_error(code: str, status: int) -> ClientError:
        response: Any = {
            "Error": {"Code": code, "Message": "m"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }
        return ClientError(response, "InvokeModel")

    assert is_retryable_bedrock_error(client_error("ThrottlingException", 429))
    assert is_retryable_bedrock_error(client_error("SomethingNew", 502))
    assert not is_retryable_bedrock_error(client_error("ValidationException", 400))
    assert not is_retryable_bedrock_error(client_error("ModelErrorException", 424))
    assert is_retryable_bedrock_error(EndpointConnectionError(endpoint_url="https://x"))
    assert not is_retryable_bedrock_error(ValueError("x"))
    # Throttles (with or without Retry-After) back off the whole pool; 5xx do not.
    assert is_bedrock_throttle(client_error("ThrottlingException", 400))
    assert is_bedrock_throttle(client_error("TooManyRequestsException", 429))
    assert is_bedrock_throttle(client_error("SomethingNew", 429))
    assert not is_bedrock_throttle(client_error("ServiceUnavailableException", 503))
    assert not is_bedrock_throttle(EndpointConnectionError(endpoint_url="https://x"))


def test_importing_the_module_does_not_import_boto3() -> None:
    script = (
        "import sys\n"
        "import knowledge.embedding.bedrock as m\n"
        "m.BedrockEmbeddingClient()\n"
        "assert 'boto3' not in sys.modules and 'botocore' not in sys.modules\n"
        "print('clean')\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "clean"
