"""Summarise ``mutmut results --all true`` per module: killed, survived, score, survivors.

Usage: python tools/mutation/summary.py RUN.txt ALL.txt OUT.json [MUTANT FILTER ...]

RUN.txt is this run's ``mutmut results --all true``. The score is killed / (killed +
survived + no tests + timeout + suspicious); "skipped" mutants (mutmut could not apply
them) and "not checked" ones (left out by a filter) are left out, and a module with
nothing checked gets no figure. Each module's row keeps the command, the commit and the
time of the run that checked it, and the names of its surviving mutants
(``bench/report/mutation.py`` puts them in ``bench/REPORT.md`` with the reasons in
``tools/mutation/equivalent.json``).

Without a filter (``make mutation``) ALL.txt and OUT.json are replaced. With one (a
per-module run) they are merged: the modules this run checked replace their lines in
ALL.txt and their rows in OUT.json, the other modules keep those of their own last run.
Prints a Markdown table of this run's modules.
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
    """``knowledge.core.scope.x_validate_segment__mutmut_3`` -> ``knowledge.core.scope`` (classes:
    ``knowledge.ingest.chunking.xǁ_SectionSplitterǁadd__mutmut_1``)."""
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


def module_lines(lines: list[str]) -> dict[str, list[str]]:
    """The status lines of ``mutmut results`` by module, in their order."""
    by_module: dict[str, list[str]] = defaultdict(list)
    for line in lines:
        match = LINE.match(line)
        if match:
            by_module[module_of(match["name"])].append(line)
    return by_module


def merge(
    previous: dict[str, Any] | None,
    previous_lines: list[str],
    run: dict[str, dict[str, Any]],
    run_lines: list[str],
) -> tuple[dict[str, Any], list[str]]:
    """OUT.json's modules and ALL.txt's lines after a filtered run: the modules ``run``
    checked from this run, every other one as it was."""
    modules = dict((previous or {}).get("modules", {}))
    modules.update(run)
    kept = module_lines(previous_lines)
    fresh = module_lines(run_lines)
    lines: list[str] = []
    for module in sorted({*kept, *fresh}):
        lines.extend(fresh[module] if module in run or module not in kept else kept[module])
    return dict(sorted(modules.items())), lines


def main(argv: list[str]) -> int:
    run_path, all_path, target, filters = Path(argv[1]), Path(argv[2]), Path(argv[3]), argv[4:]
    run_lines = run_path.read_text("utf-8").splitlines()
    command = (
        "make mutation"
        if not filters
        else "tools/mutation/run.sh " + " ".join(f"'{f}'" for f in filters)
    )
    stamp = {
        "command": command,
        "git_commit": _commit(),
        "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    table = {module: {**row, **stamp} for module, row in summarise(run_lines).items()}
    if filters:
        previous = json.loads(target.read_text("utf-8")) if target.is_file() else None
        previous_lines = all_path.read_text("utf-8").splitlines() if all_path.is_file() else []
        modules, lines = merge(previous, previous_lines, table, run_lines)
    else:
        modules, lines = table, run_lines
    commits = sorted({str(row.get("git_commit")) for row in modules.values()})
    result = {
        **stamp,
        "command": command if not filters else "per-module runs of tools/mutation/run.sh, merged",
        "git_commit": commits[0] if len(commits) == 1 else ", ".join(commits),
        "modules": modules,
    }
    all_path.write_text("\n".join(lines) + "\n", "utf-8")
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
