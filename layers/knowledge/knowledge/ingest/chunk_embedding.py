"""Chunks to vectors, in batches, reusing the vectors of an indexed version.

``ChunkEmbedder.embedded`` turns a stream of chunks into ``EmbeddedChunk`` s, sending the
embedder batches of ``embed_batch_size`` texts (only with an embedder; without one every
chunk is keyword-only). At most one embedding batch of one document is in memory.

Embedding reuse: a changed document that is already indexed first gets the vectors of
its indexed version (``WriteSession.stored_vectors``, by ``identity.embedding_key``: the
hash of the exact text embedded and of the embedder's name and dimension). A chunk whose
key is there takes that vector; only the others are sent to the embedder, still in
batches of ``embed_batch_size`` texts. So editing one paragraph of a long document
embeds the chunks that paragraph touches, and an embedder change re-embeds everything.
``IndexResult.embedded_chunks`` / ``reused_chunks`` count both. A reindex embeds every
chunk again (its escape hatch), and a failed read of the stored vectors only costs the
reuse (logged), never the document.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from knowledge.core.errors import EmbeddingError, KnowledgeError, ValidationError
from knowledge.core.identity import embedding_key
from knowledge.core.model import DocumentChunk
from knowledge.embedding.base import EmbeddingClient, checked_vector
from knowledge.ingest.chunking import embedding_text
from knowledge.ingest.run_report import RunReport, reraise_if_unavailable
from knowledge.stores.protocol import EmbeddedChunk, WriteSession

__all__ = [
    "DEFAULT_EMBED_BATCH_SIZE",
    "DEFAULT_EMBED_CONTEXT",
    "NO_VECTORS",
    "REUSE_WINDOW",
    "ChunkEmbedder",
    "embeds_context_by_default",
]

logger = logging.getLogger("knowledge.ingest.pipeline")

DEFAULT_EMBED_BATCH_SIZE = 64
DEFAULT_EMBED_CONTEXT: bool | None = None
"""Whether chunks are embedded with their title and heading path in front
(``chunking.embedding_text``, which leaves out titles and headings without a letter).
``None`` (the default): yes for every embedder except ``hashing``
(``embeds_context_by_default``). Measured (bench/REPORT.md, "Context in the chunk"):
all-MiniLM-L6-v2 on the man pages, vector MRR@10 0.832 -> 0.851 and hybrid 0.867 ->
0.891; on the Debian FAQ answers (numeric titles, no headings) nothing changes; the
hashing embedder, a bag of the chunk's own terms, loses 0.007 in vector mode on the man
pages and gains nothing in hybrid, so it stays as it was. The stored content never
changes; a vector embedded otherwise is not reused (its key hashes the text embedded),
so a reindex re-embeds it."""
_NO_CONTEXT_EMBEDDERS = frozenset({"hashing"})


def embeds_context_by_default(embedder: EmbeddingClient | None) -> bool:
    """Whether ``embed_context=None`` means on for ``embedder`` (``DEFAULT_EMBED_CONTEXT``)."""
    return embedder is not None and embedder.name not in _NO_CONTEXT_EMBEDDERS


REUSE_WINDOW = 8
"""With reuse, a batch waits for ``embed_batch_size`` texts to embed, but holds at most
this many times ``embed_batch_size`` chunks (reused ones included) in memory."""
NO_VECTORS: Mapping[str, Sequence[float]] = {}


class ChunkEmbedder:
    """Embeds chunks for the pipeline (module docstring); ``embedder=None``: keyword-only
    chunks. Validates ``embed_batch_size`` and ``embed_context`` (``None``: as
    ``embeds_context_by_default`` says)."""

    def __init__(
        self,
        embedder: EmbeddingClient | None,
        *,
        embed_batch_size: int = DEFAULT_EMBED_BATCH_SIZE,
        embed_context: bool | None = DEFAULT_EMBED_CONTEXT,
    ) -> None:
        if embed_context is None:
            embed_context = embeds_context_by_default(embedder)
        if not isinstance(embed_context, bool):
            raise ValidationError("embed_context", "must be true or false")
        self._embed_context = embed_context
        if isinstance(embed_batch_size, bool) or not isinstance(embed_batch_size, int):
            raise ValidationError("embed_batch_size", "must be an integer")
        if embed_batch_size < 1:
            raise ValidationError("embed_batch_size", f"must be at least 1, got {embed_batch_size}")
        self._embedder = embedder
        self._batch_size = embed_batch_size

    @property
    def embedder(self) -> EmbeddingClient | None:
        return self._embedder

    @property
    def batch_size(self) -> int:
        return self._batch_size

    def stored_vectors(self, session: WriteSession, path: str) -> Mapping[str, Sequence[float]]:
        """The indexed version's vectors by embedding key (module docstring: reuse)."""
        if self._embedder is None:
            return NO_VECTORS
        try:
            return session.stored_vectors(path)
        except KnowledgeError as exc:
            reraise_if_unavailable(exc)
            logger.warning("no embedding reuse for %s: %s", path, exc)
            return NO_VECTORS

    def embedded(
        self,
        chunks: Iterable[DocumentChunk],
        run: RunReport,
        reusable: Mapping[str, Sequence[float]] = NO_VECTORS,
    ) -> Iterator[EmbeddedChunk]:
        embedder = self._embedder
        if embedder is None:
            for chunk in chunks:
                yield EmbeddedChunk(chunk)
            return
        name, dimensions = embedder.name, embedder.dimensions
        batch: list[_Pending] = []
        missing = 0
        for chunk in chunks:
            # The exact text embedded, which the key hashes: with embed_context, the title
            # and heading path go in front (the stored content stays as is).
            text = embedding_text(chunk) if self._embed_context else chunk.content
            pending = _Pending(chunk, text, embedding_key(name, dimensions, text))
            batch.append(pending)
            missing += pending.key not in reusable
            if missing >= self._batch_size or len(batch) >= self._batch_size * REUSE_WINDOW:
                yield from self._embed_batch(embedder, batch, run, reusable)
                batch, missing = [], 0
        if batch:
            yield from self._embed_batch(embedder, batch, run, reusable)

    @staticmethod
    def _embed_batch(
        embedder: EmbeddingClient,
        batch: list[_Pending],
        run: RunReport,
        reusable: Mapping[str, Sequence[float]],
    ) -> list[EmbeddedChunk]:
        todo = [item for item in batch if item.key not in reusable]
        embeddings = embedder.embed_batch([item.text for item in todo]) if todo else []
        if len(embeddings) != len(todo):
            raise EmbeddingError(
                f"{embedder.name} returned {len(embeddings)} embeddings for {len(todo)} texts"
            )
        run.tokens += sum(embedding.token_count for embedding in embeddings)
        for embedding in embeddings:  # whatever the embedder (a custom one too)
            checked_vector(embedding.vector, embedder.dimensions, embedder.name)
        run.embedded += len(todo)
        run.reused += len(batch) - len(todo)
        fresh = iter(embeddings)
        return [
            EmbeddedChunk(item.chunk, reusable[item.key], item.key, reused=True)
            if item.key in reusable
            else EmbeddedChunk(item.chunk, next(fresh).vector, item.key)
            for item in batch
        ]


@dataclass(frozen=True, slots=True)
class _Pending:
    """A chunk waiting for its vector: the text to embed and its ``embedding_key``."""

    chunk: DocumentChunk
    text: str
    key: str
