"""bench/REPORT.md's shape (``bench.report_layout``): the headline rows link to their
sections and say which code they measured; superseded sections and their rows go to the
history file, and REPORT.md names what moved there."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.environment import source_digest  # noqa: E402
from bench.report_layout import (  # noqa: E402
    Report,
    anchor,
    headline_table,
    history_text,
    moved_note,
)

ROW = ("what", "target", "measured", "met")


def _report(tmp_path: Path) -> Report:
    return Report(tmp_path / "bench" / "REPORT.md", tmp_path / "bench" / "results" / "h.md")


def test_a_headline_row_belongs_to_the_section_added_after_it(tmp_path: Path) -> None:
    report = _report(tmp_path)
    report.headlines.append(ROW)
    report.add(f"## 4. Cold start\n\nproduct source digest {source_digest()}, ...")
    report.headlines.append(("other", "t", "m", "v"))
    report.add("## 7.1 Quota (Titan-like)\n\nproduct source digest 000000000000, ...")
    report.add("## 8. Mutation\n\nno digest")
    table = headline_table(report.rows())
    assert "| what | target | measured | met | [4](#4-cold-start) | this code |" in table
    assert "| other | t | m | v | [7.1](#71-quota-titan-like) | earlier code |" in table
    assert len(report.sections) == 3


def test_superseded_sections_and_their_rows_go_to_the_history(tmp_path: Path) -> None:
    report = _report(tmp_path)
    with report.superseded():
        report.headlines.append(ROW)
        report.add("## 3b. Old latency\n\n![p.png](results/p.png)")
    report.headlines.append(("current", "t", "m", "v"))
    report.add("## 3. Latency\n\ntext")
    assert [text.splitlines()[0] for text in report.sections] == ["## 3. Latency"]
    assert [row for row, _ in report.rows()] == [("current", "t", "m", "v")]
    history = history_text(report)
    assert "| what | target | measured | met | [3b](#3b-old-latency) |" in history
    assert "![p.png](p.png)" in history  # the history sits in results/ itself
    assert "[REPORT.md](../REPORT.md)" in history
    assert moved_note(report).endswith("[3b. Old latency](results/h.md#3b-old-latency).")


def test_nothing_superseded_leaves_no_note(tmp_path: Path) -> None:
    report = _report(tmp_path)
    report.add("## 1. Quality\n\ntext")
    assert moved_note(report) == ""


def test_anchors_are_githubs() -> None:
    assert anchor("9.2 Recall by scope size: big scopes, an index") == (
        "92-recall-by-scope-size-big-scopes-an-index"
    )
    assert anchor("3g. Hybrid in one request? (issue 11)") == "3g-hybrid-in-one-request-issue-11"
