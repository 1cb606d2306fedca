"""The OpenSearch backend: Amazon OpenSearch Service (managed or Serverless) or a local node.

Importing this package does not import ``opensearchpy`` or ``boto3``; they are loaded
when a store first talks to its endpoint. See README.md in this folder for the index
layout, authentication, and what differs on OpenSearch Serverless.

::

    store = OpenSearchKnowledgeStore(
        OpenSearchConfig(url="http://127.0.0.1:9200", index_name="knowledge"),
        embedder=HashingEmbedder(),
    )

``build_store`` is the builder ``knowledge.config`` uses for ``--store opensearch``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from knowledge.stores.opensearch.client import RetryPolicy
from knowledge.stores.opensearch.settings import OpenSearchConfig
from knowledge.stores.opensearch.store import OpenSearchKnowledgeStore, OpenSearchWriteSession

if TYPE_CHECKING:
    from knowledge.config import StoreSettings

__all__ = [
    "OpenSearchConfig",
    "OpenSearchKnowledgeStore",
    "OpenSearchWriteSession",
    "RetryPolicy",
    "build_store",
]


def build_store(settings: StoreSettings) -> OpenSearchKnowledgeStore:
    """The store for ``kb``/the local server: the endpoint from ``--opensearch-url`` (or
    ``KB_OPENSEARCH_URL``, then ``OPENSEARCH_URL``), every other setting from the
    ``OPENSEARCH_*`` environment (``OpenSearchConfig.from_env``), the embedder by name.
    Writes wait until they are searchable unless ``OPENSEARCH_WAIT_FOR_REFRESH`` says
    otherwise."""
    from knowledge.config import open_embedder  # config imports backends lazily

    overrides: dict[str, Any] = {}
    if "OPENSEARCH_WAIT_FOR_REFRESH" not in os.environ:
        # On the command line, `kb index` then `kb search` should see what was written.
        overrides["wait_for_refresh"] = True
    if settings.opensearch_url:
        overrides["url"] = settings.opensearch_url
    if settings.default_mode is not None:
        overrides["default_mode"] = settings.default_mode
    config = OpenSearchConfig.from_env(**overrides)
    return OpenSearchKnowledgeStore(config, embedder=open_embedder(settings.embedder_name))
