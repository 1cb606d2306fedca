"""Embedded store: keyword p50/p95 in a ~120k-chunk scope vs plain FTS5.

Keyword search in one ~120k-chunk scope, next to plain FTS5 on the same file.

Two scope shapes, each one embedded store file (hashing embedder) with one scope, built
through the product's pipeline (``index_source`` over a generated folder) and cached
under ``bench/data/keyword-scale/`` (rebuilt when the generator's parameters change):

- ``one``: a single Markdown document of about 38 MB (about 120,000 chunks);
- ``many``: 2,000 Markdown documents of about 60 chunks each.

The text is generated with a fixed seed from a vocabulary of ``VOCABULARY`` made-up words
whose frequencies follow a Zipf-Mandelbrot law (``1 / (rank + 2.7)``, as in English text:
the commonest word in about 85% of the chunks, rank 100 in about 7%, rank 10,000 in a
few dozen), in headed sections, paragraphs and lists, so that the title and heading terms
are indexed too. ``QUERIES`` queries of 1 to 6 words drawn from that vocabulary (a mix
of common, middling and rare words, a few absent from the scope) are searched:

- ``product``: ``store.search(scope, SearchQuery(text, mode=KEYWORD, max_results=10))``
  in a worker process (``bench/probes/keyword_scale.py``) on this checkout;
- ``before`` (with ``--checkout PATH``): the same in a worker on another copy of the
  project, to measure the code before a change in the same run; its results are compared
  with ``product``'s (paths, chunk indexes; absolute, rank and keyword scores to 1e-9);
- ``fts5``: plain FTS5 on the same file in this process, the query analysed the same way
  (``keyword_index.fts_query``): ``SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?
  ORDER BY rank LIMIT 10``.

The variants take turns on each query (each first in turn). Two passes: ``first`` (the
workers just started, so the product counts each query term's chunks the first time it
meets the term, as after a write) and ``again`` (every query once more: the counts are
kept). Timed inside each process around the call: wall time (``perf_counter``) and the
process's CPU time (``process_time``, which other work on a shared machine moves less).
Reported per shape and pass: p50/p95 in ms and the ratio of the product's p50 to plain
FTS5's (the done-when: at most ``LIMIT``). Then where the time goes: the statements a
search ran before and runs now, each alone on one connection (``_statements``: the
candidates joined to ``chunks`` and ranked by FTS5 alone, the term counts joined and by
FTS5 alone, the page rows looked up, walked and found at the documents' first chunks).
Writes ``bench/results/keyword-scale.json`` (or ``keyword-scale-<label>.json``).

Run: ``.venv-bench/bin/python -m bench keyword-scale [--checkout /tmp/old-checkout]``.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from bench.common.environment import DATA_DIR, PROBES_DIR, REPO_ROOT, log, write_result
from bench.common.metrics import summarize

__all__ = ["LIMIT", "SHAPES", "add_arguments", "generate_queries", "main"]

LIMIT = 2.0
"""The done-when: the product's keyword p50 over plain FTS5's, same file, same run."""

SHAPES: dict[str, tuple[int, int]] = {"one": (1, 38_400_000), "many": (2_000, 19_200)}
"""Per shape: documents, and bytes per document (about 320 bytes a chunk)."""

AGENT, CONTEXT = "bench", "keyword-scale"
VOCABULARY = 40_000
QUERIES = 200
MAX_RESULTS = 10
_SEED = 20_250_612
_GENERATOR = 1  # bumped when the text or the build changes: cached files are rebuilt
_SHIFT = 2.7  # Zipf-Mandelbrot's q: the head flattens as in natural text
_MIDDLING = 5_000  # a query's middling words are drawn from the ranks below it
_SYLLABLES = (
    "ba", "ce", "di", "fo", "gu", "ka", "le", "mi", "no", "pu", "ra", "se", "ti", "vo",
    "wu", "xa", "ye", "zo", "bri", "cla", "dro", "fle", "gra", "pli", "sto", "tre",
)  # fmt: skip
_FUNCTION_WORDS = ("the", "of", "and", "to", "in", "is", "for", "on", "with", "as")
PROBE = PROBES_DIR / "keyword_scale.py"


# --- the generated text ----------------------------------------------------------------


class Zipf:
    """Words by rank (``vocabulary``) and a sampler with Zipf-Mandelbrot frequencies."""

    def __init__(self, seed: int = _SEED, size: int = VOCABULARY) -> None:
        rng = random.Random(seed)
        made: dict[str, None] = dict.fromkeys(_FUNCTION_WORDS)
        while len(made) < size:
            made["".join(rng.choices(_SYLLABLES, k=rng.randint(2, 4)))] = None
        self.words = list(made)
        weights = [1.0 / (rank + _SHIFT) for rank in range(1, size + 1)]
        self._cumulative = list(itertools.accumulate(weights))

    def sample(self, rng: random.Random, k: int) -> list[str]:
        return rng.choices(self.words, cum_weights=self._cumulative, k=k)

    def rank_of_share(self, share: float) -> int:
        """The rank below which ``share`` of the text's words fall (0-based)."""
        return bisect.bisect_left(self._cumulative, share * self._cumulative[-1])


