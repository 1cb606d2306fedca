"""Import time of the Lambda handlers next to a naive handler.

Cold start of the Lambda handlers as Lambda runs them: the built artifacts on Python
3.12, in a fresh read-only interpreter that writes no bytecode, with and without the
bytecode the build ships, next to the naive handler (``bench/probes/naive_handler.py``), same run.

The artifacts are built here by the build ``sam build`` runs (``layers/knowledge/Makefile``
and ``functions/*/Makefile``, with python3.12), for this machine's platform instead of
arm64 (``PLATFORMS=``) so that they can run here. Two copies of each:

- ``source``: every ``__pycache__`` removed, as a layer built without bytecode ships;
- ``bytecode``: as built (an ``unchecked-hash`` pyc beside every module).

Every probe (``bench/probes/coldstart.py``) runs in a new ``python3.12 -S -s`` process with
``PYTHONDONTWRITEBYTECODE=1`` and only the function folder and the layer on ``sys.path``
(Lambda's code and layer folders are read-only: Python compiles what has no pyc at every
cold start and can keep nothing); after the runs, the ``source`` copy is checked to hold
no bytecode still. Targets, round-robin so that drift hits all alike:

- ``search``: the search function with the keyword-only settings;
- ``indexer``: the indexer function;
- ``dispatcher``: the dispatcher function (import only: its first request makes boto3's
  SQS client, which needs SQS; tests/unit/aws/test_handlers_dispatcher.py checks that its
  import loads no store, embedder or SDK);
- ``mcp``: the MCP function on its own layer (``McpLayer``: the search's dependencies and
  the MCP SDK), IAM mode, the keyword-only settings;
- ``console``: the console function (import only: it reads its settings and files on the
  first request; tests/integration/aws/test_sam.py checks that its import loads no SDK);
- ``naive``: the naive handler (boto3, openai, opensearch-py, Powertools at the top);
- ``<target>+invoke``: the import, then one request through ``lambda_handler``: a keyword
  search (API Gateway HTTP API event) against the real node for ``search`` and ``naive``,
  the same search as one MCP ``tools/call`` (one stateless streamable HTTP request, which
  loads the MCP SDK) for ``mcp``,
  an SQS batch with one S3 delete notification for ``indexer`` (S3, on loopback, says the
  object is gone; the delete by query goes to the node).

One more run per handler and copy with ``python -X importtime`` lists the packages that
cost the most. Writes ``bench/results/coldstart.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common.environment import PROBES_DIR, REPO_ROOT, log, opensearch_node, write_result
from bench.common.metrics import summarize
from bench.common.stores import SCOPE, delete_index, open_store, unique_index_name
from knowledge.core.model import IndexOptions
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.sources.folders import LocalDirectorySource

__all__ = ["add_arguments", "build_artifacts", "main"]

PROBE = PROBES_DIR / "coldstart.py"
MCP_ROUTE = "/mcp/agents/{agent}/contexts/{context}"
VARIANTS = ("source", "bytecode")
IMPORT_TARGETS = ("search", "indexer", "dispatcher", "mcp", "console", "naive")
INVOKE_TARGETS = ("search", "indexer", "mcp", "naive")
MODULES = {
    "search": "app",
    "indexer": "app",
    "dispatcher": "app",
    "mcp": "app",
    "console": "app",
    "naive": "naive_handler",
}
LAYERS = {"mcp": "mcp_layer"}  # a target's layer when not the knowledge layer
CORPUS = REPO_ROOT / "examples" / "bucket" / "ops-bot" / "runbooks"
# The functions' timeouts in template.yaml.
TIMEOUTS_MS = {
    "search": 30_000,
    "indexer": 300_000,
    "dispatcher": 29_000,
    "mcp": 29_000,
    "console": 10_000,
    "naive": 30_000,
}
TARGETS_SET = {
    "search_import_max_ms": 200,
    "naive_over_search_min": 4.0,
    # Each handler's import next to the naive handler's, same run and copy.
    "handler_over_naive_max": 0.3,
}


def python312() -> Path:
    sys.path.insert(0, str(REPO_ROOT / "tests" / "support"))
    try:
        from sam_cli import find_python312_bin_dir
    finally:
        sys.path.pop(0)
    return Path(find_python312_bin_dir()) / "python3.12"


def _make(folder: Path, target: str, artifacts: Path, python: Path, *extra: str) -> None:
    artifacts.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-C",
            str(folder),
            target,
            f"ARTIFACTS_DIR={artifacts}",
            f"PYTHON={python}",
            *extra,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def build_artifacts(root: Path, python: Path) -> dict[str, dict[str, Path]]:
    """``{variant: {"layer": dir, "mcp_layer": dir, "search": dir, "indexer": dir,
    "dispatcher": dir, "mcp": dir, "console": dir, "naive": dir}}``."""
    built = root / "bytecode"
    log("building the layer and the functions (the sam build makefiles, this platform) ...")
    _make(
        REPO_ROOT / "layers" / "knowledge",
        "build-KnowledgeLayer",
        built / "layer",
        python,
        "PLATFORMS=",
    )
    _make(
        REPO_ROOT / "layers" / "knowledge",
        "build-McpLayer",
        built / "mcp_layer",
        python,
        "PLATFORMS=",
    )
    for name, target in (
        ("search", "SearchFunction"),
        ("indexer", "IndexerFunction"),
        ("dispatcher", "DispatcherFunction"),
        ("mcp", "McpFunction"),
        ("console", "ConsoleFunction"),
    ):
        _make(REPO_ROOT / "functions" / name, f"build-{target}", built / name, python)
    # The naive handler: the search function with bench/probes/naive_handler.py beside it,
    # compiled the same way.
    shutil.copytree(built / "search", built / "naive")
    shutil.copy2(PROBES_DIR / "naive_handler.py", built / "naive" / "naive_handler.py")
    subprocess.run(
        [
            str(python),
            "-m",
            "compileall",
            "-q",
            "-f",
            "--invalidation-mode",
            "unchecked-hash",
            str(built / "naive" / "naive_handler.py"),
        ],
        check=True,
    )
    source = root / "source"
    shutil.copytree(built, source, ignore=shutil.ignore_patterns("__pycache__"))
    names = ("layer", "mcp_layer", "search", "indexer", "dispatcher", "mcp", "console", "naive")
    layers = ("layer", "mcp_layer")
    return {
        "bytecode": {n: built / n / ("python" if n in layers else "") for n in names},
        "source": {n: source / n / ("python" if n in layers else "") for n in names},
    }


def bytecode_files(folder: Path) -> int:
    return sum(1 for _ in folder.rglob("*.pyc"))


def lambda_environment(url: str, index: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "LANG": "C.UTF-8",
        "EMBEDDING_PROVIDER": "none",
        "OPENSEARCH_URL": url,
        "OPENSEARCH_INDEX": index,
        "OPENSEARCH_DEFAULT_MODE": "keyword",
        "POWERTOOLS_SERVICE_NAME": "knowledge-bench",
        "POWERTOOLS_METRICS_NAMESPACE": "KnowledgeBench",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",  # a placeholder, never sent to AWS
        "DOCUMENTS_BUCKET": "kb-123456789012-example",
        "INDEX_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/bench",
        # As in Lambda: the code and layer folders are read-only, no pyc is ever written.
        "PYTHONDONTWRITEBYTECODE": "1",
    }


class _GoneObjects(http.server.BaseHTTPRequestHandler):
    """S3 on loopback for the indexer's delete: every object is gone (404 NoSuchKey)."""

    def _gone(self, body: bool) -> None:
        payload = b"<Error><Code>NoSuchKey</Code><Message>gone</Message></Error>"
        self.send_response(404)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if body:
            self.wfile.write(payload)

    def do_HEAD(self) -> None:
        self._gone(body=False)

    def do_GET(self) -> None:
        self._gone(body=True)

    def log_message(self, format: str, *args: Any) -> None:
        return


