"""The indexes a store uses: each checked against the store once, then remembered.

The first time an index is used, its mapping is read (``Connection.get_mapping``) and
checked against the store's embedder (vector dimension, embedder name; ``mapping``'s
``check_layout``); one that is missing is created (``mapping.index_body``) when a write
needs it, and one made before the record fields (schema 1) gets them added. What the
check found (``mapping.IndexLayout``) is kept for the store's life: both sides ask it how
the index holds metadata (``metadata_pairs``).
"""

from __future__ import annotations

import threading
from dataclasses import replace

from knowledge.core.errors import EmbeddingMismatchError, StoreError
from knowledge.stores.opensearch.connection import Connection
from knowledge.stores.opensearch.mapping import (
    RECORD_PROPERTIES,
    IndexLayout,
    check_layout,
    index_body,
    layout_of,
)

__all__ = ["Indexes"]


class Indexes:
    """What the store knows of its indexes (module docstring). ``dimensions`` and
    ``embedding_model`` describe the store's embedder (``None``: keyword only).
    Thread-safe."""

    def __init__(
        self,
        connection: Connection,
        *,
        dimensions: int | None,
        embedding_model: str | None,
    ) -> None:
        self._connection = connection
        self._dimensions = dimensions
        self._embedding_model = embedding_model
        self._lock = threading.Lock()
        self._layouts: dict[str, IndexLayout] = {}

    @property
    def dimensions(self) -> int | None:
        """The store's vector dimension (``None``: keyword only)."""
        return self._dimensions

    def open(self, index: str, *, create: bool) -> bool:
        """Check that ``index`` fits this store (read once, then remembered); create it if
        asked. False when it does not exist (and ``create`` is False). Writing to a vector
        index without an embedder is refused: those chunks would miss from vector search."""
        layout = self._layouts.get(index)
        if layout is None:
            layout = self._read_layout(index, create=create)
            if layout is None:
                return False
        if create and self._dimensions is None and layout.vector_dimensions is not None:
            raise EmbeddingMismatchError(
                f"index '{index}' stores {layout.vector_dimensions}-dimension vectors"
                + (f" from '{layout.embedding_model}'" if layout.embedding_model else "")
                + ", but this store has no embedder: its chunks would be missing from vector "
                "search; configure the same embedder or use another index name"
            )
        if create and not layout.has_generations:
            self._connection.put_mapping(
                index,
                {"properties": RECORD_PROPERTIES},
                f"add the record fields to index '{index}'",
            )
            layout = replace(layout, has_generations=True)
            with self._lock:
                self._layouts[index] = layout
        return True

    def metadata_pairs(self, index: str) -> bool:
        """Whether ``index`` (opened with ``open``; or every one of a comma-separated list:
        a per-agent index and the shared library's) holds metadata as key/value terms
        (schema 4, ``metadata_pairs``); an index not read yet is taken to be new. Indexes
        of two schemas are refused, since one filter could not match both."""
        kinds = {self._pairs(name) for name in index.split(",")}
        if len(kinds) > 1:
            raise StoreError(
                f"indexes {index} hold metadata in two layouts; reindex the older one "
                "(docs/deploy.md) before searching them together"
            )
        return kinds.pop()

    def _pairs(self, index: str) -> bool:
        layout = self._layouts.get(index)
        return True if layout is None else layout.metadata_pairs

    def _read_layout(self, index: str, *, create: bool) -> IndexLayout | None:
        connection = self._connection
        mapping = connection.get_mapping(index)
        if mapping is None:
            if not create:
                return None
            config = connection.config
            body = index_body(
                vector_dimensions=self._dimensions,
                embedding_model=self._embedding_model,
                vector_engine=config.vector_engine or "lucene",
                serverless=config.serverless,
                number_of_shards=config.number_of_shards,
                number_of_replicas=config.number_of_replicas,
                refresh_interval=config.refresh_interval,
                hnsw_m=config.hnsw_m,
                hnsw_ef_construction=config.hnsw_ef_construction,
                derived_source=config.vector_derived_source,
            )
            # Another writer may create it first: fine, its mapping is checked below.
            connection.create_index(index, body)
            mapping = connection.get_mapping(index) or {}
        layout = layout_of(mapping, index)
        check_layout(
            layout,
            index,
            vector_dimensions=self._dimensions,
            embedding_model=self._embedding_model,
        )
        with self._lock:
            self._layouts[index] = layout
        return layout
