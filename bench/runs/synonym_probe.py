"""A probe: a scope's synonyms file on abbreviated / Korean loanword queries.

A synonym probe: what a scope's ``_synonyms.txt`` gains when a user types another word
than the documents use, and what it changes when they do not.

Two sets, each indexed twice in every store (memory, embedded, the OpenSearch node;
hashing embedder), once without a synonyms file (``plain``) and once with the set's
file (``synonyms``), the same documents:

- **man pages** (``--limit`` pages): each page's NAME line as its query, and the same
  queries *abbreviated* as people type them (``file descriptor`` -> ``fd``,
  ``directory`` -> ``dir``, ``memory`` -> ``mem``: ``ABBREVIATIONS``); the file holds
  each pair as an equivalence line (``fd, file descriptor``);
- **Korean FAQ** (Debian's FAQ in Korean, each question its answer's query): the same
  questions with the documents' words replaced by the loanword, the Latin spelling or
  the old spelling people also write (``설치`` -> ``인스톨``, ``데비안`` -> ``Debian``,
  ``파일`` -> ``화일``: ``KOREAN``); the file holds each pair.

MRR@10 (and the p50 of one search) for every (store, mode, query set, scope), in one
run: the gain is ``rewritten`` with the file against ``rewritten`` without;
``original`` with the file against ``original`` without is what the file costs queries
that need no synonym; and ``original`` without the file is the product's default (no
file), the neutral figure.
Only the rewritten queries that differ from their original count in ``rewritten``.

Writes ``bench/results/synonym-probe.json``. Run:
``.venv/bin/python -m bench synonym-probe --limit 300``.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.common.environment import log, opensearch_node, write_result
from bench.common.metrics import document_ranking, evaluate, first_relevant_rank, summarize
from bench.common.stores import delete_index, make_embedder, open_store, unique_index_name
from bench.corpora.faq import load_faq
from bench.corpora.manpages import Corpus, Query, load_corpus
from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SYNONYMS_FILE
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.sources.folders import LocalDirectorySource
from knowledge.stores.memory import MemoryKnowledgeStore
from knowledge.stores.protocol import KnowledgeStore

__all__ = ["ABBREVIATIONS", "KOREAN", "add_arguments", "main", "rewrite"]

ABBREVIATIONS: tuple[tuple[str, str], ...] = (
    ("file descriptor", "fd"),
    ("character", "char"),
    ("string", "str"),
    ("memory", "mem"),
    ("process", "proc"),
    ("address", "addr"),
    ("database", "db"),
    ("message", "msg"),
    ("library", "lib"),
    ("filesystem", "fs"),
    ("configuration", "config"),
    ("environment", "env"),
    ("information", "info"),
    ("directory", "dir"),
    ("allocate", "alloc"),
    ("execute", "exec"),
    ("signal", "sig"),
    ("hexadecimal", "hex"),
    ("integer", "int"),
    ("number", "num"),
    ("implementation", "impl"),
    ("error", "err"),
    ("function", "func"),
    ("interface", "iface"),
    ("network", "net"),
    ("source", "src"),
    ("length", "len"),
    ("value", "val"),
)
"""(what the man pages write, what a user types): whole words, any case."""

KOREAN: tuple[tuple[str, str], ...] = (
    ("데비안", "Debian"),
    ("리눅스", "Linux"),
    ("배포판", "디스트리뷰션"),
    ("설치", "인스톨"),
    ("커널", "kernel"),
    ("패키지", "package"),
    ("디렉터리", "디렉토리"),
    ("파일", "화일"),
)
"""(what the Korean FAQ writes, what a user also types): the loanword, the Latin
spelling, the older spelling; replaced inside words (Korean attaches particles)."""

MODES = (SearchMode.KEYWORD, SearchMode.HYBRID)
CHUNKS = 50
"""Chunks per search (as ``bench quality``): enough for ten documents."""


def synonyms_file(pairs: Sequence[tuple[str, str]]) -> str:
    """The set's ``_synonyms.txt``: one equivalence line per pair (Solr format)."""
    lines = ["# synonym probe (bench/runs/synonym_probe.py)"]
    lines += [f"{typed}, {written}" for written, typed in pairs]
    return "\n".join(lines) + "\n"


def rewrite(text: str, pairs: Sequence[tuple[str, str]], *, whole_words: bool) -> str:
    """``text`` with each documents' word replaced by what a user types."""
    for written, typed in pairs:
        if whole_words:
            pattern = re.compile(rf"(?<![\w-]){re.escape(written)}(?![\w-])", re.IGNORECASE)
            text = pattern.sub(typed, text)
        else:
            text = text.replace(written, typed)
    return text


def _query_sets(
    corpus: Corpus, pairs: Sequence[tuple[str, str]], whole: bool
) -> tuple[dict[str, list[Query]], list[int]]:
    """The ``original`` queries, the ``rewritten`` ones the rewriting changed, and the
    positions of those among the originals."""
    rewritten = [replace(q, text=rewrite(q.text, pairs, whole_words=whole)) for q in corpus.queries]
    picked = [i for i, q in enumerate(rewritten) if q != corpus.queries[i]]
    sets = {"original": list(corpus.queries), "rewritten": [rewritten[i] for i in picked]}
    return sets, picked


def _copy(corpus: Corpus, target: Path, synonyms: str | None) -> Path:
    shutil.copytree(corpus.docs_dir, target)
    if synonyms is not None:
        (target / SYNONYMS_FILE).write_text(synonyms, encoding="utf-8")
    return target


