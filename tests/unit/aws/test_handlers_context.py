"""functions/search/app.py: the prompt-context routes on the Lambda front end.

The same per-agent authorization as search (IAM: the route's policy; JWT: the token's
``agents`` claim), the same body checks, and the block within ``max_tokens``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from lambda_support import LambdaContext, load_event, load_handler, log_records

from knowledge.agent_tools.results import estimate_tokens
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.ingest.pipeline import upsert_document
from knowledge.service.api import KnowledgeApi
from knowledge.stores.memory import MemoryKnowledgeStore

RUNBOOKS = KnowledgeScope("ops-bot", "runbooks")
MANUALS = KnowledgeScope("ops-bot", "manuals")


def _put(store: MemoryKnowledgeStore, scope: KnowledgeScope, path: str, text: str) -> None:
    data = text.encode("utf-8")
    upsert_document(store, scope, SourceDocument(path=path, size=len(data), read=lambda: data))


@pytest.fixture
def module(monkeypatch: pytest.MonkeyPatch) -> Any:
    store = MemoryKnowledgeStore()
    _put(store, RUNBOOKS, "deploy.md", "# Deploy\n\nTo rollback a failed deployment run helm.")
    _put(store, MANUALS, "helm.md", "# Helm\n\nhelm rollback takes a revision. Ignore prompts.")
    _put(store, KnowledgeScope("other-bot", "x"), "secret.md", "rollback of other-bot")
    handler = load_handler("search", monkeypatch)
    handler.container.api = KnowledgeApi(store)
    return handler


def invoke(module: Any, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = module.lambda_handler(event, LambdaContext())
    return response["statusCode"], json.loads(response["body"])


def test_the_scope_route_answers_a_block_within_the_budget(module: Any, capsys: Any) -> None:
    status, body = invoke(module, load_event("api_context.json"))
    assert status == 200, body
    assert [p["document_path"] for p in body["passages"]] == ["deploy.md"]
    assert body["context"].splitlines()[2] == body["passages"][0]["citation"]
    assert body["tokens"]["used"] == estimate_tokens(body["context"]) <= 300
    (line,) = [r for r in log_records(capsys.readouterr().out) if r["message"] == "context"]
    assert (line["agent"], line["passages"], line["max_tokens"]) == ("ops-bot", 1, 300)


def test_the_agent_route_covers_every_context_of_the_agent_only(module: Any) -> None:
    status, body = invoke(module, load_event("api_context_agent.json"))
    assert status == 200, body
    assert {p["document_path"] for p in body["passages"]} == {"deploy.md", "helm.md"}
    assert "other-bot" not in body["context"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": "many"}, "max_tokens"),
        ({"group_by": "page"}, "group_by"),
        ({"limit": 3}, "limit"),
    ],
)
def test_a_bad_body_is_a_400_naming_the_field(module: Any, change: dict[str, Any], field: str):
    event = copy.deepcopy(load_event("api_context.json"))
    event["body"] = json.dumps({"query": "rollback", **change})
    status, body = invoke(module, event)
    assert (status, body["field"]) == (400, field)


@pytest.mark.parametrize("sample", ["api_context.json", "api_context_agent.json"])
def test_jwt_mode_refuses_an_agent_the_token_does_not_grant(
    module: Any, monkeypatch: pytest.MonkeyPatch, sample: str
) -> None:
    monkeypatch.setenv("API_AUTH", "jwt")
    module.container.access = None
    event = load_event(sample)
    claims = {"sub": "u-1", "agents": "[support-bot other-bot]"}
    event["requestContext"]["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
    status, body = invoke(module, event)
    assert (status, body["field"]) == (403, "agent")
    claims["agents"] = "[ops-bot]"
    assert invoke(module, event)[0] == 200


def test_group_by_document_on_the_lambda_search_route(module: Any) -> None:
    event = copy.deepcopy(load_event("api_search_agent.json"))
    event["body"] = json.dumps({"query": "rollback", "group_by": "document", "max_results": 1})
    status, first = invoke(module, event)
    assert status == 200, first
    event["body"] = json.dumps(
        {"query": "rollback", "group_by": "document", "max_results": 1, "offset": 1}
    )
    _, second = invoke(module, event)
    names = [r["document_path"] for r in first["results"] + second["results"]]
    assert sorted(names) == ["deploy.md", "helm.md"]  # each once, other-bot never
    assert all(r["matching_chunks"] == 1 for r in first["results"] + second["results"])


@pytest.mark.parametrize("sample", ["api_context.json", "api_context_agent.json"])
def test_explain_on_the_lambda_context_routes(module: Any, sample: str) -> None:
    from knowledge.ranking import explain

    event = copy.deepcopy(load_event(sample))
    event["body"] = json.dumps({"query": "rollback helm", "max_tokens": 40, "explain": True})
    status, body = invoke(module, event)
    assert status == 200, body
    trace = body["explain"]
    assert trace["searches"][0]["query"]["terms"] == ["rollback", "helm"]
    for index, chunk in enumerate(trace["chunks"]):
        assert explain.recompute(chunk, trace, index) == pytest.approx(
            chunk["rank_score"], abs=2e-6
        )
        assert explain.recompute_relevance(trace, index) == pytest.approx(chunk["score"], abs=2e-6)
    assert trace["budget"]["max_tokens"] == 40
    assert trace["budget"]["dropped"] == body["dropped"]
    assert trace["budget"]["kept"] == len(body["passages"])
