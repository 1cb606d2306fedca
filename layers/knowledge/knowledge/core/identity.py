"""Stable identities: a document is ``(agent, context, path)``; chunks are ``<doc id>:<index>``."""

from __future__ import annotations

import hashlib

from knowledge.core.scope import KnowledgeScope

__all__ = ["chunk_id", "content_hash", "document_id", "embedding_key", "is_newer_version"]


def document_id(scope: KnowledgeScope, path: str) -> str:
    """A stable hash of the (agent, context, path) triple; safe as an OpenSearch ``_id`` prefix."""
    raw = "\x1f".join((scope.agent, scope.context, path)).encode("utf-8")
    return hashlib.sha256(raw).hexdigest()[:40]


def chunk_id(doc_id: str, chunk_index: int) -> str:
    return f"{doc_id}:{chunk_index}"


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def embedding_key(model: str, dimensions: int, text: str) -> str:
    """What a stored vector is reused by: the content hash of the exact text that was
    embedded, together with the embedder's identity (name and dimension). The same text
    under another embedder has another key, so its vector is never taken for this one."""
    return content_hash("\x1f".join((model, str(dimensions), text)).encode("utf-8"))


def is_newer_version(candidate: str | None, current: str | None) -> bool:
    """True if ``candidate`` should replace ``current``.

    Versions are S3 ``sequencer`` values (hex strings; compared after right-padding
    the shorter with zeros, as S3 documents) or any other monotonically growing
    hex/decimal string. Unknown versions (``None``) never block a write.
    """
    if candidate is None or current is None:
        return True
    width = max(len(candidate), len(current))
    return candidate.ljust(width, "0").upper() >= current.ljust(width, "0").upper()
