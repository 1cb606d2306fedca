"""The MCP function's own layer (McpLayer) holds everything an MCP request needs.

``sam build`` builds the layer for arm64, whose native parts (pydantic-core, rpds,
cryptography) cannot load here; so the test builds the same layer with the same Makefile
target for this machine (``PLATFORMS=``, as tests/integration/aws/test_repo_layer.py does for
the repos layer), puts only that layer and the function's ``app.py`` on python3.12's path
(no site-packages: ``-S -s``), and sends the function the MCP requests of a session:
``tools/list``, a ``knowledge_search`` on the real OpenSearch node, the prompt. A package
the layer lacks fails the import or the request.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest
from sam_cli import REPO_ROOT, find_python312_bin_dir

from knowledge.aws.settings import LambdaSettings, build_store
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.ingest.pipeline import upsert_document

pytestmark = [pytest.mark.integration, pytest.mark.opensearch, pytest.mark.slow]

_SESSION = """
import copy, json, sys
import app  # the handler module, as Lambda imports it
heavy = ("mcp", "pydantic", "starlette", "opensearchpy", "boto3")
at_import = sorted(m for m in heavy if m in sys.modules)
class Context:
    function_name = "McpFunction"; memory_limit_in_mb = 512; aws_request_id = "req-1"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:McpFunction"
    @staticmethod
    def get_remaining_time_in_millis():
        return 29000
template = json.load(open(sys.argv[1]))
answers = []
for number, (method, params) in enumerate(json.load(sys.stdin), 1):
    event = copy.deepcopy(template)
    event["body"] = json.dumps({"jsonrpc": "2.0", "id": number, "method": method, "params": params})
    answers.append(json.loads(app.lambda_handler(event, Context())["body"]))
print(json.dumps({"at_import": at_import, "answers": answers,
                  "mcp": sys.modules["mcp"].__file__, "extractors": "lxml" in sys.modules}))
"""


@pytest.fixture(scope="module")
def host_mcp_layer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """McpLayer built by its Makefile target for this machine, beside the function."""
    built = tmp_path_factory.mktemp("mcp-layer")
    python = find_python312_bin_dir() / "python3.12"
    subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-C",
            str(REPO_ROOT / "layers" / "knowledge"),
            "build-McpLayer",
            f"ARTIFACTS_DIR={built / 'layer'}",
            f"PYTHON={python}",
            "PLATFORMS=",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=600,
    )
    (built / "function").mkdir()
    shutil.copy2(REPO_ROOT / "functions" / "mcp" / "app.py", built / "function" / "app.py")
    return built


@pytest.fixture
def index(opensearch_url: str) -> Iterator[str]:
    """An index holding one runbook of ops-bot/runbooks, written by the deployment's store."""
    name = f"test_mcp_layer_{uuid.uuid4().hex[:12]}"
    env = {
        "OPENSEARCH_URL": opensearch_url,
        "OPENSEARCH_INDEX": name,
        "OPENSEARCH_DEFAULT_MODE": "keyword",
        "OPENSEARCH_WAIT_FOR_REFRESH": "true",
        "EMBEDDING_PROVIDER": "hashing",
    }
    store = build_store(LambdaSettings.from_env(env), env=env)
    text = b"# Rollback\n\nRun helm rollback checkout-api to the previous revision.\n"
    try:
        upsert_document(
            store,
            KnowledgeScope("ops-bot", "runbooks"),
            SourceDocument(path="rollback.md", size=len(text), read=lambda: text),
        )
        yield name
    finally:
        store.close()
        request = urllib.request.Request(f"{opensearch_url}/{name}", method="DELETE")
        with suppress(OSError):
            urllib.request.urlopen(request, timeout=30).close()


def test_mcp_layer_alone_answers_an_mcp_session(
    host_mcp_layer: Path, opensearch_url: str, index: str, tmp_path: Path
) -> None:
    layer = host_mcp_layer / "layer" / "python"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": os.pathsep.join([str(host_mcp_layer / "function"), str(layer)]),
        "AWS_REGION": "us-east-1",
        "POWERTOOLS_SERVICE_NAME": "knowledge-mcp",
        "POWERTOOLS_METRICS_NAMESPACE": "KnowledgeSearch",
        "OPENSEARCH_URL": opensearch_url,
        "OPENSEARCH_INDEX": index,
        "OPENSEARCH_DEFAULT_MODE": "keyword",
        "EMBEDDING_PROVIDER": "hashing",
        "API_AUTH": "jwt",
        "JWT_ISSUER": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_EXAMPLE",
    }
    requests = [
        ["tools/list", {}],
        ["tools/call", {"name": "knowledge_search", "arguments": {"query": "helm rollback"}}],
        ["prompts/get", {"name": "knowledge_context", "arguments": {"query": "helm rollback"}}],
    ]
    python = find_python312_bin_dir() / "python3.12"
    done = subprocess.run(
        [
            str(python),
            "-S",
            "-s",
            "-B",
            "-c",
            _SESSION,
            str(REPO_ROOT / "events/api_mcp_search.json"),
        ],
        input=json.dumps(requests),
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-4000:] + done.stdout[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["at_import"] == [], "the SDK and the store load on the first MCP request"
    assert out["mcp"].startswith(str(layer))
    assert out["extractors"] is False
    listed, found, prompt = (answer["result"] for answer in out["answers"])
    assert [tool["name"] for tool in listed["tools"]] == [
        "knowledge_search",
        "knowledge_status",
        "knowledge_documents",
    ]
    assert found["isError"] is False, found
    assert [hit["source"] for hit in found["structuredContent"]["results"]] == ["rollback.md"]
    assert "helm rollback checkout-api" in prompt["messages"][0]["content"]["text"]
