"""The shared library on ``kb serve`` (embedded store) over real HTTP: granted agents'
searches include ``_shared/<context>`` marked origin ``shared``; an agent without the
grant never sees it, whatever it sends; filters and paging cover the merged list."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from knowledge.agent_tools.shared import SharedGrants
from knowledge.config import open_store
from knowledge.core.errors import ConfigurationError, ValidationError
from knowledge.local.server import LocalServer

pytestmark = pytest.mark.integration

PLAYBOOK = "# Incident playbook\n\n## Escalate\n\nPage the incident commander, then rollback.\n"


def post(base: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    tmp = tmp_path_factory.mktemp("shared")
    root = tmp / "bucket"
    for scope, name, text in (
        ("_shared/playbooks", "incident.md", PLAYBOOK),
        ("_shared/playbooks", "rollback.md", "# Rollback playbook\n\nrollback with helm\n"),
        ("_shared/secret", "x.md", "# Not granted\n\nrollback never granted\n"),
        ("ops-bot/runbooks", "deploy.md", "# Deploy\n\nrollback the deploy with helm\n"),
        ("ops-bot/other", "notes.md", "# Notes\n\nrollback notes\n"),
        ("support-bot/faq", "refunds.md", "# Refunds\n\nrollback a charge\n"),
    ):
        (root / scope).mkdir(parents=True, exist_ok=True)
        (root / scope / name).write_text(text, "utf-8")
    # A sidecar cannot make a library document anything but shared.
    (root / "_shared/playbooks/rollback.md.metadata.json").write_text(
        '{"metadataAttributes": {"origin": "manual"}}', "utf-8"
    )
    grants = SharedGrants.parse("ops-bot=playbooks")
    with closing(
        open_store(db_path=tmp / "k.db", embedder_name="hashing", environ={}, create=True)
    ) as store:
        local = LocalServer(root, store, port=0, poll_interval=5.0, shared_grants=grants)
        local.start()
        try:
            yield local
        finally:
            local.stop()


def hits(server: LocalServer, path: str, **body: Any) -> list[tuple[str, str | None]]:
    status, answer = post(server.url, path, {"query": "rollback", "mode": "keyword", **body})
    assert status == 200, answer
    return [(r["document_path"], r["metadata"].get("shared_library")) for r in answer["results"]]


OWN = "/v1/agents/ops-bot/contexts/runbooks/search"
AGENT = "/v1/agents/ops-bot/search"
OTHER = "/v1/agents/support-bot/contexts/faq/search"
OTHER_AGENT = "/v1/agents/support-bot/search"


def test_a_granted_agent_searches_its_libraries_in_one_call(server: LocalServer) -> None:
    found = hits(server, OWN, max_results=10)
    assert ("deploy.md", None) in found
    assert ("incident.md", "_shared/playbooks") in found
    assert ("rollback.md", "_shared/playbooks") in found
    assert all(lib != "_shared/secret" for _, lib in found)  # only the granted library
    assert ("notes.md", None) not in found  # the other context stays out
    status, answer = post(server.url, OWN, {"query": "incident commander", "mode": "keyword"})
    assert status == 200
    top = answer["results"][0]
    assert (top["document_path"], top["origin"]) == ("incident.md", "shared")
    agent_wide = hits(server, AGENT, max_results=10)
    assert ("notes.md", None) in agent_wide
    assert ("incident.md", "_shared/playbooks") in agent_wide
    assert all(lib is None for _, lib in hits(server, OWN, include_shared=False, max_results=10))


def test_an_agent_without_the_grant_never_sees_a_library(server: LocalServer) -> None:
    for path in (OTHER, OTHER_AGENT):
        assert all(lib is None for _, lib in hits(server, path, max_results=10))
        status, answer = post(server.url, path, {"query": "rollback", "include_shared": True})
        assert (status, answer["field"]) == (400, "include_shared")
        shared_only = {"field": "origin", "op": "eq", "value": "shared"}
        assert hits(server, path, filter=shared_only) == []
    status, answer = post(server.url, OWN, {"query": "rollback", "include_shared": "yes"})
    assert (status, answer["field"]) == (400, "include_shared")


def test_filters_and_paging_cover_the_merged_list(server: LocalServer) -> None:
    shared_only = {"field": "origin", "op": "eq", "value": "shared"}
    assert sorted(hits(server, OWN, filter=shared_only)) == [  # the sidecar's manual too
        ("incident.md", "_shared/playbooks"),
        ("rollback.md", "_shared/playbooks"),
    ]
    not_shared = {"not": shared_only}
    assert hits(server, OWN, filter=not_shared) == [("deploy.md", None)]
    everything = hits(server, OWN, max_results=3)
    pages = hits(server, OWN, max_results=1) + hits(server, OWN, max_results=2, offset=1)
    assert pages == everything
    assert len(everything) == 3


def test_grants_are_checked_when_configured() -> None:
    assert SharedGrants.parse("a=x,y; b=x a=z").grants == {"a": ("x", "y", "z"), "b": ("x",)}
    for bad in ("a", "_shared=x", "a=", "a=../x", "bad agent=x"):
        with pytest.raises(ConfigurationError):
            SharedGrants.parse(bad)


def test_the_library_is_never_writable(server: LocalServer, tmp_path: Path) -> None:
    # No writes on this server at all; with writes on, _shared is a 403 (test_writes_local).
    request = urllib.request.Request(
        server.url + "/v1/agents/_shared/contexts/playbooks/documents/x.md",
        data=b"# x",
        method="PUT",
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    refused.value.close()
    assert refused.value.code == 403


def test_the_client_can_leave_the_library_out_and_sees_it_marked(server: LocalServer) -> None:
    from knowledge.client import KnowledgeClient
    from knowledge.core.model import SearchMode, SearchQuery
    from knowledge.core.scope import KnowledgeScope

    client = KnowledgeClient(server.url, retries=0)
    scope = KnowledgeScope("ops-bot", "runbooks")
    query = SearchQuery("rollback", mode=SearchMode.KEYWORD, max_results=10)
    default = client.search(scope, query)
    assert {(h.document_path, h.origin) for h in default} >= {
        ("deploy.md", "upload"),
        ("incident.md", "shared"),
    }
    without = client.search(scope, query, include_shared=False)
    assert [h.document_path for h in without] == ["deploy.md"]
    with pytest.raises(ValidationError) as caught:
        client.search(KnowledgeScope("support-bot", "faq"), query, include_shared=True)
    assert caught.value.field == "include_shared"