def _score(
    store: KnowledgeStore,
    scopes: dict[str, KnowledgeScope],
    queries: Sequence[Query],
    mode: SearchMode,
) -> dict[str, dict[str, Any]]:
    """Each query searched in each scope, the scopes taking turns (which goes first
    alternates), so both see the same machine: MRR@10, p50 ms and ranks per scope."""
    judged: dict[str, list[tuple[list[str], tuple[str, ...]]]] = {v: [] for v in scopes}
    times: dict[str, list[float]] = {v: [] for v in scopes}
    names = list(scopes)
    for turn, query in enumerate(queries):
        order = names if turn % 2 == 0 else names[::-1]
        for variant in order:
            started = time.perf_counter()
            hits = store.search(
                scopes[variant],
                SearchQuery(query.text, mode=mode, max_results=CHUNKS, min_score=0.0),
            )
            times[variant].append((time.perf_counter() - started) * 1000.0)
            ranking = document_ranking(hit.document_path for hit in hits)
            judged[variant].append((ranking, query.relevant))
    return {
        variant: {
            "mrr_at_10": round(evaluate(judged[variant]).mrr_at_10, 4),
            "p50_ms": round(summarize(times[variant])["p50"], 2),
            "ranks": [first_relevant_rank(r, relevant) for r, relevant in judged[variant]],
        }
        for variant in scopes
    }


def _subset(scores: dict[str, Any], picked: Sequence[int]) -> dict[str, Any]:
    """The scores of the queries at ``picked`` (the originals of the rewritten ones)."""
    ranks = [scores["ranks"][i] for i in picked]
    mrr = sum(0.0 if r is None or r > 10 else 1.0 / r for r in ranks) / max(len(ranks), 1)
    return {"mrr_at_10": round(mrr, 4), "ranks": ranks}


@contextlib.contextmanager
def _stores(
    names: Sequence[str], workdir: Path, url: str | None
) -> Iterator[list[tuple[str, KnowledgeStore]]]:
    embedder = make_embedder("hashing")
    made: list[tuple[str, KnowledgeStore]] = []
    indexes: list[str] = []
    try:
        for name in names:
            if name == "memory":
                made.append((name, MemoryKnowledgeStore()))
                continue
            node = url if name == "opensearch" else None
            index = unique_index_name("bench-synonyms") if node is not None else None
            if index is not None:
                indexes.append(index)
            # Searched right after indexing: every chunk searchable by then (bench quality).
            options = {"wait_for_refresh": True} if node is not None else None
            store = open_store(
                name, embedder, workdir=workdir, node_url=node, index_name=index, options=options
            )
            made.append((name, store))
        yield made
    finally:
        for _, store in made:
            store.close()
        for index in indexes:
            assert url is not None
            delete_index(url, index)


def _probe(
    corpus: Corpus,
    pairs: Sequence[tuple[str, str]],
    *,
    whole: bool,
    stores: Sequence[str],
    workdir: Path,
    url: str | None,
) -> dict[str, Any]:
    synonyms = synonyms_file(pairs)
    sets, picked = _query_sets(corpus, pairs, whole)
    folders = {
        "plain": _copy(corpus, workdir / f"{corpus.name}-plain", None),
        "synonyms": _copy(corpus, workdir / f"{corpus.name}-synonyms", synonyms),
    }
    runs: list[dict[str, Any]] = []
    with _stores(stores, workdir, url) as opened:
        for name, store in opened:
            scopes = {variant: KnowledgeScope("bench", variant) for variant in folders}
            for variant, folder in folders.items():
                options = IndexOptions(max_documents=100_000)
                result = index_source(store, scopes[variant], LocalDirectorySource(folder), options)
                if result.errors:
                    raise SystemExit(f"{name}: indexing failed: {result.errors[:3]}")
            log(f"{name}: indexed {corpus.name} twice ({result.indexed_chunks} chunks each)")
            for mode in MODES:
                if mode not in store.supported_modes:
                    continue
                scores = {
                    f"{queries}/{variant}": found
                    for queries in ("original", "rewritten")
                    for variant, found in _score(store, scopes, sets[queries], mode).items()
                }
                for variant in folders:  # the same queries before their rewriting
                    scores[f"rewritten-original/{variant}"] = _subset(
                        scores[f"original/{variant}"], picked
                    )
                runs.append({"store": name, "mode": mode.value, "scores": scores})
                log(
                    f"{name} {mode.value}: "
                    + ", ".join(f"{k} {v['mrr_at_10']}" for k, v in scores.items())
                )
    return {
        "corpus": corpus.describe(),
        "pairs": [list(pair) for pair in pairs],
        "synonyms_file": synonyms,
        "queries": {name: len(queries) for name, queries in sets.items()},
        "examples": [
            [corpus.queries[i].text, changed.text]
            for i, changed in zip(picked, sets["rewritten"], strict=True)
        ][:5],
        "runs": runs,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=300, help="man pages (0 = all); default 300")
    parser.add_argument(
        "--stores", default="memory,embedded,opensearch", help="comma-separated store names"
    )


def main(args: argparse.Namespace) -> None:
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    payload: dict[str, Any] = {"embedder": "hashing", "chunks_per_search": CHUNKS, "sets": {}}
    node = opensearch_node() if "opensearch" in stores else contextlib.nullcontext(None)
    with tempfile.TemporaryDirectory(prefix="kb-synonyms-") as tmp, node as url:
        manpages = load_corpus(args.limit or None)
        payload["sets"]["abbreviations"] = _probe(
            manpages, ABBREVIATIONS, whole=True, stores=stores, workdir=Path(tmp), url=url
        )
        payload["sets"]["korean"] = _probe(
            load_faq("ko"), KOREAN, whole=False, stores=stores, workdir=Path(tmp), url=url
        )
    write_result("synonym-probe", payload)
