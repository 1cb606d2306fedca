"""``python -m bench``'s commands come from the files of ``bench/runs/``: every name the
benchmarks were run by keeps working, in both spellings, each with a help line."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from bench.__main__ import command_name, commands  # noqa: E402

NAMES_IN_USE = [
    "quality",
    "fusion_sweep",
    "indexing",
    "latency",
    "latency_ab",
    "coldstart",
    "memory",
    "resources",
    "store_threads",
    "concurrency",
    "formats",
    "pdf-fidelity",
    "pdf-throughput",
    "embedding-pool",
    "index-command",
    "filters",
    "scale",
    "scope-recall",
    "bm25",
    "korean-analysis",
    "korean-cost",
    "korean-variants",
    "korean-ablation",
    "page-signal",
    "hybrid-page",
    "grouping",
    "hashing-variants",
    "rerank",
    "repo-sync",
    "repo-sync-incremental",
    "shared-library",
    "ranking-cost",
    "synonym-probe",
    "named-clauses",
    "relevance",
    "relevance-fit",
    "relevance-variants",
    "keyword-scale",
    "noisy-neighbour",
    "report",
]


@pytest.mark.parametrize("name", NAMES_IN_USE)
def test_every_name_in_use_is_a_command_in_either_spelling(name: str) -> None:
    found = commands()
    for spelling in (name, name.replace("-", "_"), name.replace("_", "-")):
        assert command_name(spelling) in found, spelling


def test_a_command_is_a_module_of_runs_with_a_help_line_and_its_entry_points() -> None:
    found = commands()
    assert {command_name(name) for name in NAMES_IN_USE} <= found.keys()
    for name, stem in found.items():
        assert name == stem.replace("_", "-")
        tree = ast.parse((ROOT / "bench" / "runs" / f"{stem}.py").read_text(encoding="utf-8"))
        docstring = ast.get_docstring(tree) or ""
        first = docstring.splitlines()[0] if docstring else ""
        assert 10 < len(first) <= 96, f"{stem}: its docstring's first line is its help"
        functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert {"add_arguments", "main"} <= functions, stem


def test_help_lists_every_command_and_an_underscore_name_runs_its_command() -> None:
    listed = subprocess.run(
        [sys.executable, "-m", "bench", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for name in commands():
        assert f"    {name} " in listed or f"    {name}\n" in listed, name
    # The old spelling reaches the command's own parser (its help names its options).
    own = subprocess.run(
        [sys.executable, "-m", "bench", "fusion_sweep", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "usage: python -m bench fusion-sweep" in own


def test_an_unknown_command_is_refused_by_name() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "bench", "no-such-bench"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2
    assert "invalid choice: 'no-such-bench'" in run.stderr
