"""Cold start of the Lambda handlers: import time in a fresh interpreter, and import plus a
first keyword search, next to the naive handler (``bench/naive_handler.py``), same run.

Targets, each run in its own new process (``bench/coldstart_probe.py``), round-robin so
that drift hits all alike, after unmeasured warm-up runs that write the ``.pyc`` files
(as a deployed layer would have them):

- ``search``: ``functions/search/app.py`` with the keyword-only settings
  (``EMBEDDING_PROVIDER=none``, ``OPENSEARCH_DEFAULT_MODE=keyword``);
- ``indexer``: ``functions/indexer/app.py``;
- ``naive``: the naive handler (boto3, openai, opensearch-py, Powertools at the top);
- ``search+invoke`` / ``naive+invoke``: the import and then one keyword search request
  (API Gateway HTTP API event) against the real node, on the 300-page corpus.

One more run per handler with ``python -X importtime`` lists the packages that cost the
most. Writes ``bench/results/coldstart.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.environment import BENCH_DIR, REPO_ROOT, log, opensearch_node, write_result
from bench.manpages import load_corpus
from bench.metrics import summarize
from bench.stores import SCOPE, delete_index, open_store, unique_index_name
from knowledge.model import IndexOptions
from knowledge.sources.local import LocalDirectorySource

__all__ = ["add_arguments", "main"]

PROBE = BENCH_DIR / "coldstart_probe.py"
IMPORT_TARGETS = ("search", "indexer", "naive")
INVOKE_TARGETS = ("search", "naive")


def lambda_environment(url: str, index: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "EMBEDDING_PROVIDER": "none",
            "OPENSEARCH_URL": url,
            "OPENSEARCH_INDEX": index,
            "OPENSEARCH_DEFAULT_MODE": "keyword",
            "POWERTOOLS_SERVICE_NAME": "knowledge-bench",
            "POWERTOOLS_METRICS_NAMESPACE": "KnowledgeBench",
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "DOCUMENTS_BUCKET": "knowledge-bench-documents",
            "INDEX_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/bench",
        }
    )
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def search_event(query: str) -> dict[str, Any]:
    """An API Gateway HTTP API event for a keyword search of the bench scope."""
    template: dict[str, Any] = json.loads(
        (REPO_ROOT / "events" / "api_search.json").read_text("utf-8")
    )
    path = f"/v1/agents/{SCOPE.agent}/contexts/{SCOPE.context}/search"
    body = json.dumps({"query": query, "mode": "keyword", "max_results": 5})
    template.update(
        {
            "rawPath": path,
            "body": body,
            "isBase64Encoded": False,
            "pathParameters": {"agent": SCOPE.agent, "context": SCOPE.context},
        }
    )
    template["requestContext"]["http"]["path"] = path
    template["headers"]["content-length"] = str(len(body))
    return template


def probe(target: str, env: dict[str, str], event: Path | None, workdir: Path) -> dict[str, Any]:
    out = workdir / f"{target}.json"
    command = [sys.executable, str(PROBE), target, str(out)]
    if event is not None:
        command.append(str(event))
    started = time.perf_counter()
    done = subprocess.run(
        command,
        env=env,
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
        timeout=120,
    )
    process_ms = (time.perf_counter() - started) * 1000.0
    if done.returncode != 0:
        raise SystemExit(f"probe {target} failed:\n{done.stderr.decode(errors='replace')[-3000:]}")
    result: dict[str, Any] = json.loads(out.read_text("utf-8"))
    result["process_ms"] = process_ms
    return result


_IMPORTTIME = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)")


def heaviest_imports(target: str, env: dict[str, str], workdir: Path, top: int = 8) -> list[Any]:
    """Top-level packages by cumulative import time (one ``-X importtime`` run)."""
    out = workdir / f"{target}-importtime.json"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(PROBE), target, str(out)],
        env=env,
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=True,
    )
    totals: dict[str, int] = {}
    for line in done.stderr.decode(errors="replace").splitlines():
        match = _IMPORTTIME.match(line)
        if match and len(match.group(3)) == 1:  # top-level imports only (no nesting)
            package = match.group(4).split(".")[0]
            totals[package] = totals.get(package, 0) + int(match.group(2))
    ranked = sorted(totals.items(), key=lambda item: -item[1])[:top]
    return [{"package": name, "cumulative_ms": round(us / 1000.0, 1)} for name, us in ranked]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=20, help="measured runs per target")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured runs per target")


def main(args: argparse.Namespace) -> None:
    corpus = load_corpus(300)
    with tempfile.TemporaryDirectory(prefix="kb-coldstart-") as tmp, opensearch_node() as url:
        workdir = Path(tmp)
        index = unique_index_name("bench-coldstart")
        store = open_store("opensearch", None, workdir=None, node_url=url, index_name=index)
        try:
            store.index(SCOPE, LocalDirectorySource(corpus.docs_dir), IndexOptions())
        finally:
            store.close()
        env = lambda_environment(url, index)
        event = workdir / "event.json"
        event.write_text(json.dumps(search_event(corpus.queries[0].text)), "utf-8")
        plan: list[tuple[str, str, Path | None]] = [(t, t, None) for t in IMPORT_TARGETS]
        plan += [(f"{t}+invoke", t, event) for t in INVOKE_TARGETS]
        samples: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in plan}
        try:
            for run in range(args.warmup + args.runs):
                for label, target, event_file in plan:
                    result = probe(target, env, event_file, workdir)
                    if event_file is not None and (result.get("status") != 200):
                        raise SystemExit(f"{label}: the search answered {result.get('status')}")
                    if run >= args.warmup:
                        samples[label].append(result)
                log(f"run {run + 1}/{args.warmup + args.runs}")
            heaviest = {t: heaviest_imports(t, env, workdir) for t in IMPORT_TARGETS}
        finally:
            delete_index(url, index)

    def median(label: str, key: str) -> float:
        return round(float(statistics.median(s[key] for s in samples[label])), 1)

    summary: dict[str, Any] = {}
    for label, _, event_file in plan:
        entry: dict[str, Any] = {
            "import_ms": summarize([s["import_ms"] for s in samples[label]]),
            "process_ms": summarize([s["process_ms"] for s in samples[label]]),
            "modules_imported": samples[label][0]["modules"],
            "sdks_loaded_by_import": samples[label][0]["loaded"],
        }
        if event_file is not None:
            entry["invoke_ms"] = summarize([s["invoke_ms"] for s in samples[label]])
            entry["import_plus_invoke_ms"] = summarize(
                [s["import_ms"] + s["invoke_ms"] for s in samples[label]]
            )
            entry["sdks_loaded_after_invoke"] = samples[label][0]["loaded_after_invoke"]
        summary[label] = entry
    naive = median("naive", "import_ms")
    search = median("search", "import_ms")
    first_lean = summary["search+invoke"]["import_plus_invoke_ms"]["p50"]
    first_naive = summary["naive+invoke"]["import_plus_invoke_ms"]["p50"]
    write_result(
        "coldstart",
        {
            "runs": args.runs,
            "warmup": args.warmup,
            "python": sys.executable.replace(str(REPO_ROOT) + "/", ""),
            "targets": summary,
            "heaviest_imports": heaviest,
            "ratios": {
                "naive_over_search_import": round(naive / search, 2),
                "naive_over_indexer_import": round(naive / median("indexer", "import_ms"), 2),
                "naive_over_search_first_request": round(first_naive / first_lean, 2),
            },
            "targets_set": {"search_import_max_ms": 400, "naive_over_search_min": 4.0},
        },
    )
