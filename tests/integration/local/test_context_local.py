"""The prompt context and ``group_by`` through ``kb serve`` over real HTTP, read back by
``KnowledgeClient`` (the second front end; the Lambda one is test_handlers_context)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest

from knowledge.agent_tools.results import CUT_MARKER, estimate_tokens
from knowledge.client import KnowledgeClient
from knowledge.config import open_store
from knowledge.core.model import SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.local.server import LocalServer

pytestmark = pytest.mark.integration

RUNBOOKS = KnowledgeScope("ops-bot", "runbooks")
STEPS = "".join(
    f"## Step {n}\n\nRun helm rollback for service {n}. Then watch the pods. "
    + "Wait for the readiness probes to pass before the next service. " * 5
    + "\n\n"
    for n in range(6)
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    tmp = tmp_path_factory.mktemp("context-local")
    folder = tmp / "bucket" / "ops-bot" / "runbooks"
    folder.mkdir(parents=True)
    (folder / "rollback.md").write_text(f"# Rollback\n\n{STEPS}", "utf-8")
    (folder / "helm.md").write_text("# Helm\n\nhelm rollback takes a revision.\n", "utf-8")
    (tmp / "bucket" / "ops-bot" / "notes").mkdir()
    (tmp / "bucket" / "ops-bot" / "notes" / "n.md").write_text("helm rollback notes.\n", "utf-8")
    (tmp / "bucket" / "hr-bot" / "x").mkdir(parents=True)
    (tmp / "bucket" / "hr-bot" / "x" / "s.md").write_text("helm rollback secret.\n", "utf-8")
    with closing(
        open_store(db_path=tmp / "k.db", embedder_name="hashing", environ={}, create=True)
    ) as store:
        local = LocalServer(tmp / "bucket", store, host="127.0.0.1", port=0, poll_interval=0.2)
        local.start()
        try:
            yield local
        finally:
            local.stop()


def post(base: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


def test_the_routes_answer_blocks_within_every_budget(server: LocalServer) -> None:
    scope_path = "/v1/agents/ops-bot/contexts/runbooks/context"
    for budget in (1, 30, 60, 80, 120, 200, 400, 1000, 4000):
        ask = {"query": "helm rollback", "max_tokens": budget}
        status, body = post(server.url, scope_path, ask)
        assert status == 200, body
        assert body["tokens"]["used"] == estimate_tokens(body["context"]) <= budget
        for passage in body["passages"]:
            if passage["cut"]:
                assert passage["content"].removesuffix(CUT_MARKER).endswith(".")
    status, body = post(server.url, "/v1/agents/ops-bot/context", {"query": "helm rollback"})
    assert status == 200
    assert {p["document_path"] for p in body["passages"]} == {"rollback.md", "helm.md", "n.md"}
    status, body = post(server.url, scope_path, {"query": "helm", "max_tokens": -5})
    assert (status, body["field"]) == (400, "max_tokens")


def test_the_client_reads_the_block_and_grouped_results(server: LocalServer) -> None:
    client = KnowledgeClient(server.url)
    block = client.context(RUNBOOKS, SearchQuery("helm rollback", max_results=10), max_tokens=300)
    assert block.max_tokens == 300
    assert block.tokens_used == estimate_tokens(block.text) <= 300
    assert block.passages[0].header in block.text.splitlines()
    assert block.dropped  # 300 tokens cannot hold every step
    agent_wide = client.context(RUNBOOKS, SearchQuery("helm", cross_context=True))
    assert "hr-bot" not in agent_wide.text
    grouped = client.search(RUNBOOKS, SearchQuery("helm", group_by="document"))
    assert {r.document_path: r.matching_chunks for r in grouped} == {"rollback.md": 6, "helm.md": 1}
    page = client.search(
        RUNBOOKS, SearchQuery("helm", group_by="document", max_results=1, offset=1)
    )
    assert [r.document_path for r in page] == [grouped[1].document_path]


def test_the_client_reads_the_trace_of_a_block(server: LocalServer) -> None:
    from knowledge.ranking import explain

    client = KnowledgeClient(server.url)
    query = SearchQuery("helm rollback", max_results=10)
    plain = client.context(RUNBOOKS, query, max_tokens=300)
    assert plain.explain is None
    block = client.context(
        RUNBOOKS, query, max_tokens=300, explain=True, origin_weights={"upload": 0.5}
    )
    assert block.explain is not None
    trace = block.explain
    assert trace["searches"][0]["weights"]["origins"]["upload"] == 0.5
    assert [d["document_path"] for d in trace["budget"]["dropped"]] == [
        p.document_path for p in block.dropped
    ]
    for index, chunk in enumerate(trace["chunks"]):
        assert explain.recompute(chunk, trace, index) == pytest.approx(
            chunk["rank_score"], abs=2e-6
        )
        assert explain.recompute_relevance(trace, index) == pytest.approx(chunk["score"], abs=2e-6)
