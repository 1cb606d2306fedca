"""Korean term-stream variants on the help-page and FAQ ko sets (a probe).

Exploratory: Korean term-stream variants, measured through the embedded store.

Each variant replaces how one run of Hangul becomes terms (``knowledge.ranking.analysis
._hangul_run_terms``, optionally only on the query side), indexes each Korean set into a
fresh embedded store and sends every query in keyword mode through ``store.search``, as
``bench quality`` does; the plain FTS5 baselines (``bench/common/baselines.py``) are computed in
the same run. Variants are benchmark code: the product is unchanged by this module.

    python -m bench korean-variants [--variants a,b] [--corpora gnome-help-ko,...]

Writes ``bench/results/korean-variants.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import tempfile
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import knowledge.ranking.analysis as text
from bench.common.baselines import Fts5Baseline
from bench.common.environment import log, write_result
from bench.common.metrics import document_ranking, evaluate
from bench.common.stores import SCOPE, make_embedder, open_store
from bench.corpora.faq import load_faq
from bench.corpora.gimp_help import load_gimp_help
from bench.corpora.gnome_apps_help import load_gnome_apps_help
from bench.corpora.gnome_help import load_gnome_help
from bench.corpora.manpages import Corpus
from bench.runs.quality import score_modes
from knowledge.core.model import IndexOptions, SearchMode
from knowledge.ingest.pipeline import reindex_source
from knowledge.ingest.sources.folders import LocalDirectorySource
from knowledge.stores.embedded import keyword_index

ORIGINAL = text._hangul_run_terms
_ROWS = keyword_index._terms
_STRIPPED = ("J", "E", "XS", "VCP", "VCN", "VX")
"""Tags a word's stem ends before: particles, endings, suffixes, the copula."""


@lru_cache(maxsize=65536)
def _morphemes(run: str) -> tuple[tuple[str, str, str, str], ...]:
    return tuple(
        (
            str(m.surface),
            str(m.feature.pos),
            str(m.feature.type or ""),
            str(m.feature.expression or ""),
        )
        for m in text._mecab().parse(run)
    )


@lru_cache(maxsize=65536)
def stem(run: str) -> str:
    """The run cut before its first particle, ending or suffix ("편집기에서" -> "편집기")."""
    parts: list[str] = []
    for surface, pos, kind, expression in _morphemes(run):
        if pos.startswith(_STRIPPED):
            break
        if kind == "Inflect" and expression:
            parts.append(expression.split("+")[0].split("/")[0])
            break
        parts.append(surface)
    return "".join(parts)


def _plus(extra: Callable[[str], str], min_len: int = 2) -> Callable[[str], tuple[str, ...]]:
    def terms(run: str) -> tuple[str, ...]:
        base = ORIGINAL(run)
        word = extra(run)
        if len(word) >= min_len and word not in base:
            return (*base, word)
        return base

    return terms


def _stem_and_surface(run: str) -> tuple[str, ...]:
    terms = list(ORIGINAL(run))
    for word in (stem(run), run):
        if len(word) >= 2 and word not in terms:
            terms.append(word)
    return tuple(terms)


@lru_cache(maxsize=65536)
def noun_compound(run: str) -> str:
    """The leading nouns of the run joined, when there are two or more ("대화상자",
    "탄력키"); "" otherwise (a one-noun word, a verb)."""
    nouns: list[str] = []
    for surface, pos, _, _ in _morphemes(run):
        if not pos.startswith(("NNG", "NNP", "SL", "SH")):
            break
        nouns.append(surface)
    if len(nouns) > 1 and len(nouns[-1]) == 1 and nouns[-1] == "의":
        nouns.pop()  # "네트워크의": MeCab-ko tags the particle as a noun at times
    return "".join(nouns) if len(nouns) > 1 else ""


def _tags(extra: tuple[str, ...]) -> Callable[[str], tuple[str, ...]]:
    """The run's terms with more morpheme tags kept (``text.KOREAN_TAGS`` + ``extra``)."""

    @lru_cache(maxsize=65536)
    def terms(run: str) -> tuple[str, ...]:
        saved = text.KOREAN_TAGS
        text.KOREAN_TAGS = saved + extra
        try:
            return tuple(ORIGINAL.__wrapped__(run))
        finally:
            text.KOREAN_TAGS = saved

    return terms


def _no_short(run: str) -> tuple[str, ...]:
    base = ORIGINAL(run)
    kept = tuple(t for t in base if len(t) > 1)
    return kept or base


