"""The embedded store: one SQLite file with keyword (BM25), vector and hybrid search.

The local default (docs/architecture.md, "Stores"): no server to start, nothing to install.

**Why SQLite.** It ships with Python, so the store costs no dependency; the index is
one file that can be copied, deleted or inspected with the ``sqlite3`` shell; its
transactions give the guarantees the store needs (a search is one read snapshot, a
document is written whole or not at all); FTS5 gives a real BM25 over an inverted
index. Vectors are searched by brute force with numpy (exact kNN, local scale).

Where things are:

==================  =====================================================================
module              what it holds
==================  =====================================================================
``store``           ``EmbeddedKnowledgeStore``: opening the file, search, status wiring
``schema``          the tables, schema version and upgrade, keyword analysis, embedder identity
``connections``     the connection pool; damaged-file detection (``PRAGMA quick_check``)
``keyword_index``   FTS5 tables, BM25 candidates, ``isolation`` (shared or per agent)
``vector_search``   vector encoding, the vector cache, exact kNN without BLAS threads
``write_session``   ``EmbeddedWriteSession``: batched transactions, problems, replace
``maintenance``     giving back after large writes: free pages, merged FTS5, the WAL, heap
``status``          a scope's counts, state and problems
``candidates``      what both search sides produce; chunk row readers
==================  =====================================================================
"""

from __future__ import annotations

from .keyword_index import ISOLATION_MODES, fts_query
from .store import FUSION_METHODS, EmbeddedKnowledgeStore
from .vector_search import DEFAULT_VECTOR_CACHE_BYTES
from .write_session import DEFAULT_BATCH_DOCUMENTS, DEFAULT_BATCH_SECONDS, EmbeddedWriteSession

__all__ = [
    "DEFAULT_BATCH_DOCUMENTS",
    "DEFAULT_BATCH_SECONDS",
    "DEFAULT_VECTOR_CACHE_BYTES",
    "FUSION_METHODS",
    "ISOLATION_MODES",
    "EmbeddedKnowledgeStore",
    "EmbeddedWriteSession",
    "fts_query",
]
