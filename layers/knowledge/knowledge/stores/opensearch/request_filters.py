"""The filter clauses every OpenSearch request carries: scope, file patterns, metadata.

Every search carries the scope as ``term`` filters (agent and context; agent only with
``cross_context``) plus the query's file patterns, metadata and ``filter``
(``filter_query``); ``query_filters`` is that list, which the vector search carries
*inside* its ``knn`` clause, so the engine filters while it walks the HNSW graph and a
small scope still gets ``k`` neighbours (lucene/faiss efficient filtering). Writes use
the same scope and document filters (``scope_query``, ``document_filters``). Pure
functions, no I/O.

File patterns follow ``knowledge.core.path_filters.matches_file_patterns``: a glob matches the whole
path or the base name, ``*`` also crosses ``/``, ``**/`` is zero or more folders (each
spelling of ``knowledge.core.path_filters.expand_globstars``), case-sensitive. A glob becomes a
``wildcard`` query (``*``/``?`` only) or a ``regexp`` query (with ``[...]`` classes) on
``document_path`` and on ``document_name``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from knowledge.core.filter_language import FilterNode
from knowledge.core.path_filters import expand_globstars
from knowledge.core.scope import KnowledgeScope
from knowledge.core.scope_set import searched_scopes
from knowledge.stores.opensearch.filter_query import filter_query
from knowledge.stores.opensearch.mapping import (
    AGENT,
    CONTEXT,
    DOCUMENT_NAME,
    DOCUMENT_PATH,
    METADATA,
)
from knowledge.stores.opensearch.metadata_pairs import METADATA_TERMS, text_term

__all__ = [
    "MATCH_NOTHING",
    "document_filters",
    "file_pattern_filter",
    "glob_to_regexp",
    "glob_to_wildcard",
    "metadata_filters",
    "query_filters",
    "scope_filters",
    "scope_query",
    "searched_scope_filters",
]


MATCH_NOTHING: dict[str, Any] = {"bool": {"must_not": [{"match_all": {}}]}}
"""A filter no document passes (file patterns that cannot match anything)."""


def scope_filters(scope: KnowledgeScope, *, cross_context: bool = False) -> list[dict[str, Any]]:
    """``term`` filters for the scope: agent and context, or agent only (never neither)."""
    filters: list[dict[str, Any]] = [{"term": {AGENT: scope.agent}}]
    if not cross_context:
        filters.append({"term": {CONTEXT: scope.context}})
    return filters


def searched_scope_filters(
    scope: KnowledgeScope,
    *,
    cross_context: bool = False,
    libraries: Sequence[KnowledgeScope] = (),
) -> list[dict[str, Any]]:
    """The scope filters of a search: ``scope_filters`` alone, or with shared libraries
    (``knowledge.core.scope_set``) one ``bool`` ``should`` of the caller's scope and each
    library owner's contexts (``terms``), at least one of which must hold."""
    pairs = searched_scopes(scope, cross_context, tuple(libraries))
    if len(pairs) == 1:
        return scope_filters(scope, cross_context=cross_context)
    should: list[dict[str, Any]] = [
        {"bool": {"filter": scope_filters(scope, cross_context=cross_context)}}
    ]
    owners: dict[str, list[str]] = {}
    for agent, context in pairs[1:]:
        assert context is not None  # a library is one exact scope
        owners.setdefault(agent, []).append(context)
    for agent, contexts in owners.items():
        should.append(
            {"bool": {"filter": [{"term": {AGENT: agent}}, {"terms": {CONTEXT: contexts}}]}}
        )
    return [{"bool": {"should": should, "minimum_should_match": 1}}]


def glob_to_wildcard(pattern: str) -> str | None:
    """The ``wildcard`` query value for a glob of only ``*``/``?``/literals, else None.

    ``*`` and ``?`` mean the same in both; a literal backslash is escaped.
    """
    parts = _glob_parts(pattern)
    if parts is None or any(kind == "class" for kind, _ in parts):
        return None
    out: list[str] = []
    for kind, text in parts:
        if kind == "star":
            out.append("*")
        elif kind == "any":
            out.append("?")
        else:
            out.append(text.replace("\\", "\\\\").replace("*", "\\*").replace("?", "\\?"))
    return "".join(out)


def glob_to_regexp(pattern: str) -> str | None:
    """The Lucene ``regexp`` for a glob (``fnmatch`` syntax), or None if it matches nothing.

    ``[abc]``, ``[a-z]`` and ``[!abc]`` become Lucene character classes; every other
    non-alphanumeric character is escaped, so regexp operators are literal.
    """
    parts = _glob_parts(pattern)
    if parts is None:
        return None
    out: list[str] = []
    for kind, text in parts:
        if kind == "star":
            out.append(".*")
        elif kind == "any":
            out.append(".")
        elif kind == "class":
            out.append(text)
        else:
            out.append("".join(ch if ch.isalnum() else "\\" + ch for ch in text))
    return "".join(out)


def _class_char(ch: str) -> str:
    return "\\" + ch if ch in "\\]^-[" else ch


