"""What a sync selects of a repository's tree, against a real Git server on loopback
(``git http-backend``): path prefixes, hidden folders, symbolic links and submodules,
the text types (.rst, .toml, .adoc) and the unread files counted by extension."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from git_server import GitHttpServer, Workdir, git

from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.repos.registration import RepoRegistration
from knowledge.ingest.repos.state import RepoRegistry
from knowledge.ingest.repos.storage import FolderStorage
from knowledge.ingest.repos.sync import sync_repository
from knowledge.ingest.sources.folders import BucketFolderSource
from knowledge.stores.memory import MemoryKnowledgeStore

pytestmark = pytest.mark.integration

SCOPE = KnowledgeScope("ops-bot", "runbooks")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitHttpServer]:
    http = GitHttpServer(tmp_path_factory.mktemp("git-root"))
    yield http
    http.close()


def _links_and_a_submodule(work: Workdir) -> None:
    """A symbolic link and a submodule in ``docs/``, at the root and in ``.github/``."""
    for folder in ("docs/", "", ".github/"):
        (work.path / f"{folder}link.md").parent.mkdir(parents=True, exist_ok=True)
        (work.path / f"{folder}link.md").symlink_to("target.md")
    git(work.path, "add", "-A")
    head = git(work.path, "rev-parse", "HEAD")
    for folder in ("docs/", "", ".github/"):  # a gitlink: no folder in the work tree
        git(work.path, "update-index", "--add", "--cacheinfo", f"160000,{head},{folder}vendor")
    git(work.path, "commit", "-q", "-m", "links and submodules")
    git(work.path, "push", "-q", "origin", work.branch)


def test_problems_and_unread_counts_are_only_of_the_selected_files(
    server: GitHttpServer, tmp_path: Path
) -> None:
    work = Workdir(server.root, "selected", tmp_path / "work")
    work.write("docs/guide.md", "# Guide")
    work.write("docs/logo.png", b"\x89PNG")
    work.write("other/photo.jpg", b"\xff\xd8")
    work.write("other/tool.exe", b"MZ")
    work.commit()
    _links_and_a_submodule(work)
    registry = RepoRegistry(FolderStorage(tmp_path / "bucket"))
    narrow = RepoRegistration.from_request(
        {"name": "sel", "url": server.url("selected"), "paths": ["docs"]}
    )
    registry.add(SCOPE, narrow)
    report = sync_repository(registry, SCOPE, narrow)
    assert report.ok, report.error
    # Under the prefix only: the link and the submodule of docs/, one .png.
    assert report.problems == [
        {"path": "docs/link.md", "reason": "symbolic link not synced"},
        {"path": "docs/vendor", "reason": "submodule not synced"},
    ]
    assert registry.state(SCOPE, "sel").unread_files == {".png": 1}

    # The whole repository: the root's too, never the hidden folder's.
    whole = RepoRegistration.from_request({"name": "sel", "url": server.url("selected")})
    registry.add(SCOPE, whole)
    report = sync_repository(registry, SCOPE, whole)
    assert report.ok, report.error
    assert sorted(p["path"] for p in report.problems) == [
        "docs/link.md",
        "docs/vendor",
        "link.md",
        "vendor",
    ]
    assert registry.state(SCOPE, "sel").unread_files == {".exe": 1, ".jpg": 1, ".png": 1}


def test_rst_toml_and_adoc_are_read_as_text_and_found(
    server: GitHttpServer, tmp_path: Path
) -> None:
    work = Workdir(server.root, "texts", tmp_path / "work")
    work.write("docs/deploy.rst", "Deploy\n======\n\nThe quetzal rollout checklist.")
    work.write("config/service.toml", '[service]\nname = "wombat-gateway"\nretries = 3\n')
    work.write("manual/ops.adoc", "= Operations\n\nThe axolotl failover procedure.")
    work.commit()
    bucket = tmp_path / "bucket"
    registry = RepoRegistry(FolderStorage(bucket))
    registration = RepoRegistration.from_request(
        {"name": "txt", "url": server.url("texts"), "paths": ["docs", "config", "manual"]}
    )
    registry.add(SCOPE, registration)
    assert sync_repository(registry, SCOPE, registration).ok
    store = MemoryKnowledgeStore()
    try:
        index_source(store, SCOPE, BucketFolderSource(bucket), IndexOptions())
        for query, path in (
            ("quetzal rollout", "_repos/txt/docs/deploy.rst"),
            ("wombat-gateway", "_repos/txt/config/service.toml"),
            ("axolotl failover", "_repos/txt/manual/ops.adoc"),
        ):
            (hit, *_) = store.search(SCOPE, SearchQuery(query, mode=SearchMode.KEYWORD))
            assert hit.document_path == path
            assert hit.origin == "repo"
            assert hit.url == f"{server.url('texts').removesuffix('.git')}/{path[11:]}"
    finally:
        store.close()
