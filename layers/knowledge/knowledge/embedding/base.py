"""The embedding contract. Providers live in sibling modules and import their SDKs lazily."""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from knowledge.core.errors import EmbeddingError

__all__ = [
    "Embedding",
    "EmbeddingClient",
    "EmbeddingDeadlineError",
    "checked_vector",
    "prepare_in_background",
]

logger = logging.getLogger("knowledge.embedding")


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
    ``embed_batch`` keeps the order of its input. A provider whose first call has work to
    do before anything is sent (importing its SDK, building its client) may also offer
    ``prepare()``, which does that work now (``prepare_in_background``).
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
    try:  # map, not a generator: this runs for every text embedded (Titan: 1,024 values)
        vector = tuple(map(float, values))  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise EmbeddingError(f"{source} returned a vector that is not numbers: {exc}") from None
    if len(vector) != dimensions:
        raise EmbeddingError(
            f"{source} returned {len(vector)}-dimensional vectors, expected {dimensions}"
        )
    if not all(map(math.isfinite, vector)):
        raise EmbeddingError(f"{source} returned a vector with values not finite (NaN or inf)")
    return vector


def prepare_in_background(embedder: object) -> threading.Thread | None:
    """Run ``embedder.prepare()`` on a daemon thread and return the thread; ``None`` when
    the embedder has nothing to prepare. A remote provider's first call imports its SDK
    and builds its client (Bedrock: a few hundred milliseconds); a caller that starts this
    as soon as it has the embedder does that while it reads its listing and opens its
    store, instead of after. A failure here is only logged: the first embedding call
    makes the client again and raises it where the caller reports it."""
    prepare = getattr(embedder, "prepare", None)
    if not callable(prepare):
        return None

    def run() -> None:
        try:
            prepare()
        except Exception as exc:  # the first call raises it again, where it is reported
            logger.debug("preparing the embedder failed: %s", exc)

    thread = threading.Thread(target=run, name="embedder-prepare", daemon=True)
    thread.start()
    return thread
