"""The read routes of what an agent holds: a document's chunks, the agent's contexts and
its granted shared libraries (``KnowledgeApi.chunks``/``contexts``/``shared``), routed
as both front ends route them, over a real (memory) store."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import pytest

from knowledge.agent_tools.shared import SharedGrants
from knowledge.core.identity import document_id
from knowledge.core.model import DocumentChunk, IndexState, IndexStatus
from knowledge.core.scope import KnowledgeScope
from knowledge.service.api import KnowledgeApi
from knowledge.stores.memory import MemoryKnowledgeStore
from knowledge.stores.protocol import DocumentHeader, EmbeddedChunk

OPS = KnowledgeScope("ops-bot", "runbooks")
WHEN = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)
TEXTS = [f"step {i}: restart the checkout service" for i in range(5)]


def put(store: MemoryKnowledgeStore, scope: KnowledgeScope, path: str, texts: list[str]) -> None:
    header = DocumentHeader(path, document_id(scope, path), f"h-{path}", WHEN)
    chunks = [
        EmbeddedChunk(DocumentChunk(path, i, t, {"title": "Restart", "heading_path": ["Restart"]}))
        for i, t in enumerate(texts)
    ]
    with store.write_session(scope) as session:
        session.put_document(header, chunks)


@pytest.fixture
def store() -> MemoryKnowledgeStore:
    made = MemoryKnowledgeStore()
    put(made, OPS, "guides/restart.md", TEXTS)
    put(made, KnowledgeScope("ops-bot", "notes"), "n.md", ["a note"])
    put(made, KnowledgeScope("support-bot", "runbooks"), "secret.md", ["support only"])
    put(made, KnowledgeScope("_shared", "playbooks"), "p.md", ["a playbook", "another"])
    return made


@pytest.fixture
def api(store: MemoryKnowledgeStore) -> KnowledgeApi:
    return KnowledgeApi(store, shared=SharedGrants.parse("ops-bot=playbooks,policies"))


def get(api: KnowledgeApi, path: str) -> tuple[int, dict[str, Any]]:
    response = api.handle("GET", path)
    return response.status, json.loads(response.to_json())


CHUNKS = "/v1/agents/ops-bot/contexts/runbooks/documents/guides%2Frestart.md/chunks"


def test_a_documents_chunks_page_in_order_with_their_headings(api: KnowledgeApi) -> None:
    status, first = get(api, CHUNKS + "?limit=2")
    assert status == 200
    assert (first["agent"], first["context"], first["path"]) == (
        "ops-bot",
        "runbooks",
        "guides/restart.md",
    )
    assert [c["chunk_index"] for c in first["chunks"]] == [0, 1]
    assert first["chunks"][0]["heading_path"] == ["Restart"]
    assert first["chunks"][0]["title"] == "Restart"
    seen = [c["content"] for c in first["chunks"]]
    cursor = first["next_cursor"]
    while cursor:
        status, page = get(api, f"{CHUNKS}?limit=2&cursor={quote(cursor)}")
        assert status == 200
        seen += [c["content"] for c in page["chunks"]]
        cursor = page["next_cursor"]
    assert seen == TEXTS
    assert get(api, CHUNKS)[1]["next_cursor"] is None  # the default page holds all five


def test_a_path_of_another_scope_is_a_404_like_a_missing_one(api: KnowledgeApi) -> None:
    other = get(api, "/v1/agents/ops-bot/contexts/notes/documents/guides%2Frestart.md/chunks")
    missing = get(api, "/v1/agents/ops-bot/contexts/notes/documents/nothing.md/chunks")
    across = get(api, "/v1/agents/ops-bot/contexts/runbooks/documents/secret.md/chunks")
    assert other == (
        404,
        {"error": "no indexed document 'guides/restart.md' in ops-bot/notes", "field": None},
    )
    assert missing == (
        404,
        {"error": "no indexed document 'nothing.md' in ops-bot/notes", "field": None},
    )
    assert across == (
        404,
        {"error": "no indexed document 'secret.md' in ops-bot/runbooks", "field": None},
    )


@pytest.mark.parametrize(
    ("suffix", "field"),
    [
        ("/documents/a%2F..%2Fb.md/chunks", "path"),
        ("/documents/%FF.md/chunks", "path"),
        ("/documents/guides%2Frestart.md/chunks?limit=0", "limit"),
        ("/documents/guides%2Frestart.md/chunks?limit=201", "limit"),
        ("/documents/guides%2Frestart.md/chunks?limit=ten", "limit"),
        ("/documents/guides%2Frestart.md/chunks?cursor=", "cursor"),
        ("/documents/guides%2Frestart.md/chunks?cursor=not-a-cursor", "cursor"),
        ("/documents/guides%2Frestart.md/chunks?limit=1&limit=2", "limit"),
        ("/documents/guides%2Frestart.md/chunks?offset=2", "offset"),
    ],
)
def test_bad_input_to_the_chunks_route_is_a_400_naming_the_field(
    api: KnowledgeApi, suffix: str, field: str
) -> None:
    status, body = get(api, "/v1/agents/ops-bot/contexts/runbooks" + suffix)
    assert status == 400, body
    assert body["field"] == field


def test_a_cursor_of_another_document_is_a_400(
    api: KnowledgeApi, store: MemoryKnowledgeStore
) -> None:
    put(store, OPS, "other.md", TEXTS)
    cursor = get(api, CHUNKS + "?limit=1")[1]["next_cursor"]
    path = "/v1/agents/ops-bot/contexts/runbooks/documents/other.md/chunks?cursor="
    status, body = get(api, path + quote(cursor))
    assert (status, body["field"]) == (400, "cursor")


def test_the_chunks_route_takes_no_write(api: KnowledgeApi) -> None:
    response = api.handle("PUT", CHUNKS, b"x")
    assert (response.status, response.headers["Allow"]) == (405, "GET")


def test_the_agents_contexts_with_their_counts_and_nothing_of_another_agent(
    api: KnowledgeApi,
) -> None:
    status, body = get(api, "/v1/agents/ops-bot/contexts")
    assert status == 200
    assert body["agent"] == "ops-bot"
    assert [(c["context"], c["document_count"], c["chunk_count"]) for c in body["contexts"]] == [
        ("notes", 1, 1),
        ("runbooks", 1, 5),
    ]
    assert {c["state"] for c in body["contexts"]} == {"READY"}
    assert get(api, "/v1/agents/nobody/contexts") == (200, {"agent": "nobody", "contexts": []})
    status, body = get(api, "/v1/agents/%6Fps-bot/contexts")
    assert (status, body["field"]) == (400, "agent")


def test_the_contexts_state_is_the_status_routes(store: MemoryKnowledgeStore) -> None:
    """``kb serve``'s status hook (the start-up index) decides the state, as on status."""

    def indexing(scope: KnowledgeScope, status: IndexStatus) -> IndexStatus:
        return status if scope.context == "notes" else IndexStatus(0, 0, None, IndexState.INDEXING)

    api = KnowledgeApi(store, status=indexing)
    body = get(api, "/v1/agents/ops-bot/contexts")[1]
    assert {c["context"]: c["state"] for c in body["contexts"]} == {
        "notes": "READY",
        "runbooks": "INDEXING",
    }


def test_the_granted_libraries_read_only_in_the_grants_order(api: KnowledgeApi) -> None:
    status, body = get(api, "/v1/agents/ops-bot/shared")
    assert status == 200
    libraries = body["libraries"]
    assert [(lib["scope"], lib["state"], lib["chunk_count"]) for lib in libraries] == [
        ("_shared/playbooks", "READY", 2),
        ("_shared/policies", "EMPTY", 0),  # granted, not indexed (yet)
    ]
    assert get(api, "/v1/agents/support-bot/shared") == (
        200,
        {"agent": "support-bot", "libraries": []},
    )
    assert api.handle("POST", "/v1/agents/ops-bot/shared", b"{}").status == 405
