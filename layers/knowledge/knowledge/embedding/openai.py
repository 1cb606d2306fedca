"""OpenAI embeddings (the default provider in AWS).

- The ``openai`` package is imported on first use, not at import (Lambda cold start);
  without it, first use raises ``ConfigurationError`` naming the extra to install.
- The API key is read on first use: ``api_key`` (a string, or a function returning one,
  e.g. a Secrets Manager lookup), else ``OPENAI_API_KEY``; none -> ``ConfigurationError``.
- Key rotation: on a 401 with a function as ``api_key``, the key is read again once (by
  its ``refresh()`` if it has one, as ``knowledge.core.secrets.SecretReader`` does, skipping
  its cache) and, if it changed, the request is retried once with a new SDK client.
  A second 401, or an unchanged key, fails as any 401 does.
- Inputs go in requests of at most ``batch_size`` texts (``DEFAULT_OPENAI_BATCH_SIZE``,
  16: a pipeline batch of 64 is one request per pool worker), sent concurrently on the
  client's ``knowledge.embedding.pool.EmbeddingPool`` (from 4 in flight, growing until a
  429 and backing off on one, at most ``concurrency``, default
  ``DEFAULT_OPENAI_CONCURRENCY`` = 16; the Lambdas' ``EMBEDDING_CONCURRENCY``);
  output order is input order. A 429 holds back every request of the pool (for its
  ``Retry-After``, else the backoff); no request starts past the caller's deadline
  (``knowledge.core.deadline``).
- 408, 429, 5xx and connection errors are retried (``max_retries`` times, exponential
  backoff with jitter, ``Retry-After`` honoured) by ``knowledge.embedding.retry``; the SDK's
  own retries are switched off so attempts are not multiplied. Other errors (400, 401, ...)
  fail at once. Every failure surfaces as ``EmbeddingError``.
- ``dimensions`` is known up front: the model's native size (1536 for
  text-embedding-3-small and ada-002, 3072 for -3-large) or the ``dimensions`` argument
  (sent to the API for text-embedding-3 models, which shorten their vectors; for other
  models it declares the size). A response of another size, with a value that is not
  finite, or whose items' ``index`` is not each input's exactly once is an
  ``EmbeddingError``.
- Token counts: the API reports one total per request (``usage.prompt_tokens``); it is
  split over the request's texts in proportion to their length in characters (largest
  remainder, so the counts add up to the reported total exactly).
- A blank text is not sent (the API rejects it): it gets the zero vector and 0 tokens.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from knowledge.core.errors import (
    ConfigurationError,
    EmbeddingError,
    KnowledgeError,
    ValidationError,
)
from knowledge.core.retry_after import retry_after_seconds
from knowledge.embedding.base import Embedding, checked_vector
from knowledge.embedding.pool import (
    DEFAULT_OPENAI_CONCURRENCY,
    DEFAULT_OPENAI_INITIAL_CONCURRENCY,
    EmbeddingPool,
    check_concurrency,
    embedding_deadline,
)
from knowledge.embedding.retry import call_with_retries

if TYPE_CHECKING:
    import openai

__all__ = [
    "DEFAULT_OPENAI_BATCH_SIZE",
    "DEFAULT_OPENAI_MODEL",
    "OPENAI_MODEL_DIMENSIONS",
    "OpenAIEmbeddingClient",
    "is_openai_throttle",
    "is_retryable_openai_error",
    "split_token_count",
]

DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
OPENAI_MODEL_DIMENSIONS: dict[str, int] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
_MAX_BATCH_SIZE = 2048  # the API's limit on inputs per request

DEFAULT_OPENAI_BATCH_SIZE = 16
"""Texts per request: the indexing pipeline hands the embedder
``knowledge.ingest.pipeline.DEFAULT_EMBED_BATCH_SIZE`` (64) texts at a time, so 16-text
requests give the pool's ``DEFAULT_OPENAI_CONCURRENCY`` (4) workers one request each.
With the earlier 256 a pipeline batch was one request and the pool had nothing to run
beside it (bench/REPORT.md section 9.1: 16 at concurrency 4 against 256 on the fake
OpenAI-like server). Four times the requests: far below the API's per-minute request
limits at these sizes."""
_RETRYABLE_STATUS = frozenset({408, 429})


def _supports_dimensions_parameter(model: str) -> bool:
    return model.startswith("text-embedding-3")


def split_token_count(total: int, texts: Sequence[str]) -> list[int]:
    """Split a request's token total over its texts in proportion to their lengths.

    Largest-remainder rounding (ties to the earlier text), so the parts sum to ``total``.
    """
    if not texts:
        return []
    total = max(total, 0)
    weights = [max(len(text), 1) for text in texts]
    weight_sum = sum(weights)
    shares = [total * weight / weight_sum for weight in weights]
    parts = [int(share) for share in shares]
    leftover = total - sum(parts)
    by_remainder = sorted(range(len(texts)), key=lambda i: (-(shares[i] - parts[i]), i))
    for i in by_remainder[:leftover]:
        parts[i] += 1
    return parts


def is_retryable_openai_error(exc: BaseException) -> bool:
    """True for errors worth retrying: connection/timeouts, 408, 429 and 5xx."""
    import openai  # lazy (cold start)

    if isinstance(exc, openai.APIConnectionError):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in _RETRYABLE_STATUS or exc.status_code >= 500
    return False


def is_openai_throttle(exc: BaseException) -> bool:
    """True for a 429 (the account's rate is shared: the pool backs off)."""
    import openai  # lazy (cold start)

    return isinstance(exc, openai.APIStatusError) and exc.status_code == 429


def _is_unauthorized(exc: BaseException) -> bool:
    import openai  # lazy (cold start)

    return isinstance(exc, openai.APIStatusError) and exc.status_code == 401


def _retry_after_seconds(exc: BaseException) -> float | None:
    """The wait a throttled request was told (``retry-after-ms``, else ``retry-after``
    in seconds or as an HTTP-date), if any."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    milliseconds = retry_after_seconds(headers.get("retry-after-ms"))
    if milliseconds is not None:
        return milliseconds / 1000.0
    return retry_after_seconds(headers.get("retry-after"))


class OpenAIEmbeddingClient:
    """``EmbeddingClient`` for the OpenAI embeddings API (or a compatible ``base_url``).

    ``client`` injects a ready ``openai.OpenAI`` (tests, custom transports); it is used
    as given, so configure it with ``max_retries=0``. ``sleep`` is injectable for tests.
    ``concurrency`` bounds the requests in flight (module docstring).
    """

    def __init__(
        self,
        model: str = DEFAULT_OPENAI_MODEL,
        dimensions: int | None = None,
        *,
        api_key: str | Callable[[], str] | None = None,
        base_url: str | None = None,
        batch_size: int = DEFAULT_OPENAI_BATCH_SIZE,
        max_retries: int = 5,
        client: openai.OpenAI | None = None,
        timeout: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        concurrency: int = DEFAULT_OPENAI_CONCURRENCY,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValidationError("model", "must be a non-empty model name")
        if not 1 <= batch_size <= _MAX_BATCH_SIZE:
            raise ValidationError(
                "batch_size", f"must be in [1, {_MAX_BATCH_SIZE}], got {batch_size}"
            )
        if max_retries < 0:
            raise ValidationError("max_retries", f"must be >= 0, got {max_retries}")
        if timeout <= 0:
            raise ValidationError("timeout", f"must be > 0 seconds, got {timeout}")
        self._model = model.strip()
        self._dimensions = self._resolve_dimensions(self._model, dimensions)
        self._send_dimensions = dimensions is not None and _supports_dimensions_parameter(
            self._model
        )
        self._api_key = api_key
        self._base_url = base_url
        self._batch_size = batch_size
        self._max_retries = max_retries
        self._timeout = timeout
        self._sleep = sleep
        self._client = client
        self._owns_client = client is None
        self._client_lock = threading.Lock()
        self._key_in_use: str | None = None
        self._pool = EmbeddingPool(
            concurrency,
            initial=min(check_concurrency(concurrency), DEFAULT_OPENAI_INITIAL_CONCURRENCY),
            name="openai-embed",
        )

    @property
    def concurrency(self) -> int:
        return self._pool.concurrency

    @staticmethod
    def _resolve_dimensions(model: str, dimensions: int | None) -> int:
        native = OPENAI_MODEL_DIMENSIONS.get(model)
        if dimensions is None:
            if native is None:
                raise ValidationError(
                    "dimensions",
                    f"unknown for model {model!r}; pass dimensions= with the model's vector size",
                )
            return native
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
            raise ValidationError("dimensions", f"must be a positive integer, got {dimensions!r}")
        if native is not None:
            if dimensions > native:
                raise ValidationError(
                    "dimensions", f"{model} produces at most {native} dimensions, got {dimensions}"
                )
            if dimensions != native and not _supports_dimensions_parameter(model):
                raise ValidationError(
                    "dimensions", f"{model} always produces {native} dimensions, got {dimensions}"
                )
        return dimensions

    @property
    def name(self) -> str:
        return f"openai:{self._model}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def embed(self, text: str) -> Embedding:
        return self.embed_batch([text])[0]

    def embed_batch(self, texts: Sequence[str]) -> list[Embedding]:
        results: list[Embedding | None] = [None] * len(texts)
        pending: list[int] = []
        zero = Embedding(vector=(0.0,) * self._dimensions, token_count=0)
        for i, text in enumerate(texts):
            if text.strip():
                pending.append(i)
            else:
                results[i] = zero
        requests = [
            pending[start : start + self._batch_size]
            for start in range(0, len(pending), self._batch_size)
        ]
        answers = self._pool.map(
            lambda positions: self._embed_request([texts[i] for i in positions]), requests
        )
        for positions, embeddings in zip(requests, answers, strict=True):
            for position, embedding in zip(positions, embeddings, strict=True):
                results[position] = embedding
        return [embedding for embedding in results if embedding is not None]

    def _embed_request(self, batch: list[str]) -> list[Embedding]:
        params: dict[str, Any] = {"model": self._model, "input": batch}
        if self._send_dimensions:
            params["dimensions"] = self._dimensions
        try:
            client = self._get_client()
            try:
                response = self._create(client, params)
            except Exception as exc:
                if not _is_unauthorized(exc):
                    raise
                # A concurrent request may have rotated the key already: use its client.
                if self._client is client and not self._rotate_key():
                    raise
                response = self._create(self._get_client(), params)  # once, with the new key
        except KnowledgeError:
            raise
        except Exception as exc:
            raise EmbeddingError(self._describe_failure(exc)) from exc
        return self._parse(response, batch)

    def _create(self, client: openai.OpenAI, params: dict[str, Any]) -> Any:
        return call_with_retries(
            lambda: client.embeddings.create(**params),
            is_retryable=is_retryable_openai_error,
            max_retries=self._max_retries,
            retry_after=_retry_after_seconds,
            is_throttle=is_openai_throttle,
            sleep=self._sleep,
            gate=self._pool.gate,
            deadline=embedding_deadline(),
        )

    def _rotate_key(self) -> bool:
        """Read the key again after a 401; True if it changed and a new SDK client will
        use it. Only for a key given as a function and an SDK client created here."""
        source = self._api_key
        if not callable(source) or not self._owns_client:
            return False
        refresh = getattr(source, "refresh", None)
        reader = refresh if callable(refresh) else source
        try:
            key = str(reader()).strip()
        except KnowledgeError:
            raise
        except Exception as exc:
            raise ConfigurationError(f"cannot read the OpenAI API key again: {exc}") from exc
        with self._client_lock:
            if not key or key == self._key_in_use:
                return False
            if self._client is not None:
                self._client.close()
            self._client = self._new_client(key)
        return True

    def _describe_failure(self, exc: Exception) -> str:
        import openai  # lazy (cold start)

        what = f"OpenAI embeddings request ({self._model}) failed"
        if isinstance(exc, openai.APIStatusError):
            hint = " (check OPENAI_API_KEY)" if exc.status_code in (401, 403) else ""
            return f"{what} with HTTP {exc.status_code}{hint}: {exc.message}"
        if isinstance(exc, openai.APIConnectionError):
            return f"{what}: cannot reach the API after {self._max_retries} retries: {exc}"
        return f"{what}: {exc}"

    def _parse(self, response: Any, batch: list[str]) -> list[Embedding]:
        data = sorted(response.data, key=lambda item: item.index)
        if len(data) != len(batch):
            raise EmbeddingError(
                f"OpenAI returned {len(data)} embeddings for {len(batch)} inputs ({self._model})"
            )
        # Taken by ``index``: each input's exactly once, or a text would get another's vector.
        if [item.index for item in data] != list(range(len(batch))):
            raise EmbeddingError(
                f"OpenAI answered {len(batch)} inputs with embeddings whose index is not each "
                f"of 0..{len(batch) - 1} once ({self._model})"
            )
        usage = getattr(response, "usage", None)
        total = int(getattr(usage, "prompt_tokens", 0) or 0)
        token_counts = split_token_count(total, batch)
        source = f"OpenAI ({self._model})"
        return [
            Embedding(
                vector=checked_vector(item.embedding, self._dimensions, source), token_count=tokens
            )
            for item, tokens in zip(data, token_counts, strict=True)
        ]

    def _resolve_api_key(self) -> str:
        source = self._api_key
        if callable(source):
            try:
                key = source()
            except KnowledgeError:
                raise
            except Exception as exc:
                raise ConfigurationError(f"cannot read the OpenAI API key: {exc}") from exc
        else:
            key = source if source is not None else os.environ.get("OPENAI_API_KEY", "")
        if not key or not key.strip():
            raise ConfigurationError(
                "OPENAI_API_KEY is not set: export it, or pass api_key= (the key or a function "
                "returning it), or choose another embedder"
            )
        return key.strip()

    def prepare(self) -> None:
        """Build the SDK client now (importing ``openai``), which the first call does
        otherwise (``knowledge.embedding.base.prepare_in_background``)."""
        self._get_client()

    def _get_client(self) -> openai.OpenAI:
        if self._client is not None:
            return self._client
        with self._client_lock:
            if self._client is None:
                try:
                    import openai  # noqa: F401  # lazy (cold start); only checks it is there
                except ImportError as exc:
                    raise ConfigurationError(
                        "the openai package is not installed: "
                        "pip install 'knowledge-search[openai]'"
                    ) from exc
                self._client = self._new_client(self._resolve_api_key())
            return self._client

    def _new_client(self, key: str) -> openai.OpenAI:
        import openai  # lazy (cold start); _get_client checked that it is installed

        self._key_in_use = key
        return openai.OpenAI(
            api_key=key,
            base_url=self._base_url,
            max_retries=0,  # retried here, with our policy
            timeout=self._timeout,
        )

    def close(self) -> None:
        """Release the HTTP connections of an SDK client created here; idempotent.

        An injected ``client`` is left open (its owner closes it). The pool's threads
        end too. A later embed call creates a new SDK client (and threads).
        """
        with self._client_lock:
            if self._owns_client and self._client is not None:
                self._client.close()
                self._client = None
        self._pool.close()

    def __repr__(self) -> str:
        return (
            f"OpenAIEmbeddingClient(model={self._model!r}, dimensions={self._dimensions}, "
            f"batch_size={self._batch_size}, concurrency={self._pool.concurrency})"
        )
