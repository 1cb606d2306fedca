"""Who may call which agent's routes on AWS: the search function's tenancy check.

Authentication is API Gateway's; this module decides authorization per agent, in one
of two modes (``API_AUTH``, set by ``template.yaml``'s ``ApiAuthMode``):

``iam``
    API Gateway's IAM authorizer already checked ``execute-api:Invoke`` on the exact
    method and literal path (``.../POST/v1/agents/<agent>/...``), which is where the
    per-agent grant lives (docs/deploy.md: the ``AgentSearchPolicy`` managed policy with
    ``${aws:PrincipalTag/kb-agent}``; writes are their own routes, ``AgentWritePolicy``).
    Nothing is left to check here.
``jwt``
    API Gateway's JWT authorizer checked the token's signature, issuer, audience and
    expiry (and, on the reindex route, its OAuth scope). The token's ``agents`` claim
    (``JWT_AGENTS_CLAIM``) must name the agent of the path, or the request is a 403;
    reindex also needs ``JWT_REINDEX_SCOPE`` among the token's scopes, and a write
    (``Operation.WRITE``: PUT/DELETE a document, an upload) needs the agent in the
    write claim (``JWT_AGENTS_WRITE_CLAIM``, default ``agents_write``) too. A request with
    no JWT claims at all is refused (fail closed: a route left without the authorizer
    must not become public).

A route that offers more than its own operation (the remote MCP endpoint: one route,
whose tools search, read the status and documents, and reindex) asks ``grants`` for each
extra operation. The claims answer it in ``jwt`` mode exactly as they answer ``check`` on
that operation's own route. In ``iam`` mode only the route's literal path was granted:
search, status and documents are granted together (``AgentSearchPolicy``), so a route of
one of them grants the others; whether the caller also holds reindex or writes
(``AgentReindexPolicy``, ``AgentWritePolicy``, on their own paths) cannot be seen from a
request that did not take those paths, so they are never granted that way (fail closed).

The claim may be a JSON array, or a string of names separated by spaces or commas
(API Gateway hands array claims to the function as ``"[a b]"``; Cognito custom
attributes are strings): scope names never contain spaces, commas or brackets, so
every form reads the same. No wildcard: a token lists its agents.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from knowledge.core.errors import AccessDeniedError, ConfigurationError
from knowledge.service.routes import Operation  # what each route needs (the route table)

__all__ = [
    "API_AUTH_MODES",
    "DEFAULT_AGENTS_CLAIM",
    "DEFAULT_AGENTS_WRITE_CLAIM",
    "READ_OPERATIONS",
    "AccessPolicy",
    "Operation",
    "agents_in_claim",
]

API_AUTH_MODES = ("iam", "jwt")
DEFAULT_AGENTS_CLAIM = "agents"
DEFAULT_AGENTS_WRITE_CLAIM = "agents_write"
_SEPARATORS = re.compile(r"[\s,\[\]\"']+")
READ_OPERATIONS = frozenset({Operation.SEARCH, Operation.STATUS, Operation.DOCUMENTS})
"""Granted together: one IAM policy (``AgentSearchPolicy``), one JWT claim (``agents``)."""


def agents_in_claim(value: object) -> frozenset[str]:
    """The agent names an ``agents`` claim grants (module docstring); empty if none."""
    if value is None:
        return frozenset()
    if isinstance(value, list | tuple):
        return frozenset(str(item) for item in value if isinstance(item, str) and item)
    if isinstance(value, str):
        return frozenset(name for name in _SEPARATORS.split(value) if name)
    return frozenset()


def _scopes(authorizer: Mapping[str, Any]) -> frozenset[str]:
    jwt = authorizer.get("jwt") or {}
    scopes = jwt.get("scopes")
    names: set[str] = set()
    if isinstance(scopes, list):
        names.update(s for s in scopes if isinstance(s, str))
    claims = jwt.get("claims") or {}
    for claim in ("scope", "scp"):
        names.update(agents_in_claim(claims.get(claim)))
    return frozenset(names)


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """The function's authorization mode and, for ``jwt``, which claim and scope to read."""

    mode: str = "iam"
    agents_claim: str = DEFAULT_AGENTS_CLAIM
    reindex_scope: str | None = None
    agents_write_claim: str = DEFAULT_AGENTS_WRITE_CLAIM

    def __post_init__(self) -> None:
        if self.mode not in API_AUTH_MODES:
            raise ConfigurationError(
                f"API_AUTH: {self.mode!r} is not one of {', '.join(API_AUTH_MODES)}"
            )
        if not self.agents_claim:
            raise ConfigurationError("JWT_AGENTS_CLAIM: must name a claim")
        if not self.agents_write_claim or self.agents_write_claim == self.agents_claim:
            raise ConfigurationError(
                "JWT_AGENTS_WRITE_CLAIM: must name a claim other than JWT_AGENTS_CLAIM"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AccessPolicy:
        """``API_AUTH`` (default ``iam``), ``JWT_AGENTS_CLAIM``, ``JWT_REINDEX_SCOPE``."""
        source = os.environ if env is None else env

        def get(name: str) -> str | None:
            value = source.get(name, "").strip()
            return value or None

        return cls(
            mode=(get("API_AUTH") or "iam").lower(),
            agents_claim=get("JWT_AGENTS_CLAIM") or DEFAULT_AGENTS_CLAIM,
            reindex_scope=get("JWT_REINDEX_SCOPE"),
            agents_write_claim=get("JWT_AGENTS_WRITE_CLAIM") or DEFAULT_AGENTS_WRITE_CLAIM,
        )

    def check(
        self, request_context: Mapping[str, Any] | None, agent: str, operation: Operation
    ) -> None:
        """Allow the request or raise ``AccessDeniedError``.

        ``request_context`` is the HTTP API (v2) event's ``requestContext``; ``agent`` is
        the path's agent segment as sent (already checked by ``knowledge.service.api``).
        """
        if self.mode == "iam":
            return
        authorizer = (request_context or {}).get("authorizer") or {}
        claims = (authorizer.get("jwt") or {}).get("claims")
        if not isinstance(claims, Mapping):
            raise AccessDeniedError(
                "authorization", "the request carries no verified token (JWT claims)"
            )
        if agent not in agents_in_claim(claims.get(self.agents_claim)):
            raise AccessDeniedError(
                "agent", f"the token's '{self.agents_claim}' claim does not grant agent '{agent}'"
            )
        if operation is Operation.WRITE and agent not in agents_in_claim(
            claims.get(self.agents_write_claim)
        ):
            raise AccessDeniedError(
                "operation",
                f"writing needs agent '{agent}' in the token's '{self.agents_write_claim}' claim",
            )
        if operation is Operation.REINDEX and (
            self.reindex_scope is None or self.reindex_scope not in _scopes(authorizer)
        ):
            needed = (
                f"the token scope '{self.reindex_scope}'"
                if self.reindex_scope
                else "a token scope, and none is configured (JWT_REINDEX_SCOPE)"
            )
            raise AccessDeniedError("operation", f"reindex needs {needed}")

    def grants(
        self,
        request_context: Mapping[str, Any] | None,
        agent: str,
        operation: Operation,
        *,
        route: Operation,
    ) -> bool:
        """Whether the caller of a route that needs ``route`` (and passed ``check`` for it)
        may also do ``operation`` on ``agent`` (module docstring): the claims decide in
        ``jwt`` mode; in ``iam`` mode only what the route's own grant covers."""
        if self.mode == "iam":
            return operation is route or {operation, route} <= READ_OPERATIONS
        try:
            self.check(request_context, agent, operation)
        except AccessDeniedError:
            return False
        return True
