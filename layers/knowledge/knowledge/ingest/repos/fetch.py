"""Fetch one branch of a repository, shallow, and walk its tree (dulwich; no ``git`` binary).

``fetch_branch`` asks the server for ``refs/heads/<branch>`` only, at depth 1, without
the blobs over ``SyncBounds.max_file_bytes`` where the server has protocol v2's
``filter`` (``blob:limit``), into an in-memory object store, counting the pack's bytes
as they arrive: over ``SyncBounds.max_repo_bytes`` or past the deadline the transfer
stops; the pack's objects are then measured inflated (``pack``) and over
``SyncBounds.max_inflated_bytes`` refused before they are inflated. Thin packs are
refused (the store holds nothing to complete them from). Every failure is a
``RepoSyncError`` (``errors``) with a message of our own: dulwich's and urllib3's
messages can hold a URL or a server's text, and a credential never appears in either.

``walk_tree`` lists the regular files of the fetched commit's tree (``TreeFile``: path,
blob id, mode); submodules, symbolic links and names that are not UTF-8 come back as
skipped problems.
"""

from __future__ import annotations

import contextlib
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from knowledge.core.model import FileProblem
from knowledge.ingest.repos.errors import RepoSyncError
from knowledge.ingest.repos.network import CONNECT_TIMEOUT, READ_TIMEOUT
from knowledge.ingest.repos.registration import RepoRegistration, SyncBounds, sends_in_clear

if TYPE_CHECKING:
    from knowledge.ingest.repos.network import HostPolicy

__all__ = ["FetchedTree", "TreeFile", "fetch_branch"]

DEFAULT_HTTPS_USER = "x-access-token"


@dataclass(frozen=True, slots=True)
class TreeFile:
    path: str
    blob: str
    mode: int


@dataclass
class FetchedTree:
    commit: str
    files: list[TreeFile]
    skipped: list[FileProblem]
    pack_bytes: int
    _store: Any = field(repr=False)

    def size(self, blob: str) -> int | None:
        """The blob's size; ``None`` when the server left it out (over the filter's
        limit: ``fetch_branch`` asks for blobs up to ``max_file_bytes`` only)."""
        try:
            _, data = self._store.get_raw(blob.encode("ascii"))
        except KeyError:
            return None
        return len(data)

    def read(self, blob: str) -> bytes:
        _, data = self._store.get_raw(blob.encode("ascii"))
        return bytes(data)


class _Stop(Exception):  # noqa: N818 - internal control flow out of dulwich's callback
    def __init__(self, error: RepoSyncError) -> None:
        self.error = error


def _client(
    registration: RepoRegistration, secret: bytes | None, hosts: HostPolicy | None
) -> tuple[Any, str]:
    import urllib3
    from dulwich.client import get_transport_and_path_from_url

    from knowledge.ingest.repos.network import LOCAL, guarded_pool_manager

    if registration.is_ssh:
        from knowledge.ingest.repos.ssh import ssh_client

        return ssh_client(registration, secret, hosts)
    kwargs: dict[str, Any] = {"thin_packs": False, "quiet": True}
    kwargs["pool_manager"] = guarded_pool_manager(
        hosts or LOCAL,
        timeout=urllib3.Timeout(connect=CONNECT_TIMEOUT, read=READ_TIMEOUT),
        retries=False,
    )
    if secret is not None:
        if sends_in_clear(registration.url):  # registered before http:// was refused
            raise RepoSyncError(
                "credential",
                "a credential is sent only over https:// or ssh://, not over this http:// "
                "URL (register the repository's https:// URL)",
            )
        kwargs["username"] = registration.username or DEFAULT_HTTPS_USER
        kwargs["password"] = secret.decode("utf-8").strip()
    client, path = get_transport_and_path_from_url(registration.url, **kwargs)
    return client, path


def _connection_failed(exc: BaseException) -> bool:
    """Whether a transport error comes from the connection (refused, reset, DNS, TLS)."""
    import urllib3.exceptions

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError | urllib3.exceptions.HTTPError):
            return True
        seen = seen.__cause__ or seen.__context__
    return "connection" in str(exc).lower()


def _translated(exc: BaseException) -> RepoSyncError:
    from dulwich.client import HTTPProxyUnauthorized, HTTPUnauthorized
    from dulwich.errors import GitProtocolError, HangupException, NotGitRepository

    seen: BaseException | None = exc
    while seen is not None:  # ours, raised inside the transport (a refused address)
        if isinstance(seen, RepoSyncError):
            return seen
        seen = seen.__cause__ or seen.__context__
    if isinstance(exc, HTTPUnauthorized | HTTPProxyUnauthorized):
        return RepoSyncError(
            "credentials", "the Git host refused the credentials (check the token and its scope)"
        )
    if isinstance(exc, NotGitRepository):
        return RepoSyncError("unreachable", "no Git repository at this URL")
    if isinstance(exc, HangupException):
        return RepoSyncError(
            "unreachable",
            "the Git host closed the connection (check the URL, the key and the known hosts)",
        )
    if isinstance(exc, GitProtocolError) and _connection_failed(exc):
        return RepoSyncError("unreachable", "cannot reach the Git host; the last sync is kept")
    if isinstance(exc, GitProtocolError):
        text = str(exc).lower()
        if re.search(r"\b40[13]\b", text) or "authenticat" in text:
            return RepoSyncError("credentials", "the Git host refused the credentials")
        if re.search(r"\b404\b", text) or "not found" in text:
            return RepoSyncError("unreachable", "no Git repository at this URL")
        return RepoSyncError("protocol", "the Git host answered outside the Git protocol")
    return RepoSyncError(
        "unreachable", f"cannot reach the Git host ({type(exc).__name__}); the last sync is kept"
    )


