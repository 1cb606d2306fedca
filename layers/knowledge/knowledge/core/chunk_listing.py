"""A document's chunks as the index holds them: one paging contract for every store.

``KnowledgeStore.list_chunks(scope, path, limit=..., cursor=...)`` pages through the
chunks of the indexed version of one document of exactly ``scope``, by chunk index (the
order the chunker made them in). It answers ``None`` when the scope holds no indexed
version of ``path`` (a path that only has a problem, or none at all): the route's 404,
the same for a path that exists in another scope only, since a store reads the scope it
is given and nothing else.

Each chunk is what a search would return of it: its ``chunk_index``, its text and its
metadata (``title``, ``heading_path``, and where the extraction knew it, its position:
``page``/``page_end``, ``slide``, ``sheet``, ``row_start``/``row_end``). The chunker
keeps no character offsets, so none is shown.

**Cursors.** Opaque to callers, like the documents listing's (``knowledge.core.documents``):
they name the scope, the document and the last chunk index of the page, so a cursor used
on another document or scope is a 400 (field ``cursor``) instead of a wrong page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from knowledge.core.documents import pack_cursor, unpack_cursor
from knowledge.core.errors import ValidationError
from knowledge.core.scope import KnowledgeScope

__all__ = [
    "DEFAULT_CHUNKS_LIMIT",
    "MAX_CHUNKS_LIMIT",
    "POSITION_KEYS",
    "ChunkPage",
    "IndexedChunk",
    "chunk_page",
    "decode_chunk_cursor",
    "encode_chunk_cursor",
    "validate_chunks_limit",
]

DEFAULT_CHUNKS_LIMIT = 50
MAX_CHUNKS_LIMIT = 200
"""A chunk is at most a few KiB of text: 200 of them stay well inside a Lambda answer."""

POSITION_KEYS = ("page", "page_end", "slide", "sheet", "row_start", "row_end")
"""The metadata keys that say where in its document a chunk is (``knowledge.ingest.chunking``)."""

_KIND = "chunks"
_VERSION = 1
_REFUSAL = "is not a cursor returned by this document's chunk listing"


@dataclass(frozen=True, slots=True)
class IndexedChunk:
    """One chunk of an indexed document, as stored."""

    chunk_index: int
    content: str
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        title = self.metadata.get("title")
        headings = self.metadata.get("heading_path")
        return {
            "chunk_index": self.chunk_index,
            "content": self.content,
            "title": title if isinstance(title, str) else None,
            "heading_path": [str(h) for h in headings] if isinstance(headings, list) else [],
            "position": {k: self.metadata[k] for k in POSITION_KEYS if k in self.metadata},
            "metadata": dict(self.metadata),
        }


@dataclass(frozen=True, slots=True)
class ChunkPage:
    """One page of a document's chunks; ``next_cursor`` is ``None`` on the last page."""

    chunks: tuple[IndexedChunk, ...]
    next_cursor: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"chunks": [c.to_dict() for c in self.chunks], "next_cursor": self.next_cursor}


def validate_chunks_limit(value: object, field_name: str = "limit") -> int:
    """``value`` if it is an integer in [1, MAX_CHUNKS_LIMIT], else ``ValidationError``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CHUNKS_LIMIT:
        raise ValidationError(
            field_name, f"must be an integer from 1 to {MAX_CHUNKS_LIMIT}, got {value!r}"
        )
    return value


def encode_chunk_cursor(scope: KnowledgeScope, path: str, last_index: int) -> str:
    """The cursor that resumes the chunks of ``path`` in ``scope`` after ``last_index``."""
    return pack_cursor(
        {
            "v": _VERSION,
            "k": _KIND,
            "a": scope.agent,
            "c": scope.context,
            "p": path,
            "i": last_index,
        }
    )


def decode_chunk_cursor(scope: KnowledgeScope, path: str, cursor: str | None) -> int | None:
    """The chunk index a listing of ``path`` in ``scope`` resumes after (``None``: from
    the first). Raises ``ValidationError`` (field ``cursor``) for a cursor this module
    did not make, or one made for another document or scope."""
    if cursor is None:
        return None
    payload = unpack_cursor(cursor, _REFUSAL)
    after = payload.get("i")
    if (
        payload.get("k") != _KIND
        or payload.get("v") != _VERSION
        or isinstance(after, bool)
        or not isinstance(after, int)
    ):
        raise ValidationError("cursor", _REFUSAL)
    if payload.get("a") != scope.agent or payload.get("c") != scope.context:
        raise ValidationError("cursor", f"belongs to another scope than {scope}")
    if payload.get("p") != path:
        raise ValidationError("cursor", "belongs to another document's chunk listing")
    return after


def chunk_page(
    scope: KnowledgeScope, path: str, chunks: Sequence[IndexedChunk], limit: int
) -> ChunkPage:
    """A page from up to ``limit + 1`` chunks in index order: the first ``limit``, and a
    cursor when there was one more (a store reads one extra to know)."""
    page = tuple(chunks[:limit])
    more = len(chunks) > limit and bool(page)
    return ChunkPage(page, encode_chunk_cursor(scope, path, page[-1].chunk_index) if more else None)
