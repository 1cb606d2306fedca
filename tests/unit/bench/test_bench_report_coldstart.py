"""bench/REPORT.md's cold-start section (``bench.report.footprint``): every handler the
result measured gets a row with its ratio to the naive handler, and a headline row against
the share of the naive handler's cold start it may take."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from bench.report import footprint as report_footprint  # noqa: E402
from bench.report.layout import Report  # noqa: E402


def _stats(p50: float) -> dict[str, float]:
    return {"n": 3, "p50": p50, "p95": p50 + 1, "mean": p50, "min": p50, "max": p50 + 1}


def _entry(import_ms: float, first_ms: float | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "import_ms": _stats(import_ms),
        "process_ms": _stats(import_ms + 40),
        "modules_imported": 100,
        "sdks_loaded_by_import": [],
    }
    if first_ms is not None:
        entry["import_plus_invoke_ms"] = _stats(first_ms)
        entry["sdks_loaded_after_invoke"] = ["botocore"]
    return entry


def _result() -> dict[str, Any]:
    rows = {
        "search": _entry(100),
        "indexer": _entry(250),
        "worker": _entry(50),  # a handler the section has no name for
        "naive": _entry(500),
        "search+invoke": _entry(100, 300),
        "naive+invoke": _entry(500, 600),
    }
    return {
        "python_version": "3.12.1",
        "runs": 3,
        "warmup": 1,
        "layer_bytes": 1e6,
        "layer_bytecode_bytes": 1e5,
        "variants": {"source": rows, "bytecode": rows},
        "heaviest_imports": {
            v: {"search": [{"package": "knowledge", "cumulative_ms": 40.0}]}
            for v in ("source", "bytecode")
        },
        "ratios": {
            v: {"naive_over_search_import": 5.0, "naive_over_search_first_request": 2.0}
            for v in ("source", "bytecode")
        }
        | {"source_over_bytecode": {"search": 2.0}},
        "targets_set": {
            "search_import_max_ms": 200,
            "naive_over_search_min": 4.0,
            "handler_over_naive_max": 0.3,
        },
    }


def _section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Report:
    plt = MagicMock()
    plt.subplots.return_value = (MagicMock(), MagicMock())
    monkeypatch.setattr(report_footprint, "read_result", lambda name: _result())
    monkeypatch.setattr(report_footprint, "_pyplot", lambda: plt)
    monkeypatch.setattr(report_footprint, "_save", lambda fig, name: "")
    monkeypatch.setattr(report_footprint, "_provenance", lambda result, name: "")
    report = Report(tmp_path / "REPORT.md", tmp_path / "history.md")
    report_footprint.coldstart_section(report)
    return report


def test_every_measured_row_is_in_the_table_with_its_ratio_to_naive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (text,) = _section(tmp_path, monkeypatch).sections
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines()}
    assert "| 0.20x |" in rows["search handler (keyword mode)"]
    assert "| 0.50x |" in rows["indexer handler"]
    assert "| 0.10x |" in rows["worker handler"]
    assert "| 0.50x |" in rows["search handler (keyword mode) + first request"]
    assert "| - |" in rows["naive handler"]


def test_each_handler_has_a_headline_against_its_share_of_naive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    headlines = {
        what.split(" (import")[0]: (target, measured, verdict)
        for what, target, measured, verdict in _section(tmp_path, monkeypatch).headlines
    }
    assert headlines["Cold start, search handler (keyword mode) / naive handler"] == (
        "<= 0.3x naive",
        "0.20x (100 vs 500 ms)",
        "met",
    )
    assert headlines["Cold start, indexer handler / naive handler"] == (
        "<= 0.3x naive",
        "0.50x (250 vs 500 ms)",
        "**missed**",
    )
    assert headlines["Cold start, worker handler / naive handler"][1] == "0.10x (50 vs 500 ms)"
    assert not any(what.startswith("Cold start, naive") for what in headlines)
