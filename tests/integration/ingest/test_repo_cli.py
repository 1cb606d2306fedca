"""``kb repo`` against a server (``--api-url``: a real ``kb serve`` on loopback, through
``KnowledgeClient``) and ``kb status`` listing a scope's repositories (from the server's
repos route, or from the served folder with ``--root``), against a real Git server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from git_server import GitHttpServer, Workdir

from knowledge.core.scope import KnowledgeScope
from knowledge.local.cli import main
from knowledge.local.server import LocalServer
from knowledge.stores.memory import MemoryKnowledgeStore

pytestmark = pytest.mark.integration

SCOPE = KnowledgeScope("ops-bot", "runbooks")
ARGS = ["--agent", SCOPE.agent, "--context", SCOPE.context]


@pytest.fixture(scope="module")
def git(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitHttpServer]:
    http = GitHttpServer(tmp_path_factory.mktemp("git-root"))
    yield http
    http.close()


def test_kb_repo_and_kb_status_through_a_server(
    git: GitHttpServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = Workdir(git.root, "team", tmp_path / "work")
    work.write("guide.md", "# Guide\n\nThe quokka procedure.")
    commit = work.commit()
    root = tmp_path / "served"
    (root / SCOPE.key).mkdir(parents=True)
    with LocalServer(root, MemoryKnowledgeStore(), port=0, poll_interval=60.0) as local:
        api = [*ARGS, "--api-url", local.url]
        assert main(["repo", "add", *api, "--name", "team", "--url", git.url("team")]) == 0
        assert "team: " in capsys.readouterr().out
        assert main(["repo", "add", *api, "--name", "gone", "--url", git.url("missing")]) == 0
        capsys.readouterr()
        # A sync of every repository of the scope: one fails, so the command does.
        assert main(["repo", "sync", *api]) == 1
        out = capsys.readouterr().out
        assert f"team: at {commit[:12]}: 1 written" in out
        assert "gone: sync failed (unreachable)" in out
        assert (root / SCOPE.key / "_repos/team/guide.md").is_file()

        # kb status through the server: the index, then each repository.
        assert main(["status", *api]) == 0
        out = capsys.readouterr().out
        assert "repos:        2" in out
        assert f"team: {git.url('team')} [main] at {commit[:12]}, 1 files" in out
        assert "gone: " in out
        assert "error (unreachable)" in out
        assert main(["status", *api, "--json"]) == 0
        body = json.loads(capsys.readouterr().out)
        assert [(r["name"], r["status"]["commit"]) for r in body["repos"]] == [
            ("gone", None),
            ("team", commit),
        ]
        assert body["repos"][0]["status"]["error"]["kind"] == "unreachable"

        assert main(["repo", "list", *api, "--json"]) == 0
        assert len(json.loads(capsys.readouterr().out)["repos"]) == 2
        assert main(["repo", "remove", *api, "--name", "gone"]) == 0
        assert "removed gone" in capsys.readouterr().out

    # Locally, with the folder kb serve served: the same repositories.
    db = ["--db", str(tmp_path / "kb.db")]
    assert main(["index", str(root / SCOPE.key), *ARGS, *db]) == 0
    capsys.readouterr()
    assert main(["status", *ARGS, *db, "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "repos:        1" in out
    assert f"team: {git.url('team')} [main] at {commit[:12]}" in out
    # Without --root or --api-url the status says nothing about repositories.
    assert main(["status", *ARGS, *db]) == 0
    assert "repos:" not in capsys.readouterr().out


def test_kb_repo_needs_a_folder_or_a_server_not_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["repo", "list", *ARGS]) == 2
    assert "ROOT" in capsys.readouterr().err
    both = ["repo", "list", str(tmp_path), *ARGS, "--api-url", "http://127.0.0.1:9"]
    assert main(both) == 2
    assert "not both" in capsys.readouterr().err