def _check_inflated_size(sink: Any, bounds: SyncBounds) -> None:
    """Refuse a pack whose objects inflate past ``max_inflated_bytes`` before dulwich's
    in-memory store inflates them (``knowledge.ingest.repos.pack``); the sink is left where it
    was (dulwich takes the pack's size from its position)."""
    from knowledge.ingest.repos.pack import PackFormatError, PackLimitExceeded, inflated_size

    end = sink.tell()
    if end == 0:
        return
    sink.seek(0)
    try:
        inflated_size(sink, bounds.max_inflated_bytes)
    except PackLimitExceeded:
        raise _Stop(
            RepoSyncError(
                "bounds",
                f"the repository's files are over {bounds.max_inflated_bytes} bytes "
                "uncompressed at depth 1 (narrow it with 'paths' on a smaller repository, "
                "or raise the bound)",
            )
        ) from None
    except PackFormatError:
        raise _Stop(
            RepoSyncError("protocol", "the Git host sent a pack that cannot be read")
        ) from None
    sink.seek(end)


def fetch_branch(
    registration: RepoRegistration,
    secret: bytes | None,
    bounds: SyncBounds,
    *,
    deadline: float,
    clock: Callable[[], float] = time.monotonic,
    hosts: HostPolicy | None = None,
) -> FetchedTree:
    """The branch's head commit and its tree, fetched at depth 1; ``hosts`` says which
    addresses the fetch may connect to (``knowledge.ingest.repos.network``; default: any)."""
    from dulwich.repo import MemoryRepo

    ref = b"refs/heads/" + registration.branch.encode("utf-8")
    wanted: list[bytes] = []

    def determine_wants(refs: Any, depth: int | None = None) -> list[bytes]:
        sha = refs.get(ref)
        if sha is None:
            raise _Stop(
                RepoSyncError("branch", f"the repository has no branch '{registration.branch}'")
            )
        wanted.append(sha)
        return [sha]

    repo = MemoryRepo()
    sink, commit, abort = repo.object_store.add_pack()
    received = 0

    def pack_data(data: bytes) -> int:
        nonlocal received
        received += len(data)
        if received > bounds.max_repo_bytes:
            raise _Stop(
                RepoSyncError(
                    "bounds",
                    f"the repository is over {bounds.max_repo_bytes} bytes at depth 1 "
                    "(narrow it with 'paths' on a smaller repository, or raise the bound)",
                )
            )
        if clock() > deadline:
            raise _Stop(RepoSyncError("time", "the fetch did not finish inside the sync budget"))
        sink.write(data)
        return len(data)

    try:
        with contextlib.ExitStack() as stack:
            client, path = _client(registration, secret, hosts)
            stack.callback(client.close)
            client.fetch_pack(
                path,
                determine_wants,
                repo.get_graph_walker(),
                pack_data,
                depth=1,
                ref_prefix=[ref],
                # Servers with protocol v2's filter leave out the blobs over the file
                # bound (images, binaries): they are never transferred nor inflated.
                filter_spec=f"blob:limit={bounds.max_file_bytes}".encode("ascii"),
            )
        _check_inflated_size(sink, bounds)
        commit()
    except _Stop as stop:
        abort()
        raise stop.error from None
    except Exception as exc:  # dulwich, urllib3, socket and subprocess errors alike
        abort()
        raise _translated(exc) from None
    if not wanted:
        raise RepoSyncError("branch", f"the repository has no branch '{registration.branch}'")
    head = wanted[0]
    try:
        tree_id = repo.object_store[head].tree  # type: ignore[index,attr-defined]
    except KeyError:
        raise RepoSyncError("protocol", "the Git host did not send the branch's commit") from None
    files, skipped = _walk(repo.object_store, tree_id)
    return FetchedTree(head.decode("ascii"), files, skipped, received, repo.object_store)


def _walk(store: Any, tree_id: bytes) -> tuple[list[TreeFile], list[FileProblem]]:
    files: list[TreeFile] = []
    skipped: list[FileProblem] = []

    def visit(tid: bytes, prefix: str) -> None:
        for entry in store[tid].iteritems():
            try:
                name = entry.path.decode("utf-8")
            except UnicodeDecodeError:
                shown = entry.path.decode("utf-8", errors="replace")
                skipped.append(FileProblem(prefix + shown, "path not synced: not UTF-8"))
                continue
            path = prefix + name
            mode = entry.mode
            if stat.S_ISDIR(mode):
                visit(entry.sha, path + "/")
            elif stat.S_ISLNK(mode):
                skipped.append(FileProblem(path, "symbolic link not synced"))
            elif stat.S_ISREG(mode):
                files.append(TreeFile(path, entry.sha.decode("ascii"), mode))
            else:
                skipped.append(FileProblem(path, "submodule not synced"))

    visit(tree_id, "")
    return files, skipped
