"""The 5,000-file repository: incremental vs full fetch, same run.

Repository sync: the incremental fetch against the full fetch, same run.

The 5,000-file repository of ``bench/runs/repo_sync.py`` (``git fast-import``, served by
``git http-backend`` on loopback) is registered twice, in two scopes: ``incremental``
syncs as the product does (from the second sync on it tells the server the commit it
holds and fetches a thin pack of what changed, ``knowledge.ingest.repos.trees``);
``full`` is the baseline, the same code with its kept trees dropped before every sync,
which is the product's earlier fetch (the whole tree at depth 1 every time). After the first sync
of both, each round commits a one-file change and syncs both, the order alternating;
then a round with nothing changed. The product's scope is indexed after each of its
syncs (embedded store, hashing embedder) and checked: 5,000 documents, one re-indexed
per one-file commit. Reported: medians of the sync time (fetch + mirror) and of the
bytes the Git server sent (refs and pack), and their ratios incremental / full.

``nice -n 10 .venv-bench/bin/python -m bench repo-sync-incremental`` (the dev venv runs it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common.environment import REPO_ROOT, log, write_result
from bench.runs.repo_sync import _fast_import, _page

__all__ = ["NAME", "add_arguments", "main"]

NAME = "repo-sync-incremental"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--files", type=int, default=5000, help="files in the repository")
    parser.add_argument("--rounds", type=int, default=5, help="one-file commits")


def _sync(registry: Any, scope: Any, registration: Any, server: Any, *, full: bool) -> dict:
    from knowledge.ingest.repos.sync import sync_repository

    if full:  # the baseline: no kept trees, so the whole tree is fetched
        registry.drop_trees(scope, registration.name)
    sent = len(server.sent)
    started = time.perf_counter()
    report = sync_repository(registry, scope, registration)
    took = time.perf_counter() - started
    assert report.ok, report.error
    assert not (full and report.incremental)
    return {
        "sync_s": round(took, 4),
        "fetched_bytes": sum(size for _, size in server.sent[sent:]),
        "written": report.written,
        "incremental": report.incremental,
    }


def _index(store: Any, scope: Any, root: Path) -> dict[str, Any]:
    from knowledge.core.model import IndexOptions
    from knowledge.ingest.pipeline import index_source
    from knowledge.ingest.sources.folders import BucketFolderSource

    started = time.perf_counter()
    result = index_source(store, scope, BucketFolderSource(root), IndexOptions())
    return {
        "index_s": round(time.perf_counter() - started, 3),
        "indexed_documents": result.indexed_documents,
        "documents": store.status(scope).document_count,
    }


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in runs))


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "runs": runs,
        "sync_s_median": round(_median(runs, "sync_s"), 4),
        "fetched_bytes_median": int(_median(runs, "fetched_bytes")),
    }


def main(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(REPO_ROOT / "tests" / "support"))
    from git_server import GIT_ENV, GitHttpServer, Workdir

    from knowledge.config import open_store
    from knowledge.core.scope import KnowledgeScope
    from knowledge.ingest.repos.registration import RepoRegistration
    from knowledge.ingest.repos.state import RepoRegistry
    from knowledge.ingest.repos.storage import FolderStorage

    scopes = {
        "incremental": KnowledgeScope("bench", "incr"),
        "full": KnowledgeScope("bench", "full"),
    }
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        kind: {"first": [], "one_file_commit": [], "nothing_changed": []} for kind in scopes
    }
    indexed: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kb-bench-repo-incr-") as tmp:
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
            for scope in scopes.values():
                registry.add(scope, registration)
            store = open_store(
                "embedded", db_path=base / "kb.db", embedder_name="hashing", create=True
            )
            work = Workdir.__new__(Workdir)
            work.bare, work.branch, work.path = bare, "main", base / "work"
            subprocess.run(["git", "clone", "-q", str(bare), str(work.path)], check=True, env=env)

            def both(phase: str, order: list[str]) -> None:
                for kind in order:
                    run = _sync(registry, scopes[kind], registration, server, full=kind == "full")
                    runs[kind][phase].append(run)
                    assert run["incremental"] == (kind == "incremental" and phase != "first")
                    if kind == "incremental":
                        done = _index(store, scopes[kind], root)
                        assert done["documents"] == args.files, done
                        indexed.append({"phase": phase, **done})
                log(f"{phase}: {[runs[k][phase][-1] for k in order]}")

            try:
                both("first", ["incremental", "full"])
                for i in range(args.rounds):
                    work.write(f"docs/d00/page-{i:05d}.md", _page(i, version=1))
                    work.commit(f"one file {i}")
                    both("one_file_commit", ["incremental", "full"][:: 1 if i % 2 else -1])
                    assert indexed[-1]["indexed_documents"] == 1, indexed[-1]
                both("nothing_changed", ["incremental", "full"])
            finally:
                store.close()
        finally:
            server.close()
    summary = {kind: {phase: _summary(r) for phase, r in by.items()} for kind, by in runs.items()}
    ratios = {
        phase: {
            "sync_s": round(
                summary["incremental"][phase]["sync_s_median"]
                / summary["full"][phase]["sync_s_median"],
                3,
            ),
            "fetched_bytes": round(
                summary["incremental"][phase]["fetched_bytes_median"]
                / summary["full"][phase]["fetched_bytes_median"],
                5,
            ),
        }
        for phase in ("one_file_commit", "nothing_changed")
    }
    write_result(
        NAME,
        {
            "files": args.files,
            "rounds": args.rounds,
            "incremental": summary["incremental"],
            "full": summary["full"],
            "ratio_incremental_to_full": ratios,
            "indexed": indexed,
        },
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        prog="python -m bench.runs.repo_sync_incremental", description=__doc__
    )
    add_arguments(parser)
    main(parser.parse_args())
