"""Amazon Bedrock Titan Text Embeddings (AWS-native: IAM, no third-party key).

- ``boto3`` is imported when the client is first used, not at import.
- Titan embeds one text per ``InvokeModel`` call, so a batch goes out as concurrent calls
  on the client's ``knowledge.embedding.pool.EmbeddingPool``: from 16 in flight, growing
  until Bedrock throttles and backing off when it does, never over ``concurrency``
  (default ``DEFAULT_BEDROCK_CONCURRENCY`` = 64; the Lambdas' ``EMBEDDING_CONCURRENCY``),
  results in input order. A throttle holds back every call of the pool (for
  its ``Retry-After``, else the backoff); no call starts past the caller's deadline
  (``knowledge.core.deadline``). The client created here keeps as many connections as
  ``concurrency``.
- Titan v2 (``amazon.titan-embed-text-v2:0``) takes ``dimensions`` 256, 512 or 1024
  (default 1024) and returns normalised vectors; Titan v1 (``amazon.titan-embed-text-v1``)
  is 1536 only. ``dimensions=None`` means the model's default.
- ``token_count`` is the response's ``inputTextTokenCount``.
- Throttling, model-not-ready/timeouts, 5xx and connection errors are retried by
  ``knowledge.embedding.retry`` (botocore's own retries are switched off on the client
  created here, which also gives up on a call after ``timeout`` seconds, default
  ``DEFAULT_BEDROCK_TIMEOUT``); everything else fails at once. Failures surface as
  ``EmbeddingError``; missing credentials or region as ``ConfigurationError``.
- A blank text is not sent (Titan rejects it): it gets the zero vector and 0 tokens.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from knowledge.core.errors import (
    ConfigurationError,
    EmbeddingError,
    KnowledgeError,
    ValidationError,
)
from knowledge.core.retry_after import retry_after_seconds
from knowledge.embedding.base import Embedding, checked_vector
from knowledge.embedding.pool import (
    DEFAULT_BEDROCK_CONCURRENCY,
    DEFAULT_BEDROCK_INITIAL_CONCURRENCY,
    EmbeddingPool,
    check_concurrency,
    embedding_deadline,
)
from knowledge.embedding.retry import call_with_retries

__all__ = [
    "DEFAULT_BEDROCK_MODEL_ID",
    "DEFAULT_BEDROCK_TIMEOUT",
    "BedrockEmbeddingClient",
    "is_bedrock_throttle",
    "is_retryable_bedrock_error",
]

DEFAULT_BEDROCK_MODEL_ID = "amazon.titan-embed-text-v2:0"
_TITAN_V2_DIMENSIONS = (256, 512, 1024)
_TITAN_V2_DEFAULT_DIMENSIONS = 1024
_TITAN_V1_DIMENSIONS = 1536
DEFAULT_BEDROCK_TIMEOUT = 30.0
"""Seconds to connect, and without a byte of the answer, per attempt of the client made
here (botocore's default is 60 each). Titan answers in well under a second; a hung call
is given up on in this time and retried, and a pool whose batch already failed makes no
further attempt (``knowledge.embedding.pool``), so its thread is free again by then.
The same as ``OpenAIEmbeddingClient``'s ``timeout``."""
_THROTTLE_CODES = frozenset({"ThrottlingException", "TooManyRequestsException"})
_RETRYABLE_CODES = _THROTTLE_CODES | frozenset(
    {
        "ModelNotReadyException",
        "ModelTimeoutException",
        "InternalServerException",
        "ServiceUnavailableException",
        "RequestTimeout",
    }
)


def _is_titan_v2(model_id: str) -> bool:
    return "titan-embed-text-v2" in model_id


def _is_titan_v1(model_id: str) -> bool:
    return "titan-embed-text-v1" in model_id or "titan-embed-g1-text" in model_id


def is_retryable_bedrock_error(exc: BaseException) -> bool:
    """True for throttling, transient model errors, 5xx and connection problems."""
    from botocore.exceptions import (  # lazy (cold start)
        ClientError,
        HTTPClientError,
    )
    from botocore.exceptions import (  # lazy (cold start)
        ConnectionError as BotocoreConnectionError,
    )

    if isinstance(exc, (BotocoreConnectionError, HTTPClientError)):
        return True
    if isinstance(exc, ClientError):
        code, status = _code_and_status(exc)
        return code in _RETRYABLE_CODES or status == 429 or status >= 500
    return False


def is_bedrock_throttle(exc: BaseException) -> bool:
    """True for a throttled call (the account's rate is shared: the pool backs off)."""
    code, status = _code_and_status(exc)
    return code in _THROTTLE_CODES or status == 429


def _code_and_status(exc: BaseException) -> tuple[object, int]:
    """A botocore error's code and HTTP status (``None, 0`` for any other exception)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None, 0
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return response.get("Error", {}).get("Code"), status if isinstance(status, int) else 0


def _retry_after_seconds(exc: BaseException) -> float | None:
    """The ``Retry-After`` (seconds or an HTTP-date) of a throttled ``InvokeModel``, if
    it sent one."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    return retry_after_seconds(headers.get("retry-after") if isinstance(headers, dict) else None)


class BedrockEmbeddingClient:
    """``EmbeddingClient`` for Bedrock Titan text embeddings via ``bedrock-runtime``.

    ``client`` injects a ready ``bedrock-runtime`` client (tests, custom sessions); it is
    used as given. ``sleep`` is injectable for tests. ``concurrency`` bounds the calls in
    flight (module docstring); ``endpoint_url`` sends the calls elsewhere (a VPC
    endpoint; a local fake in tests and benchmarks).
    """

    def __init__(
        self,
        model_id: str = DEFAULT_BEDROCK_MODEL_ID,
        dimensions: int | None = None,
        region: str | None = None,
        client: Any | None = None,
        *,
        max_retries: int = 5,
        sleep: Callable[[float], None] = time.sleep,
        concurrency: int = DEFAULT_BEDROCK_CONCURRENCY,
        endpoint_url: str | None = None,
        timeout: float = DEFAULT_BEDROCK_TIMEOUT,
    ) -> None:
        if not isinstance(model_id, str) or not model_id.strip():
            raise ValidationError("model_id", "must be a non-empty Bedrock model id")
        model_id = model_id.strip()
        if _is_titan_v2(model_id):
            dimensions = _TITAN_V2_DEFAULT_DIMENSIONS if dimensions is None else dimensions
            if dimensions not in _TITAN_V2_DIMENSIONS:
                allowed = ", ".join(str(d) for d in _TITAN_V2_DIMENSIONS)
                raise ValidationError(
                    "dimensions", f"{model_id} supports {allowed}, got {dimensions!r}"
                )
        elif _is_titan_v1(model_id):
            dimensions = _TITAN_V1_DIMENSIONS if dimensions is None else dimensions
            if dimensions != _TITAN_V1_DIMENSIONS:
                raise ValidationError(
                    "dimensions", f"{model_id} always produces 1536 dimensions, got {dimensions!r}"
                )
        else:
            raise ValidationError(
                "model_id",
                f"{model_id!r} is not supported; use an Amazon Titan Text Embeddings model "
                f"(e.g. {DEFAULT_BEDROCK_MODEL_ID})",
            )
        if max_retries < 0:
            raise ValidationError("max_retries", f"must be >= 0, got {max_retries}")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ValidationError("timeout", f"must be > 0 seconds, got {timeout!r}")
        self._timeout = float(timeout)
        self._model_id = model_id
        self._dimensions = dimensions
        self._region = region
        self._max_retries = max_retries
        self._sleep = sleep
        self._client = client
        self._client_lock = threading.Lock()
        self._pool = EmbeddingPool(
            concurrency,
            initial=min(check_concurrency(concurrency), DEFAULT_BEDROCK_INITIAL_CONCURRENCY),
            name="bedrock-embed",
        )
        self._endpoint_url = endpoint_url

    @property
    def concurrency(self) -> int:
        return self._pool.concurrency

    @property
    def name(self) -> str:
        return f"bedrock:{self._model_id}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def prepare(self) -> None:
        """Build the ``bedrock-runtime`` client now (importing boto3 and loading the
        service's model), which the first call does otherwise
        (``knowledge.embedding.base.prepare_in_background``)."""
        self._get_client()

    def embed(self, text: str) -> Embedding:
        if not text.strip():
            return Embedding(vector=(0.0,) * self._dimensions, token_count=0)
        client = self._get_client()
        body: dict[str, Any] = {"inputText": text}
        if _is_titan_v2(self._model_id):
            body["dimensions"] = self._dimensions
            body["normalize"] = True
        request = json.dumps(body)
        try:
            payload = call_with_retries(
                lambda: self._invoke(client, request),
                is_retryable=is_retryable_bedrock_error,
                max_retries=self._max_retries,
                retry_after=_retry_after_seconds,
                is_throttle=is_bedrock_throttle,
                sleep=self._sleep,
                gate=self._pool.gate,
                deadline=embedding_deadline(),
            )
        except KnowledgeError:
            raise
        except Exception as exc:
            raise self._wrap(exc) from exc
        return self._parse(payload)

    def embed_batch(self, texts: Sequence[str]) -> list[Embedding]:
        return self._pool.map(self.embed, texts)

    def _invoke(self, client: Any, request: str) -> Any:
        response = client.invoke_model(
            modelId=self._model_id,
            body=request,
            contentType="application/json",
            accept="application/json",
        )
        # Read inside the retried call: a connection can also drop while streaming the body.
        return json.loads(response["body"].read())

    def _parse(self, payload: Any) -> Embedding:
        vector_data = payload.get("embedding") if isinstance(payload, dict) else None
        if not isinstance(vector_data, list):
            raise EmbeddingError(f"Bedrock {self._model_id} returned no embedding")
        vector = checked_vector(vector_data, self._dimensions, f"Bedrock {self._model_id}")
        tokens = int(payload.get("inputTextTokenCount") or 0)
        return Embedding(vector=vector, token_count=tokens)

    def _wrap(self, exc: Exception) -> Exception:
        from botocore.exceptions import (  # lazy (cold start)
            ClientError,
            NoCredentialsError,
        )

        if isinstance(exc, NoCredentialsError):
            return ConfigurationError(
                "no AWS credentials for Bedrock: configure a profile, role or AWS_* variables"
            )
        what = f"Bedrock InvokeModel ({self._model_id}) failed"
        if isinstance(exc, ClientError):
            error = exc.response.get("Error", {})
            return EmbeddingError(
                f"{what}: {error.get('Code', 'error')}: {error.get('Message', '')}".rstrip(": ")
            )
        return EmbeddingError(f"{what}: {exc}")

    def _get_client(self) -> Any:
        if self._client is not None:
            return self._client
        with self._client_lock:
            if self._client is None:
                try:
                    import boto3  # lazy (cold start)
                    from botocore.config import Config  # lazy (cold start)
                    from botocore.exceptions import NoRegionError  # lazy (cold start)
                except ImportError as exc:
                    raise ConfigurationError(
                        "boto3 is not installed: pip install 'knowledge-search[opensearch]' "
                        "(or pip install boto3)"
                    ) from exc
                try:
                    self._client = boto3.client(
                        "bedrock-runtime",
                        region_name=self._region,
                        endpoint_url=self._endpoint_url,
                        # Retried here, with our policy; botocore must not retry as well.
                        # One connection per concurrent call (botocore keeps 10).
                        config=Config(
                            retries={"total_max_attempts": 1},
                            max_pool_connections=max(10, self._pool.concurrency),
                            connect_timeout=self._timeout,
                            read_timeout=self._timeout,
                        ),
                    )
                except NoRegionError as exc:
                    raise ConfigurationError(
                        "no AWS region for Bedrock: set AWS_REGION or pass region="
                    ) from exc
            return self._client

    def __repr__(self) -> str:
        return (
            f"BedrockEmbeddingClient(model_id={self._model_id!r}, "
            f"dimensions={self._dimensions}, concurrency={self._pool.concurrency})"
        )
