"""``kb serve``'s front end over every store (memory, embedded, OpenSearch), through real
HTTP and the real ``KnowledgeClient``: document writes (put -> searchable -> overwrite ->
delete, a note, the library never writable) and the shared library in one query
(granted/not granted, ``include_shared``, the caller cannot name scopes, pages, scores in
[0, 1], normalised once, the ``KnowledgeSearch`` tool over the client)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from polling import wait_until

from knowledge.agent_tools.shared import SharedGrants
from knowledge.agent_tools.tool import KnowledgeSearchTool, ToolContext
from knowledge.client import AccessDeniedError, KnowledgeClient
from knowledge.core.errors import NotFoundError, ValidationError
from knowledge.core.model import SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.local.server import LocalServer
from knowledge.stores.protocol import KnowledgeStore

OPS = KnowledgeScope("ops-bot", "runbooks")
SUPPORT = KnowledgeScope("support-bot", "faq")
LIBRARY = KnowledgeScope("_shared", "playbooks")


@pytest.fixture
def served(store: KnowledgeStore, bucket: Path) -> Iterator[LocalServer]:
    for scope, name, text in (
        (OPS, "deploy.md", "# Deploy\n\nDeploy the gateway; rollback with helm if it fails."),
        (OPS, "alerts.md", "# Alerts\n\nThe gateway alert pages the on-call."),
        (LIBRARY, "incident.md", "# Incident\n\nIncident commander playbook for the gateway."),
        (LIBRARY, "rollback.md", "# Rollback\n\nRollback playbook: helm rollback, gateway."),
        (KnowledgeScope("_shared", "secret"), "s.md", "# S\n\ngateway rollback secret"),
        (SUPPORT, "refunds.md", "# Refunds\n\ngateway rollback of a charge"),
    ):
        (bucket / scope.key).mkdir(parents=True, exist_ok=True)
        (bucket / scope.key / name).write_text(text, "utf-8")
    server = LocalServer(
        bucket,
        store,
        port=0,
        poll_interval=0.1,
        allow_writes=True,
        shared_grants=SharedGrants.parse("ops-bot=playbooks"),
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def post(server: LocalServer, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        server.url + path, data=json.dumps(body).encode(), method="POST"
    )
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


def hits(server: LocalServer, path: str, **body: Any) -> list[tuple[str, str | None, float]]:
    """Each result's path, library and ``rank_score``; every candidate (min_score 0)."""
    request = {"query": "gateway rollback", "mode": "keyword", "min_score": 0.0, **body}
    status, answer = post(server, path, request)
    assert status == 200, answer
    assert all(0.0 <= r["score"] <= 1.0 for r in answer["results"])
    return [
        (r["document_path"], r["metadata"].get("shared_library"), r["rank_score"])
        for r in answer["results"]
    ]


OWN = "/v1/agents/ops-bot/contexts/runbooks/search"


def test_writes_on_every_store(served: LocalServer) -> None:
    client = KnowledgeClient(served.url, retries=0)

    def indexed(path: str, content_hash: str) -> bool:
        found = client.get_document(OPS, path)
        return found is not None and found.indexed and found.content_hash == content_hash

    def paths(text: str) -> list[str]:
        query = SearchQuery(text, mode=SearchMode.KEYWORD)
        return [h.document_path for h in client.search(OPS, query, include_shared=False)]

    first = client.put_document(OPS, "guides/canary.md", b"# Canary\n\nzebracanary rollout\n")
    wait_until(lambda: indexed("guides/canary.md", first["content_hash"]), "indexed")
    assert paths("zebracanary") == ["guides/canary.md"]
    second = client.put_document(OPS, "guides/canary.md", b"# Canary\n\nquokkarollout\n")
    wait_until(lambda: indexed("guides/canary.md", second["content_hash"]), "overwritten")
    assert paths("quokkarollout") == ["guides/canary.md"]
    assert paths("zebracanary") == []
    note = client.put_document(
        OPS,
        "notes/oncall.md",
        b"# On-call\n\nwombatpager\n",
        content_type="text/markdown",
        origin="manual",
    )
    wait_until(lambda: indexed("notes/oncall.md", note["content_hash"]), "note")
    found = client.search(OPS, SearchQuery("wombatpager", mode=SearchMode.KEYWORD))
    assert [(h.document_path, h.origin) for h in found] == [("notes/oncall.md", "manual")]
    assert client.delete_document(OPS, "guides/canary.md")["deleted"] is True
    wait_until(lambda: client.get_document(OPS, "guides/canary.md") is None, "deleted")
    assert paths("quokkarollout") == []
    with pytest.raises(NotFoundError):
        client.delete_document(OPS, "guides/canary.md")
    with pytest.raises(AccessDeniedError):
        client.put_document(LIBRARY, "x.md", b"# x")
    with pytest.raises(AccessDeniedError):
        client.delete_document(LIBRARY, "incident.md")


