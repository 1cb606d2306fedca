"""The report's section on mutation testing: per-module scores and the mutants no test kills.

Reads ``bench/results/mutation.json`` (written by ``tools/mutation/summary.py`` at the end
of ``make mutation``) and the hand-written reasons in ``tools/mutation/equivalent.json``
(``{mutant name: why it changes no behaviour}``); called by ``bench.report.writer``. A surviving
mutant without a reason is listed as unexplained: a missing test, not an equivalent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.common.environment import REPO_ROOT, read_result
from bench.report.helpers import REPORT, Report, _met, _table

__all__ = ["mutation_section"]

TARGET = 0.90
_HEADING = "## 8. Mutation testing (mutmut)"
EQUIVALENT = REPO_ROOT / "tools" / "mutation" / "equivalent.json"


def _reasons() -> dict[str, str]:
    if not EQUIVALENT.is_file():
        return {}
    data: dict[str, str] = json.loads(EQUIVALENT.read_text(encoding="utf-8"))
    return data


def mutation_section(
    report: Report,
    *,
    result: dict[str, Any] | None = None,
    reasons: dict[str, str] | None = None,
) -> None:
    """The section from ``mutation.json`` and ``equivalent.json`` (or the given ones)."""
    parts = [_HEADING]
    if result is None:
        result = read_result("mutation")
    if result is None or not result.get("modules"):
        parts.append("Not run: `make mutation` writes `bench/results/mutation.json`.")
        report.add("\n\n".join(parts))
        return
    modules: dict[str, dict[str, Any]] = result["modules"]
    parts.append(
        "Each mutant is one small change to a module (a flipped comparison, a changed "
        "constant, a removed statement...); the unit tests that reach the changed function "
        "run against it. Score = killed / (killed + survived + no tests + timeout). "
        f"Target: at least {TARGET:.0%} per module, every survivor equivalent (no "
        "behaviour change) and said why. Not part of `make test` (it takes tens of "
        "minutes on two shared cores)."
    )
    parts.append(
        f"Source: `bench/results/mutation.json`, made by `{result['command']}` (commit "
        f"{result.get('git_commit')}, {result.get('finished_at')}); every mutant's status "
        "in `bench/results/mutation-results.txt`; the reasons below in "
        "`tools/mutation/equivalent.json`."
    )
    commands = sorted({str(row["command"]) for row in modules.values() if "command" in row})
    if len(commands) > 1:
        parts.append(
            "Per-module runs (each module's row says on which commit its run was): "
            + "; ".join(f"`{command}`" for command in commands)
            + "."
        )
    if result.get("note"):
        parts.append(f"**Note:** {result['note']}")
    rows = [
        [
            f"`{module}`",
            row.get("killed", 0),
            row.get("survived", 0),
            row.get("no tests", 0) + row.get("timeout", 0) + row.get("suspicious", 0),
            f"{row['score']:.1%}",
            _met(row["score"] >= TARGET),
            row.get("git_commit", result.get("git_commit")),
        ]
        for module, row in modules.items()
    ]
    parts.append(
        _table(
            ["module", "killed", "survived", "no tests / timeout", "score", "90%", "commit"],
            rows,
        )
    )
    if reasons is None:
        reasons = _reasons()
    lines = []
    for row in modules.values():
        for name in row.get("not killed", []):
            why = reasons.get(name, "**unexplained**: a missing test")
            lines.append(f"- `{name}`: {why}")
    lowest = min(modules, key=lambda m: modules[m]["score"])
    score = modules[lowest]["score"]
    report.headlines.append(
        (
            "mutation score, lowest module",
            f">= {TARGET:.0%}",
            f"{score:.1%} ({lowest})",
            _met(score >= TARGET),
        )
    )
    parts.append("Surviving mutants (`mutmut show NAME` in `.mutation/` prints the change):")
    parts.append("\n".join(lines) if lines else "None.")
    report.add("\n\n".join(parts))


def splice(report_path: Path = REPORT) -> None:
    """Put this section into an existing ``REPORT.md`` in place, without re-running the
    other sections (their plots need ``.venv-bench``): ``python -m bench.report.mutation``
    after ``make mutation``. ``bench report`` rebuilds it with the rest."""
    section = Report()
    mutation_section(section)
    text = report_path.read_text(encoding="utf-8")
    start = text.find(_HEADING)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section.sections[0]
    else:  # up to the next section: the ones after it stay
        end = text.find("\n## ", start + len(_HEADING))
        after = "" if end < 0 else "\n" + text[end + 1 :]
        text = text[:start] + section.sections[0] + after
    report_path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    splice()
