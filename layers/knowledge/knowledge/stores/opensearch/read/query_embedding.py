"""The query's vector for the vector side, inside the search's deadline.

``embed_query`` runs the embedder on a small thread pool, so a search stops waiting at
its deadline whatever the provider does (its call finishes in the background). The
``hashing`` embedder (arithmetic that cannot hang) runs in the caller's thread: a
hand-off to the pool would cost more than the embedding.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import functools
from collections.abc import Sequence

from knowledge.core.deadline import Deadline, current_deadline
from knowledge.core.errors import EmbeddingError, EmbeddingMismatchError
from knowledge.embedding.base import EmbeddingClient
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.stores.opensearch.mapping import is_zero_vector

__all__ = ["DEFAULT_EMBED_TIMEOUT", "embed_query"]

DEFAULT_EMBED_TIMEOUT = 5.0
"""Seconds a query embedding may take when the caller set no deadline."""


@functools.cache
def _embed_pool() -> concurrent.futures.ThreadPoolExecutor:
    """Threads the query embeddings run on, so a caller can stop waiting at its deadline."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="query-embed")


def embed_query(
    embedder: EmbeddingClient, text: str, *, deadline: Deadline | None = None
) -> Sequence[float] | None:
    """The query's vector, or ``EmbeddingError`` once ``deadline`` (else the current one,
    else ``DEFAULT_EMBED_TIMEOUT``) passes, whatever the provider does meanwhile (its
    call finishes in the background; retries inside it see the same deadline). ``None``
    for a text without terms (a zero vector has no direction). The ``hashing`` embedder
    runs in the caller's thread (module docstring)."""
    if isinstance(embedder, HashingEmbedder):
        return _checked(embedder, embedder.embed(text).vector)
    deadline = deadline or current_deadline() or Deadline.after(DEFAULT_EMBED_TIMEOUT)
    context = contextvars.copy_context()
    future = _embed_pool().submit(context.run, embedder.embed, text)
    try:
        embedding = future.result(timeout=deadline.remaining())
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise EmbeddingError(
            f"the embedding provider '{embedder.name}' did not answer within the time "
            "budget of the request"
        ) from None
    return _checked(embedder, embedding.vector)


def _checked(embedder: EmbeddingClient, vector: Sequence[float]) -> Sequence[float] | None:
    if len(vector) != embedder.dimensions:
        raise EmbeddingMismatchError(
            f"the embedder '{embedder.name}' returned a {len(vector)}-dimension query "
            f"vector, expected {embedder.dimensions}"
        )
    return None if is_zero_vector(vector) else vector
