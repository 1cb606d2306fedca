"""Search latency of an older version and this one, interleaved on one node.

Search latency of two versions of the product, interleaved in one run on one node.

``bench latency`` run once per version measures each on a machine whose speed drifts
between runs (on the shared 2-core machine, the same code's hybrid overhead moved by
~1 ms from one run to the next). Here one worker process per version (``--before``: the
``layers/knowledge`` folder of an export of the older commit; the other is this
checkout's) indexes the corpus into its own index of the same node; then, per mode, the
two workers take turns, ``--block`` searches each, the first of each pair alternating,
so both versions see the same machine. Each search is timed as in ``bench latency``
(``store.search`` through ``recording_client.RecordingClient``: wall clock, the ``took`` of
its requests, the time inside the client's calls). Writes ``bench/results/latency-ab.json``
(``latency-ab-<label>.json`` with ``--label``) with each version's summaries and the
after/before ratio of the p50 wall time.

Two indexes of one corpus built side by side differ in their segments, so the node's
``took`` differs between them (seen: keyword p50 18 vs 21 ms): compare the "own work"
columns then, or, when both versions write the same mapping and analysis, pass
``--shared-index``: the after version builds one index and both search it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from bench.common.environment import REPO_ROOT, log, opensearch_node, write_result
from bench.common.metrics import summarize
from knowledge.ingest.pipeline import index_source

__all__ = ["add_arguments", "main"]

MODES = ("keyword", "vector", "hybrid")
VERSIONS = ("before", "after")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--before",
        type=Path,
        help="the layers/knowledge folder of the older version (e.g. a `git archive` export)",
    )
    parser.add_argument("--limit", type=int, default=0, help="pages (0 = all, the default)")
    parser.add_argument("--iterations", type=int, default=600, help="measured searches per mode")
    parser.add_argument("--warmup", type=int, default=100, help="unmeasured searches per mode")
    parser.add_argument("--block", type=int, default=50, help="searches per turn")
    parser.add_argument("--max-results", type=int, default=10)
    parser.add_argument("--label", default="", help="suffix of the result file name")
    parser.add_argument(
        "--shared-index",
        action="store_true",
        help="both versions search one index, built by the after version (only when both "
        "write the same mapping and analysis): the node's side is then the same for both",
    )
    parser.add_argument("--index", help=argparse.SUPPRESS)  # in a worker: this index name
    parser.add_argument("--reuse", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # the node URL, in a worker


def _worker(args: argparse.Namespace) -> None:
    """Index (unless ``--reuse``), then answer ``{"mode", "start", "count", "keep"}``
    lines with timings."""
    from bench.common.recording_client import RecordingClient
    from bench.common.stores import SCOPE, delete_index, open_store, unique_index_name
    from bench.corpora.manpages import load_corpus
    from bench.runs.latency import _time_store
    from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
    from knowledge.embedding.hashing import HashingEmbedder
    from knowledge.ingest.sources.folders import LocalDirectorySource
    from knowledge.stores.opensearch.client import create_client
    from knowledge.stores.opensearch.settings import OpenSearchConfig

    url = args.worker
    corpus = load_corpus(args.limit or None)
    texts = [q.text for q in corpus.queries]
    name = args.index or unique_index_name("bench-latency-ab")
    probe = RecordingClient(create_client(OpenSearchConfig(url=url)))
    store = open_store(
        "opensearch", HashingEmbedder(), workdir=None, node_url=url, index_name=name, client=probe
    )
    try:
        if args.reuse:
            status = store.status(SCOPE)
            _send(sys.stdout, {"chunks": status.chunk_count, "documents": status.document_count})
        else:
            result = index_source(
                store,
                SCOPE,
                LocalDirectorySource(corpus.docs_dir),
                IndexOptions(max_documents=100_000),
            )
            indexed = {"chunks": result.indexed_chunks, "documents": result.indexed_documents}
            _send(sys.stdout, indexed)
        for line in sys.stdin:
            order = json.loads(line)
            if order is None:
                break
            mode = SearchMode(order["mode"])
            rows: list[tuple[float, float, float]] = []
            for i in range(order["start"], order["start"] + order["count"]):
                query = SearchQuery(texts[i % len(texts)], mode=mode, max_results=args.max_results)
                rows.append(_time_store(store, probe, query))
            _send(sys.stdout, rows if order["keep"] else [])
    finally:
        store.close()
        if not args.reuse:
            delete_index(url, name)


def _send(stream: IO[str], value: Any) -> None:
    stream.write(json.dumps(value) + "\n")
    stream.flush()


def _spawn(
    pythonpath: str, url: str, args: argparse.Namespace, index: str | None, *, reuse: bool = False
) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    # Not through ``python -m bench``: that imports every benchmark, some of which need
    # parts of the product the older version may not have.
    command = [sys.executable, "-m", "bench.runs.latency_ab", "--worker", url]
    command += ["--limit", str(args.limit), "--max-results", str(args.max_results)]
    command += ["--index", index] if index else []
    command += ["--reuse"] if reuse else []
    return subprocess.Popen(
        command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT
    )


def _ask(worker: subprocess.Popen[str], order: Any) -> Any:
    assert worker.stdin is not None
    assert worker.stdout is not None
    _send(worker.stdin, order)
    line = worker.stdout.readline()
    if not line:
        raise RuntimeError("a latency worker stopped; see its output above")
    return json.loads(line)


def main(args: argparse.Namespace) -> None:
    if args.worker:
        _worker(args)
        return
    if args.before is None or not (args.before / "knowledge").is_dir():
        raise SystemExit("--before must be a layers/knowledge folder (it holds knowledge/)")
    paths = {
        "before": f"{args.before.resolve()}{os.pathsep}{REPO_ROOT}",
        "after": f"{REPO_ROOT / 'layers' / 'knowledge'}{os.pathsep}{REPO_ROOT}",
    }
    samples: dict[str, dict[str, list[list[float]]]] = {
        version: {mode: [] for mode in MODES} for version in VERSIONS
    }
    with opensearch_node() as url:
        from bench.common.stores import unique_index_name

        shared = unique_index_name("bench-latency-ab") if args.shared_index else None
        workers: dict[str, subprocess.Popen[str]] = {}
        indexed = {}
        try:
            # The after version first: with --shared-index it builds the one index.
            for version in reversed(VERSIONS):
                reuse = shared is not None and version == "before"
                workers[version] = worker = _spawn(paths[version], url, args, shared, reuse=reuse)
                assert worker.stdout is not None
                indexed[version] = json.loads(worker.stdout.readline())
                log(f"{version}: {'reads' if reuse else 'indexed'} {indexed[version]}")
            for mode in MODES:
                for version in VERSIONS:
                    order = {"mode": mode, "start": 0, "count": args.warmup, "keep": False}
                    _ask(workers[version], order)
                end = args.warmup + args.iterations
                for turn, start in enumerate(range(args.warmup, end, args.block)):
                    count = min(args.block, end - start)
                    pair = VERSIONS if turn % 2 == 0 else VERSIONS[::-1]
                    for version in pair:
                        order = {"mode": mode, "start": start, "count": count, "keep": True}
                        samples[version][mode].extend(_ask(workers[version], order))
                log(f"{mode}: done")
        finally:
            for worker in workers.values():
                if worker.poll() is None and worker.stdin is not None:
                    _send(worker.stdin, None)
                worker.wait(timeout=120)
    modes: dict[str, Any] = {}
    for mode in MODES:
        modes[mode] = {}
        for version in VERSIONS:
            rows = samples[version][mode]
            modes[mode][version] = {
                "store": summarize([w for w, _, _ in rows]),
                "store_took": summarize([t for _, t, _ in rows]),
                "store_overhead": summarize([w - t for w, t, _ in rows]),
                "store_own_work": summarize([w - c for w, _, c in rows]),
            }
        before, after = modes[mode]["before"], modes[mode]["after"]
        modes[mode]["wall_ratio_p50"] = round(after["store"]["p50"] / before["store"]["p50"], 3)
        log(
            f"{mode}: wall p50 {before['store']['p50']} -> {after['store']['p50']} ms, "
            f"overhead p50 {before['store_overhead']['p50']} -> "
            f"{after['store_overhead']['p50']} ms"
        )
    write_result(
        "latency-ab" + (f"-{args.label}" if args.label else ""),
        {
            "before": str(args.before),
            "indexed": indexed,
            "embedder": "hashing (256 dimensions)",
            "max_results": args.max_results,
            "iterations": args.iterations,
            "warmup": args.warmup,
            "block": args.block,
            "shared_index": args.shared_index,
            "modes": modes,
        },
    )


if __name__ == "__main__":  # a worker (see _spawn)
    _parser = argparse.ArgumentParser()
    add_arguments(_parser)
    main(_parser.parse_args())