@lru_cache(maxsize=65536)
def _compound_no1(run: str) -> tuple[str, ...]:
    """The run's terms with the one-syllable parts of a compound left out, on both sides
    ("글꼴" -> 글꼴, not 글 and 꼴; "편집기" -> 편집, 편집기): a part such as 글 or 기
    matches nearly every page of a manual."""
    terms: list[str] = []
    for surface, pos, kind, expression in _morphemes(run):
        if not pos.startswith(text.KOREAN_TAGS):
            continue
        if kind == "Compound" and expression:
            parts = [part.split("/")[0] for part in expression.split("+")]
            terms.extend(part for part in parts if len(part) > 1)
            terms.append(surface)
        elif kind == "Inflect" and expression:
            terms.append(expression.split("+")[0].split("/")[0])
        else:
            terms.append(surface)
    return tuple(term for term in terms if term)


VARIANTS: dict[
    str, tuple[Callable[[str], tuple[str, ...]] | None, Callable[[str], tuple[str, ...]] | None]
] = {
    # name: (index-and-query run terms, query-only run terms); None = unchanged
    "morphemes": (None, None),
    "stem": (_plus(stem), None),
    "surface": (_plus(lambda run: run), None),
    "stem+surface": (_stem_and_surface, None),
    "stem-q-no1": (
        _plus(stem),
        lambda run: tuple(t for t in _plus(stem)(run) if len(t) > 1) or _plus(stem)(run),
    ),
    "q-no1": (None, _no_short),
    "compound": (_plus(noun_compound), None),
    "mbigram": (None, None),
    # adverbs ("잘못", "미리", "빨리") and determiners ("새", "다른") kept: nori drops both
    "mag": (_tags(("MAG",)), None),
    "mm": (_tags(("MM",)), None),
    "mag+mm": (_tags(("MAG", "MM")), None),
    "compound-no1": (_compound_no1, None),
}


