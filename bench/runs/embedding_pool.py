"""Concurrent embedding vs sequential against a fake remote embedder.

Concurrent embedding: the product's pipeline against a fake remote embedder on loopback.

The embedder is the real provider (``BedrockEmbeddingClient`` through boto3, or
``OpenAIEmbeddingClient`` through the openai SDK) talking HTTP to
``tests/support/fake_embeddings.py`` on 127.0.0.1, which sleeps a fixed latency per call and
per text and can answer 429 with ``Retry-After`` over a rate. The pipeline is the
product's ``Indexer`` (read -> chunk -> embed -> write) into a recorder
(``bench.runs.indexing.RecordingWriter``), so the figure is the embedding stage as the
indexers see it, without a store's own cost.

Profiles:
- ``titan``: one text per call, ``--titan-latency`` (80 ms) a call;
- ``openai``: requests of ``--openai-batch-size`` texts (16), ``--openai-latency``
  (300 ms) a call plus ``--openai-per-text`` (2 ms) a text.

Each profile runs at every concurrency of its sweep, concurrency 1 (sequential, what the
providers did before) first, on the same documents in the same run; ratios are against
that run. Then the titan profile runs at 16 under a rate limit (``--rate-limit``
requests/s, 429 + ``Retry-After: 1`` above it) and every chunk's vector is checked
against the one the fake made for its text: lost or misplaced chunks are counted.

The documents are an even sample (``--documents``) of the man-pages corpus
(``bench.corpora.manpages``, ``--limit`` pages), copied to a temporary folder. Writes
``bench/results/embedding-pool.json``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common.environment import REPO_ROOT, log, write_result
from bench.common.stores import SCOPE
from bench.corpora.manpages import load_corpus
from bench.runs.indexing import OPTIONS, RecordingWriter
from knowledge.embedding.base import EmbeddingClient
from knowledge.ingest.chunking import MarkdownSectionChunker, embedding_text
from knowledge.ingest.pipeline import Indexer, embeds_context_by_default
from knowledge.ingest.sources.folders import LocalDirectorySource

sys.path.insert(0, str(REPO_ROOT / "tests" / "support"))
from fake_embeddings import (  # the same fake the tests use
    FakeEmbeddingServer,
    Profile,
    fake_embedding_server,
    vector_for,
)

__all__ = ["add_arguments", "main"]

DIMENSIONS = 256  # Titan v2 accepts 256; the fake answers what it is asked


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=300, help="man pages in the corpus")
    parser.add_argument("--documents", type=int, default=40, help="documents sampled")
    parser.add_argument("--titan-latency", type=float, default=0.08)
    parser.add_argument("--titan-concurrency", type=_ints, default=[1, 4, 8, 16, 32])
    parser.add_argument("--openai-latency", type=float, default=0.3)
    parser.add_argument("--openai-per-text", type=float, default=0.002)
    parser.add_argument("--openai-batch-size", type=int, default=16)
    parser.add_argument("--openai-concurrency", type=_ints, default=[1, 2, 4, 8])
    parser.add_argument("--rate-limit", type=float, default=100.0, help="requests/s")
    parser.add_argument(
        "--quota-in-flight", type=int, default=24, help="titan quota: 429 beyond this in flight"
    )
    parser.add_argument(
        "--only-quota", action="store_true", help="only the titan quota runs (baseline, adaptive)"
    )
    parser.add_argument(
        "--openai-batch-sweep",
        type=_ints,
        default=None,
        help="only the openai profile: each batch size at concurrency 1 and the provider's "
        "default (writes embedding-pool-openai-batch.json)",
    )


def _sample(docs_dir: Path, count: int, target: Path) -> int:
    files = sorted(docs_dir.rglob("*.md"))
    step = max(1, len(files) // max(count, 1))
    chosen = files[::step][:count]
    for path in chosen:
        destination = target / path.relative_to(docs_dir)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, destination)
    return len(chosen)


def _bedrock(server: FakeEmbeddingServer, concurrency: int) -> EmbeddingClient:
    from knowledge.embedding.bedrock import BedrockEmbeddingClient

    # The provider builds its own boto3 client (as in the Lambda), pointed at the fake.
    return BedrockEmbeddingClient(
        dimensions=DIMENSIONS,
        region="us-east-1",
        concurrency=concurrency,
        endpoint_url=server.url,
    )


def _openai(batch_size: int) -> Callable[[FakeEmbeddingServer, int], EmbeddingClient]:
    def make(server: FakeEmbeddingServer, concurrency: int) -> EmbeddingClient:
        from knowledge.embedding.openai import OpenAIEmbeddingClient

        return OpenAIEmbeddingClient(
            dimensions=DIMENSIONS,
            api_key="fake",
            base_url=server.url + "/v1",
            batch_size=batch_size,
            concurrency=concurrency,
        )

    return make


def _run(
    docs: Path,
    server: FakeEmbeddingServer,
    make: Callable[[FakeEmbeddingServer, int], EmbeddingClient],
    concurrency: int,
) -> dict[str, Any]:
    server.reset()
    embedder = make(server, concurrency)
    writer = RecordingWriter()
    started = time.perf_counter()
    result = Indexer(MarkdownSectionChunker(), embedder).index(
        writer, SCOPE, LocalDirectorySource(docs), OPTIONS
    )
    seconds = time.perf_counter() - started
    close = getattr(embedder, "close", None)
    if callable(close):
        close()
    chunks = [chunk for _, kept in writer.documents for chunk in kept]
    # The text the fake was sent: with the title and headings in front for every
    # embedder but hashing (knowledge.ingest.pipeline.DEFAULT_EMBED_CONTEXT).
    context = embeds_context_by_default(embedder)
    wrong = sum(
        1
        for chunk in chunks
        if list(chunk.vector or ())
        != vector_for(embedding_text(chunk.chunk) if context else chunk.chunk.content, 256)
    )
    return {
        "concurrency": concurrency,
        "seconds": round(seconds, 3),
        "documents": result.indexed_documents,
        "chunks": result.indexed_chunks,
        "chunks_per_s": round(result.indexed_chunks / seconds, 1),
        "errors": len(result.errors),
        "wrong_or_missing_vectors": wrong,
        "requests": len(server.calls),
        "throttled": server.throttled,
        "max_in_flight": server.max_in_flight,
    }


def _sweep(
    name: str,
    docs: Path,
    profile: Profile,
    make: Callable[[FakeEmbeddingServer, int], EmbeddingClient],
    levels: list[int],
) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    with fake_embedding_server(profile) as server:
        for concurrency in sorted(set(levels)):
            run = _run(docs, server, make, concurrency)
            runs.append(run)
            log(f"{name} concurrency {concurrency}: {run['seconds']} s, {run['chunks_per_s']}/s")
    base = next((r for r in runs if r["concurrency"] == 1), None)
    for run in runs:
        run["speedup_vs_sequential"] = (
            round(run["chunks_per_s"] / base["chunks_per_s"], 2) if base else None
        )
    return runs


def _quota_run(
    docs: Path, workdir: Path, args: argparse.Namespace, *, adaptive: bool
) -> dict[str, Any]:
    """``kb index``'s path (the embedded store, ``Indexer.index``) against the Titan-like
    endpoint with a concurrency quota: ``adaptive`` = the product (the limit grows from 16
    until throttled, the next documents embedded while one is written); else the
    baseline, what the product did before: 16 calls in flight at most, one document at a
    time (``lookahead=0``)."""
    from knowledge.embedding.bedrock import BedrockEmbeddingClient
    from knowledge.stores.embedded import EmbeddedKnowledgeStore

    profile = Profile(
        latency_per_call=args.titan_latency,
        dimensions=DIMENSIONS,
        max_in_flight=args.quota_in_flight,
        retry_after="",  # Bedrock's ThrottlingException carries none
    )
    name = "adaptive" if adaptive else "fixed-16"
    with fake_embedding_server(profile) as server:
        embedder = BedrockEmbeddingClient(
            dimensions=DIMENSIONS,
            region="us-east-1",
            concurrency=64 if adaptive else 16,
            endpoint_url=server.url,
        )
        chunker = MarkdownSectionChunker()
        indexer = Indexer(chunker, embedder, lookahead=None if adaptive else 0)
        store = EmbeddedKnowledgeStore(workdir / f"{name}.db", embedder)
        try:
            started = time.perf_counter()
            result = indexer.index(store, SCOPE, LocalDirectorySource(docs), OPTIONS)
            seconds = time.perf_counter() - started
            wrong = _wrong_vectors(store, docs, embedder, chunker)
        finally:
            store.close()
            embedder._pool.close()
        limit = embedder._pool.limit
        run = {
            "mode": name,
            "seconds": round(seconds, 3),
            "documents": result.indexed_documents,
            "chunks": result.indexed_chunks,
            "chunks_per_s": round(result.indexed_chunks / seconds, 1),
            "errors": len(result.errors),
            "wrong_or_missing_vectors": wrong,
            "requests": len(server.calls),
            "throttled": server.throttled,
            "max_in_flight": server.max_in_flight,
            "limit_at_end": limit.limit,
            "limit_decreases": limit.decreases,
        }
    log(f"titan quota {name}: {run}")
    return run


def _wrong_vectors(
    store: Any, docs: Path, embedder: EmbeddingClient, chunker: MarkdownSectionChunker
) -> int:
    """Chunks whose stored vector is not the fake's for their text (or is missing)."""
    from knowledge.core.identity import embedding_key

    wrong = 0
    with store.write_session(SCOPE) as session:
        for path in sorted(docs.rglob("*.md")):
            relative = path.relative_to(docs).as_posix()
            stored = session.stored_vectors(relative)
            for chunk in chunker.chunk(relative, path.read_text(encoding="utf-8")):
                text = embedding_text(chunk)
                vector = stored.get(embedding_key(embedder.name, DIMENSIONS, text))
                expected = vector_for(text, DIMENSIONS)
                norm = sum(x * x for x in expected) ** 0.5
                if vector is None or abs(vector[0] - expected[0] / norm) > 1e-5:
                    wrong += 1
    return wrong


