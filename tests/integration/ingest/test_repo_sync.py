"""Git repository sources against a real Git server on loopback (``git http-backend``).

Every sync fetches over the smart-HTTP protocol with dulwich, mirrors into a bucket
folder, and the folder is indexed as ``kb index``/``kb serve`` do; after every sync the
index holds exactly the repository's readable files at the synced commit.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from git_server import GitHttpServer, Workdir

from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.repos.registration import RepoRegistration, SyncBounds
from knowledge.ingest.repos.state import RepoRegistry
from knowledge.ingest.repos.storage import FolderStorage
from knowledge.ingest.repos.sync import SyncReport, sync_repository
from knowledge.ingest.sources.folders import BucketFolderSource
from knowledge.stores.memory import MemoryKnowledgeStore

pytestmark = pytest.mark.integration

SCOPE = KnowledgeScope("ops-bot", "runbooks")
READABLE = (".md", ".txt", ".rst", ".yaml", ".yml", ".toml", ".json", ".adoc")


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


def new_repo(server: GitHttpServer, tmp_path: Path, name: str) -> Workdir:
    return Workdir(server.root, name, tmp_path / f"work-{name.replace('/', '-')}")


def indexed(store: MemoryKnowledgeStore, bucket: Path, prefix: str) -> dict[str, str | None]:
    """Index the bucket folder's scope; return its documents under ``prefix`` -> origin."""
    index_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions())
    page = store.list_documents(SCOPE, limit=1000)
    return {d.path[len(prefix) :]: d.origin for d in page.documents if d.path.startswith(prefix)}


def kind(report: SyncReport) -> str | None:
    return None if report.error is None else report.error["kind"]


def readable(tree: dict[str, bytes]) -> set[str]:
    return {
        p
        for p in tree
        if p.lower().endswith(READABLE)
        and not any(s.startswith(".") for s in p.split("/"))
        and not p.endswith(".metadata.json")
    }


def test_add_edit_rename_delete_and_force_push_keep_the_index_equal_to_the_tree(
    server: GitHttpServer, tmp_path: Path, bucket: Path, registry: RepoRegistry, store
) -> None:
    work = new_repo(server, tmp_path, "team/docs")
    work.write("README.md", "# Team docs\n\nStart here.")
    work.write("runbooks/rollback.md", "# Rollback\n\nRun the zebracorn rollback.")
    work.write("notes/deploy.rst", "Deploy\n======\n\nThe deploy checklist.")
    work.write("images/logo.png", b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    work.write(".github/workflow.yml", "on: push")
    first = work.commit("initial")
    # An upload beside the mirror, and another repository's mirror: never touched.
    (bucket / SCOPE.key).mkdir(parents=True)
    (bucket / SCOPE.key / "upload.md").write_text("# Upload\n\nMine.")
    other = bucket / SCOPE.key / "_repos" / "other" / "kept.md"
    other.parent.mkdir(parents=True)
    other.write_text("# Kept\n\nAnother repository's file.")

    registration = RepoRegistration.from_request({"name": "docs", "url": server.url("team/docs")})
    registry.add(SCOPE, registration)
    report = sync_repository(registry, SCOPE, registration)
    assert report.ok, report.error
    assert report.commit == first
    assert report.written == 3
    state = registry.state(SCOPE, "docs")
    assert state.commit == first
    assert state.unread_files == {".png": 1}
    docs = indexed(store, bucket, "_repos/docs/")
    assert (
        set(docs)
        == readable(work.tree())
        == {"README.md", "runbooks/rollback.md", "notes/deploy.rst"}
    )
    assert set(docs.values()) == {"repo"}
    hits = store.search(SCOPE, SearchQuery("zebracorn rollback", mode=SearchMode.KEYWORD))
    assert (
        hits[0].metadata["url"] == f"http://127.0.0.1:{server.port}/team/docs/runbooks/rollback.md"
    )
    assert hits[0].origin == "repo"

    # Edit one file: one write, one document re-indexed.
    work.write("runbooks/rollback.md", "# Rollback\n\nRun the zebracorn rollback twice.")
    second = work.commit("edit")
    report = sync_repository(registry, SCOPE, registration)
    assert (report.written, report.deleted, report.unchanged) == (1, 0, 2)
    result = index_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions())
    assert result.indexed_documents == 1
    assert registry.state(SCOPE, "docs").files["README.md"][1] == first  # unchanged blob kept
    assert registry.state(SCOPE, "docs").files["runbooks/rollback.md"] == [
        registry.state(SCOPE, "docs").files["runbooks/rollback.md"][0],
        second,
    ]

    # Rename and delete.
    work.write("runbooks/roll-back.md", (work.path / "runbooks/rollback.md").read_bytes())
    (work.path / "runbooks/rollback.md").unlink()
    (work.path / "notes/deploy.rst").unlink()
    work.commit("rename and delete")
    report = sync_repository(registry, SCOPE, registration)
    assert (report.written, report.deleted) == (1, 2)
    assert set(indexed(store, bucket, "_repos/docs/")) == readable(work.tree())
    assert not (bucket / SCOPE.key / "_repos/docs/notes").exists()  # empty folder removed

    # Force-push an unrelated history: the tree decides, not the history.
    work.path.joinpath(".git").rename(tmp_path / "old-git")
    import shutil

    shutil.rmtree(work.path)
    rewritten = Workdir.__new__(Workdir)
    rewritten.bare, rewritten.branch = work.bare, "main"
    rewritten.path = tmp_path / "rewritten"
    from git_server import git

    rewritten.path.mkdir()
    git(rewritten.path, "init", "-q", "-b", "main")
    git(rewritten.path, "remote", "add", "origin", str(work.bare))
    rewritten.write("only.md", "# Only\n\nA rewritten history.")
    forced = rewritten.commit("rewrite", force=True)
    report = sync_repository(registry, SCOPE, registration)
    assert report.ok
    assert report.commit == forced
    docs = indexed(store, bucket, "_repos/docs/")
    assert set(docs) == {"only.md"} == readable(rewritten.tree())
    everything = {d.path for d in store.list_documents(SCOPE, limit=1000).documents}
    assert {"upload.md", "_repos/other/kept.md"} <= everything
    assert (bucket / SCOPE.key / "upload.md").read_text() == "# Upload\n\nMine."


