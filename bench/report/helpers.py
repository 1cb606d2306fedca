"""What the section generators of ``bench/REPORT.md`` share: labels, a result's
provenance line (and whether it measured the current code), verdicts, plots, the load note.
``bench.report.writer`` puts the sections together; each other module of ``bench/report/``
writes one section (or a few that belong together).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.common.environment import RESULTS_DIR, source_digest
from bench.report.layout import REPORT as REPORT_PATH
from bench.report.layout import STALE, Report
from bench.report.layout import table as _table

# The underscored names are the generators' shared helpers (not for use outside bench/).
__all__ = [
    "EMBEDDER_LABEL",
    "MODES",
    "REPORT",
    "STORE_LABEL",
    "Report",
    "_current",
    "_load_note",
    "_met",
    "_provenance",
    "_pyplot",
    "_save",
    "_table",
]


REPORT = REPORT_PATH
MODES = ("keyword", "vector", "hybrid")
STORE_LABEL = {"embedded": "embedded (SQLite)", "opensearch": "OpenSearch node"}
EMBEDDER_LABEL = {"hashing": "hashing", "minilm": "all-MiniLM-L6-v2"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _provenance(result: dict[str, Any], name: str) -> str:
    stale = (
        f" {STALE} (its digest differs from the current source's)." if not _current(result) else ""
    )
    return (
        f"Source: `bench/results/{name}.json`, made by `{result['command']}` "
        f"(commit {result.get('git_commit')}, product source digest "
        f"{result.get('source_digest', '?')}, {result['finished_at']}).{stale}"
    )


def _current(result: dict[str, Any]) -> bool:
    """Whether ``result`` was made by the product code as it is now."""
    return bool(result.get("source_digest") == source_digest())


def _met(ok: bool) -> str:
    return "met" if ok else "**missed**"


def _save(fig: Any, name: str) -> str:
    path = RESULTS_DIR / name
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return f"![{name}](results/{name})"


def _load_note(result: Mapping[str, Any]) -> str:
    load = result.get("machine", {}).get("load_average")
    if not load:
        return ""
    return (
        f" Load average when the run ended: {load[0]:g} (1 min), {load[1]:g} (5 min) on "
        f"{result['machine']['cpus']} CPUs."
    )
