"""``kb repo add|list|remove|sync``: repositories of a served folder (``ROOT``).

``ROOT`` is the folder ``kb serve ROOT`` serves (``<agent>/<context>/...``); the
registration goes to its ``.kb@repos/``. ``sync`` mirrors the repository into
``ROOT/<agent>/<context>/_repos/<name>/`` and indexes the scope into the store
(``--db``...), as ``kb index`` would; a running ``kb serve`` picks the change up too.
A credential is given as a reference (``env:NAME``, ``file:/path``), never as a value.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

from knowledge.core.errors import ValidationError
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.pipeline import index_source

__all__ = ["add_repo_commands"]


def _service(args: argparse.Namespace) -> Any:
    from knowledge.ingest.repos.local import LocalRepos

    root = Path(args.root)
    if not root.is_dir():
        raise ValidationError("ROOT", f"'{root}' is not a folder")

    def index_scope(scope: KnowledgeScope) -> Any:
        from knowledge.core.model import IndexOptions
        from knowledge.ingest.sources.local import BucketFolderSource
        from knowledge.local.cli_open import open_cli_store

        with closing(open_cli_store(args)) as store:
            return index_source(store, scope, BucketFolderSource(root), IndexOptions())

    return LocalRepos(root, index_scope).service


def _print(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2), file=sys.stdout)


def _line(repo: dict[str, Any]) -> str:
    status = repo["status"]
    commit = (status["commit"] or "never synced")[:12]
    error = status["error"]
    tail = f"  error ({error['kind']}): {error['message']}" if error else ""
    return (
        f"{repo['name']}: {repo['url']} [{repo['branch']}] at {commit}, "
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
        for repo in [] if args.json else answer["repos"]:
            print(_line(repo))
            for problem in repo["status"]["problems"]:
                print(f"  {problem['path']}: {problem['reason']}")
        return 0
    if args.repo_command == "remove":
        _, answer = service.remove(scope, args.name)
        _print(answer) if args.json else print(
            f"removed {args.name} ({answer['deleted_files']} files)"
        )
        return 0
    names = [args.name] if args.name else [r.name for r in service.registry.all(scope)]
    failed = 0
    for name in names:
        _, answer = service.sync(scope, name)
        if args.json:
            _print(answer)
        elif answer["error"]:
            print(f"{name}: sync failed ({answer['error']['kind']}): {answer['error']['message']}")
        else:
            print(
                f"{name}: at {answer['commit'][:12]}: {answer['written']} written, "
                f"{answer['deleted']} deleted, {answer['unchanged']} unchanged; "
                f"indexed {answer.get('indexed_documents', 0)} documents"
            )
        failed += answer["error"] is not None
    return 1 if failed else 0


def add_repo_commands(
    commands: Any, store: argparse.ArgumentParser, scoped: argparse.ArgumentParser
) -> None:
    repo = commands.add_parser("repo", help="Git repositories as a scope's documents")
    sub = repo.add_subparsers(dest="repo_command", required=True, metavar="ACTION")

    def action(name: str, helptext: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = sub.add_parser(
            name, parents=[store, scoped], help=helptext
        )
        parser.add_argument("root", metavar="ROOT", help="the folder kb serve serves")
        parser.add_argument("--json", action="store_true", help="print JSON")
        parser.set_defaults(handler=_cmd)
        return parser

    add = action("add", "register a repository (or update its registration)")
    add.add_argument("--name", required=True, help="its folder: _repos/<name>/")
    add.add_argument("--url", required=True, help="https://, http:// or ssh:// clone URL")
    add.add_argument("--branch", default="main", help="the branch synced (default main)")
    add.add_argument("--path", action="append", help="only files under this folder (repeatable)")
    add.add_argument("--credential", help="env:NAME or file:/path (token or SSH key)")
    add.add_argument("--username", help="HTTPS user sent with a token (default x-access-token)")
    add.add_argument("--known-hosts", metavar="FILE", help="known_hosts file (ssh:// URLs)")
    action("list", "the scope's repositories: commit, last sync, problems")
    remove = action("remove", "unregister a repository and delete its documents")
    remove.add_argument("--name", required=True)
    sync = action("sync", "sync now (every repository of the scope without --name), then index")
    sync.add_argument("--name")
