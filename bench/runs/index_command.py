"""`kb index`, start to exit, against a Titan-like quota (vs another version).

``kb index`` as a whole command against a Titan-like quota: texts/s from start to exit.

``bench/runs/embedding_pool.py --only-quota`` times the pipeline's embedding phase inside one
process; a user waits for the whole command: the interpreter's start and imports, the
index file's creation, the listing, the embedding, the last writes and the exit. Here
``python -m knowledge.local.cli index DIR --embedder bedrock --json`` runs as a
subprocess, its wall time taken from just before it starts to its exit, embedding through
the real ``BedrockEmbeddingClient`` (boto3, the default Titan v2 dimensions) against
``tests/support/fake_embeddings.py`` on 127.0.0.1: 80 ms a call (``--latency``), one text a call,
and a 429 without ``Retry-After`` (as Bedrock's ``ThrottlingException``) for a call that
arrives with ``--quota`` others in flight.

Each size (``--sizes``: texts, i.e. chunks) is a folder of whole man pages (an even walk
over the ``manpages-300`` corpus until the chunks reach the size). Every run indexes it
into a new index file; the product (this checkout, or the ``knowledge`` package first on
``PYTHONPATH``) and the baseline (``--baseline``: another version's ``layers/knowledge``
folder, e.g. a ``git worktree`` of ``HEAD``) alternate, ``--repeats`` times each, in the
same run. After each run every chunk's stored vector is checked against the one the fake
made for its text (lost, misplaced or missing vectors are counted). Writes
``bench/results/index-command.json`` (``--label`` adds a suffix).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common.environment import REPO_ROOT, log, write_result
from bench.corpora.manpages import load_corpus
from knowledge.core.identity import embedding_key
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.chunking import MarkdownSectionChunker, embedding_text

sys.path.insert(0, str(REPO_ROOT / "tests" / "support"))
from fake_embeddings import (  # the same fake the tests and embedding-pool use
    FakeEmbeddingServer,
    Profile,
    fake_embedding_server,
    vector_for,
)

__all__ = ["add_arguments", "main"]

SCOPE = KnowledgeScope("bench", "index-command")
MODEL_ID = "amazon.titan-embed-text-v2:0"
DIMENSIONS = 1024  # what kb index asks Titan v2 for (the provider's default)
PRODUCT = REPO_ROOT / "layers" / "knowledge"


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", type=_ints, default=[400, 2000], help="texts per run")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each version per size")
    parser.add_argument("--latency", type=float, default=0.08, help="seconds a call")
    parser.add_argument("--quota", type=int, default=24, help="429 beyond this many in flight")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="the layers/knowledge folder of the version to compare with (e.g. a git "
        "worktree of HEAD); none: the product only",
    )
    parser.add_argument(
        "--delayed-body",
        action="store_true",
        help="the fake as it answered before: its answer's body waits for the client's "
        "delayed ACK (about 40 ms a call on loopback)",
    )
    parser.add_argument("--label", default="", help="suffix of the result file")


def _folder(docs_dir: Path, texts: int, target: Path) -> tuple[int, int]:
    """Copy whole pages, an even walk over the corpus, until their chunks reach ``texts``
    (within 2% over it); the documents and chunks copied."""
    chunker = MarkdownSectionChunker()
    files = sorted(docs_dir.rglob("*.md"))
    counts = {
        path: sum(1 for _ in chunker.chunk(path.name, path.read_text(encoding="utf-8")))
        for path in files
    }
    average = sum(counts.values()) / max(1, len(files))
    step = max(1, int(len(files) / max(1.0, texts / average)))
    order = files[::step] + [path for path in files if path not in set(files[::step])]
    documents = chunks = 0
    for path in order:
        if chunks >= texts:
            break
        if chunks + counts[path] > texts * 1.02:
            continue  # a long page would overshoot the size: a shorter one later
        destination = target / path.relative_to(docs_dir)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, destination)
        documents += 1
        chunks += counts[path]
    return documents, chunks


def _run(
    server: FakeEmbeddingServer, docs: Path, db: Path, package: Path, version: str
) -> dict[str, Any]:
    server.reset()
    env = {
        **os.environ,
        "PYTHONPATH": str(package),
        "KB_EMBEDDER": "bedrock",
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": server.url,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "fake",  # boto3 signs; the fake does not check
        "AWS_SECRET_ACCESS_KEY": "fake",
    }
    command = [sys.executable, "-m", "knowledge.local.cli", "index", str(docs)]
    command += ["--agent", SCOPE.agent, "--context", SCOPE.context, "--db", str(db), "--json"]
    started_at = time.monotonic()
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        log(f"{version}: exit {done.returncode}: {done.stderr[-2000:]}")
    result = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    calls = list(server.calls)
    texts = int(result.get("embedded_chunks", 0))
    first = min((c.started for c in calls), default=started_at) - started_at
    last = max((c.ended for c in calls), default=started_at) - started_at
    return {
        "version": version,
        "exit_code": done.returncode,
        "seconds": round(seconds, 3),
        "texts": texts,
        "texts_per_s": round(texts / seconds, 1),
        "documents": result.get("indexed_documents", 0),
        "errors": len(result.get("errors", [])),
        "requests": len(calls),
        "throttled": server.throttled,
        "max_in_flight": server.max_in_flight,
        "first_call_s": round(first, 3),
        "last_answer_s": round(last, 3),
        "after_last_answer_s": round(seconds - last, 3),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def _wrong_vectors(db: Path, docs: Path) -> int:
    """Chunks whose stored vector is not the fake's for their text, or is missing."""
    from knowledge.embedding.bedrock import BedrockEmbeddingClient
    from knowledge.stores.embedded import EmbeddedKnowledgeStore

    embedder = BedrockEmbeddingClient(MODEL_ID, DIMENSIONS, region="us-east-1")  # no calls
    chunker = MarkdownSectionChunker()
    store = EmbeddedKnowledgeStore(db, embedder)
    wrong = 0
    try:
        with store.write_session(SCOPE) as session:
            for path in sorted(docs.rglob("*.md")):
                relative = path.relative_to(docs).as_posix()
                stored = session.stored_vectors(relative)
                for chunk in chunker.chunk(relative, path.read_text(encoding="utf-8")):
                    text = embedding_text(chunk)
                    vector = stored.get(embedding_key(embedder.name, DIMENSIONS, text))
                    expected = vector_for(text, DIMENSIONS)
                    norm = math.sqrt(sum(x * x for x in expected))
                    if vector is None or abs(vector[0] - expected[0] / norm) > 1e-5:
                        wrong += 1
    finally:
        store.close()
    return wrong