def write_document(path: Path, size_bytes: int, zipf: Zipf, seed: int) -> int:
    """Write about ``size_bytes`` of Markdown (sections, paragraphs, lists) to ``path``;
    the same seed writes the same bytes. Returns the size written."""
    rng = random.Random(seed)
    written = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:

        def emit(text: str) -> None:
            nonlocal written
            out.write(text)
            written += len(text)

        emit(f"# {' '.join(zipf.sample(rng, 5)).capitalize()}\n\n")
        section = 0
        while written < size_bytes:
            section += 1
            emit(f"## {' '.join(zipf.sample(rng, rng.randint(2, 5))).capitalize()}\n\n")
            for _ in range(rng.randint(2, 6)):
                kind = rng.random()
                if kind < 0.12:
                    emit(f"### {' '.join(zipf.sample(rng, rng.randint(2, 4)))}\n\n")
                elif kind < 0.25:
                    items = [" ".join(zipf.sample(rng, rng.randint(4, 10))) for _ in range(4)]
                    emit("".join(f"- {item}\n" for item in items) + "\n")
                else:
                    sentences = [
                        " ".join(zipf.sample(rng, rng.randint(6, 16))).capitalize() + "."
                        for _ in range(rng.randint(2, 6))
                    ]
                    emit(" ".join(sentences) + "\n\n")
    return written


def generate_queries(zipf: Zipf, count: int = QUERIES, seed: int = _SEED) -> list[str]:
    """``count`` queries of 1 to 6 words: each word as the text draws it (mostly common
    words), a middling one (rank below ``_MIDDLING``) or any word of the vocabulary
    (mostly rare; some the scope never uses)."""
    rng = random.Random(seed + 1)
    queries = []
    for _ in range(count):
        words = []
        for _ in range(rng.choices((1, 2, 3, 4, 5, 6), weights=(3, 5, 5, 3, 2, 1))[0]):
            kind = rng.random()
            if kind < 0.4:
                words.extend(zipf.sample(rng, 1))
            elif kind < 0.8:
                words.append(zipf.words[rng.randrange(min(_MIDDLING, len(zipf.words)))])
            else:
                words.append(zipf.words[rng.randrange(len(zipf.words))])
        queries.append(" ".join(words))
    return queries


# --- the store files ----------------------------------------------------------------------


def _parameters(shape: str) -> dict[str, Any]:
    documents, size = SHAPES[shape]
    return {
        "generator": _GENERATOR,
        "seed": _SEED,
        "vocabulary": VOCABULARY,
        "documents": documents,
        "document_bytes": size,
    }


