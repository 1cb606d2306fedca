"""Report section 1.2: every Korean set (four help-page collections and the FAQ questions)
and the English ones in one run of this code, both stores, each with its plain-BM25
baselines; which part of the product's ranking costs it against plain BM25 over the same
terms (``bench/runs/korean_ablation.py``); the analysis variants of this round."""

from __future__ import annotations

from typing import Any

from bench.common.environment import read_result
from bench.report.helpers import Report, _provenance, _table

__all__ = ["korean_sets_section"]

LABEL = "v5r10"
KOREAN = ("gimp-help-ko", "gnome-help-ko", "gnome-apps-help-ko", "faq-ko")
ENGLISH = ("faq-en", "manpages-300")
MODES = ("keyword", "vector", "hybrid")
# Last round's figures in REPORT (sections 1i and 1j), for the English check.
BEFORE = {
    ("faq-en", "embedded"): 0.487,
    ("faq-en", "opensearch"): 0.504,
    ("manpages-300", "embedded"): 0.823,
    ("manpages-300", "opensearch"): 0.826,
}


def _runs(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {run["store"]: run["modes"] for run in result["runs"]}


def _mrr(modes: dict[str, Any], mode: str) -> float | str:
    return float(modes[mode]["mrr_at_10"]) if mode in modes else "-"


def _keyword_rows(results: list[tuple[str, dict[str, Any]]]) -> list[list[object]]:
    rows: list[list[object]] = []
    for corpus in (*KOREAN, *ENGLISH):
        name = f"quality-{corpus}-hashing-{LABEL}"
        result = read_result(name)
        if result is None:
            continue
        results.append((name, result))
        runs = _runs(result)
        embedded = _mrr(runs.get("embedded", {}), "keyword")
        node = _mrr(runs.get("opensearch", {}), "keyword")
        gap = (
            f"{abs(embedded - node):.3f}"
            if isinstance(embedded, float) and isinstance(node, float)
            else "-"
        )
        base = result["baselines"]
        rows.append(
            [
                corpus,
                result["corpus"]["documents"],
                result["corpus"]["queries"],
                embedded,
                node,
                gap,
                float(base["fts5_unicode61"]["mrr_at_10"]) if "fts5_unicode61" in base else "-",
                float(base["fts5_morphemes"]["mrr_at_10"]) if "fts5_morphemes" in base else "-",
                f"{base['fts5']['mrr_at_10']:.3f} ({base['fts5']['tokenizer']})",
            ]
        )
    return rows


def _mode_rows(embedder: str, results: list[tuple[str, dict[str, Any]]]) -> list[list[object]]:
    rows: list[list[object]] = []
    # MiniLM: the FAQ sets only, re-run on this code under section 1.1's own file names.
    for corpus in ("faq-ko", "faq-en") if embedder == "minilm" else (*KOREAN, *ENGLISH):
        name = f"quality-{corpus}-{embedder}" + ("" if embedder == "minilm" else f"-{LABEL}")
        result = read_result(name)
        if result is None:
            continue
        if embedder != "hashing":
            results.append((name, result))
        for store, modes in _runs(result).items():
            before = BEFORE.get((corpus, store)) if embedder == "hashing" else None
            keyword = _mrr(modes, "keyword")
            change = (
                f"{keyword - before:+.3f}"
                if before is not None and isinstance(keyword, float)
                else "-"
            )
            rows.append(
                [
                    corpus,
                    "node" if store == "opensearch" else store,
                    *(_mrr(modes, mode) for mode in MODES),
                    change,
                ]
            )
    return rows


def _ablation(parts: list[str], results: list[tuple[str, dict[str, Any]]]) -> None:
    result = read_result("korean-ablation-r10")
    if result is None:
        return
    results.append(("korean-ablation-r10", result))
    sets = list(result["baselines"])
    rows: list[list[object]] = [
        [label, *(result["baselines"][s].get(key, "-") for s in sets)]
        for key, label in (
            ("fts5_unicode61", "plain FTS5 unicode61 (whole pages)"),
            ("fts5_morphemes", "plain FTS5 over keyword_terms (whole pages)"),
        )
    ]
    rows += [
        [name, *(scores.get(s, "-") for s in sets)] for name, scores in result["configs"].items()
    ]
    parts.append(
        "**What the product's ranking costs against plain BM25 over the same terms** "
        "(`python -m bench korean-ablation`: the embedded store, hashing embedder, keyword "
        "MRR@10 through `store.search`, one option changed per row; English sets as the "
        "check):\n\n" + _table(("", *sets), rows)
    )


def _variants(parts: list[str], results: list[tuple[str, dict[str, Any]]]) -> None:
    result = read_result("korean-variants-r10-probe")
    if result is None:
        return
    results.append(("korean-variants-r10-probe", result))
    sets = list(result["baselines"])
    rows: list[list[object]] = [
        [label, *(result["baselines"][s].get(key, "-") for s in sets)]
        for key, label in (
            ("fts5_unicode61_sections", "FTS5 unicode61, ~1,000-character sections"),
            ("fts5_morphemes_sections", "FTS5 keyword_terms, ~1,000-character sections"),
        )
    ]
    names = {
        "morphemes": "product, analysis v5 (morphemes)",
        "compound-no1": "one-syllable parts of a compound dropped (글꼴 -> 글꼴, not 글, 꼴)",
    }
    rows += [
        [names.get(name, name), *(scores.get(s, "-") for s in sets)]
        for name, scores in result["variants"].items()
    ]
    parts.append(
        "**An analysis variant** (`python -m bench korean-variants --variants "
        "morphemes,compound-no1`, embedded store, keyword MRR@10; and the issue probe's "
        "section-level baselines):\n\n" + _table(("", *sets), rows)
    )


def korean_sets_section(report: Report) -> None:
    parts = [
        "## 1.2 Korean: four help-page collections and the questions, one run of this code",
        "**gnome-apps-help-ko** (`bench/corpora/gnome_apps_help.py`) is new: the Korean help that "
        "19 GNOME applications ship in their Debian packages (text editor, image and "
        "document viewers, archive manager, calculator, system monitor, disk usage, "
        "terminal, video player, web browser, webcam, disc burner, hex editor, clocks, "
        "logs, music, virtual machines, two games; Mallard XML, read as gnome-help-ko is), "
        "one collection of 372 pages, 293 Korean titles as queries: manuals about one "
        "program's menus, dialogs and settings, the UI names and terms of art where "
        "surface words were reported to beat morphemes. libreoffice-help-ko is not used "
        "(the held-out set).",
    ]
    results: list[tuple[str, dict[str, Any]]] = []
    rows = _keyword_rows(results)
    if rows:
        parts.append(
            "**Keyword MRR@10, the product against plain BM25 on the same pages** "
            "(hashing embedder; `python -m bench quality --corpus C --label v5r10`, both "
            "stores, baselines over whole pages in the same run: FTS5 unicode61 = "
            "whitespace words, no analysis; FTS5 morphemes = the product's `keyword_terms` "
            "in FTS5 with no chunks, headings or caps; FTS5 own = trigram for Korean, "
            "porter for English):\n\n"
            + _table(
                (
                    "corpus",
                    "pages",
                    "queries",
                    "product embedded",
                    "product node",
                    "embedded vs node",
                    "FTS5 unicode61",
                    "FTS5 morphemes",
                    "FTS5 own",
                ),
                rows,
            )
        )
    for embedder, title in (
        (
            "hashing",
            "hashing embedder (keyword change against last round's REPORT, sections 1i "
            "and 1; the man-pages set there had 258 pages, here 256, as the installed man "
            "pages differ, so that row compares two corpora)",
        ),
        (
            "minilm",
            "all-MiniLM-L6-v2, the FAQ sets re-run on this code (`python -m bench quality "
            "--corpus faq-ko (faq-en) --embedder minilm`, the files section 1.1 reads; the "
            "help-page sets were not run with MiniLM: an English-only model, and 4,880 "
            "gimp-help-ko chunks take half an hour on this shared machine)",
        ),
    ):
        mode_rows = _mode_rows(embedder, results)
        if mode_rows:
            parts.append(
                f"**Every mode, {title}** (MRR@10):\n\n"
                + _table(("corpus", "store", *MODES, "keyword vs last round"), mode_rows)
            )
    _ablation(parts, results)
    _variants(parts, results)
    parts.append(
        "Commands: `bench/setup.sh`; `python -m bench quality --corpus C --embedder hashing "
        "--label v5r10` for every C above; `python -m bench korean-ablation --label "
        "r10`; `python -m bench korean-variants --variants morphemes,compound-no1 --corpora "
        "gimp-help-ko,gnome-help-ko,gnome-apps-help-ko,faq-ko --label r10-probe`. What the "
        "figures say: `docs/korean.md`."
    )
    parts.append(" ".join(_provenance(result, name) for name, result in results))
    report.add("\n\n".join(parts))
