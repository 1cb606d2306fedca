"""An ``EmbeddingClient`` wrapper that remembers vectors on disk between benchmark runs.

The offline MiniLM model embeds some 15-35 chunks/s on two cores, so the quality
benchmark would spend most of its time re-embedding the same texts for each store.
``CachingEmbedder`` keeps every vector in ``bench/.cache/embeddings-<model>.sqlite``,
keyed by the model's name and dimension (the file) and the SHA-256 of the text (the row),
and asks the wrapped client only for texts it has not seen. It reports the wrapped
client's ``name`` and ``dimensions``, so an index built through it is the same as one
built without it. Vectors are stored as float64, so a cached vector equals the computed one.

Benchmark code only: the product never caches embeddings this way.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from array import array
from collections.abc import Sequence
from pathlib import Path

from knowledge.embedding.base import Embedding, EmbeddingClient

__all__ = ["CachingEmbedder"]

_LOOKUP_BATCH = 500


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CachingEmbedder:
    """``EmbeddingClient`` that serves cached vectors and embeds only unseen texts."""

    def __init__(self, inner: EmbeddingClient, cache_dir: Path) -> None:
        self._inner = inner
        cache_dir.mkdir(parents=True, exist_ok=True)
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", inner.name).strip("_")
        self.path = cache_dir / f"embeddings-{slug}-{inner.dimensions}.sqlite"
        # The OpenSearch store embeds a query on its own thread (``search.embed_query``):
        # one connection shared under a lock.
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._lock = threading.Lock()
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors "
            "(key TEXT PRIMARY KEY, tokens INTEGER NOT NULL, vector BLOB NOT NULL)"
        )
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def dimensions(self) -> int:
        return self._inner.dimensions

    def embed(self, text: str) -> Embedding:
        return self.embed_batch([text])[0]

    def embed_batch(self, texts: Sequence[str]) -> list[Embedding]:
        with self._lock:
            return self._embed_batch(texts)

    def _embed_batch(self, texts: Sequence[str]) -> list[Embedding]:
        keys = [_key(text) for text in texts]
        found = self._lookup(sorted(set(keys)))
        missing: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in found:
                missing.setdefault(key, text)
        if missing:
            computed = self._inner.embed_batch(list(missing.values()))
            rows = []
            for key, embedding in zip(missing, computed, strict=True):
                found[key] = embedding
                blob = array("d", embedding.vector).tobytes()
                rows.append((key, embedding.token_count, blob))
            with self._db:
                self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", rows)
        self.misses += sum(1 for key in keys if key in missing)
        self.hits += sum(1 for key in keys if key not in missing)
        return [found[key] for key in keys]

    def _lookup(self, keys: list[str]) -> dict[str, Embedding]:
        found: dict[str, Embedding] = {}
        for start in range(0, len(keys), _LOOKUP_BATCH):
            part = keys[start : start + _LOOKUP_BATCH]
            marks = ",".join("?" * len(part))
            query = f"SELECT key, tokens, vector FROM vectors WHERE key IN ({marks})"
            for key, tokens, blob in self._db.execute(query, part):
                vector = array("d")
                vector.frombytes(blob)
                found[key] = Embedding(vector=tuple(vector), token_count=int(tokens))
        return found

    def close(self) -> None:
        self._db.close()

    def __repr__(self) -> str:
        return f"CachingEmbedder({self._inner!r}, path={str(self.path)!r})"
