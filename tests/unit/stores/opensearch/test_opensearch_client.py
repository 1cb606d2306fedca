"""OpenSearch client plumbing: error translation and retries with backoff."""

from __future__ import annotations

import re

import pytest
from opensearchpy.exceptions import (
    AuthorizationException,
    ConnectionError,
    ConnectionTimeout,
    ImproperlyConfigured,
    NotFoundError,
    RequestError,
    TransportError,
)

from knowledge.core.errors import (
    ConfigurationError,
    EmbeddingMismatchError,
    StoreAccessDeniedError,
    StoreError,
    StoreUnavailableError,
)
from knowledge.stores.opensearch import client as client_module
from knowledge.stores.opensearch.client import RetryPolicy, is_retryable, store_error
from knowledge.stores.opensearch.settings import OpenSearchConfig

CONFIG = OpenSearchConfig(url="http://127.0.0.1:9200")


def test_public_names_are_exported() -> None:
    assert set(client_module.__all__) <= set(dir(client_module))


def _refused() -> ConnectionError:
    cause = OSError(111, "Connection refused")
    return ConnectionError("N/A", "Failed to establish a new connection", cause)


@pytest.mark.parametrize(
    ("exc", "kind", "message"),
    [
        (
            _refused(),
            StoreUnavailableError,
            r"^OpenSearch at http://127\.0\.0\.1:9200 is unreachable: .*Connection refused.*"
            r"\(trying to search ops/x\)$",
        ),
        (
            ConnectionTimeout("TIMEOUT", "timed out", OSError("timed out")),
            StoreUnavailableError,
            "is unreachable",
        ),
        (
            TransportError(503, "unavailable", {"error": {"type": "cluster_block_exception"}}),
            StoreUnavailableError,
            r"failed to search ops/x \(503\): cluster_block_exception",
        ),
        (
            RequestError(
                400,
                "search_phase_execution_exception",
                {
                    "error": {
                        "root_cause": [{"type": "query_shard_exception", "reason": "bad field"}],
                        "type": "search_phase_execution_exception",
                    }
                },
            ),
            StoreError,
            r"\(400\): query_shard_exception: bad field$",
        ),
        (
            AuthorizationException(403, "security_exception", {"error": "no permissions"}),
            StoreAccessDeniedError,
            r"refused to search ops/x \(403\): no permissions; check the none credentials "
            r"and the domain's access policy \(or its fine-grained access control mapping\)",
        ),
        (ImproperlyConfigured("bad host"), ConfigurationError, "bad host"),
    ],
)
def test_errors_become_ours_with_the_endpoint(exc, kind, message) -> None:
    error = store_error(exc, CONFIG, "search ops/x")
    assert type(error) is kind
    assert re.search(message, str(error)), str(error)
    assert "Traceback" not in str(error)


def test_our_own_errors_pass_through() -> None:
    error = EmbeddingMismatchError("dims")
    assert store_error(error, CONFIG, "x") is error


@pytest.mark.parametrize(
    ("exc", "retryable"),
    [
        (_refused(), True),
        (ConnectionTimeout("TIMEOUT", "t", None), True),
        (TransportError(429, "too_many_requests", {}), True),
        (TransportError(500, "internal", {}), True),
        (TransportError(502, "bad gateway", {}), True),
        (RequestError(400, "bad", {}), False),
        (NotFoundError(404, "index_not_found_exception", {}), False),
        (AuthorizationException(403, "forbidden", {}), False),
        (ValueError("not ours"), False),
    ],
)
def test_what_is_retried(exc: Exception, retryable: bool) -> None:
    assert is_retryable(exc) is retryable


class _Flaky:
    def __init__(self, errors: list[Exception]) -> None:
        self.errors = errors
        self.calls = 0

    def __call__(self, value: str) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return value


def test_retries_with_growing_capped_backoff_then_succeeds() -> None:
    pauses: list[float] = []
    policy = RetryPolicy(max_retries=4, initial_backoff=1.0, max_backoff=3.0, sleep=pauses.append)
    flaky = _Flaky([TransportError(429, "x", {}), _refused(), TransportError(503, "x", {})])
    assert policy.call(flaky, "ok") == "ok"
    assert flaky.calls == 4
    assert len(pauses) == 3
    # Each pause is between half and all of min(max_backoff, initial * 2**(n-1)).
    for attempt, pause in enumerate(pauses, start=1):
        cap = min(3.0, 1.0 * 2 ** (attempt - 1))
        assert cap / 2 <= pause <= cap


def test_gives_up_after_max_retries_with_the_last_error() -> None:
    pauses: list[float] = []
    policy = RetryPolicy(max_retries=2, initial_backoff=0.01, sleep=pauses.append)
    last = TransportError(503, "third", {})
    flaky = _Flaky([TransportError(503, "a", {}), TransportError(503, "b", {}), last])
    with pytest.raises(TransportError) as info:
        policy.call(flaky, "never")
    assert info.value is last
    assert flaky.calls == 3
    assert len(pauses) == 2


def test_a_bad_request_is_not_retried() -> None:
    pauses: list[float] = []
    policy = RetryPolicy(max_retries=5, sleep=pauses.append)
    flaky = _Flaky([RequestError(400, "bad", {})])
    with pytest.raises(RequestError):
        policy.call(flaky, "x")
    assert (flaky.calls, pauses) == (1, [])
