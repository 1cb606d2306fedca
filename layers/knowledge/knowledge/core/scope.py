"""The tenant scope: every chunk carries one, every search filters on one.

A scope is ``(agent, context)``. In S3 and in a local bucket folder it is the key
prefix ``<agent>/<context>/<path>``. Each segment is 1-64 characters of
``[A-Za-z0-9._-]`` and is neither ``.`` nor ``..``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from knowledge.core.errors import InvalidScopeError, ValidationError

__all__ = ["KnowledgeScope", "ScopedKey", "parse_object_key", "validate_segment"]

_SEGMENT = re.compile(r"[A-Za-z0-9._-]{1,64}")


def validate_segment(field: str, value: object) -> str:
    """Return ``value`` if it is a valid scope segment, else raise ``InvalidScopeError``."""
    if not isinstance(value, str):
        raise InvalidScopeError(field, f"must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidScopeError(field, "must not be empty")
    if value in (".", ".."):
        raise InvalidScopeError(field, f"'{value}' is not allowed")
    if not _SEGMENT.fullmatch(value):
        shown = value if len(value) <= 80 else value[:77] + "..."
        raise InvalidScopeError(
            field, f"'{shown}' must be 1-64 characters of letters, digits, '.', '_' or '-'"
        )
    return value


@dataclass(frozen=True, slots=True)
class KnowledgeScope:
    """Owner of indexed documents: an agent and one of its contexts."""

    agent: str
    context: str

    def __post_init__(self) -> None:
        validate_segment("agent", self.agent)
        validate_segment("context", self.context)

    @property
    def key(self) -> str:
        """``agent/context``: the S3 prefix (without the trailing slash)."""
        return f"{self.agent}/{self.context}"

    def __str__(self) -> str:
        return self.key


@dataclass(frozen=True, slots=True)
class ScopedKey:
    """An object key split into its scope and the document path inside the scope."""

    scope: KnowledgeScope
    path: str


def parse_object_key(key: str) -> ScopedKey:
    """Split ``<agent>/<context>/<path>`` into scope and path.

    Raises ``ValidationError`` (field ``key``) when the key has no document path,
    and ``InvalidScopeError`` when a segment is not a valid scope name. The path
    must not contain empty, ``.`` or ``..`` segments.
    """
    parts = key.split("/", 2)
    if len(parts) < 3 or not parts[2]:
        raise ValidationError("key", f"'{key}' is not of the form <agent>/<context>/<path>")
    agent, context, path = parts
    scope = KnowledgeScope(agent, context)
    segments = path.split("/")
    if any(seg in ("", ".", "..") for seg in segments):
        raise ValidationError("key", f"'{key}' has an empty, '.' or '..' path segment")
    return ScopedKey(scope, path)
