"""``bench/REPORT.md`` section 12.1: what the score-0 named clauses that carry a candidate's
origin and lesson status cost a search on the node (``bench/runs/named_clauses.py``)."""

from __future__ import annotations

from typing import Any

from bench.common.environment import read_result
from bench.report.helpers import Report, _met, _provenance, _table

__all__ = ["named_clauses_section", "section_text"]

TITLE = "## 12.1 Ranking controls on the node: what the named clauses cost"
NAME = "named-clauses"
LIMIT = 1.10
"""The cost the clauses may add to a search's p50 (wall time) before a cheaper way is due."""


def section_text(result: dict[str, Any]) -> str:
    rows = []
    for label, mode in result["modes"].items():
        variants = mode["variants"]
        for name in variants:
            rows.append(
                [
                    label,
                    name,
                    variants[name]["wall"]["p50"],
                    f"{mode['wall_ratio_p50'][name]:.3f}x",
                    variants[name]["took"]["p50"],
                    f"{mode['took_ratio_p50'][name]:.3f}x",
                    variants[name]["wall"]["p95"],
                ]
            )
    indexed = result["indexed"]
    text = (
        f"{TITLE}\n\n"
        'A candidate read without its source (hybrid, or a `group_by: "document"` search) '
        "says whether it is a lesson card, and its origin when that origin is weighted, "
        "through optional clauses of score 0 named in the query "
        "(`opensearch.queries.with_named`). They add nothing to a score (the contract test "
        "`test_the_default_weights_change_nothing_where_no_document_is_a_lesson` checks "
        "every result and score on every store); this measures the time. One index of "
        f"{indexed['documents']} man pages ({indexed['chunks']} chunks, one page in 20 a "
        f"lesson card: {indexed['lesson_documents']}), hashing embedder, every query "
        "searched in each variant, the variants taking turns (each first in turn) in one "
        "run: `inert` has no clause (neutral origins, lessons 1.0, no extras: the baseline), "
        "`default` one (lessons 1.4 with 2 extras, what a search gets unless told), "
        "`weighted` three (`shared` 0.5 and `manual` 1.5 too). p50 / p95 in ms, ratio to "
        "`inert` of the same mode:\n\n"
        + _table(
            ["search", "variant", "wall p50", "ratio", "took p50", "took ratio", "wall p95"],
            rows,
        )
    )
    default = _worst(result, "default")
    weighted = _worst(result, "weighted")
    verdict = (
        f"What every search pays (`default`, one clause): at most {default:.3f}x p50"
        + (f", within the {LIMIT:.2f}x allowed" if default <= LIMIT else f", over {LIMIT:.2f}x")
        + f". With origins weighted too (`weighted`, three clauses): at most {weighted:.3f}x"
        + (
            f", within {LIMIT:.2f}x."
            if weighted <= LIMIT
            else f", over {LIMIT:.2f}x (a weighted search only, on the fastest kind of search: "
            "see the table for the milliseconds); a cheaper way for that case is still to "
            "be measured (candidates' origin as doc values of the metadata pairs, or no "
            "clause for an origin the scope does not hold)."
        )
    )
    load = result.get("machine", {}).get("load_average")
    if load:
        verdict += (
            f" The machine was shared (load average {load[-1]:.1f} over 15 minutes at the "
            f"end, on {result['machine'].get('cpus')} cores): the ratios, measured in turns, "
            "hold; the milliseconds are the load's."
        )
    return text + "\n\n" + verdict + "\n\n" + _provenance(result, NAME)


def _worst(result: dict[str, Any], variant: str | None = None) -> float:
    return max(
        ratio
        for mode in result["modes"].values()
        for name, ratio in mode["wall_ratio_p50"].items()
        if name != "inert" and variant in (None, name)
    )


def named_clauses_section(report: Report) -> None:
    result = read_result(NAME)
    if result is None:
        report.add(f"{TITLE}\n\nMissing: run `python -m bench named-clauses`.")
        return
    worst = _worst(result, "default")
    report.headlines.append(
        (
            "score-0 lesson clause (the default) on the node: search p50 vs none",
            f"<= {LIMIT:.2f}x",
            f"{worst:.3f}x",
            _met(worst <= LIMIT),
        )
    )
    report.add(section_text(result))
