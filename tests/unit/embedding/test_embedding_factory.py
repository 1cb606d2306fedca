from __future__ import annotations

import os
import subprocess
import sys

import pytest

import knowledge.embedding as embedding
from knowledge.core.errors import ValidationError
from knowledge.embedding import EMBEDDER_NAMES, EmbeddingClient, HashingEmbedder, create_embedder


def test_public_names() -> None:
    assert sorted(embedding.__all__) == [
        "EMBEDDER_NAMES",
        "Embedding",
        "EmbeddingClient",
        "HashingEmbedder",
        "create_embedder",
    ]
    assert EMBEDDER_NAMES == ("hashing", "openai", "local", "bedrock", "multilingual")


def test_creates_the_hashing_embedder_with_options() -> None:
    embedder = create_embedder("hashing", dimensions=64)
    assert isinstance(embedder, HashingEmbedder)
    assert embedder.dimensions == 64
    assert create_embedder(" Hashing ").name == "hashing"


@pytest.mark.parametrize(
    ("name", "options", "expected_name", "dimensions"),
    [
        ("openai", {}, "openai:text-embedding-3-small", 1536),
        (
            "openai",
            {"model": "text-embedding-3-large", "dimensions": 1024},
            "openai:text-embedding-3-large",
            1024,
        ),
        ("bedrock", {"dimensions": 512}, "bedrock:amazon.titan-embed-text-v2:0", 512),
        ("local", {}, "local:sentence-transformers/all-MiniLM-L6-v2", 384),
    ],
)
def test_creates_each_provider(
    name: str, options: dict[str, object], expected_name: str, dimensions: int
) -> None:
    embedder = create_embedder(name, **options)
    assert isinstance(embedder, EmbeddingClient)
    assert (embedder.name, embedder.dimensions) == (expected_name, dimensions)


def test_unknown_name_lists_the_choices() -> None:
    with pytest.raises(ValidationError) as info:
        create_embedder("cohere")
    assert info.value.field == "embedder"
    assert "hashing, openai, local, bedrock" in info.value.message


def test_unknown_option_is_a_validation_error() -> None:
    with pytest.raises(ValidationError) as info:
        create_embedder("hashing", size=3)
    assert info.value.field == "embedder"
    assert "size" in info.value.message


def test_choosing_a_provider_imports_no_sdk() -> None:
    script = (
        "import sys\n"
        "import knowledge.embedding as e\n"
        "assert 'knowledge.embedding.openai' not in sys.modules\n"
        "for name in e.EMBEDDER_NAMES:\n"
        "    e.create_embedder(name).dimensions\n"
        "heavy = {'openai', 'boto3', 'botocore', 'sentence_transformers', 'torch', 'numpy'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "OPENAI_API_KEY": ""},
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "[]"
