"""``bench/REPORT.md``'s "Synonyms" section: per-scope synonyms, the synonym probe
(``bench/runs/synonym_probe.py``: abbreviated man-page queries, Korean loanword / Latin /
old spellings on the Korean FAQ, every store, one run) and the quality sets without a
synonyms file before and after (``bench/runs/quality.py``, labels ``r11syn-before`` /
``r11syn-after``, embedded store).

``python -m bench.report.synonyms`` prints the section (appended to the report by hand
while another section layout is in the works; ``bench report`` writes it too)."""

from __future__ import annotations

from typing import Any

from bench.common.environment import read_result
from bench.report.helpers import Report, _met, _provenance, _table

__all__ = ["section_text", "synonyms_section"]

TITLE = "## 13. Synonyms: a scope's `_synonyms.txt`"
PROBE = "synonym-probe"
SETS = ("faq-ko", "faq-en", "manpages-300")
SET_NAMES = {"abbreviations": "man pages, abbreviated", "korean": "Korean FAQ, other spellings"}


def _neutral_pairs() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    found = []
    for corpus in SETS:
        before = read_result(f"quality-{corpus}-hashing-r11syn-before")
        after = read_result(f"quality-{corpus}-hashing-r11syn-after")
        if before is not None and after is not None:
            found.append((corpus, before, after))
    return found


def _mrr(result: dict[str, Any]) -> dict[tuple[str, str], float]:
    return {
        (run["store"], mode): scores["mrr_at_10"]
        for run in result["runs"]
        for mode, scores in run["modes"].items()
    }


def _moved(without: list[int | None], with_: list[int | None]) -> tuple[int, int]:
    """Queries whose relevant page ranked higher / lower (in the top 10) with the file."""

    def rr(rank: int | None) -> float:
        return 0.0 if rank is None or rank > 10 else 1.0 / rank

    up = sum(1 for a, b in zip(without, with_, strict=True) if rr(b) > rr(a))
    down = sum(1 for a, b in zip(without, with_, strict=True) if rr(b) < rr(a))
    return up, down


def probe_rows(probe: dict[str, Any]) -> list[list[object]]:
    rows: list[list[object]] = []
    for key, found in probe["sets"].items():
        count = found["queries"]["rewritten"]
        for run in found["runs"]:
            s = run["scores"]
            plain, synonyms = s["rewritten/plain"], s["rewritten/synonyms"]
            up, down = _moved(plain["ranks"], synonyms["ranks"])
            original = s["original/plain"]["mrr_at_10"]
            with_file = s["original/synonyms"]["mrr_at_10"]
            rows.append(
                [
                    SET_NAMES.get(key, key),
                    run["store"],
                    run["mode"],
                    count,
                    plain["mrr_at_10"],
                    synonyms["mrr_at_10"],
                    f"{synonyms['mrr_at_10'] - plain['mrr_at_10']:+.4f}",
                    f"{up} / {down}",
                    s["rewritten-original/plain"]["mrr_at_10"],
                    original,
                    f"{with_file - original:+.4f}",
                ]
            )
    return rows