def test_the_shared_library_in_one_query_on_every_store(served: LocalServer) -> None:
    both = hits(served, OWN, max_results=10)
    assert {(p, lib) for p, lib, _ in both} == {
        ("deploy.md", None),
        ("alerts.md", None),
        ("incident.md", LIBRARY.key),
        ("rollback.md", LIBRARY.key),
    }
    assert all(0.0 <= s <= 1.0 for *_, s in both)
    assert sum(1 for *_, s in both if s == pytest.approx(1.0)) == 1  # normalised once
    pages = hits(served, OWN, max_results=1) + hits(served, OWN, max_results=3, offset=1)
    assert [h[:2] for h in pages] == [h[:2] for h in both]
    assert {lib for _, lib, _ in hits(served, OWN, include_shared=False)} == {None}
    shared_only = {"field": "origin", "op": "eq", "value": "shared"}
    assert {lib for _, lib, _ in hits(served, OWN, filter=shared_only)} == {LIBRARY.key}
    agent_wide = hits(served, "/v1/agents/ops-bot/search", max_results=10)
    assert {p for p, _, _ in agent_wide} == {p for p, _, _ in both}
    # Not granted: never the library, and asking for it is a 400 naming the field.
    for path in ("/v1/agents/support-bot/contexts/faq/search", "/v1/agents/support-bot/search"):
        assert [p for p, _, _ in hits(served, path, max_results=10)] == ["refunds.md"]
        status, answer = post(served, path, {"query": "gateway", "include_shared": True})
        assert (status, answer["field"]) == (400, "include_shared")
    # The scope set is the server's: a body cannot name one.
    for body in (
        {"shared_libraries": ["_shared/secret"]},
        {"shared_libraries": [{"agent": "support-bot", "context": "faq"}]},
    ):
        status, answer = post(served, OWN, {"query": "gateway", **body})
        assert (status, answer["field"]) == (400, "shared_libraries")
    client = KnowledgeClient(served.url, retries=0)
    with pytest.raises(ValidationError) as refused:
        client.search(OPS, SearchQuery("gateway", shared_libraries=(LIBRARY,)))
    assert refused.value.field == "shared_libraries"


def test_the_tool_over_the_client_follows_the_servers_grant(served: LocalServer) -> None:
    tool = KnowledgeSearchTool()
    client = KnowledgeClient(served.url, retries=0)
    mine = ToolContext(store=client, scope=OPS, mode=SearchMode.KEYWORD)
    granted = tool.run({"query": "incident commander gateway"}, mine)
    assert re.search(
        r"\] incident\.md \(score: [01]\.\d\d, chunk: 0, origin: shared, library: playbooks\)",
        granted.content,
    ), granted.content
    alone = tool.run({"query": "incident commander gateway", "include_shared": False}, mine)
    assert "library:" not in alone.content
    theirs = ToolContext(store=client, scope=SUPPORT, mode=SearchMode.KEYWORD)
    refused = tool.run({"query": "gateway", "include_shared": True}, theirs)
    assert refused.is_error
    assert refused.content.startswith("Invalid parameter: include_shared:")


def test_the_context_route_covers_the_library_only_when_granted(served: LocalServer) -> None:
    """The prompt block (``POST .../context``, one context and agent-wide) is a search: a
    granted agent's block quotes its library, cited as such; an agent without the grant
    never gets a passage of it, whatever it sends."""

    def block(path: str, **body: Any) -> tuple[int, dict[str, Any]]:
        # min_score 0: every candidate, whatever its score (the grant alone decides).
        request = {"query": "incident commander gateway", "mode": "keyword", "min_score": 0.0}
        return post(served, path, {**request, **body})

    for path in ("/v1/agents/ops-bot/contexts/runbooks/context", "/v1/agents/ops-bot/context"):
        status, answer = block(path, max_tokens=2000)
        assert status == 200, answer
        cited = [p["citation"] for p in answer["passages"]]
        assert any("incident.md" in c and "library: playbooks" in c for c in cited), cited
        assert "secret" not in answer["context"]  # the library not granted
        assert "s.md" not in {p["document_path"] for p in answer["passages"]}
        status, alone = block(path, include_shared=False, max_tokens=2000)
        assert status == 200, alone
        assert not any("library:" in p["citation"] for p in alone["passages"]), alone
    for path in ("/v1/agents/support-bot/contexts/faq/context", "/v1/agents/support-bot/context"):
        status, answer = block(path, max_tokens=2000)
        assert status == 200, answer
        assert [p["document_path"] for p in answer["passages"]] == ["refunds.md"]
        status, refused = block(path, include_shared=True)
        assert (status, refused["field"]) == (400, "include_shared")
        status, refused = block(path, shared_libraries=["_shared/playbooks"])
        assert (status, refused["field"]) == (400, "shared_libraries")


def test_a_grant_adds_no_library_document_to_the_agents_listing(served: LocalServer) -> None:
    """The grant widens searches only: the documents routes of a granted agent list its own
    documents, page by page, and a cursor of the library's listing is refused there."""
    client = KnowledgeClient(served.url, retries=0)
    wait_until(lambda: client.get_document(LIBRARY, "incident.md") is not None, "indexed")
    listed: list[str] = []
    cursor: str | None = None
    while True:
        page = client.list_documents(OPS, limit=1, cursor=cursor)
        listed += [d.path for d in page.documents]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert sorted(listed) == ["alerts.md", "deploy.md"]
    assert client.get_document(OPS, "incident.md") is None
    theirs = client.list_documents(LIBRARY, limit=1)
    assert theirs.next_cursor is not None
    with pytest.raises(ValidationError) as refused:
        client.list_documents(OPS, limit=1, cursor=theirs.next_cursor)
    assert refused.value.field == "cursor"
