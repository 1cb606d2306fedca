"""Search latency with the Bedrock reranking stage (fake endpoint) vs without.

What the optional reranking stage costs a search: the product's path with and without it.

The store is the OpenSearch store on the real node (``KB_OPENSEARCH_URL`` or one started
here) holding the man-pages corpus (hashing embedder); each search goes through
``KnowledgeApi.search`` (the route the Lambda and ``kb serve`` answer), in hybrid mode
(the default of a deployment with a semantic embedder), ``--max-results`` results.
``rerank`` searches have a ``RerankingStage`` with the real ``BedrockReranker`` (boto3:
SigV4 signing, JSON, one HTTP round trip) that talks to ``tests/support/fake_rerank.py`` on
127.0.0.1 in a process of its own (as a remote endpoint would be; in this process it
would compete for the interpreter), which answers at once (word-overlap scores): the
figure is the product's own cost of reranking ``--top-n`` candidates, not a model's. A
real Bedrock model adds its inference and the network to AWS on top (not measured here:
no AWS access).

Per query the ``plain`` and ``rerank`` searches run back to back, in alternating order,
after a warm-up; ratios are rerank / plain of the same run. ``rerank_call`` is the stage's
own timing of the call (on its thread, which lets a search stop waiting at its deadline),
``direct_call`` the same call made in the benchmark's thread. Writes
``bench/results/rerank.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

from bench.common.environment import REPO_ROOT, log, opensearch_node, write_result
from bench.common.metrics import summarize
from bench.common.stores import SCOPE, delete_index, open_store, unique_index_name
from bench.corpora.manpages import load_corpus
from knowledge.core.model import IndexOptions, SearchQuery
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.sources.folders import LocalDirectorySource
from knowledge.reranking import RerankingStage
from knowledge.reranking.bedrock import BedrockReranker
from knowledge.service.api import KnowledgeApi

__all__ = ["add_arguments", "main"]

_REGION = "us-west-2"
_MODEL = "amazon.rerank-v1:0"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=300, help="man pages (default 300)")
    parser.add_argument("--iterations", type=int, default=300, help="measured queries")
    parser.add_argument("--warmup", type=int, default=50, help="unmeasured queries")
    parser.add_argument("--max-results", type=int, default=5)
    parser.add_argument(
        "--top-n", type=int, nargs="+", default=[20, 50], help="candidates reranked"
    )
    parser.add_argument("--label", default="", help="suffix of the result file name")


def _timed(api: KnowledgeApi, body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    response = api.search(SCOPE.agent, SCOPE.context, body)
    elapsed = (time.perf_counter() - started) * 1000.0
    if response.status != 200:
        raise SystemExit(f"search failed: {response.body}")
    return elapsed, response.body


@contextlib.contextmanager
def _fake_endpoint(arn: str) -> Iterator[str]:
    """``tests/support/fake_rerank.py`` in its own process; yields its URL."""
    process = subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "tests" / "support" / "fake_rerank.py"), arn],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip()
    finally:
        process.terminate()
        process.wait(timeout=30)


def main(args: argparse.Namespace) -> None:
    # The fake checks a SigV4 signature's shape; boto3 needs credentials to sign with.
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "secret-example")
    corpus = load_corpus(args.limit or None)
    texts = [q.text for q in corpus.queries]
    arn = f"arn:aws:bedrock:{_REGION}::foundation-model/{_MODEL}"
    runs: dict[str, Any] = {}
    with opensearch_node() as url, _fake_endpoint(arn) as fake_url:
        name = unique_index_name("bench-rerank")
        store = open_store(
            "opensearch", HashingEmbedder(), workdir=None, node_url=url, index_name=name
        )
        try:
            result = index_source(
                store,
                SCOPE,
                LocalDirectorySource(corpus.docs_dir),
                IndexOptions(max_documents=100_000),
            )
            log(f"indexed {result.indexed_documents} docs / {result.indexed_chunks} chunks")
            plain = KnowledgeApi(store)
            for top_n in args.top_n:
                reranker = BedrockReranker(_MODEL, region=_REGION, endpoint_url=fake_url)
                api = KnowledgeApi(store, reranking=RerankingStage(reranker, top_n=top_n))
                samples: dict[str, list[float]] = {
                    "plain": [],
                    "rerank": [],
                    "rerank_call": [],
                    "direct_call": [],
                }
                fallbacks = 0
                for i in range(args.warmup + args.iterations):
                    body = {
                        "query": texts[i % len(texts)],
                        "mode": "hybrid",
                        "max_results": args.max_results,
                    }
                    if i % 2 == 0:
                        plain_ms, _ = _timed(plain, body)
                        rerank_ms, answer = _timed(api, body)
                    else:
                        rerank_ms, answer = _timed(api, body)
                        plain_ms, _ = _timed(plain, body)
                    report = answer["rerank"]
                    if i >= args.warmup:
                        samples["plain"].append(plain_ms)
                        samples["rerank"].append(rerank_ms)
                        samples["rerank_call"].append(float(report["took_ms"]))
                        # The same call made in this thread: the stage's hand-off to its
                        # thread (which keeps the request's deadline) is the difference.
                        query = SearchQuery(body["query"], mode="hybrid", max_results=top_n)
                        passages = [r.content for r in store.search(SCOPE, query)]
                        started = time.perf_counter()
                        reranker.rerank(body["query"], passages)
                        samples["direct_call"].append((time.perf_counter() - started) * 1000)
                        fallbacks += 0 if report["reranked"] or not answer["results"] else 1
                plain_summary = summarize(samples["plain"])
                rerank_summary = summarize(samples["rerank"])
                runs[str(top_n)] = {
                    "top_n": top_n,
                    "plain_ms": plain_summary,
                    "rerank_ms": rerank_summary,
                    "rerank_call_ms": summarize(samples["rerank_call"]),
                    "direct_call_ms": summarize(samples["direct_call"]),
                    "ratio_p50": round(rerank_summary["p50"] / plain_summary["p50"], 2),
                    "ratio_p95": round(rerank_summary["p95"] / plain_summary["p95"], 2),
                    "added_p50_ms": round(rerank_summary["p50"] - plain_summary["p50"], 3),
                    "fallbacks": fallbacks,
                }
                log(
                    f"top {top_n}: plain p50 {plain_summary['p50']} ms, rerank p50 "
                    f"{rerank_summary['p50']} ms (x{runs[str(top_n)]['ratio_p50']}), "
                    f"rerank call p50 {runs[str(top_n)]['rerank_call_ms']['p50']} ms"
                )
        finally:
            store.close()
            delete_index(url, name)
    write_result(
        "rerank" + (f"-{args.label}" if args.label else ""),
        {
            "corpus": corpus.describe(),
            "indexed": {"documents": result.indexed_documents, "chunks": result.indexed_chunks},
            "embedder": "hashing (256 dimensions)",
            "mode": "hybrid",
            "max_results": args.max_results,
            "reranker": f"BedrockReranker({_MODEL}) -> tests/support/fake_rerank.py on 127.0.0.1",
            "iterations": args.iterations,
            "warmup": args.warmup,
            "runs": runs,
            "load": os.getloadavg(),
        },
    )
