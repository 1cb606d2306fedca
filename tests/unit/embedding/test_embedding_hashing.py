from __future__ import annotations

import hashlib
import math
import os
import struct
import subprocess
import sys

import pytest

from knowledge.core.errors import ValidationError
from knowledge.embedding.base import Embedding, EmbeddingClient
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ranking.analysis import tokenize


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


# Vectors computed by the feature-by-feature implementation, before the embedder was
# made faster: stored indexes hold these vectors, so they must stay bit for bit the same.
_PINNED_TEXTS = {
    "plain": (
        "Roll back a failed deployment with kubectl rollout undo; deploy, deploy, DEPLOY again."
    ),
    "mixed": "k8s배포 실패 시 kubectl rollout undo 로 되돌립니다 (デプロイ失敗) — naïve café ﬁle",
    "repeated": "error " * 300 + "warning " * 7,
}
_PINNED = [
    (
        256,
        "plain",
        12,
        "fdc61c5b9551a15b20d51a9f8ecfa46f6ece137c6bf1e4b135976c22f9888eca",
        {0: "-0x1.160dfa21c7009p-3", 15: "-0x1.160dfa21c7009p-2", 17: "0x1.160dfa21c7009p-3"},
    ),
    (
        256,
        "mixed",
        18,
        "6262385cca475074197397e81012da20acfcb87eda60ad9ed7eb76b885bfa46f",
        {0: "-0x1.a43da0adc6899p-4", 4: "0x1.a43da0adc6899p-4", 14: "0x1.a43da0adc6899p-4"},
    ),
    (
        256,
        "repeated",
        307,
        "d7f3b0ab9cdf4ed9c67486a312491e291baa9c9abf5ce56434dfac2a04e2391c",
        {2: "0x1.5456d5089bf0ap-2", 11: "0x1.fc3d671718a83p-8", 30: "0x1.5456d5089bf0ap-2"},
    ),
    (
        7,
        "plain",
        12,
        "0bb8ec71baa540c82469a5b8ffe06d66813216c61d92de8602c62228755d4c73",
        {0: "-0x1.6482d37a5a3d2p-1", 1: "0x1.6482d37a5a3d2p-2", 2: "0x1.6482d37a5a3d2p-3"},
    ),
    (
        7,
        "mixed",
        18,
        "51949bc01bca85c6fd64e09e16afd60c6da3ab51610493976c738c69cd617841",
        {0: "-0x1.d479c1732efadp-2", 1: "-0x1.d479c1732efadp-2", 2: "0x1.38512ba21f51ep-2"},
    ),
    (
        7,
        "repeated",
        307,
        "6985d5af134ce3a4c1021a203b31016e440715a54ea22d0f6df3522e5d52658d",
        {0: "0x1.d05da4fcd7f37p-2", 1: "-0x1.5ab9f97befc00p-7", 2: "0x1.5ab9f97befc00p-7"},
    ),
]


@pytest.mark.parametrize(("dimensions", "name", "tokens", "digest", "values"), _PINNED)
def test_vectors_stay_bit_for_bit_what_they_were(
    dimensions: int, name: str, tokens: int, digest: str, values: dict[int, str]
) -> None:
    embedding = HashingEmbedder(dimensions).embed(_PINNED_TEXTS[name])
    assert embedding.token_count == tokens
    for index, value in values.items():
        assert embedding.vector[index] == float.fromhex(value)
    packed = struct.pack(f"<{dimensions}d", *embedding.vector)
    assert hashlib.sha256(packed).hexdigest() == digest


def test_embedders_of_different_dimensions_do_not_share_term_buckets() -> None:
    text = _PINNED_TEXTS["plain"]
    small, large = HashingEmbedder(7), HashingEmbedder(256)
    first = small.embed(text)
    large.embed(text)  # the same terms, cached for another dimension
    assert small.embed(text) == first
    assert len(large.embed(text).vector) == 256
