"""The scopes one search covers: the caller's own, and the shared libraries granted to it.

A search is always inside the caller's scope (``agent/context``, or every context of the
agent with ``cross_context``). A granted agent's search also covers its shared libraries,
``_shared/<context>`` (``knowledge.agent_tools.shared``), in the *same* store query: every store
turns the set into one filter, "the caller's scope OR one of these library scopes"
(memory: the snapshots it reads; embedded: one SQL condition; OpenSearch: a ``bool``
``should`` of scope ``term`` filters inside the mandatory filter, also inside the
``knn`` clause), ranks the candidates of every scope together, normalises them once and
cuts every page from that one order.

Only the server builds the set, from the operator's grant (``SearchQuery.shared_libraries``
is never read from a request body; the API and ``KnowledgeClient`` refuse it): a caller
can only narrow it (``include_shared: false``). A library scope is always one of the
reserved owner ``_shared`` (``check_libraries``), so no set ever names another agent's
scope, whoever builds it.

**Term statistics.** Each side keeps the statistics it has without the other: the
caller's chunks are scored over the caller's corpus exactly as without the library, and
each library's chunks over that library's own corpus; then all are normalised once,
together. No agent's documents, and no library the caller is not granted, enter the
statistics of what the caller is scored over (``statistics_owner``):

- memory store: the caller's searched snapshots, and each granted library snapshot;
- embedded store, ``isolation="agent"``: the caller's FTS table and one table per
  granted library (``_shared/<context>``'s own);
- OpenSearch with ``index_per_agent``: the caller's index and one index per granted
  library, in one request over all of them (each index keeps its own statistics; the
  list is explicit, never a wildcard).

With shared statistics (the embedded store's default ``isolation="shared"``, OpenSearch's
one shared index) every scope is scored over the whole table or index, as before: that
mode's documented side channel, nothing new.

Hits of a library carry ``metadata.shared_library`` (``SHARED_CONTEXT_KEY``: the library
scope, ``_shared/<context>``) besides their origin ``shared``.

**Which scope a hit came from** (``hit_scope``): the library it names; else, for a search
of one context, that context; else (``cross_context``) the scope its ``source_key`` says,
``<agent>/<context>/<path>``, which every indexed chunk carries
(``knowledge.ingest.document_writer``), so two contexts' ``x.md`` are told apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from knowledge.core.errors import InvalidScopeError, ValidationError
from knowledge.core.scope import KnowledgeScope

__all__ = [
    "MAX_SHARED_LIBRARIES",
    "SHARED_AGENT",
    "SHARED_CONTEXT_KEY",
    "check_libraries",
    "hit_scope",
    "library_hit",
    "marked",
    "searched_scopes",
    "statistics_owner",
]

SHARED_AGENT: Final = "_shared"
"""The reserved owner of the shared library's scopes (never an agent:
``knowledge.agent_tools.shared``)."""

SHARED_CONTEXT_KEY: Final = "shared_library"
"""Metadata key of a shared hit: the library scope it came from (``_shared/<context>``)."""

MAX_SHARED_LIBRARIES: Final = 32
"""The most library scopes one search covers (each is a clause of the store's filter)."""

_FIELD: Final = "shared_libraries"


def check_libraries(value: object) -> tuple[KnowledgeScope, ...]:
    """``value`` as a tuple of distinct library scopes (order kept); ``ValidationError``
    naming ``shared_libraries`` for anything that is not a ``_shared`` scope."""
    if isinstance(value, KnowledgeScope | str) or not isinstance(value, tuple | list):
        raise ValidationError(_FIELD, "must be a sequence of shared library scopes")
    libraries: dict[KnowledgeScope, None] = {}
    for scope in value:
        if not isinstance(scope, KnowledgeScope):
            raise ValidationError(_FIELD, "each item must be a KnowledgeScope")
        if scope.agent != SHARED_AGENT:
            raise ValidationError(
                _FIELD, f"'{scope}' is not a shared library (its owner must be {SHARED_AGENT})"
            )
        libraries[scope] = None
    if len(libraries) > MAX_SHARED_LIBRARIES:
        raise ValidationError(
            _FIELD, f"must name at most {MAX_SHARED_LIBRARIES} libraries, got {len(libraries)}"
        )
    return tuple(libraries)


def statistics_owner(agent: str, context: str) -> str:
    """Whose term statistics the chunks of ``agent/context`` are scored over where a store
    isolates them (an FTS table, an index): the agent's (every context of an agent shares
    them, as its ``cross_context`` searches do); a shared library's own, ``_shared/<context>``,
    so that no library is scored over (or can be probed through) another one. Never a
    valid agent name (an agent has no ``/``)."""
    return f"{agent}/{context}" if agent == SHARED_AGENT else agent


def searched_scopes(
    scope: KnowledgeScope, cross_context: bool, libraries: tuple[KnowledgeScope, ...]
) -> list[tuple[str, str | None]]:
    """The (agent, context) pairs a search covers, the caller's first; context ``None``:
    every context of that agent (the caller's own with ``cross_context``). A library
    already inside the caller's own scope (the caller is ``_shared`` itself) is not
    repeated."""
    pairs: list[tuple[str, str | None]] = [(scope.agent, None if cross_context else scope.context)]
    for library in libraries:
        if library.agent == scope.agent and (cross_context or library.context == scope.context):
            continue
        pairs.append((library.agent, library.context))
    return pairs


def library_hit(
    scope: KnowledgeScope, libraries: tuple[KnowledgeScope, ...], agent: str, context: str
) -> KnowledgeScope | None:
    """The library a hit of ``agent/context`` came from, when the search of ``scope`` covered
    it as a library (not as the caller's own scope); else ``None``."""
    if agent != SHARED_AGENT or agent == scope.agent:
        return None
    for library in libraries:
        if library.context == context:
            return library
    return None


def marked(metadata: Mapping[str, Any], library: KnowledgeScope | None) -> Mapping[str, Any]:
    """A hit's metadata with its library named (``SHARED_CONTEXT_KEY``); as it is when the
    hit is the caller's own."""
    if library is None:
        return metadata
    return {**metadata, SHARED_CONTEXT_KEY: library.key}


def hit_scope(
    scope: KnowledgeScope, cross_context: bool, document_path: str, metadata: Mapping[str, Any]
) -> KnowledgeScope | None:
    """The scope a hit of a search of ``scope`` came from (module docstring), ``None`` when
    it cannot be told: a hit of a search across contexts whose ``source_key`` is not
    ``<agent>/<context>/<path>`` of the caller's agent (a chunk indexed before every chunk
    carried one; re-indexing the scope gives it one). Never another agent's scope but a
    shared library the hit names."""
    library = metadata.get(SHARED_CONTEXT_KEY)
    if isinstance(library, str) and library:
        owner, _, context = library.partition("/")
        return _scope_or_none(owner, context)
    if not cross_context:
        return scope
    key = metadata.get("source_key")
    suffix = "/" + document_path
    if not isinstance(key, str) or not key.endswith(suffix):
        return None
    agent, slash, context = key[: -len(suffix)].partition("/")
    if not slash or agent != scope.agent or "/" in context:
        return None
    return _scope_or_none(agent, context)


def _scope_or_none(agent: str, context: str) -> KnowledgeScope | None:
    try:
        return KnowledgeScope(agent, context)
    except InvalidScopeError:
        return None
