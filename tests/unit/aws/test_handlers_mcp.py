"""functions/mcp/app.py with HTTP API (v2) events and the memory store.

The SDK client over streamable HTTP, the JWT authorizer and a real OpenSearch node are in
tests/integration/mcp/test_mcp_remote.py; here the store is the in-memory one injected into
the handler's container, and each request is one JSON-RPC message as the stateless
transport takes it (no ``initialize`` needed).
"""

from __future__ import annotations

import json
import subprocess
import sys
from types import ModuleType
from typing import Any

import pytest
from lambda_support import (
    REPO_ROOT,
    LambdaContext,
    api_event,
    emitted_metrics,
    load_event,
    load_handler,
    log_records,
)

from knowledge.core.errors import StoreUnavailableError
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.ingest.pipeline import upsert_document
from knowledge.service.api import KnowledgeApi
from knowledge.stores.memory import MemoryKnowledgeStore

RUNBOOKS = KnowledgeScope("ops-bot", "runbooks")
ENDPOINT = "/mcp/agents/ops-bot/contexts/runbooks"
METADATA = "/.well-known/oauth-protected-resource"
ISSUER = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_EXAMPLE"
DOMAIN = "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com"


def document(path: str, text: str) -> SourceDocument:
    data = text.encode("utf-8")
    return SourceDocument(path=path, size=len(data), read=lambda: data)


@pytest.fixture
def store() -> MemoryKnowledgeStore:
    store = MemoryKnowledgeStore()
    upsert_document(store, RUNBOOKS, document("deploy.md", "# Deploy\n\nrun helm rollback."))
    upsert_document(store, KnowledgeScope("hr-bot", "payroll"), document("pay.md", "helm salaries"))
    return store


def handler(
    monkeypatch: pytest.MonkeyPatch, store: MemoryKnowledgeStore, mode: str = "iam"
) -> ModuleType:
    monkeypatch.setenv("API_AUTH", mode)
    monkeypatch.setenv("JWT_ISSUER", ISSUER if mode == "jwt" else "")
    monkeypatch.setenv("JWT_REINDEX_SCOPE", "kb/reindex")
    module = load_handler("mcp", monkeypatch)
    module.container.api = KnowledgeApi(store)
    return module


def rpc(
    method: str,
    params: dict[str, Any] | None = None,
    *,
    path: str = ENDPOINT,
    http_method: str = "POST",
    claims: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params or {}}
    event = api_event(http_method, path, body if http_method == "POST" else None, claims=claims)
    event["headers"]["accept"] = "application/json, text/event-stream"
    return event


