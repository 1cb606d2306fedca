"""Embedding providers behind one protocol, and a factory that picks one by name.

``create_embedder(name, **options)`` builds ``"hashing"`` (offline, deterministic),
``"openai"``, ``"local"`` (sentence-transformers), ``"multilingual"`` (Universal Sentence
Encoder multilingual v3, offline, numpy only) or ``"bedrock"`` (Titan). Provider
modules are imported only when chosen, and their SDKs only when first used, so importing
this package is cheap. An unknown name or option is a ``ValidationError`` on ``embedder``.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from knowledge.core.errors import ValidationError
from knowledge.embedding.base import Embedding, EmbeddingClient
from knowledge.embedding.hashing import HashingEmbedder

__all__ = ["EMBEDDER_NAMES", "Embedding", "EmbeddingClient", "HashingEmbedder", "create_embedder"]

# name -> (module, class); modules are imported on demand.
_PROVIDERS: dict[str, tuple[str, str]] = {
    "hashing": ("knowledge.embedding.hashing", "HashingEmbedder"),
    "openai": ("knowledge.embedding.openai", "OpenAIEmbeddingClient"),
    "local": ("knowledge.embedding.sentence_transformers", "SentenceTransformerEmbedder"),
    "bedrock": ("knowledge.embedding.bedrock", "BedrockEmbeddingClient"),
    "multilingual": ("knowledge.embedding.multilingual", "MultilingualEmbedder"),
}
EMBEDDER_NAMES: tuple[str, ...] = tuple(_PROVIDERS)


def create_embedder(name: str, **options: Any) -> EmbeddingClient:
    """Build the provider called ``name`` with ``options`` as its constructor arguments."""
    key = name.strip().lower() if isinstance(name, str) else ""
    if key not in _PROVIDERS:
        raise ValidationError("embedder", f"{name!r} is not one of: {', '.join(EMBEDDER_NAMES)}")
    module_name, class_name = _PROVIDERS[key]
    provider = getattr(importlib.import_module(module_name), class_name)
    try:
        inspect.signature(provider).bind(**options)
    except TypeError as exc:
        raise ValidationError("embedder", f"bad options for {key!r}: {exc}") from exc
    embedder: EmbeddingClient = provider(**options)
    return embedder