def _git_commit(package: Path) -> str | None:
    done = subprocess.run(
        ["git", "-C", str(package), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or None


def main(args: argparse.Namespace) -> None:
    corpus = load_corpus(300)
    profile = Profile(
        latency_per_call=args.latency,
        dimensions=DIMENSIONS,
        max_in_flight=args.quota,
        retry_after="",  # Bedrock's ThrottlingException carries none
        delayed_body=args.delayed_body,
    )
    versions = [("product", PRODUCT)]
    if args.baseline is not None:
        versions.insert(0, ("baseline", args.baseline.resolve()))
    sizes: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="kb-index-command-") as tmp,
        fake_embedding_server(profile) as server,
    ):
        for size in args.sizes:
            docs = Path(tmp) / f"docs-{size}"
            documents, chunks = _folder(corpus.docs_dir, size, docs)
            runs: list[dict[str, Any]] = []
            for repeat in range(args.repeats):
                for version, package in versions:  # alternating, baseline first
                    db = Path(tmp) / f"{version}-{size}-{repeat}.db"
                    run = _run(server, docs, db, package, version)
                    run["wrong_or_missing_vectors"] = _wrong_vectors(db, docs)
                    runs.append(run)
                    log(f"{size} texts, {version} #{repeat + 1}: {run}")
            sizes.append({"texts": chunks, "documents": documents, "runs": runs, **_summary(runs)})
    name = "index-command" + (f"-{args.label}" if args.label else "")
    write_result(
        name,
        {
            "corpus": corpus.describe(),
            "latency_per_call_s": args.latency,
            "quota_in_flight": args.quota,
            "delayed_body": args.delayed_body,
            "dimensions": DIMENSIONS,
            "baseline": None
            if args.baseline is None
            else {"package": str(args.baseline), "git_commit": _git_commit(args.baseline)},
            "sizes": sizes,
        },
    )


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per version: the median texts/s of its runs, and what any run lost."""
    out: dict[str, Any] = {}
    for version in sorted({run["version"] for run in runs}):
        own = [run for run in runs if run["version"] == version]
        out[version] = {
            "median_texts_per_s": round(statistics.median(r["texts_per_s"] for r in own), 1),
            "texts_per_s": [r["texts_per_s"] for r in own],
            "lost": sum(r["wrong_or_missing_vectors"] + r["errors"] for r in own),
        }
    if "baseline" in out and out["baseline"]["median_texts_per_s"]:
        out["speedup"] = round(
            out["product"]["median_texts_per_s"] / out["baseline"]["median_texts_per_s"], 2
        )
    return out
