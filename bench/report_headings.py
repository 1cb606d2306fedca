"""``bench/REPORT.md`` section 1g: title and heading context on the keyword side.

Reads the quality runs of ``bench/quality.py`` made with ``--option headings_weight=W
--label hwW`` (W = 0: the headings left out, as before analysis version 4; 0.25; 1.0)
next to the product's default run (no label:
``knowledge.ranking.headings.DEFAULT_HEADINGS_WEIGHT``).
"""

from __future__ import annotations

from typing import Any

from bench.environment import read_result
from bench.report_common import EMBEDDER_LABEL, Report, _provenance, _table

__all__ = ["headings_section"]

CORPORA = ("manpages-300", "manpages-all", "faq-en", "faq-ko")
EMBEDDERS = ("hashing", "minilm")
STORES = ("embedded", "opensearch")
MODES = ("keyword", "hybrid")
WEIGHTS = (("0", "hw0"), ("0.25", "hw0.25"), ("0.5 (default)", ""), ("1.0", "hw1.0"))


def _modes(result: dict[str, Any] | None, store: str) -> dict[str, Any] | None:
    if result is None:
        return None
    found: dict[str, Any] | None = {r["store"]: r["modes"] for r in result["runs"]}.get(store)
    return found


def _name(corpus: str, embedder: str, label: str) -> str:
    return f"quality-{corpus}-{embedder}" + (f"-{label}" if label else "")


def headings_section(report: Report) -> None:
    rows: list[list[object]] = []
    sources: list[str] = []
    worst = 0.0
    for corpus in CORPORA:
        for embedder in EMBEDDERS:
            results = {label: read_result(_name(corpus, embedder, label)) for _, label in WEIGHTS}
            if results["hw0"] is None or results[""] is None:
                continue
            for label, result in results.items():
                if result is not None:
                    sources.append(_provenance(result, _name(corpus, embedder, label)))
            for store in STORES:
                for mode in MODES:
                    cells: list[str] = []
                    values: dict[str, float] = {}
                    for _, label in WEIGHTS:
                        modes = _modes(results[label], store)
                        if modes is None:
                            cells.append("")
                            continue
                        values[label] = modes[mode]["mrr_at_10"]
                        cells.append(f"{values[label]:.3f}")
                    if "hw0" not in values or "" not in values:
                        continue
                    change = values[""] - values["hw0"]
                    worst = min(worst, change)
                    rows.append(
                        [corpus, EMBEDDER_LABEL[embedder], store, mode, *cells, f"{change:+.3f}"]
                    )
    if not rows:
        return
    parts = [
        "## 1g. Title and heading context on the keyword side",
        "Each chunk's title and heading path (`chunking.heading_context`, the line "
        "`embedding_text` puts in front of the embedded text) is indexed next to its text, "
        "with the same analysis (English Snowball stems, CJK bigrams, Korean morphemes), and "
        "weighs `headings_weight` against the text's 1.0: an FTS5 column weight of `bm25()` "
        "in the embedded store, the `boost` of the `headings` clauses in OpenSearch "
        "(`knowledge.ranking.headings`). The returned content is unchanged. MRR@10 per weight "
        "(0: no headings, the figures before analysis version 4); *change*: the default "
        "0.5 against 0. Vector mode does not read the headings field (its figures are "
        "section 1's). OpenSearch's hybrid figures move by a few thousandths from run to "
        "run with no change at all (its HNSW graph is built anew each run).",
        _table(
            [
                "corpus",
                "embedder",
                "store",
                "mode",
                *(f"weight {weight}" for weight, _ in WEIGHTS),
                "change",
            ],
            rows,
        ),
        "\n".join(sources),
        'The FAQ answers\' titles are their section numbers ("8.4"), which hold no letter '
        "and are left out, and the answers have no headings: the FAQ is unchanged by "
        "construction. The man pages have real titles (the page name) and section "
        "headings (SYNOPSIS, DESCRIPTION, SEE ALSO, ...). Weight 1.0 costs OpenSearch's "
        "keyword side about a hundredth there (a heading then counts as much as the text, "
        "and OpenSearch scores the short field on its own length, not the chunk's); 0.25 is "
        "best on OpenSearch but barely moves the embedded store; 0.5 lifts the keyword side "
        f"of both. The worst change at 0.5 in any row is {worst:+.3f}. Questions that name "
        "a section heading, the case this is for, are in none of these benchmarks. "
        "Default: 0.5 (`DEFAULT_HEADINGS_WEIGHT`, `OPENSEARCH_HEADINGS_WEIGHT`).",
    ]
    report.add("\n\n".join(parts))
