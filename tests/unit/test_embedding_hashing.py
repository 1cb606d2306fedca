from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest

from knowledge.embedding.base import Embedding, EmbeddingClient
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.errors import ValidationError
from knowledge.text import tokenize


def _cosine(a: Embedding, b: Embedding) -> float:
    dot = sum(x * y for x, y in zip(a.vector, b.vector, strict=True))
    norm_a = math.sqrt(sum(x * x for x in a.vector))
    norm_b = math.sqrt(sum(x * x for x in b.vector))
    return 0.0 if norm_a == 0.0 or norm_b == 0.0 else dot / (norm_a * norm_b)


def test_is_an_embedding_client_named_hashing() -> None:
    embedder = HashingEmbedder()
    assert isinstance(embedder, EmbeddingClient)
    assert embedder.name == "hashing"
    assert embedder.dimensions == 256


@pytest.mark.parametrize("dimensions", [1, 16, 384, 1024])
def test_vectors_have_the_configured_dimension_and_unit_length(dimensions: int) -> None:
    embedding = HashingEmbedder(dimensions).embed("Roll back a failed deployment with kubectl")
    assert len(embedding.vector) == dimensions
    assert math.sqrt(sum(x * x for x in embedding.vector)) == pytest.approx(1.0)


def test_token_count_is_the_number_of_keyword_terms() -> None:
    text = "Rollback: kubectl rollout undo (배포실패) a b"
    assert HashingEmbedder().embed(text).token_count == len(tokenize(text)) == 7


@pytest.mark.parametrize("text", ["", "   ", "!!! --- ...", "a b c"])
def test_text_without_terms_is_the_zero_vector(text: str) -> None:
    embedding = HashingEmbedder(32).embed(text)
    assert embedding.vector == (0.0,) * 32
    assert embedding.token_count == 0


def test_same_terms_same_vector_regardless_of_case_and_punctuation() -> None:
    embedder = HashingEmbedder()
    assert (
        embedder.embed("Deploy, the SERVICE!").vector == embedder.embed("deploy the service").vector
    )


def test_similar_texts_are_closer_than_unrelated_ones() -> None:
    embedder = HashingEmbedder()
    query = embedder.embed("how to roll back a deployment")
    related = embedder.embed("Rolling back deployments: run the rollback job")
    unrelated = embedder.embed("quarterly invoice totals for marketing")
    assert _cosine(query, related) > _cosine(query, unrelated) + 0.2


def test_word_forms_share_trigram_features() -> None:
    embedder = HashingEmbedder(1024)
    assert _cosine(embedder.embed("deployment"), embedder.embed("deploy")) > 0.3
    assert _cosine(embedder.embed("deployment"), embedder.embed("invoice")) < 0.2


def test_cjk_compound_matches_spaced_words() -> None:
    embedder = HashingEmbedder()
    assert _cosine(embedder.embed("배포실패"), embedder.embed("배포 실패")) > 0.7


def test_batch_keeps_order_and_equals_single_embeds() -> None:
    embedder = HashingEmbedder(64)
    texts = ["alpha beta", "", "gamma delta", "alpha beta"]
    assert embedder.embed_batch(texts) == [embedder.embed(text) for text in texts]
    assert embedder.embed_batch([]) == []


def test_vectors_are_stable_across_processes() -> None:
    # Python's str hash() is salted per process; a stable hash gives the same vector anywhere.
    text = "stable hashing across processes 안정적"
    script = (
        "from knowledge.embedding.hashing import HashingEmbedder;"
        f"print(repr(HashingEmbedder(64).embed({text!r}).vector))"
    )
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        completed = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env
        )
        outputs.add(completed.stdout.strip())
    assert outputs == {repr(HashingEmbedder(64).embed(text).vector)}


@pytest.mark.parametrize("dimensions", [0, -5, 70_000, 2.5, True])
def test_rejects_bad_dimensions(dimensions: object) -> None:
    with pytest.raises(ValidationError) as info:
        HashingEmbedder(dimensions)  # type: ignore[arg-type]
    assert info.value.field == "dimensions"
