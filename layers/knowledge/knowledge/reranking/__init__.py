"""Optional reranking of search results: off unless configured.

- ``Reranker`` (``base``): ``rerank(query, passages) -> scores in [0, 1]``;
- ``BedrockReranker`` (``bedrock``): Amazon Bedrock's ``Rerank`` API (Agent Runtime),
  e.g. ``amazon.rerank-v1:0`` or ``cohere.rerank-v3-5:0``; ``boto3`` loads on first use;
- ``RerankingStage`` (``stage``): asks the store for the top candidates, reranks the first
  ``top_n`` within a timeout and the request's deadline, and falls back to the search
  order (logged, not an error) when the reranker fails or is late.

No local cross-encoder ships here: no package on PyPI carries reranker weights that work
offline (they are downloaded from the Hugging Face hub on first use), see docs/reranking.md.
"""

from __future__ import annotations

from knowledge.reranking.base import Reranker, RerankError
from knowledge.reranking.stage import (
    DEFAULT_RERANK_TIMEOUT,
    DEFAULT_RERANK_TOP_N,
    MAX_RERANK_TOP_N,
    RerankingStage,
    RerankReport,
)

__all__ = [
    "DEFAULT_RERANK_TIMEOUT",
    "DEFAULT_RERANK_TOP_N",
    "MAX_RERANK_TOP_N",
    "RerankError",
    "RerankReport",
    "Reranker",
    "RerankingStage",
]
