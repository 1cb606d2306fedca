"""The embedding contract. Providers live in sibling modules and import their SDKs lazily."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from knowledge.core.errors import EmbeddingError

__all__ = ["Embedding", "EmbeddingClient", "EmbeddingDeadlineError", "checked_vector"]


class EmbeddingDeadlineError(EmbeddingError):
    """The caller's deadline passed (or would pass while waiting out a rate limit) before
    every text was embedded; no further call was started (``knowledge.embedding.pool``,
    ``knowledge.embedding.aimd``)."""


@dataclass(frozen=True, slots=True)
class Embedding:
    """A vector and the tokens it cost (embeddings are billed)."""

    vector: tuple[float, ...]
    token_count: int


@runtime_checkable
class EmbeddingClient(Protocol):
    """Turns text into vectors of a fixed dimension.

    ``name`` identifies provider and model (e.g. ``openai:text-embedding-3-small``);
    together with ``dimensions`` it is recorded in an index, and a mismatch is an error.
    ``embed_batch`` keeps the order of its input.
    """

    @property
    def name(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    def embed(self, text: str) -> Embedding: ...

    def embed_batch(self, texts: Sequence[str]) -> list[Embedding]: ...


def checked_vector(values: Iterable[object], dimensions: int, source: str) -> tuple[float, ...]:
    """``values`` as a vector of ``dimensions`` finite floats, else ``EmbeddingError``
    naming ``source`` (the provider and model) and the problem. Every provider checks
    what it got with this, and the indexing pipeline checks every embedder's vectors:
    a NaN or infinite component would be stored (or sent to OpenSearch) and poison every
    score it takes part in, and a vector of another size belongs to another model."""
    try:
        vector = tuple(float(x) for x in values)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise EmbeddingError(f"{source} returned a vector that is not numbers: {exc}") from None
    if len(vector) != dimensions:
        raise EmbeddingError(
            f"{source} returned {len(vector)}-dimensional vectors, expected {dimensions}"
        )
    if not all(math.isfinite(x) for x in vector):
        raise EmbeddingError(f"{source} returned a vector with values not finite (NaN or inf)")
    return vector
