"""Search filters on a chunk's document path and metadata, shared by every store.

The rule every store follows (so that ``min_score`` means the same everywhere):

1. candidates are restricted to the scope (agent and context, or agent only with
   ``cross_context``), then to ``file_patterns``, ``metadata`` and the ``filter``
   (``knowledge.core.filter_language``);
2. only then are scores normalised, over the *filtered* candidates only
   (``knowledge.ranking.fusion``): keyword scores divided by their maximum, hybrid sides
   min-max'ed and the combination divided by its maximum, so the best chunk the caller
   can see scores 1.0; vector scores are absolute (``cosine_to_unit``), not rescaled;
3. then ``min_score``, sort (score descending), ``max_results``.

A backend that filters inside its engine (OpenSearch term filters) gets the same
result by construction; a backend that filters in Python applies these functions
before normalising.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

__all__ = ["expand_globstars", "matches_file_patterns", "matches_metadata"]

_GLOBSTAR = "**/"
_MAX_GLOBSTARS = 4  # 2**4 spellings; a fifth and later "**/" reads as "*" (a superset)


def expand_globstars(pattern: str) -> tuple[str, ...]:
    """The ``fnmatch`` spellings of a glob whose ``**/`` means zero or more folders.

    ``*`` already crosses ``/``, so ``**/`` is either nothing or ``*/``:
    ``**/*.md`` -> ``("*.md", "*/*.md")``, ``docs/**/*.md`` -> ``("docs/*.md",
    "docs/*/*.md")``. A glob without ``**/`` is returned as it is. Every store and every
    listing matches through this (``matches_file_patterns``; the OpenSearch store
    translates each spelling), so they agree on what a pattern selects.
    """
    while _GLOBSTAR + _GLOBSTAR in pattern:
        pattern = pattern.replace(_GLOBSTAR + _GLOBSTAR, _GLOBSTAR)
    pieces = pattern.split(_GLOBSTAR)
    if len(pieces) == 1:
        return (pattern,)
    if len(pieces) - 1 > _MAX_GLOBSTARS:
        pieces = [*pieces[:_MAX_GLOBSTARS], "*".join(pieces[_MAX_GLOBSTARS:])]
    spellings = [pieces[0]]
    for piece in pieces[1:]:
        spellings = [s + between + piece for s in spellings for between in ("", "*/")]
    return tuple(dict.fromkeys(spellings))


def matches_file_patterns(path: str, patterns: Sequence[str]) -> bool:
    """True if ``path`` matches any glob in ``patterns`` (no patterns: every path matches).

    ``path`` is the ``/``-separated path relative to the scope. A pattern matches the
    whole path (``runbooks/*.md``; ``*`` also crosses ``/``) or the base name
    (``*.md``, ``deploy.md``); ``**/`` is zero or more folders (``**/*.md`` also matches
    ``deploy.md``; ``expand_globstars``). Matching is case-sensitive, as S3 keys are.
    """
    if not patterns:
        return True
    base = path.rsplit("/", 1)[-1]
    return any(
        fnmatchcase(path, spelling) or fnmatchcase(base, spelling)
        for pattern in patterns
        for spelling in expand_globstars(pattern)
    )


def _value_matches(value: Any, expected: str) -> bool:
    if isinstance(value, str):
        return value == expected
    if isinstance(value, list | tuple | set | frozenset):
        return any(_value_matches(item, expected) for item in value)
    if isinstance(value, bool):
        # Sidecar booleans are stored as "true"/"false" (JSON spelling), not Python's.
        return ("true" if value else "false") == expected
    if isinstance(value, int | float):
        return str(value) == expected
    return False


def matches_metadata(metadata: Mapping[str, Any], filters: Mapping[str, str]) -> bool:
    """True if every filter key is present in ``metadata`` with an equal value.

    String values must be equal; a list value matches if it contains the value
    (``tags: ["ops", "k8s"]`` matches ``{"tags": "ops"}``); numbers and booleans
    compare by their JSON spelling. No filters: everything matches.
    """
    for key, expected in filters.items():
        if key not in metadata or not _value_matches(metadata[key], expected):
            return False
    return True
