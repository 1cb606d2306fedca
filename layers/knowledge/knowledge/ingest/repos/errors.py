"""The one error a repository sync raises: ``RepoSyncError``, with a ``kind`` to check.

Every transport (``fetch`` over HTTPS, ``ssh``), the host policy (``network``) and the
credential lookup (``credentials``) raise it with a message of our own, never a library's
(which can hold a URL or a server's text).
"""

from __future__ import annotations

from knowledge.core.errors import KnowledgeError

__all__ = ["RepoSyncError"]


class RepoSyncError(KnowledgeError):
    """A sync that could not run; ``kind`` names what to check (``unreachable``,
    ``credentials``, ``branch``, ``bounds``, ``time``, ``protocol``, ``credential``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
