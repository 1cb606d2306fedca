"""``kb repo add|list|remove|sync``: repositories of a served folder (``ROOT``) or of a
server (``--api-url``: a deployed stack or a ``kb serve``, through ``KnowledgeClient``).

``ROOT`` is the folder ``kb serve ROOT`` serves (``<agent>/<context>/...``); the
registration goes to its ``.kb@repos/``. ``sync`` mirrors the repository into
``ROOT/<agent>/<context>/_repos/<name>/`` and indexes the scope into the store
(``--db``...), as ``kb index`` would; a running ``kb serve`` picks the change up too.
With ``--api-url`` the server does the same (on AWS a sync is queued: 202).
A credential is given as a reference (``env:NAME``, ``file:/path``; a Secrets Manager
ARN on AWS), never as a value.

``kb status`` shows the scope's repositories too (``scope_repos``, ``repo_lines``):
from ``--root ROOT`` locally, or from the server's repos route with ``--api-url``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from knowledge.core.errors import KnowledgeError, ValidationError
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.pipeline import index_source

__all__ = ["add_repo_commands", "repo_lines", "scope_repos"]


class _RemoteRepos:
    """The repository actions over a server's routes, answering as ``RepoService`` does
    (``(status, body)``)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def add(self, scope: KnowledgeScope, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 200, self._client.add_repo(scope, body)

    def list(self, scope: KnowledgeScope) -> tuple[int, dict[str, Any]]:
        return 200, {"repos": self._client.list_repos(scope)}

    def remove(self, scope: KnowledgeScope, name: str) -> tuple[int, dict[str, Any]]:
        return 200, self._client.remove_repo(scope, name)

    def sync(self, scope: KnowledgeScope, name: str) -> tuple[int, dict[str, Any]]:
        return 200, self._client.sync_repo(scope, name)

    def names(self, scope: KnowledgeScope) -> Sequence[str]:
        return [str(repo["name"]) for repo in self._client.list_repos(scope)]


def _local_service(root: Path, args: argparse.Namespace) -> Any:
    from knowledge.ingest.repos.kb_serve import LocalRepos

    if not root.is_dir():
        raise ValidationError("ROOT", f"'{root}' is not a folder")

    def index_scope(scope: KnowledgeScope) -> Any:
        from knowledge.core.model import IndexOptions
        from knowledge.ingest.sources.folders import BucketFolderSource
        from knowledge.local.cli_open import open_cli_store

        with closing(open_cli_store(args)) as store:
            return index_source(store, scope, BucketFolderSource(root), IndexOptions())

    return LocalRepos(root, index_scope).service


def _service(args: argparse.Namespace) -> Any:
    if args.api_url:
        if args.root is not None:
            raise ValidationError("ROOT", "give a folder or --api-url, not both")
        from knowledge.local.cli_open import open_client

        return _RemoteRepos(open_client(args))
    if args.root is None:
        raise ValidationError("ROOT", "give the folder kb serve serves, or --api-url")
    return _local_service(Path(args.root), args)


def _names(service: Any, scope: KnowledgeScope) -> Sequence[str]:
    if isinstance(service, _RemoteRepos):
        return service.names(scope)
    return [r.name for r in service.registry.all(scope)]


def scope_repos(
    args: argparse.Namespace, scope: KnowledgeScope
) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The scope's repositories for ``kb status``, and why they could not be listed:
    ``(None, None)`` when neither ``--api-url`` nor ``--root`` says where they are."""
    try:
        if getattr(args, "api_url", None):
            from knowledge.local.cli_open import open_client

            return list(open_client(args).list_repos(scope)), None
        if getattr(args, "root", None) is not None:
            _, body = _local_service(Path(args.root), args).list(scope)
            return list(body["repos"]), None
    except KnowledgeError as exc:
        return None, str(exc)
    return None, None


def _shown_url(url: str) -> str:
    """The URL without a password (a registration never holds one; this is belt and
    braces for a line that is printed)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}@{host}" if parts.username else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def repo_lines(repos: list[dict[str, Any]]) -> list[str]:
    """One line per repository, then its problems indented."""
    lines = []
    for repo in repos:
        lines.append(_line(repo))
        lines += [f"  {p['path']}: {p['reason']}" for p in repo["status"]["problems"]]
    return lines


