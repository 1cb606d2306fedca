"""Incremental fetches against a real Git server on loopback (``git http-backend``).

After the first sync a sync tells the server the commit it holds (``have`` and
``shallow``) and fetches only what changed, walking the new tree with the trees kept
from the last sync (``knowledge.ingest.repos.trees``). Whatever the fetch sent, after
every sync the index equals the repository's readable files at the synced commit.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from git_server import GitHttpServer, Workdir, git

from knowledge.core.model import IndexOptions
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.repos.registration import RepoRegistration, SyncBounds
from knowledge.ingest.repos.state import RepoRegistry
from knowledge.ingest.repos.storage import FolderStorage
from knowledge.ingest.repos.sync import SyncReport, sync_repository
from knowledge.ingest.repos.trees import TreeCache
from knowledge.ingest.sources.folders import BucketFolderSource
from knowledge.stores.memory import MemoryKnowledgeStore

pytestmark = pytest.mark.integration

SCOPE = KnowledgeScope("ops-bot", "runbooks")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitHttpServer]:
    http = GitHttpServer(tmp_path_factory.mktemp("git-root"))
    yield http
    http.close()


@pytest.fixture
def bucket(tmp_path: Path) -> Path:
    return tmp_path / "bucket"


@pytest.fixture
def registry(bucket: Path) -> RepoRegistry:
    return RepoRegistry(FolderStorage(bucket))


@pytest.fixture
def store() -> Iterator[MemoryKnowledgeStore]:
    memory = MemoryKnowledgeStore()
    yield memory
    memory.close()


def mirrored(store: MemoryKnowledgeStore, bucket: Path, name: str) -> dict[str, bytes]:
    """Index the bucket's scope; the repository's documents -> the mirrored bytes."""
    index_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions())
    prefix = f"_repos/{name}/"
    paths = [
        d.path[len(prefix) :]
        for d in store.list_documents(SCOPE, limit=1000).documents
        if d.path.startswith(prefix)
    ]
    return {p: (bucket / SCOPE.key / prefix / p).read_bytes() for p in paths}


def under(tree: dict[str, bytes], *prefixes: str) -> dict[str, bytes]:
    return {p: b for p, b in tree.items() if not prefixes or p.startswith(prefixes)}


def pack_sizes(server: GitHttpServer, since: int) -> int:
    return sum(size for path, size in server.sent[since:] if path.endswith("/git-upload-pack"))


def synced(registry: RepoRegistry, registration: RepoRegistration, **kwargs) -> SyncReport:
    report = sync_repository(registry, SCOPE, registration, **kwargs)
    assert report.ok, report.error
    return report


def test_a_sync_after_the_first_fetches_only_what_changed(
    server: GitHttpServer, tmp_path: Path, bucket: Path, registry: RepoRegistry, store
) -> None:
    work = Workdir(server.root, "wide", tmp_path / "work")
    for i in range(120):  # random bytes: the pack's size is what it carries
        work.write(f"docs/d{i % 6}/page{i}.md", f"# Page {i}\n\n{os.urandom(1500).hex()}")
    work.commit("initial")
    registration = RepoRegistration.from_request({"name": "wide", "url": server.url("wide")})
    registry.add(SCOPE, registration)
    sent = len(server.sent)
    first = synced(registry, registration)
    full = pack_sizes(server, sent)
    assert not first.incremental
    assert full > 150_000
    assert first.fetched_bytes > 150_000

    work.write("docs/d0/page0.md", "# Page 0\n\nEdited once.")
    edited = work.commit("one file")
    sent = len(server.sent)
    one = synced(registry, registration)
    assert one.incremental
    assert (one.commit, one.written, one.unchanged) == (edited, 1, 119)
    assert pack_sizes(server, sent) < full / 50  # the one blob and its trees, not the tree
    assert mirrored(store, bucket, "wide") == work.tree()

    # A rename: the server leaves the blob out as known, the mirror has its bytes.
    (work.path / "docs/d1/page1.md").rename(work.path / "docs/d1/renamed.md")
    work.commit("rename")
    sent = len(server.sent)
    moved = synced(registry, registration)
    assert moved.incremental  # no fall back to a full fetch
    assert (moved.written, moved.deleted) == (1, 1)
    assert pack_sizes(server, sent) < full / 50
    assert mirrored(store, bucket, "wide") == work.tree()

    # Nothing new on the branch: the refs are listed, no pack is asked for at all, and
    # the kept trees are not written again.
    kept = bucket / ".kb@repos" / SCOPE.key / "wide.trees"
    written_at = kept.stat().st_mtime_ns
    sent = len(server.sent)
    none = synced(registry, registration)
    assert (none.written, none.deleted, none.fetched_bytes) == (0, 0, 0)
    assert pack_sizes(server, sent) < 1_000
    assert kept.stat().st_mtime_ns == written_at
    assert mirrored(store, bucket, "wide") == work.tree()


def test_a_revert_to_an_older_blob_is_fetched_though_history_is_not(
    server: GitHttpServer, tmp_path: Path, bucket: Path, registry: RepoRegistry, store
) -> None:
    """A blob of an older commit (never fetched: depth 1) comes back; the client tells the
    server its commit is shallow, so the server never assumes the client has history."""
    work = Workdir(server.root, "revert", tmp_path / "work")
    work.write("guide.md", "# Guide\n\nVersion one.")
    work.write("other.md", "# Other")
    work.commit("v1")
    work.write("guide.md", "# Guide\n\nVersion two.")
    work.commit("v2")
    registration = RepoRegistration.from_request({"name": "rv", "url": server.url("revert")})
    registry.add(SCOPE, registration)
    synced(registry, registration)  # at v2: v1's blob was never fetched
    git(work.path, "revert", "--no-edit", "HEAD")
    git(work.path, "push", "-q", "origin", "main")
    report = synced(registry, registration)
    assert report.incremental
    assert (report.written, report.problems) == (1, [])
    assert mirrored(store, bucket, "rv") == work.tree()


def test_new_paths_on_an_unchanged_branch_are_fetched_in_full(
    server: GitHttpServer, tmp_path: Path, bucket: Path, registry: RepoRegistry, store
) -> None:
    """Files outside the old ``paths`` were never mirrored, yet the old tree names them:
    the server would leave them out, so the sync fetches in full for them."""
    work = Workdir(server.root, "prefixes", tmp_path / "work")
    work.write("docs/a.md", "# A")
    work.write("guides/b.md", "# B")
    work.write("guides/deep/c.rst", "C\n=\n\nText.")
    work.commit()
    narrow = RepoRegistration.from_request(
        {"name": "px", "url": server.url("prefixes"), "paths": ["docs"]}
    )
    registry.add(SCOPE, narrow)
    synced(registry, narrow)
    assert mirrored(store, bucket, "px") == under(work.tree(), "docs/")
    wide = RepoRegistration.from_request(
        {"name": "px", "url": server.url("prefixes"), "paths": ["docs", "guides"]}
    )
    registry.add(SCOPE, wide)
    report = synced(registry, wide)
    assert (report.written, report.unchanged, report.problems) == (2, 1, [])
    assert mirrored(store, bucket, "px") == under(work.tree(), "docs/", "guides/")
    # And narrower again: the files under the dropped prefix go.
    registry.add(SCOPE, narrow)
    report = synced(registry, narrow)
    assert report.deleted == 2
    assert mirrored(store, bucket, "px") == under(work.tree(), "docs/")


def test_a_large_file_stays_a_problem_on_an_incremental_sync(
    server: GitHttpServer, tmp_path: Path, bucket: Path, registry: RepoRegistry, store
) -> None:
    work = Workdir(server.root, "large", tmp_path / "work")
    work.allow_filter()
    work.write("big.txt", os.urandom(50_000).hex())
    work.write("small.md", "# Small")
    work.commit()
    registration = RepoRegistration.from_request({"name": "lg", "url": server.url("large")})
    registry.add(SCOPE, registration)
    bounds = SyncBounds(max_file_bytes=10_000)
    synced(registry, registration, bounds=bounds)
    work.write("small.md", "# Small\n\nEdited.")
    work.commit()
    sent = len(server.sent)
    report = synced(registry, registration, bounds=bounds)
    assert report.incremental
    assert report.problems == [{"path": "big.txt", "reason": "larger than 10000 bytes"}]
    assert pack_sizes(server, sent) < 5_000  # one fetch, without the large blob
    assert mirrored(store, bucket, "lg") == {"small.md": b"# Small\n\nEdited."}


def test_a_damaged_or_partial_tree_cache_falls_back_to_a_full_fetch(
    server: GitHttpServer, tmp_path: Path, bucket: Path, registry: RepoRegistry, store
) -> None:
    work = Workdir(server.root, "damaged", tmp_path / "work")
    work.write("keep/a.md", "# A")
    work.write("edit/b.md", "# B")
    work.commit()
    registration = RepoRegistration.from_request({"name": "dm", "url": server.url("damaged")})
    registry.add(SCOPE, registration)
    synced(registry, registration)
    trees = bucket / ".kb@repos" / SCOPE.key / "dm.trees"
    assert trees.is_file()

    trees.write_bytes(b"not a cache")
    work.write("edit/b.md", "# B\n\nTwice.")
    work.commit()
    report = synced(registry, registration)
    assert not report.incremental
    assert mirrored(store, bucket, "dm") == work.tree()

    # A cache without the unchanged folder's tree: the walk misses it, the fetch redoes.
    cache = TreeCache.from_bytes(trees.read_bytes())
    assert cache is not None
    keep_tree = git(work.path, "rev-parse", "HEAD:keep")
    from dulwich.objects import ShaFile

    cache.objects = [
        (t, raw)
        for t, raw in cache.objects
        if ShaFile.from_raw_string(t, raw).id.decode() != keep_tree
    ]
    trees.write_bytes(cache.to_bytes())
    work.write("edit/b.md", "# B\n\nThrice.")
    work.commit()
    report = synced(registry, registration)
    assert not report.incremental
    assert mirrored(store, bucket, "dm") == work.tree()


def test_a_tree_cache_whose_objects_cannot_be_read_falls_back_to_a_full_fetch(
    server: GitHttpServer, tmp_path: Path, bucket: Path, registry: RepoRegistry, store
) -> None:
    """A cache that parses but holds a tree dulwich cannot read: nothing of it is used."""
    work = Workdir(server.root, "unreadable", tmp_path / "work")
    work.write("a.md", "# A")
    work.commit()
    registration = RepoRegistration.from_request({"name": "ur", "url": server.url("unreadable")})
    registry.add(SCOPE, registration)
    synced(registry, registration)
    trees = bucket / ".kb@repos" / SCOPE.key / "ur.trees"
    cache = TreeCache.from_bytes(trees.read_bytes())
    assert cache is not None
    cache.objects = [*cache.objects, (2, b"not a tree")]  # 2: dulwich's tree type
    trees.write_bytes(cache.to_bytes())
    work.write("a.md", "# A\n\nTwice.")
    work.commit()
    report = synced(registry, registration)
    assert not report.incremental
    assert mirrored(store, bucket, "ur") == work.tree()


def test_a_force_push_over_a_fetched_commit_keeps_the_index_equal_to_the_tree(
    server: GitHttpServer, tmp_path: Path, bucket: Path, registry: RepoRegistry, store
) -> None:
    """The last synced commit is no longer on the branch (amended, then force-pushed, and
    the server's copy pruned): the server does not know it, and sends the whole tree."""
    work = Workdir(server.root, "forced", tmp_path / "work")
    work.write("a.md", "# A")
    work.write("b.md", "# B")
    work.commit()
    registration = RepoRegistration.from_request({"name": "fp", "url": server.url("forced")})
    registry.add(SCOPE, registration)
    synced(registry, registration)
    work.write("b.md", "# B amended")
    (work.path / "a.md").unlink()
    git(work.path, "add", "-A")
    git(work.path, "commit", "-q", "--amend", "-m", "amended")
    git(work.path, "push", "-q", "--force", "origin", "main")
    git(work.bare, "reflog", "expire", "--expire=now", "--all")
    git(work.bare, "gc", "-q", "--prune=now")
    report = synced(registry, registration)
    assert (report.written, report.deleted) == (1, 1)
    assert mirrored(store, bucket, "fp") == work.tree()


def test_trees_that_cannot_be_kept_cost_a_full_fetch_never_the_sync(
    server: GitHttpServer, tmp_path: Path, bucket: Path, registry: RepoRegistry, store
) -> None:
    """The kept trees' key cannot be written (nor deleted): the sync still succeeds and
    records its state; the next one fetches in full."""
    work = Workdir(server.root, "unkept", tmp_path / "work")
    work.write("a.md", "# A")
    work.commit()
    registration = RepoRegistration.from_request({"name": "uk", "url": server.url("unkept")})
    registry.add(SCOPE, registration)
    blocked = bucket / ".kb@repos" / SCOPE.key / "uk.trees"
    (blocked / "in-the-way").mkdir(parents=True)  # a folder where the file would go
    first = synced(registry, registration)
    assert registry.state(SCOPE, "uk").commit == first.commit
    work.write("a.md", "# A twice")
    work.commit()
    second = synced(registry, registration)
    assert not second.incremental
    assert mirrored(store, bucket, "uk") == work.tree()
