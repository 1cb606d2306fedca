"""A deterministic, offline embedder: signed feature hashing of keyword terms.

Used by tests and by the no-key local mode. It has no model and no network: a text's
vector is a bag of its ``knowledge.text.tokenize`` terms plus, for fuzzy matching of
word forms ("deploy" / "deployment"), the character trigrams of each longer non-CJK
term, each feature hashed with BLAKE2b (stable across processes, unlike ``hash()``)
into one of ``dimensions`` buckets with a hashed sign, then L2-normalised.

Same text, same vector, on every machine. A text with no terms (empty, punctuation
only) has the zero vector; its cosine similarity with anything is taken to be 0.
``token_count`` is the number of terms.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from functools import lru_cache

from knowledge.embedding.base import Embedding
from knowledge.errors import ValidationError
from knowledge.text import is_cjk, tokenize

__all__ = ["DEFAULT_HASHING_DIMENSIONS", "HashingEmbedder"]

DEFAULT_HASHING_DIMENSIONS = 256
_MAX_DIMENSIONS = 65_536

# A whole-term match should outweigh sharing a few trigrams.
_TERM_WEIGHT = 1.0
_TRIGRAM_WEIGHT = 0.5
_MIN_TRIGRAM_TERM_LENGTH = 4
_SIGN_BIT = 1 << 63


@lru_cache(maxsize=65_536)
def _feature_hash(feature: str) -> int:
    return int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "big")


def _features(term: str) -> list[tuple[str, float]]:
    # Prefixes keep the term "abc" and the trigram "abc" apart.
    features = [("t\x1f" + term, _TERM_WEIGHT)]
    if len(term) >= _MIN_TRIGRAM_TERM_LENGTH and not any(is_cjk(ch) for ch in term):
        padded = f"^{term}$"
        features.extend(
            ("g\x1f" + padded[i : i + 3], _TRIGRAM_WEIGHT) for i in range(len(padded) - 2)
        )
    return features


class HashingEmbedder:
    """``EmbeddingClient`` that hashes terms into ``dimensions`` buckets (default 256)."""

    def __init__(self, dimensions: int = DEFAULT_HASHING_DIMENSIONS) -> None:
        if (
            isinstance(dimensions, bool)
            or not isinstance(dimensions, int)
            or not 1 <= dimensions <= _MAX_DIMENSIONS
        ):
            raise ValidationError(
                "dimensions", f"must be an integer in [1, {_MAX_DIMENSIONS}], got {dimensions!r}"
            )
        self._dimensions = dimensions

    @property
    def name(self) -> str:
        return "hashing"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def embed(self, text: str) -> Embedding:
        terms = tokenize(text)
        vector = [0.0] * self._dimensions
        for term in terms:
            for feature, weight in _features(term):
                hashed = _feature_hash(feature)
                bucket = hashed % self._dimensions
                vector[bucket] += -weight if hashed & _SIGN_BIT else weight
        norm = math.sqrt(math.fsum(x * x for x in vector))
        if norm > 0.0:
            vector = [x / norm for x in vector]
        return Embedding(vector=tuple(vector), token_count=len(terms))

    def embed_batch(self, texts: Sequence[str]) -> list[Embedding]:
        return [self.embed(text) for text in texts]

    def __repr__(self) -> str:
        return f"HashingEmbedder(dimensions={self._dimensions})"
