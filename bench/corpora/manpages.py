"""The man-pages known-item benchmark (described in the man-pages builder's README,
outside this repository): build and load it.

The corpus is built by the shared script ``shared/bench/build_manpages.py`` (called where
it lies, next to the repository, or at ``KB_MANPAGES_BUILDER``), from the Debian packages
``manpages`` and ``manpages-dev`` rendered with ``man``; ``bench/setup.sh`` installs them.
Each built corpus is cached under ``bench/data/manpages-<limit|all>/``:
``docs/<section>/<page>.md`` and ``queries.jsonl`` (``{"query", "relevant"}`` per line).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.common.environment import DATA_DIR, REPO_ROOT, log

__all__ = ["BUILDER", "Corpus", "Query", "load_corpus", "read_corpus"]

BUILDER = Path(
    os.environ.get("KB_MANPAGES_BUILDER")
    or REPO_ROOT.parent / "shared" / "bench" / "build_manpages.py"
)


_BUILDER_NAME = "shared/bench/build_manpages.py"


@dataclass(frozen=True, slots=True)
class Query:
    text: str
    relevant: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Corpus:
    """A built corpus: its folder of Markdown pages and its queries."""

    name: str
    limit: int | None
    docs_dir: Path
    queries: tuple[Query, ...]
    documents: int
    total_bytes: int
    builder: str = _BUILDER_NAME

    def describe(self) -> dict[str, object]:
        return {
            "name": self.name,
            "limit": self.limit,
            "documents": self.documents,
            "queries": len(self.queries),
            "total_bytes": self.total_bytes,
            "builder": self.builder,
        }


def _build(target: Path, limit: int | None) -> None:
    if not BUILDER.is_file():
        raise SystemExit(
            f"the man-pages builder is not at {BUILDER}: clone the repository next to "
            "shared/ or set KB_MANPAGES_BUILDER"
        )
    if shutil.which("man") is None or not Path("/usr/share/man/man2").is_dir():
        raise SystemExit("man and the manual pages are missing: run bench/setup.sh first")
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    command = [sys.executable, str(BUILDER), str(partial)]
    if limit is not None:
        command += ["--limit", str(limit)]
    log(f"building the man-pages corpus: {' '.join(command)}")
    subprocess.run(command, check=True)
    partial.rename(target)


def load_corpus(limit: int | None) -> Corpus:
    """The corpus of ``limit`` pages (an even sample; ``None`` = all), built if missing."""
    name = f"manpages-{limit if limit is not None else 'all'}"
    root = DATA_DIR / name
    if not (root / "queries.jsonl").is_file():
        _build(root, limit)
    return read_corpus(root, name, limit)


def read_corpus(root: Path, name: str, limit: int | None, builder: str = _BUILDER_NAME) -> Corpus:
    """A built corpus read back: ``root/docs/**/*.md`` and ``root/queries.jsonl``."""
    queries = tuple(
        Query(item["query"], tuple(item["relevant"]))
        for item in (
            json.loads(line)
            for line in (root / "queries.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()
        )
    )
    files = sorted((root / "docs").rglob("*.md"))
    return Corpus(
        name=name,
        limit=limit,
        docs_dir=root / "docs",
        queries=queries,
        documents=len(files),
        total_bytes=sum(f.stat().st_size for f in files),
        builder=builder,
    )
