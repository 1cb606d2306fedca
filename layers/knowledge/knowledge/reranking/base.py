"""The ``Reranker`` protocol: a second opinion on the order of a search's best candidates.

A reranker reads the query and each candidate passage together (a cross-encoder), which a
keyword or vector index cannot, and scores how well the passage answers the query.
``knowledge.reranking.stage`` decides when it runs, on how many candidates, within which
time, and what happens when it fails (the search order stands).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from knowledge.core.errors import KnowledgeError

__all__ = ["RerankError", "Reranker"]


class RerankError(KnowledgeError):
    """The reranker failed or answered something unusable. Never reaches a caller: the
    stage logs it and keeps the search order."""


@runtime_checkable
class Reranker(Protocol):
    @property
    def name(self) -> str:
        """``provider:model`` for logs and the search response (``bedrock:amazon.rerank-v1:0``)."""
        ...

    def rerank(self, query: str, passages: Sequence[str]) -> list[float]:
        """One relevance score in [0, 1] per passage, in the order of ``passages``
        (higher is more relevant). Raises ``RerankError`` when it cannot."""
        ...
