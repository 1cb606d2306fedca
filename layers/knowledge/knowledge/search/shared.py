"""The shared library: read-only scopes ``_shared/<context>`` the operator grants to agents.

The operator drops the library's documents under the reserved owner ``_shared``
(``SHARED_AGENT``) in the bucket (or ``kb serve``'s folder); they are indexed like any
scope, and every record of them carries origin ``shared`` (``knowledge.ingest.pipeline``), so
their hits say so and a ``filter`` on ``origin`` selects or leaves them out. The API never
writes them (``knowledge.ingest.writes``).

Grants are server-side configuration only (``SharedGrants``: the template's
``SharedLibraryGrants`` -> ``KB_SHARED_GRANTS``, ``kb serve --shared-grant``), never read
from a request: ``ops-bot=playbooks,policies; support-bot=playbooks``. A granted agent's
searches (one context, or agent-wide) include its granted libraries unless the request
says ``"include_shared": false``; an agent without a grant never sees them, whatever it
sends (``"include_shared": true`` is then a 400).

How a search covers them (``SharedLibraryStore``): the agent's own search and one search
per granted library scope, each through the store's ordinary scope filter and with its
own term statistics (the library's corpus never mixes into an agent's, nor one agent's
into another's), merged by score; paging (``offset``) pages through the merged list.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from knowledge.core.errors import ConfigurationError, InvalidScopeError
from knowledge.core.model import SearchMode, SearchQuery, SearchResult
from knowledge.core.scope import KnowledgeScope, validate_segment
from knowledge.stores.protocol import KnowledgeStore

__all__ = ["SHARED_AGENT", "SHARED_CONTEXT_KEY", "SharedGrants", "SharedLibraryStore"]

SHARED_AGENT = "_shared"
SHARED_CONTEXT_KEY = "shared_library"
"""Metadata key of a shared hit: the library scope it came from (``_shared/<context>``)."""
_AGENTS = re.compile(r"[;\s]+")


@dataclass(frozen=True, slots=True)
class SharedGrants:
    """Which agents may search which shared libraries."""

    grants: Mapping[str, tuple[str, ...]]

    @classmethod
    def parse(cls, text: str | Sequence[str] | None) -> SharedGrants:
        """``"agent=ctx1,ctx2; other=ctx1"`` (or a list of ``agent=ctx,...`` items);
        ``ConfigurationError`` naming the bad item."""
        items = _AGENTS.split(text) if isinstance(text, str) else list(text or ())
        grants: dict[str, tuple[str, ...]] = {}
        for item in (i.strip() for i in items):
            if not item:
                continue
            agent, sep, contexts = item.partition("=")
            try:
                if not sep:
                    raise InvalidScopeError("grant", f"'{item}' is not AGENT=CONTEXT[,CONTEXT]")
                validate_segment("agent", agent)
                if agent == SHARED_AGENT:
                    raise InvalidScopeError("agent", f"'{SHARED_AGENT}' cannot be granted")
                names = tuple(validate_segment("context", c) for c in contexts.split(",") if c)
                if not names:
                    raise InvalidScopeError("context", f"'{item}' names no library")
            except InvalidScopeError as exc:
                raise ConfigurationError(f"shared library grant '{item}': {exc}") from None
            grants[agent] = tuple(dict.fromkeys((*grants.get(agent, ()), *names)))
        return cls(grants)

    def scopes_of(self, agent: str) -> tuple[KnowledgeScope, ...]:
        """The library scopes granted to ``agent`` (empty: none)."""
        return tuple(KnowledgeScope(SHARED_AGENT, c) for c in self.grants.get(agent, ()))


class SharedLibraryStore:
    """A store's search widened to granted library scopes (module docstring); only
    ``search``, ``name`` and ``default_mode`` (what the search route and a reranking
    stage use)."""

    def __init__(self, store: KnowledgeStore, libraries: Sequence[KnowledgeScope]) -> None:
        self._store = store
        self._libraries = tuple(libraries)

    @property
    def name(self) -> str:
        return self._store.name

    @property
    def default_mode(self) -> SearchMode:
        return self._store.default_mode

    def search(self, scope: KnowledgeScope, query: SearchQuery) -> list[SearchResult]:
        wanted = query.offset + query.max_results
        each = replace(query, offset=0, max_results=wanted)
        ranked: list[tuple[float, int, int, SearchResult]] = []
        for rank, hit in enumerate(self._store.search(scope, each)):
            ranked.append((hit.score, 0, rank, hit))
        library_query = replace(each, cross_context=False)
        for order, library in enumerate(self._libraries, start=1):
            for rank, hit in enumerate(self._store.search(library, library_query)):
                marked = replace(hit, metadata={**hit.metadata, SHARED_CONTEXT_KEY: library.key})
                ranked.append((hit.score, order, rank, marked))
        ranked.sort(key=lambda item: (-item[0], item[1], item[2]))
        return [hit for *_, hit in ranked[query.offset : wanted]]
