"""Rotating the OpenAI key without restarting (issue 8, item 9).

A real HTTP server on 127.0.0.1 plays OpenAI's embeddings API and accepts only the key
it currently holds (401 otherwise, as OpenAI does for a revoked key); the key lives in
moto's Secrets Manager. The embedder is built exactly as the Lambda functions build it
(``knowledge.aws.settings.build_embedder`` from ``LambdaSettings``); ``OPENAI_BASE_URL``
(read by the OpenAI SDK) points it at the server.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from json_http import JsonHandler, serving
from lambda_support import use_fake_aws
from moto import mock_aws

from knowledge.aws.settings import LambdaSettings, build_embedder
from knowledge.core.errors import EmbeddingError
from knowledge.core.secrets import clear_secret_cache, read_secret


@dataclass
class KeyCheckingOpenAI:
    """Answers POST /v1/embeddings for ``accepted_key`` only; records each request's key."""

    accepted_key: str
    url: str = ""
    seen: list[tuple[str, int]] = field(default_factory=list)

    def answer(self, key: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if key != self.accepted_key:
            error = {"message": "Incorrect API key provided", "type": "invalid_request_error"}
            return 401, {"error": {**error, "code": "invalid_api_key"}}
        data = [
            {"object": "embedding", "index": i, "embedding": [1.0] + [0.0] * 1535}
            for i, _ in enumerate(body["input"])
        ]
        usage = {"prompt_tokens": 3, "total_tokens": 3}
        return 200, {"object": "list", "data": data, "model": body["model"], "usage": usage}


@pytest.fixture
def openai_server() -> Iterator[KeyCheckingOpenAI]:
    fake = KeyCheckingOpenAI(accepted_key="sk-first")

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
            key = self.headers.get("authorization", "").removeprefix("Bearer ")
            status, payload = fake.answer(key, body)
            fake.seen.append((key, status))
            self.send_json(status, payload)

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as url:
        fake.url = f"{url}/v1"
        yield fake


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    use_fake_aws(monkeypatch)
    clear_secret_cache()
    with mock_aws():
        yield boto3.client("secretsmanager", region_name="us-east-1")
    clear_secret_cache()


def embedder_for(secret_arn: str, server: KeyCheckingOpenAI, monkeypatch: Any) -> Any:
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    settings = LambdaSettings(embedding_provider="openai", openai_secret_arn=secret_arn)
    return build_embedder(settings)


def test_a_rotated_key_is_used_on_the_next_call_without_a_restart(
    openai_server, secrets, monkeypatch
):
    arn = secrets.create_secret(Name="openai", SecretString='{"api_key": "sk-first"}')["ARN"]
    embedder = embedder_for(arn, openai_server, monkeypatch)
    assert len(embedder.embed("before the rotation").vector) == 1536

    # Rotation: the secret gets a new key and OpenAI stops accepting the old one.
    secrets.put_secret_value(SecretId=arn, SecretString='{"api_key": "sk-second"}')
    openai_server.accepted_key = "sk-second"

    assert len(embedder.embed("after the rotation").vector) == 1536
    assert openai_server.seen == [
        ("sk-first", 200),
        ("sk-first", 401),  # the cached key is refused once...
        ("sk-second", 200),  # ...the secret is read again and the call retried
    ]
    assert len(embedder.embed("and later").vector) == 1536
    assert openai_server.seen[-1] == ("sk-second", 200)
    embedder.close()


def test_a_401_with_an_unchanged_secret_fails_after_one_re_read(
    openai_server, secrets, monkeypatch
):
    arn = secrets.create_secret(Name="openai", SecretString="sk-revoked")["ARN"]
    embedder = embedder_for(arn, openai_server, monkeypatch)
    with pytest.raises(EmbeddingError, match="HTTP 401") as caught:
        embedder.embed("text")
    assert openai_server.seen == [("sk-revoked", 401)], "no retry with the same key"
    assert "sk-revoked" not in str(caught.value)
    embedder.close()


def test_the_refresh_window_bounds_how_long_an_old_value_is_served(secrets):
    # inside a window no loaded machine outlasts: the cached value
    kept = secrets.create_secret(Name="kept", SecretString="v1")["ARN"]
    assert read_secret(kept, max_age=300) == "v1"
    secrets.put_secret_value(SecretId=kept, SecretString="v2")
    assert read_secret(kept, max_age=300) == "v1", "inside the window: the cached value"
    # a 1 s window: the new value is waited for, and it comes only once the window is over
    arn = secrets.create_secret(Name="window", SecretString="v1")["ARN"]
    read_at = time.monotonic()
    assert read_secret(arn, max_age=1) == "v1"
    secrets.put_secret_value(SecretId=arn, SecretString="v2")
    while (value := read_secret(arn, max_age=1)) == "v1":
        assert time.monotonic() - read_at < 30.0, "the old value outlived its window"
        time.sleep(0.05)
    assert value == "v2", "after the window: read again"
    assert time.monotonic() - read_at >= 1.0, "not before the window was over"
    secrets.put_secret_value(SecretId=arn, SecretString="v3")
    assert read_secret(arn, max_age=300, refresh=True) == "v3", "a refresh reads at once"
