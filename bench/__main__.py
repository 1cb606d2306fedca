"""``python -m bench <command>``: run one benchmark (or ``all``), or write the report.

Run from the repository root with the bench venv: ``.venv-bench/bin/python -m bench ...``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

__all__ = ["main"]

COMMANDS = {
    "quality": "retrieval quality per store, embedder and mode (man-pages benchmark)",
    "fusion_sweep": "hybrid fusion ablation: normalisation, weights, depth per embedder",
    "indexing": "indexing throughput: embedded store, OpenSearch store, raw bulk",
    "latency": "search latency per mode on the real node, next to OpenSearch's took",
    "coldstart": "import time of the Lambda handlers next to a naive handler",
    "memory": "peak RSS of indexing one large Markdown file",
    "report": "write bench/REPORT.md and the plots from bench/results/*.json",
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_text in COMMANDS.items():
        module = importlib.import_module(f"bench.{name}")
        sub = commands.add_parser(name, help=help_text, description=module.__doc__)
        module.add_arguments(sub)
    args = parser.parse_args(argv)
    importlib.import_module(f"bench.{args.command}").main(args)


if __name__ == "__main__":
    main(sys.argv[1:])
