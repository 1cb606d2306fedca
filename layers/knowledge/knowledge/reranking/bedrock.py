"""Amazon Bedrock's ``Rerank`` API (``bedrock-agent-runtime``), through ``boto3``.

One ``Rerank`` call per query: the query as ``textQuery``, every passage as an inline
``TEXT`` source, ``numberOfResults`` = all of them, so every passage comes back with its
``relevanceScore`` (in [0, 1] for the Amazon and Cohere rerank models) and its ``index``
in the request. The model is named by its ARN; a bare model id
(``amazon.rerank-v1:0``, ``cohere.rerank-v3-5:0``) becomes the foundation-model ARN of the
client's partition and region.

The caller needs ``bedrock:Rerank`` and ``bedrock:InvokeModel`` on that model (the
template grants exactly these when reranking is on). ``boto3`` is imported on first use
(``prepare``: when the stage is built);
botocore's own retries are off (a reranker that fails is skipped, not waited for) and its
timeouts are ``timeout``. Every failure is a ``RerankError``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

from knowledge.core.errors import ValidationError
from knowledge.reranking.base import RerankError

__all__ = ["DEFAULT_RERANK_MODEL_ID", "MAX_PASSAGE_CHARS", "BedrockReranker", "model_arn"]

DEFAULT_RERANK_MODEL_ID = "amazon.rerank-v1:0"
MAX_PASSAGE_CHARS = 32_000
"""The API's limit on one text (``RerankTextDocument``); a longer passage is cut."""
_MAX_SOURCES = 1000  # the API's limit on sources in one request


def model_arn(model_id: str, *, partition: str, region: str) -> str:
    """The ARN ``Rerank`` takes: ``model_id`` itself when it is one, else the
    foundation-model ARN (``arn:aws:bedrock:<region>::foundation-model/<model_id>``)."""
    if model_id.startswith("arn:"):
        return model_id
    return f"arn:{partition}:bedrock:{region}::foundation-model/{model_id}"


class BedrockReranker:
    """``Reranker`` over Bedrock ``Rerank`` (module docstring).

    ``client`` injects a ready ``bedrock-agent-runtime`` client, used as given;
    ``endpoint_url`` sends the calls elsewhere (a VPC endpoint; botocore also reads
    ``AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME``).
    """

    def __init__(
        self,
        model_id: str = DEFAULT_RERANK_MODEL_ID,
        region: str | None = None,
        client: Any | None = None,
        *,
        endpoint_url: str | None = None,
        timeout: float = 3.0,
    ) -> None:
        if not isinstance(model_id, str) or not model_id.strip():
            raise ValidationError("rerank_model", "must be a Bedrock rerank model id or ARN")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ValidationError("rerank_timeout", f"must be a positive number, got {timeout!r}")
        self._model_id = model_id.strip()
        self._region = region
        self._client = client
        self._endpoint_url = endpoint_url
        self._timeout = float(timeout)
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"bedrock:{self._model_id}"

    def prepare(self) -> None:
        """Make the client now (``boto3`` imported, its models loaded: no network call),
        off the clock of any search: the first rerank call of a process otherwise spent
        its time limit (3 s) on it, more than a loaded machine had. A failure is left to
        the first call, which reports it as it always did."""
        try:
            self._get_client()
        except RerankError:
            return

    @property
    def model_id(self) -> str:
        return self._model_id

    def rerank(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        if len(passages) > _MAX_SOURCES:
            raise RerankError(f"at most {_MAX_SOURCES} passages per call, got {len(passages)}")
        client = self._get_client()
        arn = model_arn(
            self._model_id, partition=client.meta.partition, region=client.meta.region_name
        )
        try:
            response = client.rerank(
                queries=[{"type": "TEXT", "textQuery": {"text": query}}],
                sources=[
                    {
                        "type": "INLINE",
                        "inlineDocumentSource": {
                            "type": "TEXT",
                            # The API refuses an empty text; a chunk is never empty anyway.
                            "textDocument": {"text": passage[:MAX_PASSAGE_CHARS] or " "},
                        },
                    }
                    for passage in passages
                ],
                rerankingConfiguration={
                    "type": "BEDROCK_RERANKING_MODEL",
                    "bedrockRerankingConfiguration": {
                        "modelConfiguration": {"modelArn": arn},
                        "numberOfResults": len(passages),
                    },
                },
            )
        except RerankError:
            raise
        except Exception as exc:
            raise RerankError(
                f"Bedrock Rerank ({self._model_id}) failed: {_describe(exc)}"
            ) from exc
        return self._scores(response, len(passages))

    def _scores(self, response: Any, count: int) -> list[float]:
        results = response.get("results") if isinstance(response, dict) else None
        if not isinstance(results, list):
            raise RerankError(f"Bedrock Rerank ({self._model_id}) returned no results")
        scores: list[float | None] = [None] * count
        for item in results:
            index = item.get("index") if isinstance(item, dict) else None
            score = item.get("relevanceScore") if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < count or scores[index] is not None:
                raise RerankError(
                    f"Bedrock Rerank ({self._model_id}) returned a bad index {index!r}"
                )
            if not isinstance(score, int | float) or not math.isfinite(score):
                raise RerankError(
                    f"Bedrock Rerank ({self._model_id}) returned a bad score {score!r}"
                )
            scores[index] = min(1.0, max(0.0, float(score)))
        missing = sum(1 for s in scores if s is None)
        if missing:
            raise RerankError(
                f"Bedrock Rerank ({self._model_id}) scored {count - missing} of {count} passages"
            )
        return [s for s in scores if s is not None]

    def _get_client(self) -> Any:
        if self._client is not None:
            return self._client
        with self._lock:
            if self._client is None:
                try:
                    import boto3  # lazy (cold start)
                    from botocore.config import Config  # lazy (cold start)
                except ImportError as exc:
                    raise RerankError("boto3 is not installed: pip install boto3") from exc
                try:
                    self._client = boto3.client(
                        "bedrock-agent-runtime",
                        region_name=self._region,
                        endpoint_url=self._endpoint_url,
                        config=Config(
                            retries={"total_max_attempts": 1},
                            connect_timeout=self._timeout,
                            read_timeout=self._timeout,
                        ),
                    )
                except Exception as exc:  # NoRegionError and the like
                    raise RerankError(f"cannot create the Bedrock client: {exc}") from exc
            return self._client

    def __repr__(self) -> str:
        return f"BedrockReranker(model_id={self._model_id!r})"


def _describe(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error", {})
        return f"{error.get('Code', 'error')}: {error.get('Message', '')}".rstrip(": ")
    return f"{type(exc).__name__}: {exc}"
