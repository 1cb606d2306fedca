"""The package's public surface: what ``import knowledge`` offers, and what it costs."""

from __future__ import annotations

import subprocess
import sys

import knowledge

EXPECTED = {
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
    "IndexedDocument",
    "IndexState",
    "IndexStatus",
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
}


def test_public_names() -> None:
    assert set(knowledge.__all__) == EXPECTED
    for name in knowledge.__all__:
        assert getattr(knowledge, name) is not None


def test_import_loads_no_backend_or_provider() -> None:
    heavy = ["numpy", "openai", "opensearchpy", "boto3", "botocore", "sqlite3", "torch"]
    heavy += ["pypdfium2", "docx", "pptx", "openpyxl", "lxml", "PIL"]
    code = f"import sys, knowledge; print(','.join(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""