def _openai_batch_sweep(args: argparse.Namespace) -> None:
    """The OpenAI profile per request size: the pipeline hands the embedder
    ``embed_batch_size`` texts at a time, so a request size at or above it leaves the
    pool one request to send (no concurrency)."""
    from knowledge.embedding.pool import DEFAULT_OPENAI_CONCURRENCY

    corpus = load_corpus(args.limit)
    profile = Profile(
        latency_per_call=args.openai_latency,
        latency_per_text=args.openai_per_text,
        dimensions=DIMENSIONS,
    )
    sweeps: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kb-embedding-pool-") as tmp:
        docs = Path(tmp)
        sampled = _sample(corpus.docs_dir, args.documents, docs)
        levels = [1, DEFAULT_OPENAI_CONCURRENCY]
        for batch_size in args.openai_batch_sweep:
            runs = _sweep(f"openai batch {batch_size}", docs, profile, _openai(batch_size), levels)
            sweeps[str(batch_size)] = runs
    baseline = sweeps[str(args.openai_batch_sweep[0])][0]["chunks_per_s"]
    for runs in sweeps.values():
        for run in runs:
            run["vs_first_sequential"] = round(run["chunks_per_s"] / baseline, 2)
    write_result(
        "embedding-pool-openai-batch",
        {
            "corpus": corpus.describe(),
            "documents_sampled": sampled,
            "pipeline_embed_batch_size": Indexer(MarkdownSectionChunker()).embed_batch_size,
            "latency_per_call_s": args.openai_latency,
            "latency_per_text_s": args.openai_per_text,
            "concurrency": DEFAULT_OPENAI_CONCURRENCY,
            "by_batch_size": sweeps,
        },
    )


