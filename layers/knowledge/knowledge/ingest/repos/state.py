"""What the product remembers of a repository: its registration and its sync state.

Both are JSON under ``REGISTRY_PREFIX`` of the storage (``.kb@repos/<agent>/<context>/
<name>.json`` and ``<name>.state.json``), never under a scope's documents. Beside the
state, ``<name>.status.json`` is its summary (``RepoState.public``: no manifest), which
the scope's status reads (``statuses``; on AWS the search function may read only the
summaries, not the registrations nor the kept trees).

``RepoState.files`` is the manifest: repository path -> ``[blob id, commit]``, the blob
mirrored and the commit it was written at (its sidecar's ``url`` and ``commit``): an
unchanged blob keeps both, so an unchanged file is never rewritten nor re-indexed.
``large_blobs``: the blobs over the file bound at that sync (an incremental fetch does
not send them again, and they are still problems, not files to fetch in full).

``<name>.trees`` holds the trees of the synced commit (``knowledge.ingest.repos.trees``),
from which the next sync fetches incrementally.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from knowledge.core.errors import NotFoundError, ValidationError
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.repos import MIRROR_FOLDER, REGISTRY_PREFIX
from knowledge.ingest.repos.registration import RepoRegistration
from knowledge.ingest.repos.storage import ObjectStorage
from knowledge.ingest.repos.trees import TreeCache

__all__ = [
    "MAX_REPOS_PER_SCOPE",
    "RepoRegistry",
    "RepoState",
    "mirror_prefix",
    "registration_name",
]

MAX_REPOS_PER_SCOPE = 50
_STATE = ".state.json"
_STATUS = ".status.json"
_TREES = ".trees"


def registration_name(filename: str) -> str | None:
    """The repository a key's last segment registers (``<name>.json``), or ``None`` for
    a state, a summary, kept trees or anything else."""
    if not filename.endswith(".json") or filename.endswith((_STATE, _STATUS)):
        return None
    return filename[: -len(".json")]


def mirror_prefix(scope: KnowledgeScope, name: str) -> str:
    """The bucket key prefix of a repository's mirrored files."""
    return f"{scope.key}/{MIRROR_FOLDER}/{name}/"


@dataclass
class RepoState:
    commit: str | None = None
    synced_at: str | None = None
    attempted_at: str | None = None
    error: dict[str, str] | None = None
    problems: list[dict[str, str]] = field(default_factory=list)
    unread_files: dict[str, int] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)
    large_blobs: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: bytes | None) -> RepoState:
        if not data:
            return cls()
        raw: dict[str, Any] = json.loads(data)
        return cls(**{k: raw[k] for k in cls.__dataclass_fields__ if k in raw})

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode("utf-8")

    def public(self) -> dict[str, Any]:
        """The status of the repository (no manifest: its size is the file count)."""
        return {
            "commit": self.commit,
            "synced_at": self.synced_at,
            "attempted_at": self.attempted_at,
            "error": self.error,
            "problems": self.problems,
            "unread_files": self.unread_files,
            "files": len(self.files),
        }


class RepoRegistry:
    def __init__(self, storage: ObjectStorage) -> None:
        self.storage = storage

    @staticmethod
    def _key(scope: KnowledgeScope, name: str, suffix: str = ".json") -> str:
        return f"{REGISTRY_PREFIX}{scope.key}/{name}{suffix}"

    def names(self, scope: KnowledgeScope) -> list[str]:
        prefix = f"{REGISTRY_PREFIX}{scope.key}/"
        found = (key[len(prefix) :] for key in self.storage.keys(prefix))
        return sorted(
            name
            for name in (registration_name(f) for f in found if "/" not in f)
            if name is not None
        )

    def add(self, scope: KnowledgeScope, registration: RepoRegistration) -> bool:
        """Register (or update) ``registration``; True when it is new."""
        existing = self.storage.get(self._key(scope, registration.name))
        if existing is None and len(self.names(scope)) >= MAX_REPOS_PER_SCOPE:
            raise ValidationError(
                "name", f"a scope holds at most {MAX_REPOS_PER_SCOPE} repositories"
            )
        data = json.dumps(registration.to_dict(), sort_keys=True).encode("utf-8")
        self.storage.put(self._key(scope, registration.name), data)
        return existing is None

    def get(self, scope: KnowledgeScope, name: str) -> RepoRegistration:
        data = self.storage.get(self._key(scope, name))
        if data is None:
            raise NotFoundError(f"no repository '{name}' is registered in {scope}")
        return RepoRegistration.from_stored(json.loads(data))

    def all(self, scope: KnowledgeScope) -> Iterator[RepoRegistration]:
        for name in self.names(scope):
            yield self.get(scope, name)

    def state(self, scope: KnowledgeScope, name: str) -> RepoState:
        return RepoState.from_json(self.storage.get(self._key(scope, name, _STATE)))

    def save_state(self, scope: KnowledgeScope, name: str, state: RepoState) -> None:
        self.storage.put(self._key(scope, name, _STATE), state.to_json())
        summary = json.dumps(state.public(), sort_keys=True).encode("utf-8")
        self.storage.put(self._key(scope, name, _STATUS), summary)

    def summary(self, scope: KnowledgeScope, name: str) -> dict[str, Any]:
        """The last sync of ``name`` (``RepoState.public``), from its summary (from the
        state for one synced before summaries were written)."""
        data = self.storage.get(self._key(scope, name, _STATUS))
        if data is None:
            return self.state(scope, name).public()
        summary: dict[str, Any] = json.loads(data)
        return summary

    def statuses(self, scope: KnowledgeScope) -> list[dict[str, Any]]:
        """Each registered repository's last sync, for the scope's status."""
        return [{"name": name, **self.summary(scope, name)} for name in self.names(scope)]

    def trees(self, scope: KnowledgeScope, name: str) -> TreeCache | None:
        """The trees of the last synced commit, or ``None`` (none kept, or unreadable:
        an optimisation never fails a sync, which then fetches in full)."""
        try:
            data = self.storage.get(self._key(scope, name, _TREES))
        except Exception:
            return None
        return TreeCache.from_bytes(data)

    def save_trees(self, scope: KnowledgeScope, name: str, trees: TreeCache) -> None:
        self.storage.put(self._key(scope, name, _TREES), trees.to_bytes())

    def drop_trees(self, scope: KnowledgeScope, name: str) -> None:
        self.storage.delete(self._key(scope, name, _TREES))

    def remove(self, scope: KnowledgeScope, name: str) -> int:
        """Unregister ``name`` and delete its mirrored files; returns how many were deleted.
        The mirror goes first, the registration last: an interrupted remove can be redone."""
        self.get(scope, name)
        deleted = 0
        for key in list(self.storage.keys(mirror_prefix(scope, name))):
            self.storage.delete(key)
            deleted += 1
        self.storage.delete(self._key(scope, name, _TREES))
        self.storage.delete(self._key(scope, name, _STATUS))
        self.storage.delete(self._key(scope, name, _STATE))
        self.storage.delete(self._key(scope, name))
        return deleted
