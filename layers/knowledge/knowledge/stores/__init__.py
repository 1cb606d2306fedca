"""Index backends. Each module implements ``knowledge.stores.protocol.KnowledgeStore`` whole.

docs/architecture.md, "One store protocol".

- ``memory``: in-memory TF-IDF keyword store, no dependencies (for tests and embedding-free use);
- ``embedded``: persistent local store with keyword, vector and hybrid search;
- ``opensearch``: Amazon OpenSearch Service or a local node.

Backends are imported from their modules, never from here, so that importing one does
not import the others' dependencies.
"""

from __future__ import annotations

__all__: list[str] = []