@contextlib.contextmanager
def gone_objects_s3() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _GoneObjects)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


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


def mcp_event(query: str) -> dict[str, Any]:
    """The same keyword search as ``search_event``, as one MCP ``tools/call`` to the MCP
    endpoint of the bench scope (JSON-RPC, stateless: no ``initialize`` needed)."""
    event = search_event(query)
    path = f"/mcp/agents/{SCOPE.agent}/contexts/{SCOPE.context}"
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "knowledge_search",
                "arguments": {"query": query, "max_results": 5},
            },
        }
    )
    event.update({"rawPath": path, "body": body, "routeKey": f"POST {MCP_ROUTE}"})
    event.pop("pathParameters", None)
    event["requestContext"]["http"]["path"] = path
    event["requestContext"]["routeKey"] = f"POST {MCP_ROUTE}"
    event["headers"]["content-length"] = str(len(body))
    event["headers"]["accept"] = "application/json, text/event-stream"
    return event


def probe(
    python: Path,
    target: str,
    paths: dict[str, Path],
    env: dict[str, str],
    event: Path | None,
    workdir: Path,
    *,
    flags: tuple[str, ...] = (),
) -> tuple[dict[str, Any], str]:
    out = workdir / f"{target}.json"
    command = [str(python), *flags, "-S", "-s", str(PROBE), MODULES[target], str(out)]
    if event is not None:
        command.append(str(event))
    env = {
        **env,
        "PYTHONPATH": os.pathsep.join(
            [str(paths[target]), str(paths[LAYERS.get(target, "layer")])]
        ),
        "KB_PROBE_TIMEOUT_MS": str(TIMEOUTS_MS[target]),
    }
    started = time.perf_counter()
    done = subprocess.run(
        command,
        env=env,
        cwd=paths[target],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
        timeout=120,
    )
    process_ms = (time.perf_counter() - started) * 1000.0
    stderr = done.stderr.decode(errors="replace")
    if done.returncode != 0:
        raise SystemExit(f"probe {target} failed:\n{stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.read_text("utf-8"))
    result["process_ms"] = process_ms
    return result, stderr


_IMPORTTIME = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)")


