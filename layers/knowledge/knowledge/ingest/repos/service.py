"""The repository routes' logic, shared by the local server and the AWS API.

``RepoService`` answers ``POST|GET .../repos``, ``GET|DELETE .../repos/{name}`` and
``POST .../repos/{name}/sync`` as ``(status, body)``; ``knowledge.service.api`` routes to it and
maps its exceptions as for every route. What a sync does on demand is the front end's:
locally ``sync_now`` syncs and indexes at once (200); on AWS it hands the sync to the
sync function (202).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from knowledge.core.errors import ValidationError
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.repos.registration import (
    CREDENTIAL_ENV,
    CREDENTIAL_FILE,
    RepoRegistration,
    validate_repo_name,
)
from knowledge.ingest.repos.state import RepoRegistry

__all__ = ["RepoService", "SyncNow"]

SyncNow = Callable[[KnowledgeScope, RepoRegistration], tuple[int, dict[str, Any]]]


class RepoService:
    def __init__(
        self,
        registry: RepoRegistry,
        sync_now: SyncNow,
        *,
        credential_kinds: Sequence[str] = (CREDENTIAL_ENV, CREDENTIAL_FILE),
    ) -> None:
        self.registry = registry
        self._sync_now = sync_now
        self._kinds = tuple(credential_kinds)

    def describe(self, scope: KnowledgeScope, registration: RepoRegistration) -> dict[str, Any]:
        return {
            **registration.public(),
            "status": self.registry.state(scope, registration.name).public(),
        }

    def statuses(self, scope: KnowledgeScope) -> list[dict[str, Any]]:
        """Each repository's last sync, for the scope's status."""
        return self.registry.statuses(scope)

    def add(self, scope: KnowledgeScope, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        registration = RepoRegistration.from_request(body, credential_kinds=self._kinds)
        created = self.registry.add(scope, registration)
        return (201 if created else 200), self.describe(scope, registration)

    def list(self, scope: KnowledgeScope) -> tuple[int, dict[str, Any]]:
        repos = [self.describe(scope, r) for r in self.registry.all(scope)]
        return 200, {"repos": repos}

    def get(self, scope: KnowledgeScope, name: str) -> tuple[int, dict[str, Any]]:
        return 200, self.describe(scope, self.registry.get(scope, validate_repo_name(name)))

    def remove(self, scope: KnowledgeScope, name: str) -> tuple[int, dict[str, Any]]:
        deleted = self.registry.remove(scope, validate_repo_name(name))
        return 200, {"name": name, "removed": True, "deleted_files": deleted}

    def sync(
        self, scope: KnowledgeScope, name: str, body: Mapping[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        if body:
            raise ValidationError(next(iter(body)), "a sync request takes no fields")
        registration = self.registry.get(scope, validate_repo_name(name))
        return self._sync_now(scope, registration)