def _union() -> Corpus:
    """gnome-help-ko and gimp-help-ko as one collection (983 pages): a larger set, where a
    morpheme's document frequency grows and a surface word's precision may count more."""
    import json
    import shutil

    from bench.common.environment import DATA_DIR
    from bench.corpora.manpages import read_corpus

    root = DATA_DIR / "help-union-ko"
    if not (root / "queries.jsonl").is_file():
        lines = []
        for part in (load_gnome_help(), load_gimp_help()):
            target = root / "docs" / part.name
            shutil.copytree(part.docs_dir, target)
            lines += [
                json.dumps(
                    {"query": q.text, "relevant": [f"{part.name}/{r}" for r in q.relevant]},
                    ensure_ascii=False,
                )
                for q in part.queries
            ]
        (root / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return read_corpus(root, "help-union-ko", None, builder="bench/runs/korean_variants.py")


def _with_bigrams(terms: list[str]) -> list[str]:
    """The terms, then each pair of consecutive Hangul terms joined ("이미지 창" ->
    "이미지창"): a phrase a page holds counts as a term of its own."""
    joined = [
        a + b for a, b in itertools.pairwise(terms) if text.has_hangul(a) and text.has_hangul(b)
    ]
    return terms + joined


STREAMS: dict[str, Callable[[list[str]], list[str]]] = {"mbigram": _with_bigrams}
"""Variants of the whole term stream (``keyword_terms``' output), not of one run."""


CORPORA: dict[str, Callable[[], Corpus]] = {
    "help-union-ko": _union,
    "gnome-help-ko": load_gnome_help,
    "gimp-help-ko": load_gimp_help,
    "gnome-apps-help-ko": load_gnome_apps_help,
    "faq-ko": lambda: load_faq("ko"),
}


@contextlib.contextmanager
def _variant(name: str) -> Iterator[None]:
    from knowledge.ranking import headings

    both, query_only = VARIANTS[name]
    run_terms = both or ORIGINAL
    saved_index = keyword_index.keyword_terms  # type: ignore[attr-defined]
    saved_headings = headings.keyword_terms  # type: ignore[attr-defined]
    stream = STREAMS.get(name)

    def terms(value: str) -> list[str]:
        found = text.keyword_terms(value)
        return stream(found) if stream is not None else found

    def query_terms(value: str) -> list[str]:
        if query_only is None:
            return terms(value)
        text._hangul_run_terms = query_only  # type: ignore[assignment]
        try:
            return terms(value)
        finally:
            text._hangul_run_terms = run_terms  # type: ignore[assignment]

    text._hangul_run_terms = run_terms  # type: ignore[assignment]
    # fts_query and the index's rows both call keyword_index.keyword_terms; a query-only
    # variant applies to both here, so it is for stream variants and query-only run terms
    # the index path must not see: the index calls _terms, patched apart below.
    setattr(keyword_index, "keyword_terms", query_terms)  # noqa: B010
    setattr(keyword_index, "_terms", lambda content: " ".join(terms(content)))  # noqa: B010
    setattr(headings, "keyword_terms", terms)  # noqa: B010
    saved_rows = _ROWS
    try:
        yield
    finally:
        text._hangul_run_terms = ORIGINAL
        setattr(keyword_index, "keyword_terms", saved_index)  # noqa: B010
        setattr(keyword_index, "_terms", saved_rows)  # noqa: B010
        setattr(headings, "keyword_terms", saved_headings)  # noqa: B010


def _keyword(corpus: Corpus, workdir: Path) -> float:
    store = open_store("embedded", make_embedder("hashing"), workdir=workdir)
    try:
        result = reindex_source(
            store, SCOPE, LocalDirectorySource(corpus.docs_dir), IndexOptions(max_documents=100_000)
        )
        if result.errors:
            raise SystemExit(f"indexing failed: {result.errors[:3]}")
        modes = score_modes(_KeywordOnly(store), corpus.queries, 50)  # type: ignore[arg-type]
    finally:
        store.close()
    return float(modes["keyword"]["mrr_at_10"])


class _KeywordOnly:
    """The store, offering keyword mode only (the other modes are not measured here)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.name = store.name
        self.supported_modes = (SearchMode.KEYWORD,)

    def search(self, *args: Any, **kwargs: Any) -> Any:
        return self._store.search(*args, **kwargs)


def _sections(text_: str, size: int = 1000) -> list[str]:
    """The page cut at paragraph breaks into sections of about ``size`` characters."""
    sections: list[str] = []
    current = ""
    for paragraph in text_.split("\n\n"):
        if current and len(current) + len(paragraph) > size:
            sections.append(current)
            current = ""
        current = f"{current}\n\n{paragraph}" if current else paragraph
    if current:
        sections.append(current)
    return sections


def section_baseline(corpus: Corpus, analyse: Callable[[str], list[str]] | None) -> float:
    """The issue's probe: plain FTS5 BM25 (unicode61) over ~1,000-character sections,
    documents ranked by their best section."""
    import re
    import sqlite3

    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE s USING fts5(path UNINDEXED, body, tokenize='unicode61')")
    for path in sorted(corpus.docs_dir.rglob("*.md")):
        relative = path.relative_to(corpus.docs_dir).as_posix()
        for section in _sections(path.read_text(encoding="utf-8")):
            body = " ".join(analyse(section)) if analyse else section
            db.execute("INSERT INTO s VALUES (?, ?)", (relative, body))
    judged = []
    for query in corpus.queries:
        q = " ".join(analyse(query.text)) if analyse else query.text
        words = dict.fromkeys(re.findall(r"[^\W_]+", q.lower()))
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        rows = (
            db.execute(
                "SELECT path FROM s WHERE s MATCH ? ORDER BY bm25(s) LIMIT 50", (match,)
            ).fetchall()
            if words
            else []
        )
        judged.append((document_ranking(row[0] for row in rows)[:10], query.relevant))
    return float(evaluate(judged).to_dict()["mrr_at_10"])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--corpora", default=",".join(CORPORA))
    parser.add_argument("--label", default="")
    parser.add_argument("--baselines-only", action="store_true")


def main(args: argparse.Namespace) -> None:
    results: dict[str, Any] = {"baselines": {}, "variants": {}}
    corpora = {name: CORPORA[name]() for name in args.corpora.split(",")}
    for name, corpus in corpora.items():
        results["baselines"][name] = {}
        for label, analyse in (("fts5_unicode61", None), ("fts5_morphemes", text.keyword_terms)):
            baseline = Fts5Baseline(corpus.docs_dir, "unicode61", analyse)
            judged = [(baseline.ranking(q.text, 10), q.relevant) for q in corpus.queries]
            results["baselines"][name][label] = evaluate(judged).to_dict()["mrr_at_10"]
            results["baselines"][name][label + "_sections"] = round(
                section_baseline(corpus, analyse), 4
            )
        log(f"{name} ({len(corpus.queries)} queries): {results['baselines'][name]}")
    with tempfile.TemporaryDirectory(prefix="kb-variants-") as workdir:
        for variant in [] if args.baselines_only else args.variants.split(","):
            results["variants"][variant] = {}
            with _variant(variant):
                for name, corpus in corpora.items():
                    score = _keyword(corpus, Path(workdir))
                    results["variants"][variant][name] = round(score, 3)
                    log(f"{variant} {name}: keyword MRR@10 {score:.3f}")
    label = f"-{args.label}" if args.label else ""
    write_result(f"korean-variants{label}", results)


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(description=__doc__)
    add_arguments(_parser)
    main(_parser.parse_args())
