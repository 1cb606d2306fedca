"""Title and heading context on the keyword side: how much it weighs next to the text.

Every keyword index holds, next to a chunk's own terms, the terms of its document title
and heading path (``heading_context``, the line ``chunking.embedding_text`` puts in front
of the embedded text), analysed exactly as the content (``text.keyword_terms``; in
OpenSearch in the same ``content_terms`` field as the text's terms, analysis version 5).
A question often names what a heading names ("how do I X" under a heading "X") while the
chunk's text does not repeat it. The returned content is never changed.

``headings_weight`` is the weight of those terms next to the content's (1.0): the FTS5
column weight of ``bm25()`` in the embedded store, a factor on their term counts in the
memory store. OpenSearch holds them in the text's own field, so there any weight above
0 counts them once, as the default 1.0 does everywhere (a field of their own, short,
over-rewarded heading matches: ``docs/korean.md``); 0 leaves them out (of chunks
written from then on, on OpenSearch). The default and its figures: ``docs/ranking.md``
section 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from knowledge.core.errors import ValidationError
from knowledge.ranking.analysis import keyword_terms

__all__ = [
    "DEFAULT_HEADINGS_WEIGHT",
    "check_headings_weight",
    "heading_context",
    "heading_terms",
]

DEFAULT_HEADINGS_WEIGHT: Final = 1.0
"""The weight of title and heading terms next to the content's 1.0 (module docstring)."""


def heading_context(metadata: Mapping[str, Any]) -> str:
    """A chunk's document title and heading path as one line (``"Title > Section > Sub"``)
    from its ``metadata``: what ``chunking.embedding_text`` puts in front of the text, and what
    the keyword indexes hold next to it (``headings``). The title is not repeated when it
    is the first heading; a title or heading without a letter ("3.1.4", "2024-05") says
    nothing and is left out; ``""`` when none is left."""
    title = str(metadata.get("title") or "").strip()
    raw_path = metadata.get("heading_path") or ()
    path = [str(h).strip() for h in raw_path if str(h).strip()]
    parts = path if path and path[0] == title else [p for p in (title, *path) if p]
    return " > ".join(part for part in parts if any(ch.isalpha() for ch in part))


def check_headings_weight(value: object, field: str = "headings_weight") -> float:
    """``value`` as a weight: a finite number >= 0, else ``ValidationError`` naming ``field``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValidationError(field, f"must be a number >= 0, got {value!r}")
    return float(value)


def heading_terms(metadata: Mapping[str, Any]) -> list[str]:
    """The keyword terms of a chunk's title and heading path (from its ``metadata``), in
    order: what the embedded and memory stores index next to its text's terms."""
    return keyword_terms(heading_context(metadata))
