"""bench.runs.scope_recall's variants and the report's reading of the shipped rule."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bench.report.scope_recall import rule_cell
from bench.runs.scope_recall import sent_ef


def _scope(chunks: int, **variants: tuple[int, float]) -> dict[str, Any]:
    return {
        "chunks": chunks,
        "exact_ms": {"p50": 9.0, "p95": 12.0, "n": 3},
        "variants": {
            name: {
                "ef_search": ef,
                "recall_at_10": recall,
                "min_recall": recall,
                "knn_ms": {"p50": 5.0, "p95": 7.0, "n": 3},
            }
            for name, (ef, recall) in variants.items()
        },
    }


def test_variants_send_fixed_values_rules_and_the_product_rule() -> None:
    assert sent_ef("400", 50_000) == 400
    assert sent_ef("rule:5000:15", 4_000) == 200
    assert sent_ef("rule:5000:15", 30_000) == 2_000
    assert sent_ef("auto", 1_000) == 200
    assert sent_ef("auto", 120_000) == 10_000


def test_the_rule_cell_is_the_measured_request_the_rule_sends() -> None:
    small = rule_cell(_scope(150, **{"200": (200, 0.99), "400": (400, 1.0)}))
    assert small is not None
    assert (small["sent"], small["recall_at_10"]) == ("knn 200", 0.99)
    mid = rule_cell(_scope(16_217, **{"200": (200, 0.9)}))
    assert mid is not None
    assert (mid["sent"], mid["recall_at_10"], mid["ms"]["p50"]) == ("exact", 1.0, 9.0)
    assert rule_cell(_scope(90_000, **{"200": (200, 0.7)})) is None  # 7,500 not measured
