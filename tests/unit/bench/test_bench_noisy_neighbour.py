"""bench.runs.noisy_neighbour's pieces that need no server: the generated text, the summaries,
and its REPORT section from a hand-made result."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bench.report import noisy_neighbour as report_fairness
from bench.report.helpers import Report
from bench.runs.noisy_neighbour import _marker, _summary, _tail, generate_text


def test_generated_text_is_the_same_for_a_seed_and_names_its_marker_once(
    tmp_path: Path,
) -> None:
    first, second, other = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "c.txt"
    size = generate_text(first, 20_000, seed=3, marker=_marker("big", 0))
    generate_text(second, 20_000, seed=3, marker=_marker("big", 0))
    generate_text(other, 20_000, seed=4, marker=_marker("big", 0))
    text = first.read_text("ascii")
    assert size == len(text) >= 20_000
    assert first.read_bytes() == second.read_bytes() != other.read_bytes()
    assert text.count(_marker("big", 0)) == 1
    assert "\n\n" in text  # paragraphs


def test_markers_are_letters_and_differ_per_file() -> None:
    words = {_marker(kind, n) for kind in ("base", "load", "up") for n in range(300)}
    assert len(words) == 900
    assert all(word.isalpha() for word in words)


def test_a_try_that_gave_up_makes_the_percentiles_a_lower_bound() -> None:
    tries: list[dict[str, Any]] = [{"seconds": s, "timed_out": False} for s in (0.5, 0.7)]
    assert _summary(tries)["lower_bound"] is False
    tries.append({"seconds": 120.0, "timed_out": True})
    tries.append({"file": "x", "not_run": True})  # not run: not counted
    summary = _summary(tries)
    assert summary["tries"] == 3
    assert summary["timed_out"] == 1
    assert summary["lower_bound"] is True
    assert summary["max_s"] == pytest.approx(120.0)


def test_the_tail_names_the_try_under_way_at_the_big_swap() -> None:
    tries = [
        {"file": "a", "seconds": 0.4, "at_s": 40.0},
        {"file": "b", "seconds": 1.3, "at_s": 48.8},
        {"file": "c", "seconds": 0.2, "at_s": 51.0},
    ]
    tail = _tail(tries, big_at=50.0)
    assert [t["file"] for t in tail["at_big_swap"]] == ["b"]
    assert tail["slowest"]["file"] == "b"


def _version(p95: float, *, old: bool = False) -> dict[str, Any]:
    summary = {"tries": 20, "p50_s": 0.4, "p95_s": p95, "max_s": p95, "timed_out": 0}
    version: dict[str, Any] = {
        "baseline": {"tries": 20, "p50_s": 0.4, "p95_s": 1.0, "max_s": 1.0, "timed_out": 0},
        "load": {**summary, "not_run": 0, "started_under_load": 2 if old else 20},
        "p95_ratio": round(p95, 1),
        "tail": {"tries": 0},
        "puts": {"202": 40, "429": 0, "other": {}},
        "big_progress_seen": None
        if old
        else {"document": "manual.txt", "chunks_done": 10, "chunks_estimated": 100},
        "drain": {
            "big_searchable_s": 50.0,
            "all_searchable_s": 200.0,
            "new_documents": {"manuals": 1, "uploads": 40},
        },
        "write_lock": {"max_wait_s": 39.0 if old else 1.7},
        "server_cpu": {"cpu_s": 160.0, "until_drained_cores": 0.8, "machine_busy_cores": 1.9},
        "load_average": {"load_start": [2.0, 2.0, 2.0], "tries_end": [3.0, 2.0, 2.0]},
    }
    if old:
        version["commit"] = "abc1234"
    return version


def test_the_section_renders_both_versions_and_the_headline(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    result = {
        "command": "python -m bench noisy-neighbour",
        "finished_at": "now",
        "setup": {
            "big_file_bytes": 50 * 2**20,
            "puts": 40,
            "put_bytes": 4 * 2**20,
            "tries": 20,
            "give_up_s": 120.0,
            "cap_s": 600.0,
            "search_every_s": 0.02,
        },
        "target_p95_s": 2.0,
        "met": True,
        "versions": {"new": _version(1.02), "old": _version(77.6, old=True)},
    }
    monkeypatch.setattr(report_fairness, "read_result", lambda name: result)
    report = Report(tmp_path / "REPORT.md", tmp_path / "history.md")
    report_fairness.noisy_neighbour_section(report)
    (text,) = report.sections
    assert "| this code | 0.40 / 1.00 / 1.00 | 0.40 / 1.02 / 1.02 |" in text
    assert "| before fair scheduling (abc1234) |" in text
    assert "manual.txt: 10 of ~100" in text
    what, target, measured, verdict = report.headlines[0]
    assert "50 MiB + 40 x 4 MiB" in what
    assert (target, verdict) == ("<= 2 s", "met")
    assert measured == "1.02 s (before, same run: 77.6 s)"


def test_the_section_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report_fairness, "read_result", lambda name: None)
    report = Report()
    report_fairness.noisy_neighbour_section(report)
    assert "Missing: `python -m bench noisy-neighbour`" in report.sections[0]
