"""A 5,000-file Git repository synced, then after a one-file commit.

Repository sync: a 5,000-file repository synced once, then after a one-file commit.

A real Git server on loopback (``git http-backend`` behind the tests' small HTTP server,
``tests/support/git_server.py``) serves a repository of ``--files`` Markdown files made with
``git fast-import``; the product syncs it (dulwich shallow fetch, mirror into a bucket
folder) and indexes the folder into the embedded store with the hashing embedder, as
``kb repo sync`` does. Then one file changes in a new commit and the same runs again;
then once more with nothing changed (the baseline of a sync's fixed cost: the fetch of
the tree at depth 1 and the walk).

``nice -n 10 .venv-bench/bin/python -m bench repo-sync`` (the dev venv runs it too).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common.environment import REPO_ROOT, log, write_result
from knowledge.ingest.pipeline import index_source

__all__ = ["add_arguments", "main"]

NAME = "repo-sync"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--files", type=int, default=5000, help="files in the repository")


def _page(i: int, version: int = 0) -> bytes:
    words = " ".join(f"term{(i * 7 + k) % 997}" for k in range(120))
    return f"# Page {i}\n\nVersion {version}. {words}\n".encode()


def _fast_import(bare: Path, files: int) -> None:
    stream = bytearray(b"commit refs/heads/main\ncommitter Bench <b@example.invalid> 0 +0000\n")
    stream += b"data 7\ninitial\n"
    for i in range(files):
        data = _page(i)
        stream += f"M 100644 inline docs/d{i // 100:02d}/page-{i:05d}.md\n".encode()
        stream += f"data {len(data)}\n".encode() + data + b"\n"
    subprocess.run(["git", "fast-import", "--quiet"], cwd=bare, input=bytes(stream), check=True)


def _timed_sync(
    registry: Any, scope: Any, registration: Any, store: Any, root: Path, server: Any
) -> dict[str, Any]:
    from knowledge.core.model import IndexOptions
    from knowledge.ingest.repos.sync import sync_repository
    from knowledge.ingest.sources.folders import BucketFolderSource

    sent_before = len(server.sent)
    started = time.perf_counter()
    report = sync_repository(registry, scope, registration)
    synced = time.perf_counter()
    # What the Git server sent for this sync (refs and the pack), in bytes.
    fetched = sum(size for _, size in server.sent[sent_before:])
    result = index_source(store, scope, BucketFolderSource(root), IndexOptions())
    done = time.perf_counter()
    assert report.ok, report.error
    return {
        "sync_s": round(synced - started, 3),
        "fetched_bytes": fetched,
        "index_s": round(done - synced, 3),
        "total_s": round(done - started, 3),
        "written": report.written,
        "deleted": report.deleted,
        "unchanged": report.unchanged,
        "indexed_documents": result.indexed_documents,
    }


def main(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(REPO_ROOT / "tests" / "support"))
    from git_server import GIT_ENV, GitHttpServer, Workdir

    from knowledge.config import open_store
    from knowledge.core.scope import KnowledgeScope
    from knowledge.ingest.repos.registration import RepoRegistration
    from knowledge.ingest.repos.state import RepoRegistry
    from knowledge.ingest.repos.storage import FolderStorage

    scope = KnowledgeScope("bench", "repo")
    with tempfile.TemporaryDirectory(prefix="kb-bench-repo-") as tmp:
        base = Path(tmp)
        server = GitHttpServer(base / "git")
        try:
            bare = base / "git" / "big.git"
            bare.parent.mkdir(parents=True)
            env = {**os.environ, **GIT_ENV}
            subprocess.run(
                ["git", "init", "--bare", "-q", "-b", "main", str(bare)], check=True, env=env
            )
            _fast_import(bare, args.files)
            log(f"repository of {args.files} files made")
            root = base / "root"
            root.mkdir()
            registry = RepoRegistry(FolderStorage(root))
            registration = RepoRegistration.from_request({"name": "big", "url": server.url("big")})
            registry.add(scope, registration)
            store = open_store(
                "embedded", db_path=base / "kb.db", embedder_name="hashing", create=True
            )
            try:
                first = _timed_sync(registry, scope, registration, store, root, server)
                log(f"first sync: {first}")
                work = Workdir.__new__(Workdir)
                work.bare, work.branch, work.path = bare, "main", base / "work"
                subprocess.run(
                    ["git", "clone", "-q", str(bare), str(work.path)], check=True, env=env
                )
                work.write("docs/d00/page-00000.md", _page(0, version=1))
                work.commit("one file")
                one = _timed_sync(registry, scope, registration, store, root, server)
                log(f"one-file commit: {one}")
                nothing = _timed_sync(registry, scope, registration, store, root, server)
                log(f"nothing changed: {nothing}")
            finally:
                store.close()
        finally:
            server.close()
    write_result(
        NAME,
        {
            "files": args.files,
            "first": first,
            "one_file_commit": one,
            "nothing_changed": nothing,
            "one_file_vs_first": round(one["total_s"] / first["total_s"], 3),
        },
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.runs.repo_sync", description=__doc__)
    add_arguments(parser)
    main(parser.parse_args())
