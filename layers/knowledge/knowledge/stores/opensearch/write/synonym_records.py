"""A scope's synonyms in OpenSearch (``knowledge.ranking.synonym_expansion``): one record per scope,
and a short-lived cache on the search path.

The record (``RECORD_SYNONYMS``) holds the checked text of the scope's synonyms file in
``SYNONYMS`` (``{"rules": text}``, ``_source`` only), with the scope's agent and context
and when it was written. Where the store names ids it has one fixed id per scope;
with server-made ids (Serverless) each write makes a new record and the latest is read.
A reindex's replace keeps it (``generations.unwritten_query``): configuration, not a
document. No document count, listing or problem query reads it.

**Search path** (``SynonymCache``): a keyword search needs the scope's set before it can
build its query, so a lookup costs one request; the cache keeps each scope's text for
``CACHE_SECONDS`` (60), so a search Lambda reads it at most once a minute per scope,
never per query, and never from S3. A write session of the same store drops the scope's
entry when it ends (``kb serve``, tests: at once); another process (the indexing
Lambda) is seen within ``CACHE_SECONDS``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from knowledge.core.scope import KnowledgeScope
from knowledge.stores.opensearch.mapping import (
    AGENT,
    CONTEXT,
    INDEXED_AT,
    RECORD,
    RECORD_SYNONYMS,
    SYNONYMS,
)

if TYPE_CHECKING:
    from knowledge.stores.opensearch.connection import Connection

__all__ = [
    "CACHE_SECONDS",
    "SynonymCache",
    "synonyms_body",
    "synonyms_record",
    "synonyms_record_id",
]

CACHE_SECONDS: Final = 60.0
_CACHE_LIMIT: Final = 4096
"""Scopes kept at most (a search Lambda serving many scopes starts over past it)."""


def synonyms_record(scope: KnowledgeScope, text: str | None, at: datetime) -> dict[str, Any]:
    """The scope's synonyms record (``None``: the scope has none now)."""
    return {
        RECORD: RECORD_SYNONYMS,
        AGENT: scope.agent,
        CONTEXT: scope.context,
        INDEXED_AT: at.isoformat(),
        SYNONYMS: {"rules": text or ""},
    }


def synonyms_record_id(document_id: str) -> str:
    """The fixed id of the record, from the scope's document id of the empty path."""
    return f"synonyms:{document_id}"


def synonyms_body(scope: KnowledgeScope) -> dict[str, Any]:
    """The latest synonyms record of exactly ``scope``."""
    return {
        "size": 1,
        "track_total_hits": False,
        "_source": {"includes": [SYNONYMS]},
        "sort": [{INDEXED_AT: "desc"}],
        "query": {
            "bool": {
                "filter": [
                    {"term": {RECORD: RECORD_SYNONYMS}},
                    {"term": {AGENT: scope.agent}},
                    {"term": {CONTEXT: scope.context}},
                ]
            }
        },
    }


def _text_of(response: dict[str, Any]) -> str | None:
    hits = response.get("hits", {}).get("hits", [])
    if not hits:
        return None
    value = hits[0].get("_source", {}).get(SYNONYMS, {})
    text = value.get("rules") if isinstance(value, dict) else None
    return text if isinstance(text, str) and text else None


class SynonymCache:
    """Each scope's synonyms text for ``CACHE_SECONDS`` (module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], tuple[float, str | None]] = {}

    def text(self, connection: Connection, index: str, scope: KnowledgeScope) -> str | None:
        """The scope's synonyms text (``None``: none), from the cache or one request."""
        key = (index, scope.key)
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and entry[0] > now:
            return entry[1]
        response = connection.search(index, f"read the synonyms of {scope}", synonyms_body(scope))
        text = _text_of(response)
        with self._lock:
            if len(self._entries) >= _CACHE_LIMIT:
                self._entries.clear()
            self._entries[key] = (now + CACHE_SECONDS, text)
        return text

    def forget(self, scope: KnowledgeScope) -> None:
        """Drop the scope's entries (a write session of this store on it ended)."""
        with self._lock:
            for key in [k for k in self._entries if k[1] == scope.key]:
                del self._entries[key]