def _glob_parts(pattern: str) -> list[tuple[str, str]] | None:
    """Split a glob like ``fnmatch.translate`` does: star, any, literal, class.

    Returns None when the glob can never match (an empty character class).
    """
    parts: list[tuple[str, str]] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            if not parts or parts[-1][0] != "star":
                parts.append(("star", ""))
        elif c == "?":
            parts.append(("any", ""))
        elif c == "[":
            j = i
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                parts.append(("literal", "["))
                continue
            stuff = pattern[i:j]
            i = j + 1
            negate = stuff.startswith("!")
            if negate:
                stuff = stuff[1:]
            items: list[str] = []
            k = 0
            while k < len(stuff):
                if k + 2 < len(stuff) and stuff[k + 1] == "-":
                    lo, hi = stuff[k], stuff[k + 2]
                    if lo <= hi:
                        items.append(f"{_class_char(lo)}-{_class_char(hi)}")
                    k += 3
                else:
                    items.append(_class_char(stuff[k]))
                    k += 1
            if not items:
                if not negate:
                    return None
                parts.append(("any", ""))
            else:
                parts.append(("class", "[" + ("^" if negate else "") + "".join(items) + "]"))
        elif parts and parts[-1][0] == "literal":
            parts[-1] = ("literal", parts[-1][1] + c)
        else:
            parts.append(("literal", c))
    return parts


def _pattern_clauses(pattern: str) -> list[dict[str, Any]]:
    parts = _glob_parts(pattern)
    if parts is not None and all(kind == "literal" for kind, _ in parts):
        # No glob character: the pattern names a path or a base name. A ``term`` is the
        # same match, and a domain that refuses wildcard queries (expensive) accepts it.
        return [{"term": {DOCUMENT_PATH: pattern}}, {"term": {DOCUMENT_NAME: pattern}}]
    wildcard = glob_to_wildcard(pattern)
    if wildcard is not None:
        return [
            {"wildcard": {DOCUMENT_PATH: {"value": wildcard}}},
            {"wildcard": {DOCUMENT_NAME: {"value": wildcard}}},
        ]
    regexp = glob_to_regexp(pattern)
    if regexp is None:
        return []
    return [
        {"regexp": {DOCUMENT_PATH: {"value": regexp, "flags": "NONE"}}},
        {"regexp": {DOCUMENT_NAME: {"value": regexp, "flags": "NONE"}}},
    ]


def file_pattern_filter(patterns: Sequence[str]) -> dict[str, Any] | None:
    """One filter for the globs (any may match, on the path or the base name); None if none."""
    if not patterns:
        return None
    should = [
        clause
        for pattern in patterns
        for spelling in expand_globstars(pattern)
        for clause in _pattern_clauses(spelling)
    ]
    if not should:
        return MATCH_NOTHING
    return {"bool": {"should": should, "minimum_should_match": 1}}


def metadata_filters(metadata: Mapping[str, str], *, pairs: bool = False) -> list[dict[str, Any]]:
    """Exact-match ``term`` filters, one per key (sorted by key, for stable bodies): on the
    key's ``metadata_terms`` (``pairs``: schema 4, ``metadata_pairs``), else on
    ``metadata.<key>``.

    Metadata scalars are indexed as keywords (numbers and booleans by their JSON
    spelling) and a list matches if it contains the value, as
    ``knowledge.core.path_filters.matches_metadata`` defines.
    """
    if pairs:
        return [
            {"term": {METADATA_TERMS: text_term(key, metadata[key])}} for key in sorted(metadata)
        ]
    return [{"term": {f"{METADATA}.{key}": metadata[key]}} for key in sorted(metadata)]


def query_filters(
    scope: KnowledgeScope,
    *,
    cross_context: bool = False,
    file_patterns: Sequence[str] = (),
    metadata: Mapping[str, str] | None = None,
    search_filter: FilterNode | None = None,
    metadata_pairs: bool = False,
    libraries: Sequence[KnowledgeScope] = (),
) -> list[dict[str, Any]]:
    """Every filter of a search: scope (with its shared ``libraries``:
    ``searched_scope_filters``), then file patterns, then metadata, then the ``filter``
    (``filter_query``); all must hold. ``metadata_pairs``: the index holds metadata as
    key/value terms (schema 4)."""
    filters = searched_scope_filters(scope, cross_context=cross_context, libraries=libraries)
    patterns = file_pattern_filter(file_patterns)
    if patterns is not None:
        filters.append(patterns)
    filters.extend(metadata_filters(metadata or {}, pairs=metadata_pairs))
    if search_filter is not None:
        filters.append(filter_query(search_filter, pairs=metadata_pairs))
    return filters


def scope_query(scope: KnowledgeScope) -> dict[str, Any]:
    """Every chunk of exactly this scope (for ``_delete_by_query`` and counts)."""
    return {"bool": {"filter": scope_filters(scope)}}


def document_filters(scope: KnowledgeScope, path: str) -> list[dict[str, Any]]:
    """Every chunk of one document of the scope."""
    return [*scope_filters(scope), {"term": {DOCUMENT_PATH: path}}]
