"""Report section 1f: Korean keyword analysis, Hangul bigrams (analysis v2) against
MeCab-ko morphemes (analysis v3), both stores, in the same run."""

from __future__ import annotations

from typing import Any

from bench.environment import read_result
from bench.report_common import Report, _provenance, _table

__all__ = ["korean_section"]

MODES = ("keyword", "vector", "hybrid")
STORES = {"embedded": "embedded (SQLite)", "opensearch": "OpenSearch node"}
EMBEDDERS = {"hashing": "hashing", "minilm": "all-MiniLM-L6-v2"}


def _modes(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {run["store"]: run["modes"] for run in result["runs"]}


def korean_section(report: Report) -> None:
    title = "## 1f. Korean keyword analysis: Hangul bigrams vs MeCab-ko morphemes"
    pairs = []
    for corpus in ("faq-ko", "faq-en"):
        for embedder in EMBEDDERS:
            before = read_result(f"quality-{corpus}-{embedder}-bigrams")
            after = read_result(f"quality-{corpus}-{embedder}")
            if before is not None and after is not None:
                pairs.append((corpus, embedder, before, after))
    if not pairs:
        report.add(
            f"{title}\n\nNot run yet: `quality --corpus faq-ko --label bigrams` from an export "
            "of the commit before analysis v3, then `quality --corpus faq-ko` (README)."
        )
        return
    rows = []
    for corpus, embedder, before, after in pairs:
        b, a = _modes(before), _modes(after)
        for store, label in STORES.items():
            if store not in a or store not in b:
                continue
            for mode in MODES:
                x, y = b[store][mode], a[store][mode]
                rows.append(
                    [
                        corpus,
                        EMBEDDERS[embedder],
                        label,
                        mode,
                        f"{x['mrr_at_10']:.3f}",
                        f"{y['mrr_at_10']:.3f}",
                        f"{y['mrr_at_10'] - x['mrr_at_10']:+.3f}",
                        f"{x['recall_at_10']:.3f}",
                        f"{y['recall_at_10']:.3f}",
                    ]
                )
    fts5 = pairs[0][3]["baselines"]["fts5"]["mrr_at_10"] if pairs[0][0] == "faq-ko" else None
    parts = [
        title,
        "The Debian FAQ questions of section 1b, same harness, both stores, in one run: "
        "*bigrams* = the product code of commit 9f8e585, the one before analysis version 3 "
        "(Hangul runs as overlapping character bigrams, in the embedded terms and "
        "OpenSearch's `cjk_bigram` sub-field), run with this harness from an export of "
        "that commit (`PYTHONPATH=<export>/layers/knowledge:. .venv-bench/bin/python -m "
        "bench quality --corpus C --embedder E --label bigrams`: the result file records "
        "the worktree's commit and calls its code digest stale, as it should); "
        "*morphemes* = this code (`knowledge.ranking.analysis`: each Hangul run cut by "
        "MeCab-ko with mecab-ko-dic into its content morphemes, particles and endings "
        "dropped; the OpenSearch store indexes the same terms, sent pre-analysed in "
        "`content_ko`). Han and Kana keep their bigrams; English text is analysed as "
        "before (the faq-en rows are the no-loss check). MiniLM is English-only, so on "
        "Korean its hybrid leans on the keyword side. With the hashing embedder the "
        "stronger keyword side now leaves hybrid at or just below keyword (0.444 vs 0.448 "
        "embedded): its fusion weights were chosen on the bigram figures (section 1c)."
        + (f" Plain FTS5 trigram baseline on faq-ko: MRR@10 {fts5:.3f}." if fts5 else ""),
        _table(
            [
                "corpus",
                "embedder",
                "store",
                "mode",
                "MRR@10 bigrams",
                "MRR@10 morphemes",
                "change",
                "R@10 bigrams",
                "R@10 morphemes",
            ],
            rows,
        ),
        "Candidates measured before this choice (document-level BM25 over the same FAQ "
        "answers, `/tmp` script, not kept): bigrams 0.349; MeCab-ko morphemes 0.450, with "
        "compound parts 0.464; kiwipiepy morphemes 0.453 (5.7x slower to analyse, 145 MB "
        "of model and native code plus numpy); bigrams *and* morphemes in one field 0.36 "
        "(the bigrams drown the morphemes). nori (OpenSearch's MeCab-ko port) could not be "
        "run: `org.opensearch.plugin:analysis-nori` is on Maven Central only as 3.8.0, not "
        "for the local node's 2.19.1 (docs/korean.md).",
    ]
    speed = read_result("korean-analysis")
    if speed is not None:
        a = speed["analyses"]
        parts.append(
            "Cost (`python -m bench korean-analysis`, same run, term caches cleared before "
            f"each pass, best of {speed['repeat']}): the {speed['bytes'] / 1e3:.0f} kB of "
            f"Korean answers analyse at {a['morphemes']['mb_per_s']:.2f} MB/s with "
            f"morphemes vs {a['bigrams']['mb_per_s']:.2f} MB/s with bigrams "
            f"({speed['ratio_bigrams_over_morphemes']:.1f}x slower; English text takes the "
            "same path as before); the first text with Hangul in a process imports MeCab-ko "
            f"and opens the dictionary in {speed['first_use_seconds']['median'] * 1000:.0f} "
            "ms (median of fresh interpreters, warm file cache). "
            + _provenance(speed, "korean-analysis")
        )
    for corpus, embedder, before, after in pairs:
        parts.append(
            _provenance(before, f"quality-{corpus}-{embedder}-bigrams")
            + " "
            + _provenance(after, f"quality-{corpus}-{embedder}")
        )
    report.add("\n\n".join(parts))
