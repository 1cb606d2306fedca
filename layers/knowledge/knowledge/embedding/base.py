"""The embedding contract. Providers live in sibling modules and import their SDKs lazily."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["Embedding", "EmbeddingClient"]


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
