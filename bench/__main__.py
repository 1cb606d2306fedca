"""``python -m bench <command>``: run one benchmark, or write the report.

Run from the repository root with the bench venv: ``.venv-bench/bin/python -m bench ...``.
Every module of ``bench/runs/`` is a command named after its file, ``_`` written ``-``
(``fusion_sweep.py``: ``fusion-sweep``; ``fusion_sweep`` is accepted too). Its help line
is its docstring's first line; it exposes ``add_arguments(parser)`` and ``main(args)``.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import sys
from pathlib import Path

__all__ = ["command_name", "commands", "main"]

RUNS = Path(__file__).resolve().parent / "runs"


def commands() -> dict[str, str]:
    """Every command, its name to its module's name in ``bench.runs``, from the files."""
    stems = sorted(path.stem for path in RUNS.glob("*.py") if not path.stem.startswith("_"))
    return {stem.replace("_", "-"): stem for stem in stems}


def command_name(word: str) -> str:
    """The command ``word`` names: ``-`` and ``_`` are the same letter in a command name."""
    return word.replace("_", "-")


def _help_line(stem: str) -> str:
    """The first line of a run module's docstring, read without importing the module."""
    source = (RUNS / f"{stem}.py").read_text(encoding="utf-8")
    docstring = ast.get_docstring(ast.parse(source)) or ""
    return docstring.strip().splitlines()[0] if docstring.strip() else ""


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    found = commands()
    if argv and not argv[0].startswith("-"):
        argv[0] = command_name(argv[0])
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="command")
    # Only the chosen command's module is imported: each one's imports are its own
    # (torch, matplotlib, the node's client) and the list needs none of them.
    chosen = argv[0] if argv and argv[0] in found else None
    module = importlib.import_module(f"bench.runs.{found[chosen]}") if chosen else None
    for name, stem in found.items():
        sub = subparsers.add_parser(name, help=_help_line(stem))
        if module is not None and name == chosen:
            sub.description = module.__doc__
            sub.formatter_class = argparse.RawDescriptionHelpFormatter
            module.add_arguments(sub)
    args = parser.parse_args(argv)
    assert module is not None  # parse_args exits on an unknown or missing command
    module.main(args)


if __name__ == "__main__":
    main()
