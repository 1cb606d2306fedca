"""bench/REPORT.md's shape (``bench.report.layout``): the headline rows link to their
sections and say which code they measured; REPORT.md names the superseded sections of the
frozen history file, which it links to and never writes."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from bench.common.environment import source_digest  # noqa: E402
from bench.report.layout import (  # noqa: E402
    Report,
    anchor,
    frozen,
    frozen_titles,
    headline_table,
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


HISTORY = """# Benchmark history: superseded measurements

Frozen text.

## Figures these sections reported

| what | target | measured | met | [3b](#3b-old-latency) | earlier code |

## 3b. Old latency

![p.png](p.png)

### A table of 3b

## 1c. Old fusion
"""


def test_the_frozen_history_sections_are_named_under_the_headline_table(tmp_path: Path) -> None:
    report = _report(tmp_path)
    report.history_path.parent.mkdir(parents=True)
    report.history_path.write_text(HISTORY, encoding="utf-8")
    report.add("## 3. Latency\n\ntext")
    assert frozen_titles(report.history_path) == ["3b. Old latency", "1c. Old fusion"]
    note = moved_note(report)
    assert "are in [results/h.md](results/h.md): " in note
    assert note.endswith(
        "[3b. Old latency](results/h.md#3b-old-latency); "
        "[1c. Old fusion](results/h.md#1c-old-fusion)."
    )
    assert report.history_path.read_text(encoding="utf-8") == HISTORY


def test_no_history_file_leaves_no_note(tmp_path: Path) -> None:
    report = _report(tmp_path)
    report.add("## 1. Quality\n\ntext")
    assert frozen_titles(report.history_path) == []
    assert moved_note(report) == ""


def test_a_frozen_part_of_a_section_is_its_text_verbatim(tmp_path: Path) -> None:
    text = "### Before and after\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    (tmp_path / "old-table.md").write_text(text, encoding="utf-8")
    assert frozen("old-table", tmp_path) == text.strip()
    assert frozen("never-frozen", tmp_path) == ""


def test_anchors_are_githubs() -> None:
    assert anchor("9.2 Recall by scope size: big scopes, an index") == (
        "92-recall-by-scope-size-big-scopes-an-index"
    )
    assert anchor("3g. Hybrid in one request? (issue 11)") == "3g-hybrid-in-one-request-issue-11"
