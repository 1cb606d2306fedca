"""The shape of ``bench/REPORT.md``: the headline table, then one section per current
benchmark; the sections a later run or the decision they informed superseded are frozen
text in ``bench/results/history.md``, which no generator writes: REPORT.md links to them.

A section generator (a module of ``bench/report/``) appends its headline rows to
``report.headlines`` (what, target, measured, verdict), then its text with
``report.add``: the rows appended since the previous ``add`` belong to that section, and
the headline table links each to its section and says whether every source of it was
measured on the product code as it is now (``bench.common.environment.source_digest``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.common.environment import BENCH_DIR, RESULTS_DIR, read_result, source_digest

__all__ = [
    "HISTORY",
    "REPORT",
    "STALE",
    "Report",
    "anchor",
    "frozen",
    "frozen_titles",
    "header",
    "headline_table",
    "measured_now",
    "moved_note",
    "table",
]

REPORT = BENCH_DIR / "REPORT.md"
HISTORY = RESULTS_DIR / "history.md"
"""The superseded sections, frozen: text kept as it was last generated, edited by no one."""
HISTORY_FIGURES = "Figures these sections reported"
"""The heading of the history's own headline table (not a section)."""
FROZEN = RESULTS_DIR / "frozen"
"""Superseded parts of current sections, frozen as text: ``<name>.md``, read by ``frozen``."""
STALE = "**Made with another version of the product code than the current one**"
"""What ``bench.report.helpers._provenance`` writes after a source measured on other code."""


def table(
    header: Sequence[str], rows: Sequence[Sequence[object]], float_format: str = "{:.3f}"
) -> str:
    def cell(value: object) -> str:
        return float_format.format(value) if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


@dataclass(frozen=True)
class Placement:
    """Where a headline row's figure is told: its section's title, and whether every run
    behind that section measured the current product code (``None``: not recorded)."""

    title: str
    current: bool | None


UNPLACED = Placement("", current=None)
_DIGEST = re.compile(r"product source digest ([0-9a-f]+|\?)")
_digest_now: list[str] = []


def measured_now(text: str) -> bool | None:
    """Whether every product source digest a section's provenance names is the current
    source's (``None``: the section names none)."""
    digests = set(_DIGEST.findall(text))
    if not digests:
        return None
    if not _digest_now:
        _digest_now.append(source_digest())
    return digests == {_digest_now[0]}


class Report:
    """The sections and headline rows of ``output`` (REPORT.md), next to the frozen
    ``history`` it links to."""

    def __init__(self, output: Path = REPORT, history: Path = HISTORY) -> None:
        self.output, self.history_path = output, history
        self.sections: list[str] = []
        self.headlines: list[tuple[str, str, str, str]] = []  # what, target, measured, verdict
        self.placements: list[Placement] = []  # one per headline row, once its section is added

    def add(self, text: str) -> None:
        text = text.strip() + "\n"
        here = Placement(text.splitlines()[0].lstrip("#").strip(), measured_now(text))
        self.placements += [here] * (len(self.headlines) - len(self.placements))
        self.sections.append(text)

    def rows(self) -> list[tuple[tuple[str, str, str, str], Placement]]:
        """The current headline rows with their sections."""
        placed = self.placements + [UNPLACED] * (len(self.headlines) - len(self.placements))
        return list(zip(self.headlines, placed, strict=True))


