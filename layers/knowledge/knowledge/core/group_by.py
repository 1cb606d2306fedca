"""What a search may be grouped by (``SearchQuery.group_by``; ``knowledge.ranking.grouping``
pages the results). Re-exported by ``knowledge.core.model``."""

from __future__ import annotations

from knowledge.core.errors import ValidationError

__all__ = ["GROUP_BY_DOCUMENT", "GROUP_BY_VALUES", "parse_group_by"]

GROUP_BY_DOCUMENT = "document"
GROUP_BY_VALUES = (GROUP_BY_DOCUMENT,)
"""What a search may be grouped by (``None``: one result per chunk;
``knowledge.ranking.grouping``)."""


def parse_group_by(value: object, field_name: str = "group_by") -> str | None:
    """``None`` (not given) or one of ``GROUP_BY_VALUES``; else ``ValidationError``."""
    if value is None:
        return None
    if isinstance(value, str) and value in GROUP_BY_VALUES:
        return value
    shown = repr(value) if len(repr(value)) <= 64 else repr(value)[:61] + "..."
    raise ValidationError(
        field_name, f"{shown} is not one of: {', '.join(GROUP_BY_VALUES)} (or leave it out)"
    )
