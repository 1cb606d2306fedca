"""Write bench/REPORT.md and the plots from bench/results/*.json.

The generators are ``bench/report/``'s (``bench.report.writer`` puts them in order); the
superseded sections stay as frozen text in ``bench/results/history.md``, which REPORT.md
links to.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.report.layout import HISTORY, REPORT
from bench.report.writer import write_report

__all__ = ["add_arguments", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", type=Path, default=REPORT)
    parser.add_argument(
        "--history",
        type=Path,
        default=HISTORY,
        help="the frozen file of superseded sections REPORT.md links to (read, never written)",
    )


def main(args: argparse.Namespace) -> None:
    write_report(args.output, args.history)
