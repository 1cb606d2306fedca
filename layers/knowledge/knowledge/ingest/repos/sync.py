"""One sync of one registered repository into its mirror ``_repos/<name>/`` of the scope.

1. Resolve the credential, fetch the branch at depth 1 and walk its tree
   (``knowledge.ingest.repos.fetch``): incrementally, from the trees of the last synced
   commit (``knowledge.ingest.repos.trees``, kept by the registry) when there are any; a
   file the plan needs whose blob the server assumed known (it was in the old tree but
   was never mirrored: ``paths`` changed) makes the sync fetch again in full. A failure
   here writes nothing: the state records the error (``error``: kind and message) and
   keeps the last good commit and manifest, so the last good sync stays searchable. A
   force-push is nothing special: the new tree is compared with the manifest, whatever
   the history.
2. Select the files: under ``paths``, no hidden segment (``.github/``, as every listing
   skips them), read by the product (``DOCUMENT_PATTERNS``; the others are counted by
   extension in ``unread_files``), at most ``max_file_bytes`` (else a problem). More
   than ``max_files`` selected files fail the sync (bounds) before anything is written.
3. Write what changed: for a new or changed blob its sidecar (``origin`` ``repo``,
   ``url``, ``repo``, ``commit``) then its bytes; delete the files gone from the tree.
   Nothing outside ``_repos/<name>/`` is written. Past the deadline the writes stop, the
   manifest records what was written and the state says the sync is incomplete
   (``error.kind`` ``time``): the next sync continues from there.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from knowledge.core.documents import validate_document_path
from knowledge.core.errors import ValidationError
from knowledge.core.model import IndexOptions, unread_extension
from knowledge.core.origin import REPO
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SIDECAR_SUFFIX, is_document_path
from knowledge.ingest.repos import MIRROR_FOLDER
from knowledge.ingest.repos.credentials import resolve_credential
from knowledge.ingest.repos.errors import RepoSyncError
from knowledge.ingest.repos.fetch import FetchedTree, fetch_branch
from knowledge.ingest.repos.links import file_url
from knowledge.ingest.repos.registration import RepoRegistration, SyncBounds
from knowledge.ingest.repos.state import RepoRegistry, RepoState, mirror_prefix
from knowledge.ingest.repos.trees import TreeCache

if TYPE_CHECKING:
    from knowledge.ingest.repos.network import HostPolicy

__all__ = ["SyncReport", "sync_repository"]

_PATTERNS = IndexOptions().file_patterns


@dataclass
class SyncReport:
    name: str
    commit: str | None
    written: int = 0
    deleted: int = 0
    unchanged: int = 0
    error: dict[str, str] | None = None
    problems: list[dict[str, str]] = field(default_factory=list)
    fetched_bytes: int = 0  # the pack the server sent (0: nothing new)
    incremental: bool = False  # fetched from the last synced commit's trees

    @property
    def ok(self) -> bool:
        return self.error is None

    def public(self) -> dict[str, object]:
        return {
            "name": self.name,
            "commit": self.commit,
            "written": self.written,
            "deleted": self.deleted,
            "unchanged": self.unchanged,
            "error": self.error,
            "problems": self.problems,
        }


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _is_hidden(path: str) -> bool:
    return any(segment.startswith(".") for segment in path.split("/"))


def sidecar(registration: RepoRegistration, path: str, commit: str) -> bytes:
    attributes: dict[str, str] = {"origin": REPO, "repo": registration.name, "commit": commit}
    url = file_url(registration.url, commit, path)
    if url is not None:
        attributes["url"] = url
    return json.dumps({"metadataAttributes": attributes}, sort_keys=True).encode("utf-8")


class _NeedFullFetch(Exception):  # noqa: N818 - internal: a blob only a full fetch sends
    pass


@dataclass
class _Plan:
    keep: dict[str, list[str]]
    write: list[tuple[str, str]]  # (path, blob)
    delete: list[str]
    problems: list[dict[str, str]]
    unread: dict[str, int]
    large: list[str]  # blobs over the file bound (or left out by the server's filter)


def _plan(
    registration: RepoRegistration, tree: FetchedTree, old: RepoState, bounds: SyncBounds
) -> _Plan:
    selected = [f for f in tree.files if registration.selects(f.path) and not _is_hidden(f.path)]
    if len(selected) > bounds.max_files:
        raise RepoSyncError(
            "bounds",
            f"the branch holds {len(selected)} files, over the bound of {bounds.max_files} "
            "(narrow it with 'paths', or raise the bound)",
        )
    # Links and submodules are problems where a file would have been synced: under
    # ``paths``, not hidden (a link in .github/ or outside the prefixes is not the user's).
    problems = [
        {"path": p.path, "reason": p.reason}
        for p in tree.skipped
        if registration.selects(p.path) and not _is_hidden(p.path)
    ]
    unread: dict[str, int] = {}
    large: list[str] = []
    keep: dict[str, list[str]] = {}
    write: list[tuple[str, str]] = []
    for item in selected:
        if not is_document_path(item.path, _PATTERNS):
            ext = unread_extension(item.path)
            unread[ext] = unread.get(ext, 0) + 1
            continue
        try:
            validate_document_path(f"{MIRROR_FOLDER}/{registration.name}/{item.path}")
        except ValidationError as exc:
            problems.append({"path": item.path, "reason": f"path not synced: {exc.message}"})
            continue
        previous = old.files.get(item.path)
        if previous is not None and previous[0] == item.blob:
            keep[item.path] = previous  # mirrored already: never read again
            continue
        size = tree.size(item.blob)
        if size is None and (
            tree.unresolved or (item.blob in tree.assumed and item.blob not in old.large_blobs)
        ):
            # Left out as known though never mirrored (``paths`` changed), or a delta
            # without its base: only a full fetch is sure to send it.
            raise _NeedFullFetch
        if size is None or size > bounds.max_file_bytes:
            large.append(item.blob)
            problems.append(
                {"path": item.path, "reason": f"larger than {bounds.max_file_bytes} bytes"}
            )
            continue
        write.append((item.path, item.blob))
    wanted = set(keep) | {path for path, _ in write}
    delete = sorted(path for path in old.files if path not in wanted)
    return _Plan(keep, write, delete, problems, unread, sorted(set(large)))


def _mirrored_blobs(
    registry: RepoRegistry, scope: KnowledgeScope, name: str, state: RepoState
) -> Callable[[str], bytes | None]:
    """A blob's bytes from the mirror, by the manifest (a thin pack's delta base; the
    fetch checks the id against the bytes)."""
    paths = {entry[0]: path for path, entry in state.files.items()}
    prefix = mirror_prefix(scope, name)

    def read(blob: str) -> bytes | None:
        path = paths.get(blob)
        return None if path is None else registry.storage.get(prefix + path)

    return read


def sync_repository(
    registry: RepoRegistry,
    scope: KnowledgeScope,
    registration: RepoRegistration,
    *,
    bounds: SyncBounds | None = None,
    read_secret: Callable[[str], bytes] | None = None,
    clock: Callable[[], float] = time.monotonic,
    hosts: HostPolicy | None = None,
) -> SyncReport:
    """Sync ``registration`` into its mirror and record the state; never raises for a
    repository's own failure (it is the report's and the state's ``error``)."""
    bounds = bounds or SyncBounds()
    deadline = clock() + bounds.time_budget_seconds
    state = registry.state(scope, registration.name)
    state.attempted_at = _now()
    try:
        secret = resolve_credential(registration.credential, read_secret=read_secret)
        since = registry.trees(scope, registration.name)
        if since is not None and since.commit != state.commit:
            since = None  # kept for another commit than the mirror's: start afresh
        tree, plan = _fetch_and_plan(
            registry,
            scope,
            registration,
            state,
            bounds=bounds,
            secret=secret,
            since=since,
            deadline=deadline,
            clock=clock,
            hosts=hosts,
        )
    except RepoSyncError as exc:
        state.error = {"kind": exc.kind, "message": exc.message}
        registry.save_state(scope, registration.name, state)
        return SyncReport(registration.name, state.commit, error=state.error)

    mirror = _MirrorWriter(
        registry,
        scope,
        registration,
        tree,
        files=_manifest_during(plan, state),
        deadline=deadline,
        clock=clock,
    )
    report = SyncReport(registration.name, tree.commit, unchanged=len(plan.keep))
    report.deleted = mirror.delete(plan.delete)
    report.written = mirror.write(plan.write)
    _record_outcome(state, plan, mirror, report, tree)
    report.fetched_bytes = tree.pack_bytes
    report.incremental = tree.incremental
    _keep_trees(registry, scope, registration.name, tree, state=state, since=since)
    registry.save_state(scope, registration.name, state)
    return report


