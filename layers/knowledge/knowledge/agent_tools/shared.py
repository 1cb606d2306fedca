"""The shared library: read-only scopes ``_shared/<context>`` the operator grants to agents.

The operator drops the library's documents under the reserved owner ``_shared``
(``SHARED_AGENT``) in the bucket (or ``kb serve``'s folder); they are indexed like any
scope, and every record of them carries origin ``shared`` (``knowledge.ingest.pipeline``), so
their hits say so and a ``filter`` on ``origin`` selects or leaves them out. The API never
writes them (``knowledge.ingest.api_writes``).

Grants are server-side configuration only (``SharedGrants``: the template's
``SharedLibraryGrants`` -> ``KB_SHARED_GRANTS``, ``kb serve --shared-grant``), never read
from a request: ``ops-bot=playbooks,policies; support-bot=playbooks``. A granted agent's
searches (one context, or agent-wide) include its granted libraries unless the request
says ``"include_shared": false``; an agent without a grant never sees them, whatever it
sends (``"include_shared": true`` is then a 400).

How a search covers them (``SharedLibraryStore``): one store query over the agent's scope
and its granted library scopes (``SearchQuery.shared_libraries``, ``knowledge.core.scope_set``:
one scope filter, each side with its own term statistics, normalised once, every page a
slice of one order). The set is built here, from the grant, never from the request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from knowledge.core.errors import ConfigurationError, InvalidScopeError, ValidationError
from knowledge.core.model import SearchMode, SearchQuery, SearchResult
from knowledge.core.scope import KnowledgeScope, validate_segment
from knowledge.core.scope_set import SHARED_AGENT, SHARED_CONTEXT_KEY
from knowledge.embedding.base import EmbeddingClient
from knowledge.stores.protocol import KnowledgeStore

__all__ = ["SHARED_AGENT", "SHARED_CONTEXT_KEY", "SharedGrants", "SharedLibraryStore"]

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
    """A store's search widened to granted library scopes, in one store query (module
    docstring); only ``search``, ``name``, ``default_mode`` and ``embedder`` (what the
    search route, a reranking stage and ``ranking.vector_side.store_vector_side`` use)."""

    def __init__(self, store: KnowledgeStore, libraries: Sequence[KnowledgeScope]) -> None:
        self._store = store
        self._libraries = tuple(libraries)

    @property
    def name(self) -> str:
        return self._store.name

    @property
    def default_mode(self) -> SearchMode:
        return self._store.default_mode

    @property
    def embedder(self) -> EmbeddingClient | None:
        return self._store.embedder

    @property
    def libraries(self) -> tuple[KnowledgeScope, ...]:
        """The granted library scopes."""
        return self._libraries

    def search(
        self, scope: KnowledgeScope, query: SearchQuery, *, include_shared: bool | None = None
    ) -> list[SearchResult]:
        """The store's search of ``scope`` and the granted libraries (``include_shared``
        false: the scope alone; true without a library: a ``ValidationError``)."""
        if include_shared is not None and not isinstance(include_shared, bool):
            raise ValidationError("include_shared", "must be true or false")
        if include_shared is True and not self._libraries:
            raise ValidationError("include_shared", "no shared library is granted to this agent")
        libraries = () if include_shared is False else self._libraries
        return self._store.search(scope, replace(query, shared_libraries=libraries))
