"""An embedder a test holds half-way through a document, and a document large enough to
be written in pieces (``stores.embedded.write_session.STAGED_DOCUMENT_BYTES``)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from knowledge.core.errors import EmbeddingError
from knowledge.embedding.base import Embedding
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.stores.embedded.write_session import STAGED_DOCUMENT_BYTES

__all__ = ["GatedEmbedder", "large_text"]


class GatedEmbedder(HashingEmbedder):
    """The hashing embedder whose calls for texts naming ``marker`` wait for ``gate``
    after the first ``free_calls`` of them (``arrived`` says one is waiting), or fail
    once ``fail`` is set. Other texts are embedded at once."""

    def __init__(self, marker: str, free_calls: int = 2) -> None:
        super().__init__()
        self.marker = marker
        self.free_calls = free_calls
        self.calls = 0
        self.gate = threading.Event()
        self.arrived = threading.Event()
        self.fail = False

    def embed_batch(self, texts: Sequence[str]) -> list[Embedding]:
        if any(self.marker in text for text in texts):
            self.calls += 1
            if self.calls > self.free_calls:
                self.arrived.set()
                if self.fail:
                    raise EmbeddingError("the provider went away half-way")
                self.gate.wait(30)
        return super().embed_batch(texts)


def large_text(marker: str) -> bytes:
    """A text document over the staging size, every section naming ``marker``."""
    section = f"# Section {{n}}\n\n{marker} " + "lorem ipsum dolor sit amet " * 30 + "\n\n"
    parts: list[str] = []
    size = n = 0
    while size <= STAGED_DOCUMENT_BYTES:
        part = section.format(n=n)
        parts.append(part)
        size += len(part.encode())
        n += 1
    return "".join(parts).encode()