def test_private_repository_with_a_token_and_the_failures_that_keep_the_last_sync(
    server: GitHttpServer,
    tmp_path: Path,
    bucket: Path,
    registry: RepoRegistry,
    store,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    work = new_repo(server, tmp_path, "private/secrets")
    work.write("guide.md", "# Guide\n\nThe private quokka guide.")
    work.commit()
    registration = RepoRegistration.from_request(
        {"name": "priv", "url": server.url("private/secrets"), "credential": "env:KB_TEST_TOKEN"}
    )
    registry.add(SCOPE, registration)
    monkeypatch.setenv("KB_TEST_TOKEN", "wrong-token")
    report = sync_repository(registry, SCOPE, registration)
    assert kind(report) == "credentials"
    assert not (bucket / SCOPE.key / "_repos").exists()

    monkeypatch.setenv("KB_TEST_TOKEN", server.token)
    report = sync_repository(registry, SCOPE, registration)
    assert report.ok, report.error
    assert set(indexed(store, bucket, "_repos/priv/")) == {"guide.md"}

    # Unset, then wrong again, then an unreachable host: the last good sync stays.
    monkeypatch.delenv("KB_TEST_TOKEN")
    report = sync_repository(registry, SCOPE, registration)
    assert kind(report) == "credential"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    gone = RepoRegistration.from_request(
        {"name": "priv", "url": f"http://127.0.0.1:{closed_port}/private/secrets.git"}
    )
    report = sync_repository(registry, SCOPE, gone)
    assert kind(report) == "unreachable"
    state = registry.state(SCOPE, "priv")
    assert state.error == report.error
    assert state.commit is not None
    assert set(indexed(store, bucket, "_repos/priv/")) == {"guide.md"}
    # The token is nowhere in what the product stored.
    stored = b"".join(p.read_bytes() for p in bucket.rglob("*") if p.is_file())
    assert server.token.encode() not in stored
    assert (
        json.loads((bucket / ".kb@repos" / SCOPE.key / "priv.json").read_text())["credential"]
        == "env:KB_TEST_TOKEN"
    )


def test_bounds_fail_before_writing_and_a_large_file_is_a_problem(
    server: GitHttpServer, tmp_path: Path, bucket: Path, registry: RepoRegistry, store
) -> None:
    work = new_repo(server, tmp_path, "big")
    for i in range(5):
        work.write(f"docs/page{i}.md", f"# Page {i}\n\nText {i}.")
    work.write("docs/huge.txt", "x" * 5000)
    work.write("other/skip.md", "# Outside the paths")
    work.commit()
    registration = RepoRegistration.from_request(
        {"name": "big", "url": server.url("big"), "paths": ["docs"]}
    )
    registry.add(SCOPE, registration)
    report = sync_repository(registry, SCOPE, registration, bounds=SyncBounds(max_files=3))
    assert kind(report) == "bounds"
    assert "6 files" in (report.error or {})["message"]
    assert not (bucket / SCOPE.key).exists()
    report = sync_repository(registry, SCOPE, registration, bounds=SyncBounds(max_repo_bytes=200))
    assert kind(report) == "bounds"

    report = sync_repository(registry, SCOPE, registration, bounds=SyncBounds(max_file_bytes=1000))
    assert report.ok
    assert report.problems == [{"path": "docs/huge.txt", "reason": "larger than 1000 bytes"}]
    assert set(indexed(store, bucket, "_repos/big/")) == {f"docs/page{i}.md" for i in range(5)}

    # A server with protocol v2's filter never sends the large blobs: the same problems,
    # and the pack holds no 300 kB of random bytes.
    work.allow_filter()
    work.write("docs/random.txt", os.urandom(300_000))
    work.commit()
    report = sync_repository(registry, SCOPE, registration, bounds=SyncBounds(max_file_bytes=1000))
    assert report.ok
    assert report.problems == [
        {"path": "docs/huge.txt", "reason": "larger than 1000 bytes"},
        {"path": "docs/random.txt", "reason": "larger than 1000 bytes"},
    ]
    pack = [size for path, size in server.sent if path.endswith("/git-upload-pack")][-1]
    assert pack < 20_000

    missing = RepoRegistration.from_request(
        {"name": "big", "url": server.url("big"), "branch": "nope"}
    )
    report = sync_repository(registry, SCOPE, missing)
    assert kind(report) == "branch"
    assert registry.state(SCOPE, "big").commit is not None


def test_a_small_pack_that_inflates_past_the_bound_is_refused_before_it_is_inflated(
    server: GitHttpServer, tmp_path: Path, bucket: Path, registry: RepoRegistry
) -> None:
    """A server without ``filter`` sends every blob: 8 MB of zeros is a pack of a few kB,
    under ``max_repo_bytes``, that would inflate into memory whole; it is measured from
    the pack's headers first and refused, nothing written."""
    work = new_repo(server, tmp_path, "bomb")
    work.write("docs/a.md", "# A\n\nText.")
    work.write("docs/zeros.txt", b"\0" * 8_000_000)
    work.commit()
    registration = RepoRegistration.from_request({"name": "bomb", "url": server.url("bomb")})
    registry.add(SCOPE, registration)
    bounds = SyncBounds(max_repo_bytes=1_000_000, max_inflated_bytes=4_000_000)
    report = sync_repository(registry, SCOPE, registration, bounds=bounds)
    pack = [size for path, size in server.sent if path.endswith("/git-upload-pack")][-1]
    assert pack < 100_000  # the fetched pack is well under max_repo_bytes
    assert kind(report) == "bounds"
    assert "4000000 bytes uncompressed" in (report.error or {})["message"]
    assert not (bucket / SCOPE.key).exists()
    # Under a bound it fits, the same repository syncs (the big file is a problem).
    bounds = SyncBounds(max_inflated_bytes=9_000_000, max_file_bytes=1_000_000)
    report = sync_repository(registry, SCOPE, registration, bounds=bounds)
    assert report.ok, report.error
    assert (bucket / SCOPE.key / "_repos/bomb/docs/a.md").is_file()


def test_remove_deletes_only_that_repositorys_mirror(
    server: GitHttpServer, tmp_path: Path, bucket: Path, registry: RepoRegistry, store
) -> None:
    work = new_repo(server, tmp_path, "removable")
    work.write("a.md", "# A")
    work.commit()
    (bucket / SCOPE.key).mkdir(parents=True)
    (bucket / SCOPE.key / "upload.md").write_text("# Upload")
    registration = RepoRegistration.from_request({"name": "rm", "url": server.url("removable")})
    registry.add(SCOPE, registration)
    assert sync_repository(registry, SCOPE, registration).ok
    assert registry.names(SCOPE) == ["rm"]
    kept = bucket / ".kb@repos" / SCOPE.key
    assert sorted(p.name for p in kept.iterdir()) == [
        "rm.json",
        "rm.state.json",
        "rm.status.json",
        "rm.trees",
    ]
    assert registry.remove(SCOPE, "rm") == 2  # the file and its sidecar
    assert registry.names(SCOPE) == []
    assert not kept.exists()  # registration, state, summary, trees: all gone (and the folder)
    assert set(indexed(store, bucket, "")) == {"upload.md"}


# --- the front ends: kb serve's routes, KnowledgeClient, kb repo -------------------------


def test_routes_and_client_register_sync_and_remove_on_kb_serve(
    server: GitHttpServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from knowledge.client import KnowledgeClient
    from knowledge.core.errors import NotFoundError, ValidationError
    from knowledge.local.server import LocalServer

    work = new_repo(server, tmp_path, "private/served")
    work.write("docs/howto.md", "# How to\n\nFeed the wombat twice a day.")
    commit = work.commit()
    root = tmp_path / "served"
    (root / SCOPE.key).mkdir(parents=True)
    (root / SCOPE.key / "upload.md").write_text("# Upload\n\nNot a wombat.")
    monkeypatch.setenv("KB_SERVED_TOKEN", server.token)
    store = MemoryKnowledgeStore()
    with LocalServer(root, store, port=0, poll_interval=60.0) as local:
        client = KnowledgeClient(local.url)
        added = client.add_repo(
            SCOPE,
            {
                "name": "served",
                "url": server.url("private/served"),
                "credential": "env:KB_SERVED_TOKEN",
            },
        )
        assert added["credential"] == "env"
        assert "KB_SERVED_TOKEN" not in json.dumps(added)
        assert added["status"]["commit"] is None
        with pytest.raises(ValidationError) as refused:
            client.add_repo(SCOPE, {"name": "bad", "url": "https://x:tok@h/o/r.git"})
        assert refused.value.field == "url"
        report = client.sync_repo(SCOPE, "served")
        assert report["commit"] == commit
        assert report["written"] == 1
        assert report["indexed_documents"] == 1
        hits = client.search(SCOPE, SearchQuery("wombat twice", mode=SearchMode.KEYWORD))
        assert hits[0].document_path == "_repos/served/docs/howto.md"
        assert hits[0].origin == "repo"
        listed = client.list_repos(SCOPE)
        assert [r["name"] for r in listed] == ["served"]
        assert listed[0]["status"]["commit"] == commit
        assert client.get_repo(SCOPE, "served")["status"]["files"] == 1
        status = local.api.status(SCOPE.agent, SCOPE.context).body
        assert [(r["name"], r["commit"], r["error"]) for r in status["repos"]] == [
            ("served", commit, None)
        ]
        with pytest.raises(NotFoundError):
            client.get_repo(SCOPE, "nope")
        assert client.remove_repo(SCOPE, "served")["removed"] is True
        local.api.reindex(SCOPE.agent, SCOPE.context)
        paths = {d.path for d in store.list_documents(SCOPE).documents}
        assert paths == {"upload.md"}


def test_kb_repo_commands_and_the_serve_interval(
    server: GitHttpServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from knowledge.ingest.repos.kb_serve import LocalRepos, RepoScheduler
    from knowledge.local.cli import main

    work = new_repo(server, tmp_path, "cli")
    work.write("a.md", "# A\n\nAlpha.")
    work.commit()
    root = tmp_path / "root"
    root.mkdir()
    db = tmp_path / "kb.db"
    scope = ["--agent", SCOPE.agent, "--context", SCOPE.context, "--db", str(db)]
    assert (
        main(["repo", "add", str(root), *scope, "--name", "cli", "--url", server.url("cli")]) == 0
    )
    assert main(["repo", "sync", str(root), *scope]) == 0
    assert "1 written" in capsys.readouterr().out
    assert main(["repo", "list", str(root), *scope]) == 0
    assert "cli: " in capsys.readouterr().out
    assert main(["search", "Alpha", *scope, "--mode", "keyword"]) == 0
    assert "_repos/cli/a.md" in capsys.readouterr().out

    # kb serve's interval: a due repository is synced, a fresh one is not.
    work.write("b.md", "# B\n\nBeta.")
    work.commit()
    indexed_scopes: list[KnowledgeScope] = []
    repos = LocalRepos(root, indexed_scopes.append)
    assert RepoScheduler(repos, interval=3600.0).run_once() == 0  # synced a moment ago
    assert RepoScheduler(repos, interval=0.0).run_once() == 1
    assert indexed_scopes == [SCOPE]
    assert (root / SCOPE.key / "_repos/cli/b.md").is_file()
    assert main(["repo", "remove", str(root), *scope, "--name", "cli"]) == 0
    assert not (root / SCOPE.key / "_repos/cli").exists()


def test_a_sync_out_of_time_stops_writing_and_the_next_one_continues(
    server: GitHttpServer, tmp_path: Path, bucket: Path, registry: RepoRegistry, store
) -> None:
    work = new_repo(server, tmp_path, "slow")
    for i in range(6):
        work.write(f"p{i}.md", f"# P{i}\n\nPage {i}.")
    commit = work.commit()
    registration = RepoRegistration.from_request({"name": "slow", "url": server.url("slow")})
    registry.add(SCOPE, registration)
    ticks = iter(range(10_000))

    def clock() -> float:
        """A clock that passes one second per call: the budget ends after a few writes."""
        return float(next(ticks))

    bounds = SyncBounds(time_budget_seconds=4.0)
    report = sync_repository(registry, SCOPE, registration, bounds=bounds, clock=clock)
    assert kind(report) == "time"
    assert 0 < report.written < 6
    state = registry.state(SCOPE, "slow")
    assert state.commit is None  # not synced yet: the state says what the mirror holds
    assert len(state.files) == report.written
    assert set(indexed(store, bucket, "_repos/slow/")) == set(state.files)
    report = sync_repository(registry, SCOPE, registration)
    assert report.ok
    assert report.commit == commit
    assert report.unchanged == len(state.files)
    assert set(indexed(store, bucket, "_repos/slow/")) == readable(work.tree())


def test_a_link_in_the_mirror_is_never_written_through(
    server: GitHttpServer, tmp_path: Path, bucket: Path, registry: RepoRegistry
) -> None:
    work = new_repo(server, tmp_path, "linked")
    work.write("ok.md", "# OK")
    work.write("sub/escape.md", "# Escape")
    work.commit()
    outside = tmp_path / "outside"
    outside.mkdir()
    mirror = bucket / SCOPE.key / "_repos" / "linked"
    mirror.mkdir(parents=True)
    (mirror / "sub").symlink_to(outside, target_is_directory=True)
    registration = RepoRegistration.from_request({"name": "linked", "url": server.url("linked")})
    registry.add(SCOPE, registration)
    report = sync_repository(registry, SCOPE, registration)
    assert kind(report) == "storage"
    assert report.problems == [{"path": "sub/escape.md", "reason": "not written (PermissionError)"}]
    assert list(outside.iterdir()) == []
    assert (mirror / "ok.md").is_file()
    assert registry.state(SCOPE, "linked").commit is None  # not a complete sync


def test_a_file_that_cannot_be_deleted_stays_in_the_manifest_for_the_next_sync(
    server: GitHttpServer, tmp_path: Path, bucket: Path, registry: RepoRegistry
) -> None:
    work = new_repo(server, tmp_path, "undeletable")
    work.write("ok.md", "# OK")
    work.write("sub/old.md", "# Old")
    first = work.commit()
    registration = RepoRegistration.from_request(
        {"name": "undeletable", "url": server.url("undeletable")}
    )
    registry.add(SCOPE, registration)
    assert sync_repository(registry, SCOPE, registration).ok
    # The mirror's folder becomes a link out of the bucket: nothing is deleted through it.
    mirror = bucket / SCOPE.key / "_repos" / "undeletable"
    outside = tmp_path / "outside"
    (mirror / "sub").rename(outside)
    (mirror / "sub").symlink_to(outside, target_is_directory=True)
    (work.path / "sub/old.md").unlink()
    work.write("new.md", "# New")
    work.commit()
    report = sync_repository(registry, SCOPE, registration)
    assert kind(report) == "storage"
    assert report.problems == [{"path": "sub/old.md", "reason": "not deleted (PermissionError)"}]
    assert (report.deleted, report.written, report.commit) == (0, 1, first)
    assert (outside / "old.md").is_file()
    state = registry.state(SCOPE, "undeletable")
    assert state.commit == first  # not a complete sync
    assert set(state.files) == {"ok.md", "sub/old.md", "new.md"}  # the next sync retries it


def test_a_fetch_past_the_deadline_stops_and_writes_nothing(
    server: GitHttpServer, tmp_path: Path, bucket: Path, registry: RepoRegistry
) -> None:
    work = new_repo(server, tmp_path, "late")
    work.write("a.md", "# A")
    work.commit()
    registration = RepoRegistration.from_request({"name": "late", "url": server.url("late")})
    registry.add(SCOPE, registration)
    ticks = iter([0.0])

    def clock() -> float:
        """The sync starts at 0; by the time the pack arrives, an hour has passed."""
        return next(ticks, 3600.0)

    report = sync_repository(registry, SCOPE, registration, clock=clock)
    assert report.error == {
        "kind": "time",
        "message": "the fetch did not finish inside the sync budget",
    }
    assert (report.commit, report.written) == (None, 0)
    assert not (bucket / SCOPE.key / "_repos" / "late").exists()