def main(args: argparse.Namespace) -> None:
    # boto3 signs every request; the fake does not check the (made-up) credentials.
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "fake")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "fake")
    if args.openai_batch_sweep:
        _openai_batch_sweep(args)
        return
    corpus = load_corpus(args.limit)
    with tempfile.TemporaryDirectory(prefix="kb-embedding-pool-") as tmp:
        docs = Path(tmp) / "docs"
        sampled = _sample(corpus.docs_dir, args.documents, docs)
        quota = {
            "latency_per_call_s": args.titan_latency,
            "max_in_flight": args.quota_in_flight,
            "baseline": _quota_run(docs, Path(tmp), args, adaptive=False),
            "adaptive": _quota_run(docs, Path(tmp), args, adaptive=True),
        }
        quota["speedup"] = round(
            quota["adaptive"]["chunks_per_s"] / quota["baseline"]["chunks_per_s"], 2
        )
        if args.only_quota:
            write_result(
                "embedding-quota",
                {"corpus": corpus.describe(), "documents_sampled": sampled, **quota},
            )
            return
        titan = Profile(latency_per_call=args.titan_latency, dimensions=DIMENSIONS)
        titan_runs = _sweep("titan", docs, titan, _bedrock, [1, *args.titan_concurrency])
        openai = Profile(
            latency_per_call=args.openai_latency,
            latency_per_text=args.openai_per_text,
            dimensions=DIMENSIONS,
        )
        openai_runs = _sweep(
            "openai",
            docs,
            openai,
            _openai(args.openai_batch_size),
            [1, *args.openai_concurrency],
        )
        limited = Profile(
            latency_per_call=args.titan_latency,
            dimensions=DIMENSIONS,
            rate_per_second=args.rate_limit,
            burst=16,
            retry_after="1",
        )
        with fake_embedding_server(limited) as server:
            rate_run = _run(docs, server, _bedrock, 16)
        log(f"titan at 16 under {args.rate_limit}/s: {rate_run}")
    expected = titan_runs[0]["chunks"]
    at16 = next((r for r in titan_runs if r["concurrency"] == 16), None)
    write_result(
        "embedding-pool",
        {
            "corpus": corpus.describe(),
            "documents_sampled": sampled,
            "chunks": expected,
            "pipeline_embed_batch_size": Indexer(MarkdownSectionChunker()).embed_batch_size,
            "profiles": {
                "titan": {
                    "latency_per_call_s": args.titan_latency,
                    "texts_per_call": 1,
                    "runs": titan_runs,
                },
                "openai": {
                    "latency_per_call_s": args.openai_latency,
                    "latency_per_text_s": args.openai_per_text,
                    "batch_size": args.openai_batch_size,
                    "runs": openai_runs,
                },
            },
            "quota": quota,
            "rate_limited": {
                "profile": "titan",
                "concurrency": 16,
                "rate_limit_per_s": args.rate_limit,
                "retry_after_s": 1,
                **rate_run,
                "lost_chunks": expected - rate_run["chunks"] + rate_run["wrong_or_missing_vectors"],
            },
            "targets": {
                "titan_speedup_at_16": at16["speedup_vs_sequential"] if at16 else None,
                "titan_speedup_at_16_met": bool(at16 and at16["speedup_vs_sequential"] >= 8),
                "zero_lost_under_429": rate_run["chunks"] == expected
                and rate_run["wrong_or_missing_vectors"] == 0
                and rate_run["errors"] == 0,
            },
        },
    )
