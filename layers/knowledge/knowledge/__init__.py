"""Scoped knowledge search for AI agents: the core contracts, re-exported.

Only the light core is imported here (value objects, errors, protocols), so importing
``knowledge`` stays cheap on a Lambda cold start. Backends, providers, the CLI and the
local server live in their own modules and are imported where they are used.
"""

from __future__ import annotations

from knowledge.core.documents import DocumentPage, IndexedDocument
from knowledge.core.errors import (
    ConfigurationError,
    EmbeddingError,
    EmbeddingMismatchError,
    ExtractionError,
    InvalidScopeError,
    KnowledgeError,
    NotFoundError,
    StoreError,
    StoreUnavailableError,
    UnsupportedModeError,
    ValidationError,
)
from knowledge.core.model import (
    DocumentChunk,
    FileProblem,
    IndexOptions,
    IndexResult,
    IndexState,
    IndexStatus,
    SearchMode,
    SearchQuery,
    SearchResult,
)
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import DocumentSource, SourceDocument
from knowledge.stores.protocol import KnowledgeStore

__all__ = [
    "ConfigurationError",
    "DocumentChunk",
    "DocumentPage",
    "DocumentSource",
    "EmbeddingError",
    "EmbeddingMismatchError",
    "ExtractionError",
    "FileProblem",
    "IndexOptions",
    "IndexResult",
    "IndexState",
    "IndexStatus",
    "IndexedDocument",
    "InvalidScopeError",
    "KnowledgeError",
    "KnowledgeScope",
    "KnowledgeStore",
    "NotFoundError",
    "SearchMode",
    "SearchQuery",
    "SearchResult",
    "SourceDocument",
    "StoreError",
    "StoreUnavailableError",
    "UnsupportedModeError",
    "ValidationError",
]
