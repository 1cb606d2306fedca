"""The relevance variants' feature changes (``bench.runs.relevance_variants``), on records
made here: what a variant does to a result's coverage, and that the ``recorded`` variant
leaves every feature as it was."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from bench.runs.relevance_variants import VARIANTS, absent_share  # noqa: E402
from knowledge.ranking.relevance import idf  # noqa: E402

ABSENT = idf(0, 1000)


def payload(typed: dict[str, float], coverage: float) -> dict[str, Any]:
    record = {
        "search_relevance": {"terms": {"chunks": 1000, "typed": typed}},
        "results": [{"document_path": "a.md", "relevance": {"coverage": coverage}}],
    }
    return {"modes": {"keyword": {"records": [record]}}}


def coverage_of(changed: dict[str, Any]) -> float:
    (record,) = changed["modes"]["keyword"]["records"]
    return float(record["results"][0]["relevance"]["coverage"])


def test_an_absent_terms_share_only_lightens_the_denominator() -> None:
    # "sell" the scope never uses; the chunk holds "debian" (2.0 of 2.0 + ABSENT).
    original = payload({"debian": 2.0, "sell": ABSENT}, 2.0 / (2.0 + ABSENT))
    changed = absent_share(0.5)(original)
    assert coverage_of(changed) == pytest.approx(2.0 / (2.0 + 0.5 * ABSENT), abs=1e-6)
    assert coverage_of(original) == pytest.approx(2.0 / (2.0 + ABSENT))  # not changed in place


def test_a_korean_compound_and_its_parts_are_one_position() -> None:
    # 편집, 기, 편집기 (a compound and its parts) and 커밋; the chunk holds the three.
    typed = {"편집": 3.0, "기": 2.0, "편집기": 5.0, "커밋": 4.0}
    recorded = (3.0 + 2.0 + 5.0) / 14.0
    change, _ = VARIANTS["compound"]
    assert coverage_of(change(payload(typed, recorded))) == pytest.approx(5.0 / 9.0, abs=1e-6)


def test_the_recorded_variant_changes_nothing() -> None:
    original = payload({"debian": 2.0, "sell": ABSENT}, 0.3)
    change, extra = VARIANTS["recorded"]
    assert change(original) == original
    assert extra(original["modes"]["keyword"]["records"][0]) == []
