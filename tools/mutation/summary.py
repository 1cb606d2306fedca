"""Summarise ``mutmut results --all true`` per module: killed, survived, score, survivors.

Usage: python tools/mutation/summary.py RESULTS.txt OUT.json [MUTANT FILTER ...]

The score is killed / (killed + survived + no tests + timeout + suspicious); "skipped"
mutants (mutmut could not apply them) and "not checked" ones (left out by a filter) are
left out, and a module with nothing checked gets no figure. OUT.json also keeps the
command, the commit and the names of the surviving mutants (``bench/report_mutation.py``
puts them in ``bench/REPORT.md`` with the reasons in ``tools/mutation/equivalent.json``).
Prints a Markdown table.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

LINE = re.compile(r"^\s*(?P<name>[\w.ǁ]+__mutmut_\d+): (?P<status>.+?)\s*$")
COUNTED = ("killed", "survived", "no tests", "timeout", "suspicious")


def module_of(name: str) -> str:
    """``knowledge.scope.x_validate_segment__mutmut_3`` -> ``knowledge.scope`` (classes:
    ``knowledge.chunking.xǁ_SectionSplitterǁadd__mutmut_1``)."""
    module, _, _function = name.rpartition(".")
    return module


def summarise(lines: list[str]) -> dict[str, dict[str, Any]]:
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    survivors: dict[str, list[str]] = defaultdict(list)
    for line in lines:
        match = LINE.match(line)
        if match:
            module = module_of(match["name"])
            counts[module][match["status"]] += 1
            if match["status"] != "killed" and match["status"] in COUNTED:
                survivors[module].append(match["name"])
    table: dict[str, dict[str, Any]] = {}
    for module, counter in sorted(counts.items()):
        total = sum(counter[s] for s in COUNTED)
        if not total:
            continue  # not run (a filtered run): no figure rather than a misleading 0%
        table[module] = {
            **{s: counter[s] for s in sorted(counter) if s != "not checked"},
            "score": round(counter["killed"] / total, 4),
            "not killed": survivors[module],
        }
    return table


def _commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],  # noqa: S607 (git from PATH, as bench does)
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


def main(argv: list[str]) -> int:
    source, target, filters = Path(argv[1]), Path(argv[2]), argv[3:]
    table = summarise(source.read_text("utf-8").splitlines())
    command = (
        "make mutation"
        if not filters
        else "tools/mutation/run.sh " + " ".join(f"'{f}'" for f in filters)
    )
    result = {
        "command": command,
        "git_commit": _commit(),
        "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "modules": table,
    }
    target.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", "utf-8")
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