def anchor(title: str) -> str:
    """The fragment GitHub gives a heading: lower case, punctuation but ``-`` and ``_``
    dropped, spaces as ``-``."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def _number(title: str) -> str:
    return title.split(" ", 1)[0].rstrip(".") or title


def headline_table(
    rows: Sequence[tuple[tuple[str, str, str, str], Placement]], link_to: str = ""
) -> str:
    """The rows with their section (a link to ``link_to#anchor``) and the code measured."""
    cells = []
    for row, place in rows:
        where = f"[{_number(place.title)}]({link_to}#{anchor(place.title)})" if place.title else ""
        code = {True: "this code", False: "earlier code", None: "not recorded"}[place.current]
        cells.append([*row, where, code])
    return table(["what", "target", "measured", "verdict", "section", "measured on"], cells)


def frozen(name: str, folder: Path = FROZEN) -> str:
    """The frozen part ``name`` of a current section, verbatim (``""`` when it is missing):
    an older run's table kept in its section, whose generator is gone."""
    path = folder / f"{name}.md"
    return path.read_text(encoding="utf-8").strip() if path.exists() else ""


def frozen_titles(history: Path) -> list[str]:
    """The titles of the frozen history's sections (its ``##`` headings), in its order."""
    if not history.exists():
        return []
    titles = []
    for line in history.read_text(encoding="utf-8").splitlines():
        if line.startswith("## ") and line[3:].strip() != HISTORY_FIGURES:
            titles.append(line[3:].strip())
    return titles


def moved_note(report: Report) -> str:
    """The paragraph under REPORT.md's headline table that lists what moved out."""
    titles = frozen_titles(report.history_path)
    if not titles:
        return ""
    link = _relative(report.history_path, report.output.parent)
    listed = "; ".join(f"[{t}]({link}#{anchor(t)})" for t in titles)
    return (
        f"Superseded measurements (a later run, or the decision they informed, replaced "
        f"them; they keep their numbers) are in [{link}]({link}): {listed}."
    )


def header(report: Report) -> str:
    """REPORT.md's top: how it is made, the machine, the headline table, what moved."""
    machine = None
    for name in ("indexing", "latency", "coldstart", "memory", "quality-manpages-300-minilm"):
        result = read_result(name)
        if result is not None:
            machine = result["machine"]
            break
    lines = [
        "# Benchmarks",
        "",
        "Generated by `.venv-bench/bin/python -m bench report` from `bench/results/*.json`; "
        "do not edit by hand. Reproduce everything with `make bench` (it runs "
        "`bench/setup.sh`: the man pages from Debian, and `.venv-bench` with torch, "
        "sentence-transformers, the offline all-MiniLM-L6-v2 model and matplotlib; each "
        "benchmark starts its own OpenSearch node from `tools/opensearch-local`). One "
        "benchmark: `make bench-quality`, `bench-questions`, `bench-indexing`, "
        "`bench-latency`, `bench-coldstart`, `bench-memory`, `bench-documents`, then "
        "`make bench-report`. A new benchmark's section is written by a generator "
        "(a module of `bench/report/`: its headline rows, then its text) that "
        "`bench/report/writer.py` calls last; a section it replaces is frozen: its text "
        "goes, as last generated, to `bench/results/history.md` (which no generator "
        "writes) and its generator is removed (`bench/README.md`).",
    ]
    if machine is not None:
        packages = ", ".join(f"{k} {v}" for k, v in machine["packages"].items() if v)
        lines += [
            "",
            f"Machine: {machine['cpus']} CPUs, {machine['memory_gib']} GiB, "
            f"{machine['platform']}, Python {machine['python']}; {packages}. The machine is "
            "shared and noisy: figures are medians, and performance is reported as ratios "
            "to a baseline measured in the same run.",
        ]
    lines += [
        "",
        "## Headline figures",
        "",
        "Each row links to the section that tells how it was measured; *measured on* says "
        "whether every run behind that section measured the product code as it is now "
        "(its source digest) or an earlier version (the section names the commit).",
        "",
        headline_table(report.rows()),
    ]
    moved = moved_note(report)
    if moved:
        lines += ["", moved]
    return "\n".join(lines) + "\n"


def _relative(path: Path, start: Path) -> str:
    """``path`` relative to the folder ``start`` (both absolute), with ``..`` as needed."""
    path, start = path.resolve(), start.resolve()
    for ups, parent in enumerate([start, *start.parents]):
        if path.is_relative_to(parent):
            return "/".join([".."] * ups + [path.relative_to(parent).as_posix()])
    return path.as_posix()
