"""The OpenSearch backend: Amazon OpenSearch Service (managed or Serverless) or a local node.

Importing this package does not import ``opensearchpy`` or ``boto3``; they are loaded
when a store first talks to its endpoint. See README.md in this folder for the index
layout, authentication, and what differs on OpenSearch Serverless.

::

    store = OpenSearchKnowledgeStore(
        OpenSearchConfig(url="http://127.0.0.1:9200", index_name="knowledge"),
        embedder=HashingEmbedder(),
    )

``build_store`` is the builder ``knowledge.config`` uses for ``--store opensearch`` (config
resolves the settings and opens the embedder; this package never imports config).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from knowledge.core.model import SearchMode
from knowledge.stores.opensearch.client import RetryPolicy
from knowledge.stores.opensearch.settings import OpenSearchConfig
from knowledge.stores.opensearch.store import OpenSearchKnowledgeStore, OpenSearchWriteSession

if TYPE_CHECKING:
    from collections.abc import Callable

    from knowledge.embedding.base import EmbeddingClient

__all__ = [
    "OpenSearchConfig",
    "OpenSearchKnowledgeStore",
    "OpenSearchWriteSession",
    "RetryPolicy",
    "build_store",
]


def build_store(
    *,
    url: str | None,
    default_mode: SearchMode | str | None,
    open_embedder: Callable[[], EmbeddingClient | None],
) -> OpenSearchKnowledgeStore:
    """The store for ``kb``/the local server: the endpoint ``url`` (``--opensearch-url``,
    ``KB_OPENSEARCH_URL``, as ``knowledge.config`` resolved it; ``None``: ``OPENSEARCH_URL``),
    every other setting from the ``OPENSEARCH_*`` environment (``OpenSearchConfig.from_env``),
    then the embedder from ``open_embedder`` (after the settings are checked: a bad setting
    fails before a model loads). Writes wait until they are searchable unless
    ``OPENSEARCH_WAIT_FOR_REFRESH`` says otherwise."""
    overrides: dict[str, Any] = {}
    if "OPENSEARCH_WAIT_FOR_REFRESH" not in os.environ:
        # On the command line, `kb index` then `kb search` should see what was written.
        overrides["wait_for_refresh"] = True
    if url:
        overrides["url"] = url
    if default_mode is not None:
        overrides["default_mode"] = default_mode
    config = OpenSearchConfig.from_env(**overrides)
    return OpenSearchKnowledgeStore(config, embedder=open_embedder())
