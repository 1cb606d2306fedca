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

Incremental: given the trees of the last synced commit (``since``, a ``TreeCache``), the
fetch tells the server that commit (``have`` and ``shallow``), so it sends only what the
new commit adds; the cached trees are loaded into the store so that the whole new tree
can be walked. A branch still at that commit fetches no pack at all. The pack is asked
for thin (``git upload-pack`` leaves out the objects the client has only in a thin
pack): its deltas may name a base outside it, which is a cached tree or the mirrored
file of an old blob (``old_blob``, its id checked from its bytes); a delta whose base
is neither (an image's old version, never mirrored) is left out
(``FetchedTree.unresolved``). A tree the walk cannot find (a damaged or partial cache)
makes the fetch start again in full. The blobs the server left out because the client
"has" them are ``FetchedTree.assumed``.

``walk_tree`` lists the regular files of the fetched commit's tree (``TreeFile``: path,
blob id, mode); submodules, symbolic links and names that are not UTF-8 come back as
skipped problems.
"""

from __future__ import annotations

import contextlib
import functools
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
from knowledge.ingest.repos.trees import TreeCache

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
    # Blobs of the ``since`` commit's tree: an incremental fetch leaves them out.
    assumed: frozenset[str] = frozenset()
    incremental: bool = False
    trees: TreeCache | None = field(default=None, repr=False)
    unresolved: bool = False  # deltas of the thin pack whose base was not at hand

    # A blob's bytes from the mirror (a renamed or copied file the server left out as known).
    mirrored: Callable[[str], bytes | None] | None = field(default=None, repr=False)

    def size(self, blob: str) -> int | None:
        """The blob's size; ``None`` when the server left it out (over the filter's
        limit: ``fetch_branch`` asks for blobs up to ``max_file_bytes`` only; or known to
        this client, and not in the mirror either)."""
        try:
            _, data = self._store.get_raw(blob.encode("ascii"))
        except KeyError:
            found = _checked_blob(self.mirrored, blob)
            if found is None:
                return None
            self._store.add_object(found)
            return len(found.data)
        return len(data)

    def read(self, blob: str) -> bytes:
        _, data = self._store.get_raw(blob.encode("ascii"))
        return bytes(data)


class _Stop(Exception):  # noqa: N818 - internal control flow out of dulwich's callback
    def __init__(self, error: RepoSyncError) -> None:
        self.error = error


def _client(
    registration: RepoRegistration,
    secret: bytes | None,
    hosts: HostPolicy | None,
    *,
    thin: bool = False,
) -> tuple[Any, str]:
    import urllib3
    from dulwich.client import get_transport_and_path_from_url

    from knowledge.ingest.repos.network import LOCAL, guarded_pool_manager

    if registration.is_ssh:
        from knowledge.ingest.repos.ssh import ssh_client

        return ssh_client(registration, secret, hosts, thin=thin)
    kwargs: dict[str, Any] = {"thin_packs": thin, "quiet": True}
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


def _checked_blob(source: Callable[[str], bytes | None] | None, blob: str) -> Any:
    """The dulwich ``Blob`` of id ``blob`` from ``source``, or ``None`` (absent, or bytes
    whose id is another's)."""
    from dulwich.objects import Blob

    data = source(blob) if source is not None else None
    if data is None:
        return None
    found = Blob.from_string(data)
    return found if found.id.decode("ascii") == blob else None


def _store_pack(sink: Any, store: Any, old_blob: Callable[[str], bytes | None] | None) -> bool:
    """Inflate the received pack into ``store`` (its checksum verified first); a thin
    pack's delta bases come from the store (the cached trees) or ``old_blob``. Returns
    whether some deltas were left out for want of their base."""
    from dulwich.objects import Blob
    from dulwich.pack import PackData, PackInflater, UnresolvedDeltas

    size = sink.tell()
    if size == 0:
        return False
    sink.seek(0)

    def base(raw_id: bytes) -> tuple[int, list[bytes]]:
        try:
            return store.get_raw(raw_id)  # type: ignore[no-any-return]
        except KeyError:
            pass
        found = _checked_blob(old_blob, raw_id.hex())
        if found is None:
            raise KeyError(raw_id.hex())
        return Blob.type_num, [found.data]

    pack = PackData.from_file(sink, store.object_format, size)
    try:
        pack.check()
        try:
            for obj in PackInflater.for_pack_data(pack, base):
                store.add_object(obj)
        except UnresolvedDeltas:
            return True
    finally:
        pack.close()
    return False


def fetch_branch(
    registration: RepoRegistration,
    secret: bytes | None,
    bounds: SyncBounds,
    *,
    deadline: float,
    clock: Callable[[], float] = time.monotonic,
    hosts: HostPolicy | None = None,
    since: TreeCache | None = None,
    old_blob: Callable[[str], bytes | None] | None = None,
) -> FetchedTree:
    """The branch's head commit and its tree, fetched at depth 1; ``hosts`` says which
    addresses the fetch may connect to (``knowledge.ingest.repos.network``; default: any);
    ``since``: the trees of the last synced commit, to fetch only what changed, and
    ``old_blob``: the bytes of a blob of it where the mirror holds them (a thin pack's
    delta bases)."""
    from dulwich.repo import MemoryRepo

    def in_full() -> FetchedTree:
        return fetch_branch(
            registration, secret, bounds, deadline=deadline, clock=clock, hosts=hosts
        )

    if since is not None and not since.matches(registration.url, registration.branch):
        since = None
    repo = MemoryRepo()
    assumed: set[str] = set()
    graph_walker: Any = repo.get_graph_walker()
    if since is not None:
        try:
            assumed = since.load_into(repo.object_store)
        except Exception:  # unreadable: fetch in full
            return in_full()
        graph_walker = _holding(since.commit)
    transfer = _Transfer(registration.branch, bounds, since, deadline, clock)
    connect = functools.partial(_client, registration, secret, hosts, thin=since is not None)
    try:
        unresolved = transfer.receive(connect, graph_walker, repo.object_store, old_blob)
    except _Stop as stop:
        raise stop.error from None
    except Exception as exc:  # dulwich, urllib3, socket and subprocess errors alike
        raise _translated(exc) from None
    if not transfer.wanted:
        raise RepoSyncError("branch", f"the repository has no branch '{registration.branch}'")
    head = transfer.wanted[0]
    try:
        head_commit = repo.object_store[head]  # type: ignore[index]
        tree_id = head_commit.tree  # type: ignore[attr-defined]
        files, skipped, trees = _walk(repo.object_store, tree_id)
    except KeyError:
        if since is not None:  # a tree the cache should have held: fetch in full
            return in_full()
        raise RepoSyncError("protocol", "the Git host did not send the branch's tree") from None
    return FetchedTree(
        head.decode("ascii"),
        files,
        skipped,
        transfer.received,
        repo.object_store,
        assumed=frozenset(assumed),
        incremental=since is not None,
        unresolved=unresolved,
        mirrored=old_blob if since is not None else None,
        trees=TreeCache.of(registration.url, registration.branch, head_commit, trees),
    )


def _holding(commit: str) -> Any:
    """The graph walker of a client holding ``commit`` and its tree, never its parents
    (a shallow clone of it): the server sends only what the branch's head adds."""
    from dulwich.object_store import ObjectStoreGraphWalker

    have: Any = commit.encode("ascii")  # dulwich's ObjectID
    return ObjectStoreGraphWalker([have], lambda sha: [], shallow={have})


class _Transfer:
    """One fetch of the branch's ref (module docstring): the head the server names, and
    the pack it sends, counted as it arrives (over ``max_repo_bytes`` or past the
    deadline the transfer stops), then checked and stored."""

    def __init__(
        self,
        branch: str,
        bounds: SyncBounds,
        since: TreeCache | None,
        deadline: float,
        clock: Callable[[], float],
    ) -> None:
        self._branch = branch
        self._ref = b"refs/heads/" + branch.encode("utf-8")
        self._bounds = bounds
        self._since = since
        self._deadline = deadline
        self._clock = clock
        self._sink: Any = None
        self.wanted: list[bytes] = []  # the head commit, once the server named it
        self.received = 0

    def receive(
        self,
        connect: Callable[[], tuple[Any, str]],
        graph_walker: Any,
        store: Any,
        old_blob: Callable[[str], bytes | None] | None,
    ) -> bool:
        """Fetch the pack into ``store`` over the client ``connect`` opens (closed after the
        transfer); whether some of its deltas were left out for want of their base
        (``_store_pack``)."""
        from tempfile import SpooledTemporaryFile

        with SpooledTemporaryFile(max_size=16 * 1024 * 1024, prefix="kb-pack-") as sink:
            self._sink = sink
            with contextlib.ExitStack() as stack:
                client, path = connect()
                stack.callback(client.close)
                client.fetch_pack(
                    path,
                    self._determine_wants,
                    graph_walker,
                    self._pack_data,
                    depth=1,
                    ref_prefix=[self._ref],
                    # Servers with protocol v2's filter leave out the blobs over the file
                    # bound (images, binaries): they are never transferred nor inflated.
                    filter_spec=f"blob:limit={self._bounds.max_file_bytes}".encode("ascii"),
                )
            _check_inflated_size(sink, self._bounds)
            return _store_pack(sink, store, old_blob)

    def _determine_wants(self, refs: Any, depth: int | None = None) -> list[bytes]:
        sha = refs.get(self._ref)
        if sha is None:
            raise _Stop(RepoSyncError("branch", f"the repository has no branch '{self._branch}'"))
        self.wanted.append(sha)
        if self._since is not None and sha.decode("ascii") == self._since.commit:
            return []  # nothing new: the cached trees are the tree
        return [sha]

    def _pack_data(self, data: bytes) -> int:
        self.received += len(data)
        if self.received > self._bounds.max_repo_bytes:
            raise _Stop(
                RepoSyncError(
                    "bounds",
                    f"the repository is over {self._bounds.max_repo_bytes} bytes at depth 1 "
                    "(narrow it with 'paths' on a smaller repository, or raise the bound)",
                )
            )
        if self._clock() > self._deadline:
            raise _Stop(RepoSyncError("time", "the fetch did not finish inside the sync budget"))
        self._sink.write(data)
        return len(data)


def _walk(store: Any, tree_id: bytes) -> tuple[list[TreeFile], list[FileProblem], list[Any]]:
    files: list[TreeFile] = []
    skipped: list[FileProblem] = []
    trees: list[Any] = []

    def visit(tid: bytes, prefix: str) -> None:
        tree = store[tid]
        trees.append(tree)
        for entry in tree.iteritems():
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
    return files, skipped, trees
