"""Report section 1j: a third Korean help-pages set (gnome-help-ko), the product's keyword
side against plain FTS5 on three help-page collections, and Korean term-stream variants
(``bench/korean_variants.py``)."""

from __future__ import annotations

from typing import Any

from bench.environment import read_result
from bench.report_common import Report, _provenance, _table

__all__ = ["korean_help_section"]

SETS = ("gnome-help-ko", "gimp-help-ko", "help-union-ko", "faq-ko")
VARIANT_NAMES = {
    "morphemes": "**morphemes (analysis v5, unchanged)**",
    "stem": "+ the word's stem (cut before its first particle, ending, suffix or copula)",
    "compound": "+ leading nouns joined (대화상자, 탄력키) when there are two or more",
    "surface": "+ the word's exact surface",
    "stem+surface": "+ stem and exact surface",
    "q-no1": "query side: one-syllable morphemes dropped (kept if all are)",
    "stem-q-no1": "+ stem, and the query without one-syllable morphemes",
    "mbigram": "+ consecutive Korean terms joined (a phrase as a term)",
    "mag": "adverbs (MAG: 잘못, 미리, 빨리) kept",
    "mm": "determiners (MM: 다른, 모든) kept",
    "mag+mm": "adverbs and determiners kept",
}


def _store_rows(results: list[tuple[str, dict[str, Any]]]) -> list[list[object]]:
    rows: list[list[object]] = []
    for name in ("gnome-help-ko", "gimp-help-ko", "faq-ko"):
        # gimp-help-ko and faq-ko measured again with this code (section 1i keeps its own)
        file = f"quality-{name}-hashing-{'v5' if name == 'gnome-help-ko' else 'rerun'}"
        result = read_result(file)
        if result is None:
            continue
        results.append((file, result))
        stores = {run["store"]: run["modes"] for run in result["runs"]}
        base = result["baselines"]
        rows.append(
            [
                name,
                result["corpus"]["documents"],
                len(stores.get("embedded", {}).get("keyword", {}).get("ranks", [])),
                stores.get("embedded", {}).get("keyword", {}).get("mrr_at_10", "-"),
                stores.get("opensearch", {}).get("keyword", {}).get("mrr_at_10", "-"),
                base["fts5_unicode61"]["mrr_at_10"],
                base["fts5_morphemes"]["mrr_at_10"],
            ]
        )
    return rows


def korean_help_section(report: Report) -> None:
    parts = [
        "## 1j. Korean help pages: a third set (gnome-help-ko), and term-stream variants",
        "**gnome-help-ko** (`bench/gnome_help.py`, Debian's `gnome-user-docs`: GNOME Help "
        "and the GNOME system administration guide in Korean, Mallard XML; 306 pages, each "
        "indexed without its title and its `<info>` block, the `<desc>` line included; 298 "
        "Korean titles as queries; the untranslated strings stay English, as they are "
        "shipped) joins gimp-help-ko (677 pages, 52 queries) to test whether analysis v5 "
        "generalises beyond the set it was tuned on. help-union-ko is the two as one "
        "collection (983 pages, 350 queries): a larger collection, where a morpheme's "
        "document frequency grows and an exact surface word's precision could count more.",
    ]
    results: list[tuple[str, dict[str, Any]]] = []
    rows = _store_rows(results)
    if rows:
        parts.append(
            "**The product against plain FTS5** (hashing embedder, keyword MRR@10 through "
            "`store.search`; `python -m bench quality`, both stores, baselines over whole "
            "pages in the same run):\n\n"
            + _table(
                (
                    "corpus",
                    "pages",
                    "queries",
                    "product embedded",
                    "product node",
                    "FTS5 unicode61",
                    "FTS5 morphemes",
                ),
                rows,
            )
        )
    variants = read_result("korean-variants")
    if variants is not None:
        results.append(("korean-variants", variants))
        base = variants["baselines"]
        baseline_rows = [
            [
                label,
                *(
                    f"{base[name][key]:.3f}" if name in base and key in base[name] else "-"
                    for name in SETS
                ),
            ]
            for key, label in (
                ("fts5_unicode61", "FTS5 unicode61, whole pages"),
                ("fts5_morphemes", "FTS5 morphemes, whole pages"),
                ("fts5_unicode61_sections", "FTS5 unicode61, ~1,000-character sections"),
                ("fts5_morphemes_sections", "FTS5 morphemes, ~1,000-character sections"),
            )
        ]
        merged = dict(variants["variants"])
        variant_rows = [
            [VARIANT_NAMES.get(name, name), *(scores.get(s, "-") for s in SETS)]
            for name, scores in merged.items()
        ]
        parts.append(
            "**Term-stream variants** (`python -m bench korean-variants`: one change to how "
            "a run of Hangul becomes terms, the same in documents and queries unless said, "
            "indexed into the embedded store and searched through it, keyword MRR@10, "
            "hashing embedder; English text is untouched by every variant, so the English "
            "sets cannot move):\n\n" + _table(("", *SETS), baseline_rows + variant_rows)
        )
        parts.append(
            "What it says: on all three help-page collections, and at both granularities "
            "(whole pages; the issue probe's ~1,000-character sections), the morphemes beat "
            "the surface words, by 0.09-0.26; the product's keyword side is above plain "
            "FTS5 unicode61 on each (gnome-help-ko by 0.11) and above FTS5 morphemes on "
            "gnome-help-ko and on the union, below it on gimp-help-ko (0.734 vs 0.762: "
            "11 queries worse, 7 better, mostly rank 2 against 1; a whole page against its "
            "best 500-character chunk). No variant beats v5 on every set: a word's stem "
            "or surface costs gimp-help-ko 0.04-0.14 and the FAQ 0.01-0.09; phrase terms "
            "cost gimp-help-ko 0.10; joined nouns, adverbs and determiners move the sets by "
            "-0.04 to +0.01 in different directions. The best, one-syllable morphemes "
            "dropped from the query, moves them by -0.001 to +0.009, less than one "
            "gimp-help-ko query (0.019): noise, not a win. So analysis v5 stays as it is. "
            "The held-out set's reversal (surface words 0.670 over morphemes 0.527 in the "
            "issue's probe) is not reproduced on either help collection here."
        )
    parts.append(
        "Commands: `bench/setup.sh`; `python -m bench quality --corpus C --embedder hashing "
        "--label L` for C in gnome-help-ko (L = v5), gimp-help-ko and faq-ko (L = v5, the "
        "files renamed to -rerun: section 1i keeps its own); `python -m bench "
        "korean-variants`."
    )
    parts.append(" ".join(_provenance(result, name) for name, result in results))
    report.add("\n\n".join(parts))
