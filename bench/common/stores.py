"""The stores and embedders under test, built exactly as a user would build them.

``open_store`` returns the product's ``EmbeddedKnowledgeStore`` (a fresh SQLite file) or
``OpenSearchKnowledgeStore`` (a fresh index on the node) with default settings;
``make_embedder`` returns the hashing embedder or the offline all-MiniLM-L6-v2 model
(behind the on-disk ``CachingEmbedder`` unless ``cache=False``).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from bench.common.embedding_cache import CachingEmbedder
from bench.common.environment import CACHE_DIR
from knowledge.core.scope import KnowledgeScope
from knowledge.embedding.base import EmbeddingClient
from knowledge.stores.protocol import KnowledgeStore

__all__ = [
    "EMBEDDERS",
    "SCOPE",
    "STORES",
    "delete_index",
    "make_embedder",
    "open_store",
    "unique_index_name",
]

SCOPE = KnowledgeScope("bench", "manpages")
STORES = ("embedded", "opensearch")
EMBEDDERS = ("hashing", "minilm", "multilingual")


def make_embedder(name: str, *, cache: bool = True) -> EmbeddingClient:
    """``hashing`` (256 dimensions, never cached: it is cheap), ``minilm`` or
    ``multilingual`` (USE multilingual v3, ``knowledge.embedding.multilingual``)."""
    if name == "hashing":
        from knowledge.embedding.hashing import HashingEmbedder

        return HashingEmbedder()
    if name == "minilm":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from knowledge.embedding.sentence_transformers import SentenceTransformerEmbedder

        model = SentenceTransformerEmbedder()
        return CachingEmbedder(model, CACHE_DIR) if cache else model
    if name == "multilingual":
        from knowledge.embedding.multilingual import MultilingualEmbedder

        multilingual = MultilingualEmbedder()
        return CachingEmbedder(multilingual, CACHE_DIR) if cache else multilingual
    raise SystemExit(f"unknown embedder {name!r}: one of {', '.join(EMBEDDERS)}")


def unique_index_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def open_store(
    kind: str,
    embedder: EmbeddingClient | None,
    *,
    workdir: Path | None,
    node_url: str | None = None,
    index_name: str | None = None,
    client: Any = None,
    options: dict[str, Any] | None = None,
) -> KnowledgeStore:
    """A new, empty store of ``kind`` (``embedded`` or ``opensearch``); ``options`` are
    extra constructor arguments (embedded) or ``OpenSearchConfig`` fields (OpenSearch)."""
    options = options or {}
    if kind == "embedded":
        from knowledge.stores.embedded import EmbeddedKnowledgeStore

        if workdir is None:
            raise SystemExit("the embedded store needs a folder for its file")

        return EmbeddedKnowledgeStore(
            workdir / f"{uuid.uuid4().hex[:10]}.db", embedder=embedder, **options
        )
    if kind == "opensearch":
        from knowledge.stores.opensearch import OpenSearchConfig, OpenSearchKnowledgeStore

        if node_url is None:
            raise SystemExit("the opensearch store needs a node URL")
        config = OpenSearchConfig(
            url=node_url, index_name=index_name or unique_index_name("bench"), **options
        )
        return OpenSearchKnowledgeStore(config, embedder=embedder, client=client)
    raise SystemExit(f"unknown store {kind!r}: one of {', '.join(STORES)}")


def refresh_index(node_url: str, index_name: str) -> None:
    """Make everything written to the index searchable now (not within the refresh
    interval): scores must not depend on how fast the first query follows indexing."""
    from opensearchpy import OpenSearch

    client = OpenSearch(hosts=[node_url], timeout=120)
    try:
        client.indices.refresh(index=index_name)
    finally:
        client.close()


def delete_index(node_url: str, index_name: str) -> None:
    from opensearchpy import OpenSearch

    client = OpenSearch(hosts=[node_url], timeout=120)
    try:
        client.indices.delete(index=index_name, ignore_unavailable=True)
    finally:
        client.close()
