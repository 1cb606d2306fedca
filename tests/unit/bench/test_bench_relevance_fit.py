"""The relevance calibration's fit (``bench.runs.relevance_fit``), on records made here:
where it writes, that it learns the query's script, and that the file it writes scores
as it fitted."""

from __future__ import annotations

import math
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from bench.runs.relevance_fit import (  # noqa: E402
    DEFAULT_OUT,
    _calibration_json,
    calibrated_score,
    fit,
    record_script,
)
from knowledge.ranking.relevance import Script, parse_calibrations  # noqa: E402


def test_the_fit_writes_the_file_the_product_reads() -> None:
    shipped = resources.files("knowledge.ranking").joinpath("relevance_calibration.json")
    assert DEFAULT_OUT.resolve() == Path(str(shipped)).resolve()
    assert DEFAULT_OUT.is_file()


def record(typed: list[str], coverages: list[float]) -> dict[str, Any]:
    """One keyword search's record: results ``0.md``, ``1.md``, ... in rank order."""
    return {
        "search_relevance": {"terms": {"chunks": 1000, "typed": dict.fromkeys(typed, 1.0)}},
        "results": [
            {"document_path": f"{i}.md", "score": 0.0, "relevance": {"coverage": c}}
            for i, c in enumerate(coverages)
        ],
    }


ENGLISH = ["instal", "modul", "window"]
KOREAN = ["모듈", "설치", "방법"]


def payload() -> dict[str, Any]:
    """English answers found at coverage 0.5-0.6 (unanswerable questions' hits 0.1-0.3);
    Korean ones at 0.7-0.8 (unanswerable 0.4-0.5): the same coverage is stronger evidence
    in English."""
    questions: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    for typed, answered, unanswered in (
        (ENGLISH, (0.5, 0.6), (0.1, 0.2, 0.3)),
        (KOREAN, (0.7, 0.8), (0.4, 0.5, 0.45)),
    ):
        for i in range(20):
            questions.append({"kind": "answerable", "relevant": ["0.md"], "text": typed[0]})
            records.append(record(typed, [answered[i % 2], 0.05]))
            questions.append({"kind": "off", "relevant": [], "text": typed[0]})
            records.append(record(typed, [unanswered[i % 3], 0.05]))
    return {
        "embedder": {"name": "hashing", "family": "hashing", "key": "hashing"},
        "questions": questions,
        "modes": {"keyword": {"records": records}},
    }


def test_the_script_of_a_record_is_the_products_of_its_typed_terms() -> None:
    assert record_script(record(ENGLISH, [])) is Script.OTHER
    assert record_script(record(KOREAN, [])) is Script.CJK
    assert record_script(record([], [])) is Script.OTHER


def test_the_fit_learns_that_a_cjk_query_needs_more_coverage() -> None:
    calibration = fit([payload()], l2=1e-3)
    a, b, d = calibration["default"]["keyword"]
    assert b > 0
    assert d < 0
    assert calibration["hashing"]["keyword"] == [a, b, d]
    # The file it writes scores what the fit computes, for either script.
    written = parse_calibrations(_calibration_json(calibration, "test"))
    scale = written["hashing"]
    for coverage in (0.3, 0.55, 0.75):
        result = {"relevance": {"coverage": coverage, "vector": None}}
        for script in Script:
            expected = 1.0 / (1.0 + math.exp(-(a + b * coverage + d * (script is Script.CJK))))
            assert calibrated_score(result, "keyword", scale, script) == pytest.approx(
                expected, abs=1e-5
            )
            # Without vector evidence a hybrid result is scored with keyword's.
            assert calibrated_score(result, "hybrid", scale, script) == pytest.approx(
                expected, abs=1e-5
            )
    # Coverage 0.5: an English answer's, a Korean unanswerable question's hit.
    english = calibrated_score({"relevance": {"coverage": 0.5}}, "keyword", scale, Script.OTHER)
    korean = calibrated_score({"relevance": {"coverage": 0.5}}, "keyword", scale, Script.CJK)
    assert english > 0.5 > korean