def _print(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2), file=sys.stdout)


def _line(repo: dict[str, Any]) -> str:
    status = repo["status"]
    commit = (status["commit"] or "never synced")[:12]
    error = status["error"]
    tail = f"  error ({error['kind']}): {error['message']}" if error else ""
    return (
        f"{repo['name']}: {_shown_url(repo['url'])} [{repo['branch']}] at {commit}, "
        f"{status['files']} files, synced {status['synced_at'] or 'never'}, "
        f"{len(status['problems'])} problems{tail}"
    )


def _cmd(args: argparse.Namespace) -> int:
    scope = KnowledgeScope(args.agent, args.context)
    service = _service(args)
    if args.repo_command == "add":
        body: dict[str, Any] = {"name": args.name, "url": args.url, "branch": args.branch}
        if args.path:
            body["paths"] = args.path
        if args.credential:
            body["credential"] = args.credential
        if args.username:
            body["username"] = args.username
        if args.known_hosts:
            body["known_hosts"] = Path(args.known_hosts).read_text(encoding="utf-8")
        _, answer = service.add(scope, body)
        _print(answer) if args.json else print(_line(answer))
        return 0
    if args.repo_command == "list":
        _, answer = service.list(scope)
        if args.json:
            _print(answer)
        for line in [] if args.json else repo_lines(answer["repos"]):
            print(line)
        return 0
    if args.repo_command == "remove":
        _, answer = service.remove(scope, args.name)
        _print(answer) if args.json else print(
            f"removed {args.name} ({answer['deleted_files']} files)"
        )
        return 0
    names = [args.name] if args.name else _names(service, scope)
    failed = 0
    for name in names:
        _, answer = service.sync(scope, name)
        if args.json:
            _print(answer)
        elif answer.get("accepted"):  # AWS: queued, the repos function syncs it
            print(f"{name}: sync queued (kb repo list shows its result)")
            continue
        elif answer["error"]:
            print(f"{name}: sync failed ({answer['error']['kind']}): {answer['error']['message']}")
        else:
            print(
                f"{name}: at {answer['commit'][:12]}: {answer['written']} written, "
                f"{answer['deleted']} deleted, {answer['unchanged']} unchanged; "
                f"indexed {answer.get('indexed_documents', 0)} documents"
            )
        failed += answer.get("error") is not None
    return 1 if failed else 0


def add_repo_commands(
    commands: Any,
    store: argparse.ArgumentParser,
    scoped: argparse.ArgumentParser,
    remote: argparse.ArgumentParser | None = None,
) -> None:
    repo = commands.add_parser("repo", help="Git repositories as a scope's documents")
    sub = repo.add_subparsers(dest="repo_command", required=True, metavar="ACTION")
    parents = [store, scoped] if remote is None else [store, scoped, remote]

    def action(name: str, helptext: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = sub.add_parser(name, parents=parents, help=helptext)
        parser.add_argument(
            "root", metavar="ROOT", nargs="?", help="the folder kb serve serves (or --api-url)"
        )
        parser.add_argument("--json", action="store_true", help="print JSON")
        parser.set_defaults(handler=_cmd)
        return parser

    add = action("add", "register a repository (or update its registration)")
    add.add_argument("--name", required=True, help="its folder: _repos/<name>/")
    add.add_argument("--url", required=True, help="https://, http:// or ssh:// clone URL")
    add.add_argument("--branch", default="main", help="the branch synced (default main)")
    add.add_argument("--path", action="append", help="only files under this folder (repeatable)")
    add.add_argument(
        "--credential", help="env:NAME or file:/path (token or SSH key); on AWS a secret ARN"
    )
    add.add_argument("--username", help="HTTPS user sent with a token (default x-access-token)")
    add.add_argument("--known-hosts", metavar="FILE", help="known_hosts file (ssh:// URLs)")
    action("list", "the scope's repositories: commit, last sync, problems")
    remove = action("remove", "unregister a repository and delete its documents")
    remove.add_argument("--name", required=True)
    sync = action("sync", "sync now (every repository of the scope without --name), then index")
    sync.add_argument("--name")