def store_file(shape: str, zipf: Zipf) -> tuple[Path, dict[str, Any]]:
    """The shape's store file, built (text generated, then indexed) unless a file built
    with the same parameters is cached; returns it with what its build recorded."""
    folder = DATA_DIR / "keyword-scale" / shape
    db = folder / "kb.db"
    marker = folder / "built.json"
    parameters = _parameters(shape)
    if marker.is_file() and db.is_file():
        built: dict[str, Any] = json.loads(marker.read_text("utf-8"))
        if built.get("parameters") == parameters:
            return db, built
    shutil.rmtree(folder, ignore_errors=True)
    docs = folder / "docs"
    documents, size = SHAPES[shape]
    log(f"{shape}: writing {documents} document(s) of {size / 1e6:.2f} MB ...")
    total = sum(
        write_document(docs / f"doc-{i:04d}.md", size, zipf, _SEED + 7 * i)
        for i in range(documents)
    )
    log(f"{shape}: indexing {total / 1e6:.1f} MB through the pipeline ...")
    built = {"parameters": parameters, "bytes": total, **_index(docs, db)}
    shutil.rmtree(docs)  # the store holds what the searches need
    marker.write_text(json.dumps(built, indent=2) + "\n", encoding="utf-8")
    log(f"{shape}: {built['chunks']} chunks in {built['index_seconds']:.0f} s")
    return db, built


def _index(docs: Path, db: Path) -> dict[str, Any]:
    from knowledge.core.model import IndexOptions
    from knowledge.core.scope import KnowledgeScope
    from knowledge.embedding.hashing import HashingEmbedder
    from knowledge.ingest.pipeline import index_source
    from knowledge.ingest.sources.folders import LocalDirectorySource
    from knowledge.stores.embedded import EmbeddedKnowledgeStore

    store = EmbeddedKnowledgeStore(db, embedder=HashingEmbedder())
    try:
        started = time.perf_counter()
        result = index_source(
            store, KnowledgeScope(AGENT, CONTEXT), LocalDirectorySource(docs), IndexOptions()
        )
        seconds = time.perf_counter() - started
    finally:
        store.close()
    if result.errors:
        raise SystemExit(f"indexing failed: {result.errors[:3]}")
    return {
        "documents": result.indexed_documents,
        "chunks": result.indexed_chunks,
        "index_seconds": round(seconds, 1),
        "file_mb": round(db.stat().st_size / 1e6, 1),
    }


# --- the measurement ----------------------------------------------------------------------