def invoke(module: ModuleType, event: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    response = module.lambda_handler(event, LambdaContext())
    body = json.loads(response["body"]) if response["body"] else None
    return response["statusCode"], response["headers"], body


def test_the_handler_imports_no_sdk_store_or_embedder() -> None:
    """The MCP SDK (pydantic, Starlette), the store and boto3 load on the first MCP
    request, never with the handler (bench/runs/coldstart.py measures the import)."""
    code = f"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location("app", {str(REPO_ROOT / "functions/mcp/app.py")!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
heavy = ("mcp", "mcp_types", "pydantic", "starlette", "anyio", "openai", "opensearchpy",
         "boto3", "botocore.session", "numpy", "knowledge.agent_tools.mcp_server")
print(sorted(m for m in heavy if m in sys.modules))
"""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"POWERTOOLS_METRICS_NAMESPACE": "Test", "PATH": ""},
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_tools_list_and_a_search_as_single_stateless_requests(
    monkeypatch: pytest.MonkeyPatch, store: MemoryKnowledgeStore, capsys: pytest.CaptureFixture[str]
) -> None:
    module = handler(monkeypatch, store)
    status, headers, body = invoke(module, rpc("tools/list"))
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert "mcp-session-id" not in headers, "stateless: no session to keep"
    names = [tool["name"] for tool in body["result"]["tools"]]
    assert names == ["knowledge_search", "knowledge_status", "knowledge_documents"]
    call = {"name": "knowledge_search", "arguments": {"query": "helm rollback"}}
    status, _, body = invoke(module, rpc("tools/call", call))
    assert status == 200
    result = body["result"]
    assert result["isError"] is False
    assert [r["source"] for r in result["structuredContent"]["results"]] == ["deploy.md"]
    out = capsys.readouterr().out
    lines = [r for r in log_records(out) if r["message"] == "mcp"]
    assert [(r["rpc_method"], r.get("tool"), r.get("tool_error")) for r in lines] == [
        ("tools/list", None, None),
        ("tools/call", "knowledge_search", False),
    ]
    assert {(r["agent"], r["context"], r["status"]) for r in lines} == {
        ("ops-bot", "runbooks", 200)
    }
    assert "helm" not in json.dumps(lines), "the query text is not logged"
    metrics = emitted_metrics(out)
    assert metrics["McpRequests"] == 2
    assert metrics["McpToolCalls"] == 1
    assert "McpToolErrors" not in metrics


def test_the_sample_event_searches_its_scope_in_jwt_mode(
    monkeypatch: pytest.MonkeyPatch, store: MemoryKnowledgeStore
) -> None:
    module = handler(monkeypatch, store, "jwt")
    status, headers, body = invoke(module, load_event("api_mcp_search.json"))
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert body["id"] == 3
    result = body["result"]
    assert result["isError"] is False
    assert result["content"][0]["text"].startswith("Found 1 result for")
    hits = result["structuredContent"]["results"]
    assert [(h["source"], h["agent"], h["context"]) for h in hits] == [
        ("deploy.md", "ops-bot", "runbooks")
    ]


def test_a_failing_store_is_a_tool_error_without_details(
    monkeypatch: pytest.MonkeyPatch, store: MemoryKnowledgeStore, capsys: pytest.CaptureFixture[str]
) -> None:
    module = handler(monkeypatch, store)

    def down(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailableError("https://search-kb.us-east-1.es.amazonaws.com refused")

    monkeypatch.setattr(store, "search", down)
    call = {"name": "knowledge_search", "arguments": {"query": "helm"}}
    status, _, body = invoke(module, rpc("tools/call", call))
    assert status == 200
    assert body["result"]["isError"] is True
    text = body["result"]["content"][0]["text"]
    assert text == "Failed to search knowledge: the index backend is unavailable; try again later"
    assert emitted_metrics(capsys.readouterr().out)["McpToolErrors"] == 1


def test_an_unexpected_failure_is_a_500_naming_the_request_id_only(
    monkeypatch: pytest.MonkeyPatch, store: MemoryKnowledgeStore, capsys: pytest.CaptureFixture[str]
) -> None:
    module = handler(monkeypatch, store)

    def broken() -> KnowledgeApi:
        raise RuntimeError("arn:aws:es:us-east-1:123456789012:domain/kb at https://x")

    module.container.api = None
    monkeypatch.setattr(module.endpoint(), "_api", broken)
    status, _, body = invoke(module, rpc("tools/list"))
    assert status == 500
    message = body["error"]["message"]
    assert message == "internal error (request id UsmLHjXpIAMEJhA=)"
    out = capsys.readouterr().out
    assert "Traceback" in out, "logged with its trace"
    assert emitted_metrics(out)["ServerErrors"] == 1


def test_get_and_delete_are_405_post_only(
    monkeypatch: pytest.MonkeyPatch, store: MemoryKnowledgeStore
) -> None:
    module = handler(monkeypatch, store)
    for method in ("GET", "DELETE"):
        status, headers, body = invoke(module, rpc("ping", http_method=method))
        assert status == 405, method
        assert headers["allow"] == "POST"
        assert body["error"]["code"] == -32600


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/mcp/agents/%6Fps-bot/contexts/runbooks", 400),  # as sent, never decoded
        ("/mcp/agents/ops-bot/contexts/..", 400),
        ("/mcp/agents/ops-bot", 404),
        ("/mcp", 404),
    ],
)
def test_the_scope_is_the_urls_segments_as_sent(
    monkeypatch: pytest.MonkeyPatch, store: MemoryKnowledgeStore, path: str, status: int
) -> None:
    module = handler(monkeypatch, store)
    assert invoke(module, rpc("tools/list", path=path))[0] == status


def test_iam_mode_has_no_reindex_tool_and_no_metadata(
    monkeypatch: pytest.MonkeyPatch, store: MemoryKnowledgeStore
) -> None:
    module = handler(monkeypatch, store)
    _, _, body = invoke(module, rpc("tools/list"))
    assert "knowledge_reindex" not in [t["name"] for t in body["result"]["tools"]]
    assert invoke(module, rpc("ping", path=METADATA, http_method="GET"))[0] == 404


def test_jwt_mode_grants_the_path_agent_and_reindex_by_the_token(
    monkeypatch: pytest.MonkeyPatch, store: MemoryKnowledgeStore
) -> None:
    module = handler(monkeypatch, store, "jwt")
    reader = {"sub": "u-1", "agents": "[ops-bot]"}
    manager = {"sub": "u-2", "agents": "[ops-bot]", "scope": "kb/reindex"}
    status, _, body = invoke(module, rpc("tools/list", claims=reader))
    assert status == 200
    assert "knowledge_reindex" not in [t["name"] for t in body["result"]["tools"]]
    _, _, body = invoke(module, rpc("tools/list", claims=manager))
    assert "knowledge_reindex" in [t["name"] for t in body["result"]["tools"]]
    path = "/mcp/agents/hr-bot/contexts/payroll"
    status, headers, body = invoke(module, rpc("tools/list", path=path, claims=manager))
    assert status == 403
    assert "www-authenticate" not in headers, "a new token of the same grant would not help"
    assert body["error"]["message"].startswith("Forbidden: the token's 'agents' claim")


def test_jwt_mode_without_verified_claims_is_a_401_naming_the_metadata(
    monkeypatch: pytest.MonkeyPatch, store: MemoryKnowledgeStore
) -> None:
    """Fail closed: a route left without the authorizer must not become public."""
    module = handler(monkeypatch, store, "jwt")
    event = rpc("tools/list")
    event["requestContext"].pop("authorizer")
    status, headers, _ = invoke(module, event)
    assert status == 401
    assert headers["www-authenticate"] == (
        f'Bearer resource_metadata="https://{DOMAIN}{METADATA}{ENDPOINT}"'
    )


def test_jwt_mode_publishes_the_protected_resource_metadata(
    monkeypatch: pytest.MonkeyPatch, store: MemoryKnowledgeStore, capsys: pytest.CaptureFixture[str]
) -> None:
    module = handler(monkeypatch, store, "jwt")
    for path, resource in (
        (METADATA + ENDPOINT, f"https://{DOMAIN}{ENDPOINT}"),
        (METADATA, f"https://{DOMAIN}"),
    ):
        event = rpc("ping", path=path, http_method="GET")
        event["requestContext"].pop("authorizer")  # an unauthenticated route
        status, headers, body = invoke(module, event)
        assert status == 200
        assert headers["content-type"] == "application/json"
        assert body == {
            "resource": resource,
            "authorization_servers": [ISSUER],
            "bearer_methods_supported": ["header"],
            "resource_name": "knowledge-search"
            + (": ops-bot/runbooks" if path != METADATA else ""),
        }
    assert emitted_metrics(capsys.readouterr().out)["MetadataRequests"] == 2
    assert invoke(module, rpc("ping", path=METADATA + "/mcp/x", http_method="GET"))[0] == 404
    assert invoke(module, rpc("ping", path=METADATA))[0] == 405
