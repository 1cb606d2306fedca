"""One cold start, in a fresh interpreter: ``bench/probes/coldstart.py MODULE OUT [EVENT]``.

Imports the handler module ``MODULE`` (``app``, or ``naive_handler``) from ``sys.path``
(``PYTHONPATH``: the function's folder and the layer, set by ``bench.runs.coldstart``), timing
the import alone, then (with ``EVENT``, a JSON file) calls ``lambda_handler`` once and
times that too. Writes ``{"import_ms", "invoke_ms", "status", "modules", "loaded"}`` to
``OUT`` as JSON (stdout belongs to the handler's logs). Standard library only.
"""

import time

_PROCESS_START = time.perf_counter()

import importlib  # noqa: E402 - everything after the clock started is measured or cheap
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

WATCHED = ("boto3", "botocore", "openai", "opensearchpy", "numpy", "pydantic", "httpx")


class LambdaContext:
    function_name = "knowledge-bench"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:knowledge-bench"
    memory_limit_in_mb = 1024
    aws_request_id = "00000000-0000-0000-0000-000000000000"
    log_group_name = "/aws/lambda/knowledge-bench"
    log_stream_name = "bench"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        # The function's timeout (the indexer's is 300 s, and it keeps a reserve).
        return int(os.environ.get("KB_PROBE_TIMEOUT_MS", "30000"))


def main() -> None:
    module_name, out = sys.argv[1], Path(sys.argv[2])
    event_file = Path(sys.argv[3]) if len(sys.argv) > 3 else None
    before = len(sys.modules)
    started = time.perf_counter()
    module = importlib.import_module(module_name)
    import_ms = (time.perf_counter() - started) * 1000.0
    after_import = sorted(name for name in WATCHED if name in sys.modules)
    modules = len(sys.modules) - before
    result = {
        "import_ms": import_ms,
        "since_process_start_ms": (time.perf_counter() - _PROCESS_START) * 1000.0,
        "modules": modules,
        "loaded": after_import,
    }
    if event_file is not None:
        event = json.loads(event_file.read_text(encoding="utf-8"))
        started = time.perf_counter()
        response = module.lambda_handler(event, LambdaContext())
        result["invoke_ms"] = (time.perf_counter() - started) * 1000.0
        if "batchItemFailures" in response:  # the indexer (SQS partial batch response)
            result["batch_item_failures"] = len(response["batchItemFailures"])
        else:
            result["status"] = response.get("statusCode")
            body = json.loads(response.get("body") or "{}")
            result["results"] = len(body.get("results", []))
        result["loaded_after_invoke"] = sorted(n for n in WATCHED if n in sys.modules)
    out.write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main()