class _Worker:
    """A search worker process (``bench/probes/keyword_scale.py``) on one checkout's product."""

    def __init__(self, db: Path, checkout: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(checkout / "layers" / "knowledge")}
        self._process = subprocess.Popen(
            [sys.executable, str(PROBE), str(db), AGENT, CONTEXT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        self._in: IO[str] = self._process.stdin  # type: ignore[assignment]
        self._out: IO[str] = self._process.stdout  # type: ignore[assignment]
        self.package = self._ask({"package": True})["package"]

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        self._in.write(json.dumps(request) + "\n")
        self._in.flush()
        line = self._out.readline()
        if not line:
            raise SystemExit(f"search worker died (exit {self._process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def search(self, text: str) -> tuple[tuple[float, float], list[list[Any]]]:
        """(wall ms, CPU ms) of one keyword search, and its results."""
        answer = self._ask({"query": text, "max_results": MAX_RESULTS})
        return (float(answer["ms"]), float(answer["cpu_ms"])), answer["results"]

    def close(self) -> None:
        self._in.close()
        self._process.wait(timeout=60)


def _fts5(conn: sqlite3.Connection, text: str) -> tuple[float, float]:
    """(wall ms, CPU ms) of plain FTS5's best ``MAX_RESULTS`` for ``text``, analysed as
    the product analyses it."""
    from knowledge.stores.embedded.keyword_index import fts_query

    started, cpu = time.perf_counter(), time.process_time()
    match = fts_query(text)
    if match is not None:
        conn.execute(
            "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?",
            (match, MAX_RESULTS),
        ).fetchall()
    return (time.perf_counter() - started) * 1000.0, (time.process_time() - cpu) * 1000.0


def _same(a: list[list[Any]], b: list[list[Any]]) -> bool:
    """Same chunks in the same order, scores equal to 1e-9."""
    return len(a) == len(b) and all(
        x[:2] == y[:2] and all(abs(p - q) <= 1e-9 for p, q in zip(x[2:], y[2:], strict=True))
        for x, y in zip(a, b, strict=True)
    )


def _ratios(summary: dict[str, dict[str, Any]], key: str) -> dict[str, float]:
    base = summary["fts5"][key]
    return {v: round(s[key] / base, 2) for v, s in summary.items() if v != "fts5"}


def _summary(times: dict[str, list[float]]) -> dict[str, Any]:
    summary = {variant: summarize(values) for variant, values in times.items()}
    return {
        "ms": summary,
        "ratio_p50": _ratios(summary, "p50"),
        "ratio_p95": _ratios(summary, "p95"),
        "raw_ms": {v: [round(x, 3) for x in values] for v, values in times.items()},
    }


def _measure(
    db: Path, queries: list[str], checkouts: dict[str, Path]
) -> tuple[dict[str, Any], dict[str, str]]:
    """Per pass: wall and CPU times of every variant, taking turns on each query."""
    workers = {name: _Worker(db, path) for name, path in checkouts.items()}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    passes: dict[str, Any] = {}
    try:
        for name in ("first", "again"):
            wall: dict[str, list[float]] = {variant: [] for variant in (*workers, "fts5")}
            cpu: dict[str, list[float]] = {variant: [] for variant in wall}
            differ = 0
            for turn, text in enumerate(queries):
                variants = list(wall)
                shift = turn % len(variants)
                found: dict[str, list[list[Any]]] = {}
                for variant in variants[shift:] + variants[:shift]:
                    if variant == "fts5":
                        took = _fts5(conn, text)
                    else:
                        took, found[variant] = workers[variant].search(text)
                    wall[variant].append(took[0])
                    cpu[variant].append(took[1])
                if "before" in found and not _same(found["before"], found["product"]):
                    differ += 1
            passes[name] = {**_summary(wall), "cpu": _summary(cpu)}
            if "before" in workers:
                passes[name]["results_differ"] = differ
            log(
                f"  {name}: "
                + ", ".join(
                    f"{v} p50 {s['p50']:.1f} ms (cpu {cpu_s['p50']:.1f})"
                    for (v, s), cpu_s in zip(
                        passes[name]["ms"].items(), passes[name]["cpu"]["ms"].values(), strict=True
                    )
                )
            )
    finally:
        conn.close()
        packages = {name: worker.package for name, worker in workers.items()}
        for worker in workers.values():
            worker.close()
    return passes, packages


# --- where the time goes: the statements, one at a time -------------------------------------

_SCOPE = "c.agent = ? AND c.context = ?"
_JOINED = (
    "SELECT c.id, c.path, c.chunk_index, c.context, c.agent, c.metadata,"
    " ? * -bm25(chunks_fts, 1.0, ?) AS s FROM chunks_fts JOIN chunks AS c"
    f" ON c.id = chunks_fts.rowid WHERE chunks_fts MATCH ? AND {_SCOPE}"
    " ORDER BY s DESC, path, chunk_index, context, agent LIMIT ?"
)
_COUNT_JOINED = (
    "SELECT count(*) FROM chunks_fts CROSS JOIN chunks AS c ON c.id = chunks_fts.rowid"
    f" WHERE chunks_fts MATCH ? AND {_SCOPE}"
)
_COUNT_FTS = "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?"
_PLAIN = "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?"


def _statements(db: Path, queries: list[str]) -> dict[str, Any]:
    """CPU ms per query (p50, mean) of the statements a keyword search ran before and
    runs now, each alone on one connection: the candidates joined to ``chunks`` and
    FTS5 ranking alone; a query's terms counted joined to the scope and by FTS5 alone;
    the page rows looked up per matching page, walked from the candidates' documents
    and found at their first chunks; plain FTS5 next to them."""
    from knowledge.ranking.analysis import keyword_terms
    from knowledge.stores.embedded.keyword_index import fts_match, fts_query
    from knowledge.stores.embedded.page_index import first_page_sql, first_pages, page_sql
    from knowledge.stores.embedded.ranked_rows import ranked_sql

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    scope = [AGENT, CONTEXT]
    times: dict[str, list[float]] = {}

    def timed(label: str, sql: str, params: list[Any]) -> list[Any]:
        started = time.process_time()
        rows = conn.execute(sql, params).fetchall()
        times.setdefault(label, []).append((time.process_time() - started) * 1000.0)
        return rows

    try:
        for text in queries:
            match = fts_query(text)
            if match is None:
                continue
            timed("plain FTS5 (ORDER BY rank LIMIT 10)", _PLAIN, [match, MAX_RESULTS])
            joined = timed(
                "candidates joined to chunks (40)", _JOINED, [1.0, 1.0, match, *scope, 40]
            )
            timed(
                "candidates ranked by FTS5 alone (80)",
                ranked_sql(["chunks_fts"]),
                [1.0, 1.0, match, 80],
            )
            started = time.process_time()
            for term in dict.fromkeys(keyword_terms(text)):
                conn.execute(_COUNT_JOINED, [fts_match([term]), *scope]).fetchone()
            times.setdefault("term counts joined to the scope", []).append(
                (time.process_time() - started) * 1000.0
            )
            started = time.process_time()
            for term in dict.fromkeys(keyword_terms(text)):
                conn.execute(_COUNT_FTS, [fts_match([term])]).fetchone()
            times.setdefault("term counts by FTS5 alone", []).append(
                (time.process_time() - started) * 1000.0
            )
            paths = sorted({row[1] for row in joined})
            if paths:
                for walk, label in (
                    (False, "page rows: every match looked up"),
                    (True, "page rows: candidates' documents walked"),
                ):
                    timed(label, *page_sql("pages_fts", (_SCOPE, scope), paths, match, walk=walk))
                documents = sorted({(row[4], row[3], row[1]) for row in joined})
                started = time.process_time()
                firsts, _ = first_pages(conn, "pages_fts", documents)
                conn.execute(*first_page_sql("pages_fts", list(firsts), match)).fetchall()
                times.setdefault("page rows: candidates' first chunks", []).append(
                    (time.process_time() - started) * 1000.0
                )
    finally:
        conn.close()
    return {
        label: {
            "p50": round(statistics.median(values), 3),
            "mean": round(statistics.fmean(values), 3),
        }
        for label, values in times.items()
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shapes", default="one,many", help="comma-separated: one, many")
    parser.add_argument(
        "--checkout", type=Path, default=None, help="another copy of the project: 'before'"
    )
    parser.add_argument("--queries", type=int, default=QUERIES)
    parser.add_argument("--label", default="", help="result file suffix (keyword-scale-LABEL)")


def main(args: argparse.Namespace) -> None:
    zipf = Zipf()
    queries = generate_queries(zipf, args.queries)
    checkouts = {"product": REPO_ROOT}
    if args.checkout is not None:
        checkouts["before"] = args.checkout.resolve()
    payload: dict[str, Any] = {
        "vocabulary": VOCABULARY,
        "queries": len(queries),
        "max_results": MAX_RESULTS,
        "limit": LIMIT,
        "query_sample": queries[:12],
        "shapes": {},
    }
    for shape in (s.strip() for s in args.shapes.split(",") if s.strip()):
        if shape not in SHAPES:
            raise SystemExit(f"unknown shape {shape!r}: one of {', '.join(SHAPES)}")
        db, built = store_file(shape, zipf)
        log(f"{shape}: {built['chunks']} chunks, {len(queries)} queries")
        passes, packages = _measure(db, queries, checkouts)
        log(f"{shape}: the statements one at a time ...")
        payload["shapes"][shape] = {
            "built": built,
            "passes": passes,
            "packages": packages,
            "statements_cpu_ms": _statements(db, queries),
        }
    write_result("keyword-scale" + (f"-{args.label}" if args.label else ""), payload)