def _fetch_and_plan(
    registry: RepoRegistry,
    scope: KnowledgeScope,
    registration: RepoRegistration,
    state: RepoState,
    *,
    bounds: SyncBounds,
    secret: bytes | None,
    since: TreeCache | None,
    deadline: float,
    clock: Callable[[], float],
    hosts: HostPolicy | None,
) -> tuple[FetchedTree, _Plan]:
    """The branch's tree and what to do with it (module docstring, steps 1 and 2): fetched
    from ``since`` when there are trees of the mirror's commit, again in full when the
    plan needs a blob only a full fetch sends."""
    tree = fetch_branch(
        registration,
        secret,
        bounds,
        deadline=deadline,
        clock=clock,
        hosts=hosts,
        since=since,
        old_blob=_mirrored_blobs(registry, scope, registration.name, state),
    )
    try:
        return tree, _plan(registration, tree, state, bounds)
    except _NeedFullFetch:
        tree = fetch_branch(
            registration, secret, bounds, deadline=deadline, clock=clock, hosts=hosts
        )
        return tree, _plan(registration, tree, state, bounds)


def _manifest_during(plan: _Plan, old: RepoState) -> dict[str, list[str]]:
    """The manifest as the writes start: the files kept, and every file to rewrite or
    delete at its old version until it is (an incomplete sync's manifest then says what
    the mirror holds)."""
    files = dict(plan.keep)
    for path, _ in plan.write:
        if path in old.files:
            files[path] = old.files[path]
    for path in plan.delete:
        files[path] = old.files[path]
    return files


