"""A probe: richer hashing embedders (stop words, stems, dimensions).

A probe: would a richer hashing embedder make hybrid beat keyword by more?

With the offline ``hashing`` embedder, hybrid stays within a few hundredths of keyword
(REPORT 1.1/1c): its "vector" side is a hashed bag of the same words BM25 already scores.
This probe builds variants of that embedder (the product's ``HashingEmbedder`` is the
``product`` row) and runs the product's search path on the embedded store with each, per
corpus, keyword / vector / hybrid MRR@10 (document level, as ``bench quality``):

- ``stop``: stop words left out (``knowledge.ranking.analysis.STOP_WORDS``);
- ``stems``: stop words out and the keyword side's Snowball stems as the terms;
- ``sublinear``: stems, and ``1 + log(tf)`` per feature instead of the raw count;
- ``d1024``: the product's features in 1,024 dimensions instead of 256;
- ``stems-d1024``: stems in 1,024 dimensions.

Every variant keeps the product's character trigrams of each word of 4+ characters
(weight 0.5). Each variant is named ``hashing`` to the store, so hybrid uses the hashing
embedder's weights and relevance floor. Nothing here is in the product: the result says
whether a variant is worth a new embedder identity (a stored hashing vector is only
comparable with one made the same way). Writes ``bench/results/hashing-variants.json``.
"""

from __future__ import annotations

import argparse
import math
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common.environment import log, write_result
from bench.common.stores import open_store
from bench.corpora.faq import load_faq
from bench.corpora.manpages import Corpus, load_corpus
from bench.runs.quality import evaluate_store
from knowledge.embedding.base import Embedding
from knowledge.embedding.hashing import DEFAULT_HASHING_DIMENSIONS, HashingEmbedder
from knowledge.ranking.analysis import STOP_WORDS, is_cjk, keyword_terms, tokenize

__all__ = ["VARIANTS", "VariantEmbedder"]

_TRIGRAM_WEIGHT = 0.5
_MIN_TRIGRAM_TERM_LENGTH = 4

VARIANTS: dict[str, dict[str, Any]] = {
    "stop": {"stop": True},
    "stems": {"stop": True, "stems": True},
    "sublinear": {"stop": True, "stems": True, "sublinear": True},
    "d1024": {"dimensions": 1024},
    "stems-d1024": {"stop": True, "stems": True, "dimensions": 1024},
}
CORPORA: dict[str, Callable[[], Corpus]] = {
    "faq-en": lambda: load_faq("en"),
    "faq-ko": lambda: load_faq("ko"),
    "manpages-300": lambda: load_corpus(300),
}


def _sign_and_bucket(feature: str, dimensions: int) -> tuple[float, int]:
    import hashlib

    hashed = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")
    return (-1.0 if hashed >> 63 else 1.0), hashed % dimensions


class VariantEmbedder(HashingEmbedder):
    """Signed feature hashing of a text's terms and trigrams, as the module docstring says
    (named ``hashing``, as the product's, for its weights and floor)."""

    def __init__(
        self,
        *,
        dimensions: int = DEFAULT_HASHING_DIMENSIONS,
        stop: bool = False,
        stems: bool = False,
        sublinear: bool = False,
    ) -> None:
        super().__init__(dimensions)
        self._stop, self._stems, self._sublinear = stop, stems, sublinear

    def embed(self, text: str) -> Embedding:
        words = tokenize(text)
        if self._stop:
            words = [word for word in words if word not in STOP_WORDS]
        terms = keyword_terms(" ".join(words)) if self._stems else words
        features: Counter[str] = Counter("t\x1f" + term for term in terms)
        for word in words:
            if len(word) >= _MIN_TRIGRAM_TERM_LENGTH and not any(is_cjk(ch) for ch in word):
                padded = f"^{word}$"
                for i in range(len(padded) - 2):
                    features["g\x1f" + padded[i : i + 3]] += 1
        vector = [0.0] * self._dimensions
        for feature, count in features.items():
            weight = 1.0 + math.log(count) if self._sublinear else float(count)
            if feature.startswith("g"):
                weight *= _TRIGRAM_WEIGHT
            sign, bucket = _sign_and_bucket(feature, self._dimensions)
            vector[bucket] += sign * weight
        norm = math.sqrt(math.fsum(x * x for x in vector))
        if norm > 0.0:
            vector = [x / norm for x in vector]
        return Embedding(vector=tuple(vector), token_count=len(terms))


def _modes(corpus: Corpus, embedder: Any, chunks: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        store = open_store("embedded", embedder, workdir=Path(folder))
        try:
            _, modes = evaluate_store(store, corpus, chunks)
        finally:
            store.close()
    return {mode: float(scores["mrr_at_10"]) for mode, scores in modes.items()}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpora", default=",".join(CORPORA), help="comma-separated")
    parser.add_argument("--chunks", type=int, default=50, help="chunks asked per search")


def main(args: argparse.Namespace) -> None:
    results: dict[str, dict[str, dict[str, float]]] = {}
    for name in [c.strip() for c in args.corpora.split(",") if c.strip()]:
        if name not in CORPORA:
            raise SystemExit(f"unknown corpus {name!r}: one of {', '.join(CORPORA)}")
        corpus = CORPORA[name]()
        rows = {"product": _modes(corpus, HashingEmbedder(), args.chunks)}
        for variant, options in VARIANTS.items():
            rows[variant] = _modes(corpus, VariantEmbedder(**options), args.chunks)
        for variant, modes in rows.items():
            log(f"{name} {variant}: {modes}")
        results[name] = rows
    write_result("hashing-variants", {"chunks": args.chunks, "corpora": results})
