"""Korean keyword analysis speed: MeCab-ko morphemes vs Hangul bigrams.

Korean keyword analysis cost: MeCab-ko morphemes (``keyword_terms``, analysis v3)
against the Hangul bigrams of analysis v2, on the Korean FAQ answers, in one run.

The bigram analysis is rebuilt from this code's own pieces (``tokenize``, which still
cuts CJK runs into bigrams, then ``_analyzed`` per term: exactly v2's ``keyword_terms``).
Both run with their term caches cleared before each pass (what a new Lambda instance
sees); the best of ``--repeat`` passes is kept. The first-use cost of MeCab-ko (import
and dictionary open) is timed in fresh interpreters.

Writes ``bench/results/korean-analysis.json``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.common.environment import log, write_result
from bench.corpora.faq import load_faq
from knowledge.ranking import analysis as text

__all__ = ["add_arguments", "main"]

_FIRST_USE = """
import time
t = time.perf_counter()
from knowledge.ranking.analysis import keyword_terms
keyword_terms("데비안")
print(time.perf_counter() - t)
"""


def _bigram_terms(value: str) -> list[str]:
    """Analysis v2's ``keyword_terms``: ``tokenize`` (CJK bigrams), then stems."""
    terms = (text._analyzed(token) for token in text.tokenize(value))
    return [term for term in terms if term is not None]


def _clear() -> None:
    text._analyzed.cache_clear()
    text._hangul_run_terms.cache_clear()


def _best_seconds(analyse: Callable[[str], list[str]], texts: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        _clear()
        started = time.perf_counter()
        for value in texts:
            analyse(value)
        best = min(best, time.perf_counter() - started)
    return best


def _first_use_seconds(runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", _FIRST_USE], capture_output=True, text=True, check=True
        )
        times.append(float(done.stdout.strip()))
    return times


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeat", type=int, default=5, help="passes per analysis (best kept)")
    parser.add_argument("--first-use", type=int, default=5, help="fresh interpreters timed")


def main(args: argparse.Namespace) -> None:
    corpus = load_faq("ko")
    texts = [path.read_text(encoding="utf-8") for path in sorted(corpus.docs_dir.rglob("*.md"))]
    size = sum(len(value.encode("utf-8")) for value in texts)
    text.keyword_terms("데비안")  # the tagger opened outside the timing
    results: dict[str, Any] = {}
    for name, analyse in (("bigrams", _bigram_terms), ("morphemes", text.keyword_terms)):
        seconds = _best_seconds(analyse, texts, args.repeat)
        results[name] = {"seconds": round(seconds, 4), "mb_per_s": round(size / 1e6 / seconds, 3)}
        log(f"{name}: {results[name]}")
    first = _first_use_seconds(args.first_use)
    payload = {
        "corpus": corpus.describe(),
        "bytes": size,
        "repeat": args.repeat,
        "analyses": results,
        "ratio_bigrams_over_morphemes": round(
            results["bigrams"]["mb_per_s"] / results["morphemes"]["mb_per_s"], 2
        ),
        "first_use_seconds": {
            "median": round(statistics.median(first), 3),
            "runs": [round(x, 3) for x in first],
        },
    }
    write_result("korean-analysis", payload)