def heaviest_imports(stderr: str, top: int = 6) -> list[Any]:
    """Top-level packages by cumulative import time (one ``-X importtime`` run)."""
    totals: dict[str, int] = {}
    for line in stderr.splitlines():
        match = _IMPORTTIME.match(line)
        if match and len(match.group(3)) == 1:  # top-level imports only (no nesting)
            package = match.group(4).split(".")[0]
            totals[package] = totals.get(package, 0) + int(match.group(2))
    ranked = sorted(totals.items(), key=lambda item: -item[1])[:top]
    return [{"package": name, "cumulative_ms": round(us / 1000.0, 1)} for name, us in ranked]


def _check_response(label: str, target: str, result: dict[str, Any]) -> None:
    if target == "indexer":
        if result.get("batch_item_failures") != 0:
            raise SystemExit(f"{label}: the indexer failed its record: {result}")
    elif result.get("status") != 200:
        raise SystemExit(f"{label}: the search answered {result.get('status')}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=15, help="measured runs per target")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured runs per target")


def main(args: argparse.Namespace) -> None:
    python = python312()
    with (
        tempfile.TemporaryDirectory(prefix="kb-coldstart-") as tmp,
        opensearch_node() as url,
        gone_objects_s3() as s3_url,
    ):
        workdir = Path(tmp)
        artifacts = build_artifacts(workdir / "build", python)
        layer = artifacts["bytecode"]["layer"]
        layer_bytes = sum(f.stat().st_size for f in layer.rglob("*") if f.is_file())
        mcp_layer = artifacts["bytecode"]["mcp_layer"]
        mcp_layer_bytes = sum(f.stat().st_size for f in mcp_layer.rglob("*") if f.is_file())
        pyc_bytes = sum(f.stat().st_size for f in layer.rglob("*.pyc"))
        index = unique_index_name("bench-coldstart")
        store = open_store("opensearch", None, workdir=None, node_url=url, index_name=index)
        try:
            index_source(store, SCOPE, LocalDirectorySource(CORPUS), IndexOptions())
        finally:
            store.close()
        env = {**lambda_environment(url, index), "AWS_ENDPOINT_URL_S3": s3_url}
        events = {
            "search": workdir / "search-event.json",
            "naive": workdir / "search-event.json",
            "mcp": workdir / "mcp-event.json",
            "indexer": REPO_ROOT / "events" / "sqs_s3_delete.json",
        }
        events["search"].write_text(json.dumps(search_event("roll back a release")), "utf-8")
        events["mcp"].write_text(json.dumps(mcp_event("roll back a release")), "utf-8")
        plan: list[tuple[str, str, Path | None]] = [(t, t, None) for t in IMPORT_TARGETS]
        plan += [(f"{t}+invoke", t, events[t]) for t in INVOKE_TARGETS]
        samples: dict[str, dict[str, list[dict[str, Any]]]] = {
            v: {label: [] for label, _, _ in plan} for v in VARIANTS
        }
        try:
            for run in range(args.warmup + args.runs):
                for label, target, event_file in plan:
                    for variant in VARIANTS:
                        result, _ = probe(
                            python, target, artifacts[variant], env, event_file, workdir
                        )
                        if event_file is not None:
                            _check_response(label, target, result)
                        if run >= args.warmup:
                            samples[variant][label].append(result)
                log(f"run {run + 1}/{args.warmup + args.runs}")
            heaviest = {
                variant: {
                    t: heaviest_imports(
                        probe(
                            python,
                            t,
                            artifacts[variant],
                            env,
                            None,
                            workdir,
                            flags=("-X", "importtime"),
                        )[1]
                    )
                    for t in IMPORT_TARGETS
                }
                for variant in VARIANTS
            }
        finally:
            delete_index(url, index)
        written = {name: bytecode_files(folder) for name, folder in artifacts["source"].items()}
        if any(written.values()):
            raise SystemExit(f"bytecode was written into the read-only copy: {written}")

    def median(variant: str, label: str, key: str = "import_ms") -> float:
        return float(statistics.median(s[key] for s in samples[variant][label]))

    summary: dict[str, Any] = {}
    for variant in VARIANTS:
        summary[variant] = {}
        for label, _, event_file in plan:
            runs = samples[variant][label]
            entry: dict[str, Any] = {
                "import_ms": summarize([s["import_ms"] for s in runs]),
                "process_ms": summarize([s["process_ms"] for s in runs]),
                "modules_imported": runs[0]["modules"],
                "sdks_loaded_by_import": runs[0]["loaded"],
            }
            if event_file is not None:
                entry["invoke_ms"] = summarize([s["invoke_ms"] for s in runs])
                entry["import_plus_invoke_ms"] = summarize(
                    [s["import_ms"] + s["invoke_ms"] for s in runs]
                )
                entry["sdks_loaded_after_invoke"] = runs[0]["loaded_after_invoke"]
            summary[variant][label] = entry

    def first(variant: str, target: str) -> float:
        return float(summary[variant][f"{target}+invoke"]["import_plus_invoke_ms"]["p50"])

    ratios = {
        variant: {
            "naive_over_search_import": round(
                median(variant, "naive") / median(variant, "search"), 2
            ),
            "naive_over_indexer_import": round(
                median(variant, "naive") / median(variant, "indexer"), 2
            ),
            "naive_over_search_first_request": round(
                first(variant, "naive") / first(variant, "search"), 2
            ),
            "mcp_over_search_import": round(median(variant, "mcp") / median(variant, "search"), 2),
            "mcp_over_search_first_request": round(
                first(variant, "mcp") / first(variant, "search"), 2
            ),
            "over_naive_import": {
                label: round(median(variant, label) / median(variant, "naive"), 2)
                for label in IMPORT_TARGETS
                if label != "naive"
            },
        }
        for variant in VARIANTS
    }
    ratios["source_over_bytecode"] = {
        label: round(median("source", label) / median("bytecode", label), 2)
        for label in IMPORT_TARGETS
    }
    write_result(
        "coldstart",
        {
            "runs": args.runs,
            "warmup": args.warmup,
            "python": str(python),
            "python_version": subprocess.run(
                [str(python), "-c", "import sys; print(sys.version.split()[0])"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip(),
            "layer_bytes": layer_bytes,
            "mcp_layer_bytes": mcp_layer_bytes,
            "layer_bytecode_bytes": pyc_bytes,
            "variants": summary,
            "heaviest_imports": heaviest,
            "ratios": ratios,
            "targets_set": TARGETS_SET,
        },
    )