class _MirrorWriter:
    """Deletes and writes files of the mirror until the deadline (module docstring, step
    3), keeping ``files``, the manifest, equal to what the mirror holds; a file that
    fails keeps its manifest entry (the next sync tries it again) and is in ``failed``."""

    def __init__(
        self,
        registry: RepoRegistry,
        scope: KnowledgeScope,
        registration: RepoRegistration,
        tree: FetchedTree,
        *,
        files: dict[str, list[str]],
        deadline: float,
        clock: Callable[[], float],
    ) -> None:
        self._storage = registry.storage
        self._prefix = mirror_prefix(scope, registration.name)
        self._registration = registration
        self._tree = tree
        self._deadline = deadline
        self._clock = clock
        self.files = files
        self.failed: list[dict[str, str]] = []
        self.out_of_time = False

    def _in_time(self) -> bool:
        if self.out_of_time or self._clock() > self._deadline:
            self.out_of_time = True
        return not self.out_of_time

    def delete(self, paths: list[str]) -> int:
        """Delete ``paths`` (each one's sidecar first); how many were deleted."""
        deleted = 0
        for path in paths:
            if not self._in_time():
                break
            try:
                self._storage.delete(self._prefix + path + SIDECAR_SUFFIX)
                self._storage.delete(self._prefix + path)
            except Exception as exc:  # kept in the manifest: the next sync deletes it again
                self.failed.append({"path": path, "reason": f"not deleted ({type(exc).__name__})"})
                continue
            del self.files[path]
            deleted += 1
        return deleted

    def write(self, files: list[tuple[str, str]]) -> int:
        """Write each (path, blob): its sidecar, then its bytes; how many were written."""
        written = 0
        commit = self._tree.commit
        for path, blob in files:
            if not self._in_time():
                break
            try:
                self._storage.put(
                    self._prefix + path + SIDECAR_SUFFIX, sidecar(self._registration, path, commit)
                )
                self._storage.put(self._prefix + path, self._tree.read(blob))
            except Exception as exc:  # its old entry stays: the next sync writes it again
                self.failed.append({"path": path, "reason": f"not written ({type(exc).__name__})"})
                continue
            self.files[path] = [blob, commit]
            written += 1
        return written


def _record_outcome(
    state: RepoState, plan: _Plan, mirror: _MirrorWriter, report: SyncReport, tree: FetchedTree
) -> None:
    """The state after the writes: the manifest, the problems and unread files; the new
    commit when every change was made, else an error saying what is left (the last
    complete commit stays the state's and the report's)."""
    plan.problems.extend(mirror.failed)
    state.files = mirror.files
    state.problems = plan.problems
    state.unread_files = dict(sorted(plan.unread.items()))
    state.large_blobs = plan.large
    if mirror.out_of_time or mirror.failed:
        left = len(plan.write) + len(plan.delete) - report.written - report.deleted
        state.error = (
            {
                "kind": "time",
                "message": f"the sync budget ran out with {left} changes left; the next "
                "sync continues from here",
            }
            if mirror.out_of_time
            else {
                "kind": "storage",
                "message": f"{len(mirror.failed)} files could not be written or deleted (see "
                "problems); the next sync retries them",
            }
        )
        report.commit = state.commit
    else:
        state.commit = tree.commit
        state.synced_at = state.attempted_at
        state.error = None
    report.error = state.error
    report.problems = state.problems


def _keep_trees(
    registry: RepoRegistry,
    scope: KnowledgeScope,
    name: str,
    tree: FetchedTree,
    *,
    state: RepoState,
    since: TreeCache | None,
) -> None:
    """Keep the synced commit's trees for the next sync to fetch from, unless they are
    the ones already kept. Saved before the state: a state naming a commit whose trees
    are not kept only costs a full fetch."""
    unchanged_trees = tree.incremental and since is not None and since.commit == tree.commit
    if state.commit != tree.commit or tree.trees is None or unchanged_trees:
        return
    try:
        registry.save_trees(scope, name, tree.trees)
    except Exception:  # an optimisation: the next sync fetches in full
        # Trees of another commit than the state's are never used, so a failed drop
        # leaves nothing wrong behind either.
        with contextlib.suppress(Exception):
            registry.drop_trees(scope, name)


def mirror_document_path(name: str, path: str) -> str:
    """The scope-relative document path of a repository file."""
    return posixpath.join(MIRROR_FOLDER, name, path)
