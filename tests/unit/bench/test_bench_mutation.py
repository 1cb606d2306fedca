"""The mutation summary (tools/mutation/summary.py) and its REPORT.md section, on literal
``mutmut results`` lines."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from bench.report import mutation as report_mutation  # noqa: E402
from bench.report.helpers import Report  # noqa: E402

_spec = importlib.util.spec_from_file_location("summary", ROOT / "tools/mutation/summary.py")
assert _spec is not None
assert _spec.loader is not None
summary = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(summary)

RESULTS = """\
    knowledge.core.scope.x_validate__mutmut_1: killed
    knowledge.core.scope.x_validate__mutmut_2: survived
    knowledge.core.scope.x_validate__mutmut_3: killed
    knowledge.core.scope.x_validate__mutmut_4: skipped
    knowledge.ingest.chunking.xǁ_SectionSplitterǁadd__mutmut_7: killed
    knowledge.ingest.chunking.xǁ_SectionSplitterǁadd__mutmut_8: timeout
    knowledge.ranking.fusion.x_fuse__mutmut_1: not checked
"""


def test_scores_count_killed_over_every_checked_mutant() -> None:
    table = summary.summarise(RESULTS.splitlines())
    assert table == {
        "knowledge.ingest.chunking": {
            "killed": 1,
            "timeout": 1,
            "score": 0.5,
            "not killed": ["knowledge.ingest.chunking.xǁ_SectionSplitterǁadd__mutmut_8"],
        },
        "knowledge.core.scope": {
            "killed": 2,
            "skipped": 1,
            "survived": 1,
            "score": 0.6667,
            "not killed": ["knowledge.core.scope.x_validate__mutmut_2"],
        },
    }


def test_the_report_section_lists_scores_and_explains_survivors(tmp_path: Path) -> None:
    results, out = tmp_path / "results.txt", tmp_path / "mutation.json"
    results.write_text(RESULTS, encoding="utf-8")
    merged = tmp_path / "all.txt"
    assert summary.main(["summary.py", str(results), str(merged), str(out)]) == 0
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written["command"] == "make mutation"
    assert written["modules"]["knowledge.core.scope"]["command"] == "make mutation"
    assert set(written["modules"]) == {"knowledge.ingest.chunking", "knowledge.core.scope"}
    assert merged.read_text(encoding="utf-8") == RESULTS

    report = Report()
    report_mutation.mutation_section(
        report,
        result=written,
        reasons={"knowledge.core.scope.x_validate__mutmut_2": "same message either way"},
    )
    text = report.sections[0]
    commit = written["git_commit"]
    assert f"| `knowledge.core.scope` | 2 | 1 | 0 | 66.7% | **missed** | {commit} |" in text
    assert f"| `knowledge.ingest.chunking` | 1 | 0 | 1 | 50.0% | **missed** | {commit} |" in text
    assert "- `knowledge.core.scope.x_validate__mutmut_2`: same message either way" in text
    assert "- `knowledge.ingest.chunking.xǁ_SectionSplitterǁadd__mutmut_8`: **unexplained**" in text
    assert report.headlines == [
        (
            "mutation score, lowest module",
            ">= 90%",
            "50.0% (knowledge.ingest.chunking)",
            "**missed**",
        )
    ]


LATER = """\
    knowledge.core.scope.x_validate__mutmut_1: killed
    knowledge.core.scope.x_validate__mutmut_2: killed
    knowledge.core.scope.x_validate__mutmut_3: killed
    knowledge.core.scope.x_validate__mutmut_4: skipped
    knowledge.ingest.chunking.xǁ_SectionSplitterǁadd__mutmut_7: not checked
    knowledge.ingest.chunking.xǁ_SectionSplitterǁadd__mutmut_8: not checked
    knowledge.ranking.fusion.x_fuse__mutmut_1: not checked
"""


def test_a_filtered_run_replaces_only_the_modules_it_checked(tmp_path: Path) -> None:
    first, later = tmp_path / "first.txt", tmp_path / "later.txt"
    first.write_text(RESULTS, encoding="utf-8")
    later.write_text(LATER, encoding="utf-8")
    merged, out = tmp_path / "all.txt", tmp_path / "mutation.json"
    assert summary.main(["summary.py", str(first), str(merged), str(out)]) == 0
    assert (
        summary.main(["summary.py", str(later), str(merged), str(out), "knowledge.core.scope*"])
        == 0
    )
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written["command"] == "per-module runs of tools/mutation/run.sh, merged"
    scope, chunking = (
        written["modules"]["knowledge.core.scope"],
        written["modules"]["knowledge.ingest.chunking"],
    )
    assert (scope["killed"], scope["score"], scope["not killed"]) == (3, 1.0, [])
    assert scope["command"] == "tools/mutation/run.sh 'knowledge.core.scope*'"
    assert (chunking["killed"], chunking["timeout"], chunking["score"]) == (1, 1, 0.5)
    assert chunking["command"] == "make mutation"
    assert merged.read_text(encoding="utf-8").splitlines() == [
        "    knowledge.core.scope.x_validate__mutmut_1: killed",
        "    knowledge.core.scope.x_validate__mutmut_2: killed",
        "    knowledge.core.scope.x_validate__mutmut_3: killed",
        "    knowledge.core.scope.x_validate__mutmut_4: skipped",
        "    knowledge.ingest.chunking.xǁ_SectionSplitterǁadd__mutmut_7: killed",
        "    knowledge.ingest.chunking.xǁ_SectionSplitterǁadd__mutmut_8: timeout",
        "    knowledge.ranking.fusion.x_fuse__mutmut_1: not checked",
    ]
    report = Report()
    report_mutation.mutation_section(report, result=written, reasons={})
    assert (
        "Per-module runs (each module's row says on which commit its run was): "
        "`make mutation`; `tools/mutation/run.sh 'knowledge.core.scope*'`."
    ) in report.sections[0]


def test_splice_replaces_the_section_and_keeps_the_ones_after_it(tmp_path: Path) -> None:
    path = tmp_path / "REPORT.md"
    path.write_text(
        "# Benchmarks\n\n## 7.1 Quota\n\nseven\n\n## 8. Mutation testing (mutmut)\n\nold\n\n"
        "## 9. Scale\n\nnine\n",
        encoding="utf-8",
    )
    report_mutation.splice(path)
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# Benchmarks\n\n## 7.1 Quota\n\nseven\n\n## 8. Mutation testing")
    assert "\nold\n" not in text
    assert text.endswith("\n\n## 9. Scale\n\nnine\n")
    assert text.count("## 8. Mutation testing (mutmut)") == 1