def section_text(
    probe: dict[str, Any] | None, pairs: list[tuple[str, dict[str, Any], dict[str, Any]]]
) -> str:
    text = f"{TITLE}\n\n"
    if probe is not None:
        abbreviations = probe["sets"]["abbreviations"]
        korean = probe["sets"]["korean"]
        text += (
            "A synonym probe (`bench/runs/synonym_probe.py`), one run, hashing embedder, every "
            "store: each set indexed twice in each store, without a synonyms file and with "
            "one, the same documents. The man pages' NAME-line queries are *abbreviated* as "
            "people type them (`file descriptor` -> `fd`, `directory` -> `dir`, `memory` "
            f"-> `mem`, {len(abbreviations['pairs'])} pairs, e.g. "
            f"`{abbreviations['examples'][0][0]}` -> `{abbreviations['examples'][0][1]}`) and "
            "the file holds each pair as an equivalence line (`fd, file descriptor`); the "
            "Korean FAQ's questions get the loanword, Latin or older spelling of the "
            f"answers' words ({len(korean['pairs'])} pairs: "
            + ", ".join(f"`{a}` -> `{b}`" for a, b in korean["pairs"])
            + "), the file the same pairs. Only the queries the rewriting changed are "
            f"scored as *rewritten* ({abbreviations['queries']['rewritten']} of "
            f"{abbreviations['queries']['original']} man pages, "
            f"{korean['queries']['rewritten']} of {korean['queries']['original']} Korean "
            "questions). MRR@10:\n\n"
            + _table(
                [
                    "set",
                    "store",
                    "mode",
                    "rewritten",
                    "no file",
                    "with the file",
                    "gain",
                    "queries up / down",
                    "as written (no file)",
                    "all queries, no file",
                    "all queries, file's effect",
                ],
                probe_rows(probe),
                float_format="{:.4f}",
            )
            + "\n\n*as written (no file)* is the same rewritten queries before their "
            "rewriting: what the synonyms win back of what the other word cost. *all "
            "queries* is every query as the benchmark writes it: without a file it is "
            "the product's default; the file's effect on them is what the expansions cost "
            "or bring queries that needed no synonym. Each added term weighs 0.5 "
            "(`SYNONYM_WEIGHT`, docs/ranking.md section 5a).\n\n"
            "Read: on the man pages the file wins back about half of what abbreviating "
            "cost the keyword side (e.g. embedded 0.712 -> 0.758 against 0.804 as "
            "written), in hybrid too, in all three stores alike; the queries that "
            "needed no synonym move by at most 0.0023. On the Korean FAQ the "
            "gain is 0.03-0.04 in the embedded store and on the node (keyword), smaller in "
            "hybrid and in the memory store (whose TF-IDF moves 15 queries up and 12 "
            "down); there the file also lifts the questions as written (+0.005 to "
            "+0.012 in the embedded store and on the node), which already mix "
            "`Debian` and `데비안`. A loanword that MeCab-ko "
            "cuts into pieces (`디스트리뷰션` -> `디스`, `트리`, `뷰`, `션`) still matches "
            "its rule, since the rule is cut the same way, but its pieces also match "
            "unrelated words. The weight 0.5 was not tuned: other weights were not "
            "measured."
        )
        cost = []
        for key, found in probe["sets"].items():
            for run in found["runs"]:
                plain, synonyms = (
                    run["scores"]["original/plain"],
                    run["scores"]["original/synonyms"],
                )
                if "p50_ms" in plain:
                    ratio = f"{synonyms['p50_ms'] / plain['p50_ms']:.2f}x"
                    row = [SET_NAMES.get(key, key), run["store"], run["mode"]]
                    cost.append([*row, plain["p50_ms"], synonyms["p50_ms"], ratio])
        if cost:
            text += (
                "\n\nCost, the same run: p50 ms of one search of every query as written, "
                "without and with the file, the two scopes taking turns query by query "
                "(which goes first alternating). With the file a search reads it from the "
                "store (the embedded store's row; the node's record, cached for a minute) "
                "and its expanded queries add a second `MATCH` / `match`. The machine was "
                "shared with other runs (load average ~20): ratios within about 0.1 of "
                "1.0 are noise here.\n\n"
                + _table(["set", "store", "mode", "no file", "with the file", "ratio"], cost)
            )
        text += "\n\n" + _provenance(probe, PROBE)
    if pairs:
        rows = []
        for corpus, before, after in pairs:
            old, new = _mrr(before), _mrr(after)
            for key in sorted(old):
                if key in new:
                    rows.append(
                        [corpus, key[0], key[1], old[key], new[key], f"{new[key] - old[key]:+.4f}"]
                    )
        text += (
            "\n\nNo synonyms file (every scope of these sets): MRR@10 of the quality sets "
            "before (the commit this branch started from, 6fd574b, run from an archive of "
            "it) and after, embedded store, hashing embedder, the same machine. Without a "
            "file the keyword query is the one it was (the embedded store's SQL and "
            "OpenSearch's request body are unchanged; OpenSearch only reads the scope's "
            "synonyms record once a minute):\n\n"
            + _table(
                ["set", "store", "mode", "before", "after", "delta"], rows, float_format="{:.4f}"
            )
        )
        for corpus, before, after in pairs:
            text += "\n\n" + _provenance(before, f"quality-{corpus}-hashing-r11syn-before")
            text += "\n\n" + _provenance(after, f"quality-{corpus}-hashing-r11syn-after")
    return text


def _worst(pairs: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> float:
    return max(
        (
            abs(new - _mrr(before)[key])
            for _corpus, before, after in pairs
            for key, new in _mrr(after).items()
            if key in _mrr(before)
        ),
        default=0.0,
    )


def synonyms_section(report: Report) -> None:
    probe, pairs = read_result(PROBE), _neutral_pairs()
    if probe is None and not pairs:
        report.add(f"{TITLE}\n\nMissing: run `bench synonym-probe` and `bench quality`.")
        return
    if pairs:
        worst = _worst(pairs)
        report.headlines.append(
            (
                "no synonyms file: largest MRR@10 change on the quality sets",
                "<= 0.005",
                f"{worst:.4f}",
                _met(worst <= 0.005),
            )
        )
    report.add(section_text(probe, pairs))


if __name__ == "__main__":
    print(section_text(read_result(PROBE), _neutral_pairs()).strip())
