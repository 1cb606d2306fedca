"""A deterministic, offline embedder: signed feature hashing of keyword terms.

Used by tests and by the no-key local mode. It has no model and no network: a text's
vector is a bag of its ``knowledge.ranking.analysis.tokenize`` terms plus, for fuzzy matching of
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
import operator
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import chain, repeat

from knowledge.core.errors import ValidationError
from knowledge.embedding.base import Embedding
from knowledge.ranking.analysis import TERM_CACHE_ENTRIES, is_cjk, tokenize

__all__ = ["DEFAULT_HASHING_DIMENSIONS", "HashingEmbedder"]

DEFAULT_HASHING_DIMENSIONS = 256
_MAX_DIMENSIONS = 65_536

# A whole-term match should outweigh sharing a few trigrams.
_TERM_WEIGHT = 1.0
_TRIGRAM_WEIGHT = 0.5
_MIN_TRIGRAM_TERM_LENGTH = 4
_SIGN_BIT = 1 << 63
# A feature's contribution is one of four signed weights; a term is cached as its features'
# keys ``bucket * 4 + kind``, so a text's vector is a count of keys (summed in C).
_SIGNED_WEIGHTS = (_TERM_WEIGHT, -_TERM_WEIGHT, _TRIGRAM_WEIGHT, -_TRIGRAM_WEIGHT)
# Entries of each term cache (hashed features, a term's keys): bounded by memory, not by the
# vocabulary (``knowledge.ranking.analysis.TERM_CACHE_ENTRIES`` says why and what it costs).
_TERM_CACHE_SIZE = TERM_CACHE_ENTRIES


@lru_cache(maxsize=_TERM_CACHE_SIZE)
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


def _term_keys(term: str, dimensions: int) -> tuple[int, ...]:
    keys: list[int] = []
    for feature, weight in _features(term):
        hashed = _feature_hash(feature)
        kind = (0 if weight == _TERM_WEIGHT else 2) + (1 if hashed & _SIGN_BIT else 0)
        keys.append((hashed % dimensions) * 4 + kind)
    return tuple(keys)


@lru_cache(maxsize=16)
def _term_keys_for(dimensions: int) -> Callable[[str], tuple[int, ...]]:
    """A per-dimension, bounded cache of ``_term_keys`` (one-argument: cheap to call)."""

    @lru_cache(maxsize=_TERM_CACHE_SIZE)
    def keys(term: str) -> tuple[int, ...]:
        return _term_keys(term, dimensions)

    return keys


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
        # Every weight is +-1 or +-0.5, so each bucket's sum is exact in any order: counting
        # the keys gives bit for bit the vector of adding the features one by one.
        counts = Counter(chain.from_iterable(map(_term_keys_for(self._dimensions), terms)))
        for key, count in counts.items():
            vector[key >> 2] += count * _SIGNED_WEIGHTS[key & 3]
        norm = math.sqrt(math.fsum(map(operator.mul, vector, vector)))
        if norm > 0.0:
            vector = list(map(operator.truediv, vector, repeat(norm, len(vector))))
        return Embedding(vector=tuple(vector), token_count=len(terms))

    def embed_batch(self, texts: Sequence[str]) -> list[Embedding]:
        return [self.embed(text) for text in texts]

    def __repr__(self) -> str:
        return f"HashingEmbedder(dimensions={self._dimensions})"
