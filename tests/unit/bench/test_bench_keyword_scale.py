"""``python -m bench keyword-scale``: its generated text and queries are the same every run,
shaped like text (a few words in most chunks, most words rare), and its report section
renders what a run wrote."""

from __future__ import annotations

import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bench.report.keyword_scale import section_text
from bench.runs.keyword_scale import Zipf, generate_queries, write_document


def test_queries_are_fixed_and_hold_one_to_six_words() -> None:
    zipf = Zipf(size=2_000)
    queries = generate_queries(zipf, 100)
    assert queries == generate_queries(Zipf(size=2_000), 100)
    assert {len(q.split()) for q in queries} == set(range(1, 7))
    assert all(word in set(zipf.words) for q in queries for word in q.split())


def test_the_text_follows_the_vocabulary_ranks(tmp_path: Path) -> None:
    zipf = Zipf(size=2_000)
    path = tmp_path / "doc.md"
    size = write_document(path, 60_000, zipf, seed=5)
    text = path.read_text("utf-8")
    assert size == len(text) >= 60_000
    assert write_document(tmp_path / "again.md", 60_000, zipf, seed=5) == size
    assert (tmp_path / "again.md").read_text("utf-8") == text
    counts = Counter(word.strip(".#-").lower() for word in text.split())
    # The head is common, the tail rare: the 10 commonest words are a sixth of the text.
    head = sum(count for _, count in counts.most_common(10))
    assert head > sum(counts.values()) / 6
    assert zipf.rank_of_share(0.5) < len(zipf.words) / 10
    assert zipf.sample(random.Random(1), 3) == zipf.sample(random.Random(1), 3)


def _pass(product: float, before: float, fts5: float) -> dict[str, Any]:
    ms = {
        name: {"p50": value, "p95": 3 * value}
        for name, value in (("product", product), ("before", before), ("fts5", fts5))
    }
    ratios = {v: round(ms[v]["p50"] / fts5, 2) for v in ("product", "before")}
    summary = {"ms": ms, "ratio_p50": ratios, "ratio_p95": ratios}
    return {**summary, "cpu": summary, "results_differ": 0}


def test_the_section_renders_a_run() -> None:
    result = {
        "vocabulary": 40_000,
        "queries": 200,
        "command": "python -m bench keyword-scale",
        "finished_at": "now",
        "shapes": {
            shape: {
                "built": {"chunks": 120_000},
                "passes": {"first": _pass(6.0, 20.0, 3.0), "again": _pass(5.0, 18.0, 3.0)},
                "statements_cpu_ms": {"plain FTS5": {"p50": 3.0, "mean": 8.0}},
            }
            for shape in ("one", "many")
        },
    }
    text = section_text(result)
    assert "| one 38 MB document (120,000 chunks) | first | after | 6.0 / 18.0 |" in text
    assert "2.00x in wall time" in text
    assert "met." in text
