"""Summarise ``mutmut results --all true`` per module: killed, survived, score.

Usage: python tools/mutation/summary.py RESULTS.txt OUT.json

The score is killed / (killed + survived + no tests + timeout); "skipped" mutants (mutmut
could not apply them) are left out. Prints a Markdown table; writes the figures as JSON.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

LINE = re.compile(r"^\s*(?P<name>[\w.]+)__mutmut_\d+: (?P<status>.+?)\s*$")
COUNTED = ("killed", "survived", "no tests", "timeout", "suspicious")


def module_of(name: str) -> str:
    """``knowledge.scope.x_validate_segment`` -> ``knowledge.scope`` (classes: ``xǁ``)."""
    module, _, _function = name.rpartition(".")
    return module


def summarise(lines: list[str]) -> dict[str, dict[str, float]]:
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for line in lines:
        match = LINE.match(line)
        if match:
            counts[module_of(match["name"])][match["status"]] += 1
    table: dict[str, dict[str, float]] = {}
    for module, counter in sorted(counts.items()):
        total = sum(counter[s] for s in COUNTED)
        if not total:
            continue  # not run (a filtered run): no figure rather than a misleading 0%
        killed = counter["killed"]
        table[module] = {
            **{s: counter[s] for s in sorted(counter)},
            "score": round(killed / total, 4) if total else 0.0,
        }
    return table


def main(argv: list[str]) -> int:
    source, target = Path(argv[1]), Path(argv[2])
    table = summarise(source.read_text("utf-8").splitlines())
    target.write_text(json.dumps(table, indent=2) + "\n", "utf-8")
    print("| module | killed | survived | no tests | timeout | score |")
    print("|---|---|---|---|---|---|")
    for module, row in table.items():
        print(
            f"| {module} | {row.get('killed', 0)} | {row.get('survived', 0)} | "
            f"{row.get('no tests', 0)} | {row.get('timeout', 0)} | {row['score']:.1%} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
