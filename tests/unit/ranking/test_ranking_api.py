"""Origin weights, lesson cards and ``explain`` through the HTTP API's handling (issue 29):
the body fields and their errors, the deployment's defaults (environment, constructor),
the shared library's merge, and the trace recomputing every score."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from knowledge.agent_tools.shared import SharedGrants
from knowledge.core.errors import ConfigurationError
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.ingest.pipeline import upsert_document
from knowledge.ranking import explain
from knowledge.ranking.origin_weights import RankWeights, rank_weights_from_env
from knowledge.service.api import KnowledgeApi
from knowledge.stores.memory import MemoryKnowledgeStore

SCOPE = KnowledgeScope("ops-bot", "runbooks")
LIBRARY = KnowledgeScope("_shared", "playbooks")
SEARCH = "/v1/agents/ops-bot/contexts/runbooks/search"

OWN = {
    "disk.md": ("disk full: free space on the volume", {}),
    "note.md": ("a manual note on the disk being full", {"origin": "manual"}),
    "lesson.md": ("lesson: a full disk stops the queue", {"kind": "lesson"}),
    "other.md": ("disk disk disk quota", {}),
}


@pytest.fixture
def store() -> Iterator[MemoryKnowledgeStore]:
    store = MemoryKnowledgeStore()
    for path, (text, metadata) in OWN.items():
        data = text.encode()
        upsert_document(
            store, SCOPE, SourceDocument(path, len(data), lambda d=data: d, metadata=metadata)
        )
    library = b"disk full playbook: the shared answer on disk full volumes"
    upsert_document(store, LIBRARY, SourceDocument("playbook.md", len(library), lambda: library))
    yield store
    store.close()


def post(api: KnowledgeApi, **body: Any) -> tuple[int, dict[str, Any]]:
    # min_score 0: every candidate, the weak ones too (these tests are about the ranking).
    request = {"query": "disk full", "min_score": 0.0, **body}
    response = api.handle("POST", SEARCH, json.dumps(request))
    return response.status, response.body


def paths(body: dict[str, Any]) -> list[str]:
    return [r["document_path"] for r in body["results"]]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"origin_weights": {"vault": 1.0}}, "origin_weights"),
        ({"origin_weights": {"shared": 50}}, "origin_weights.shared"),
        ({"origin_weights": {"manual": "high"}}, "origin_weights.manual"),
        ({"origin_weights": [1, 2]}, "origin_weights"),
        ({"lesson_weight": 0}, "lesson_weight"),
        ({"lesson_weight": True}, "lesson_weight"),
        ({"explain": "yes"}, "explain"),
        ({"extra_lessons": 9}, "extra_lessons"),
        ({"extra_lessons": 1.5}, "extra_lessons"),
    ],
)
def test_a_bad_ranking_field_is_a_400_naming_it(
    store: MemoryKnowledgeStore, body: dict[str, Any], field: str
) -> None:
    status, answer = post(KnowledgeApi(store, weights=RankWeights()), **body)
    assert status == 400
    assert answer["field"] == field


def test_the_deployment_default_applies_and_a_request_overrides_it(
    store: MemoryKnowledgeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, plain = post(KnowledgeApi(store, weights=RankWeights(lesson=1.0, extra_lessons=0)))
    before = {r["document_path"]: r["rank_score"] for r in plain["results"]}
    monkeypatch.setenv("KB_ORIGIN_WEIGHTS", "manual=0.5")
    monkeypatch.setenv("KB_LESSON_WEIGHT", "1.0")
    monkeypatch.setenv("KB_LESSON_EXTRA", "0")
    api = KnowledgeApi(store)  # the defaults from the environment
    _, halved = post(api)
    after = {r["document_path"]: r["rank_score"] for r in halved["results"]}
    assert after["note.md"] == pytest.approx(before["note.md"] * 0.5, abs=1e-6)
    assert {p: s for p, s in after.items() if p != "note.md"} == {
        p: s for p, s in before.items() if p != "note.md"
    }
    # A weight moves the ranking, not the absolute relevance.
    absolute = {r["document_path"]: r["score"] for r in plain["results"]}
    assert {r["document_path"]: r["score"] for r in halved["results"]} == absolute
    _, overridden = post(api, origin_weights={"manual": 1.0})
    assert {r["document_path"]: r["rank_score"] for r in overridden["results"]} == before


def test_a_bad_environment_weight_names_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="KB_ORIGIN_WEIGHTS"):
        rank_weights_from_env({"KB_ORIGIN_WEIGHTS": "vault=2"})
    with pytest.raises(ConfigurationError, match="KB_LESSON_WEIGHT"):
        rank_weights_from_env({"KB_LESSON_WEIGHT": "heavy"})
    weights = rank_weights_from_env({"KB_ORIGIN_WEIGHTS": " manual = 1.2 ; shared=0.8"})
    assert dict(weights.origins) == {"upload": 1.0, "repo": 1.0, "manual": 1.2, "shared": 0.8}


def test_the_shared_weight_ranks_the_library_below_the_teams_own(
    store: MemoryKnowledgeStore,
) -> None:
    grants = SharedGrants.parse("ops-bot=playbooks")
    api = KnowledgeApi(store, shared=grants, weights=RankWeights(lesson=1.0, extra_lessons=0))
    _, plain = post(api, max_results=10)
    library = next(r for r in plain["results"] if r["document_path"] == "playbook.md")
    assert library["rank_score"] == 1.0  # the best of the one query (scope and library)
    _, weighted = post(api, max_results=10, origin_weights={"shared": 0.3})
    scores = {r["document_path"]: r["rank_score"] for r in weighted["results"]}
    assert scores["playbook.md"] == pytest.approx(0.3)
    above = [p for p, s in scores.items() if s > 0.3]
    assert above
    assert paths(weighted)[: len(above)] == above
    _, own_down = post(api, max_results=10, origin_weights={"upload": 0.2, "manual": 0.2})
    assert paths(own_down)[0] == "playbook.md"
    assert all(r["rank_score"] <= 0.2 + 1e-9 for r in own_down["results"][1:])


def test_a_lesson_past_the_page_is_appended_and_marked(store: MemoryKnowledgeStore) -> None:
    api = KnowledgeApi(store, weights=RankWeights(lesson=1.0, extra_lessons=1))
    _, full = post(api, max_results=10)
    rank = paths(full).index("lesson.md")
    assert rank >= 1
    _, page = post(api, max_results=1)
    assert paths(page) == [paths(full)[0], "lesson.md"]
    assert page["results"][1]["extra"] is True
    _, off = post(api, max_results=1, extra_lessons=0)  # a request turns them off
    assert paths(off) == [paths(full)[0]]
    # Through the shared library's merge too: its page keeps one extra lesson.
    shared = KnowledgeApi(
        store,
        shared=SharedGrants.parse("ops-bot=playbooks"),
        weights=RankWeights(lesson=1.0, extra_lessons=1),
    )
    _, merged = post(shared, max_results=1)
    assert [r.get("extra", False) for r in merged["results"]] == [False, True]
    assert merged["results"][1]["document_path"] == "lesson.md"


def test_explain_returns_a_trace_that_recomputes_every_score(
    store: MemoryKnowledgeStore,
) -> None:
    api = KnowledgeApi(store, shared=SharedGrants.parse("ops-bot=playbooks"))
    status, body = post(api, explain=True, origin_weights={"shared": 0.5}, max_results=10)
    assert status == 200
    trace = body["explain"]
    # The library is searched in the same store query: one search, weighted once.
    assert [s["scope"] for s in trace["searches"]] == ["ops-bot/runbooks"]
    assert trace["searches"][0]["libraries"] == ["_shared/playbooks"]
    assert trace["searches"][0]["query"]["terms"] == ["disk", "full"]
    assert trace["searches"][0]["weights"]["origins"]["shared"] == 0.5
    library = [r for r in body["results"] if r["metadata"].get("shared_library")]
    assert library
    assert all(trace["results"][body["results"].index(r)]["origin_weight"] == 0.5 for r in library)
    json.dumps(trace)  # plain JSON
    assert len(trace["results"]) == len(body["results"])
    for index, result in enumerate(body["results"]):
        assert explain.recompute(result, trace, index) == pytest.approx(
            result["rank_score"], abs=2e-6
        )
        assert explain.recompute_relevance(trace, index) == pytest.approx(result["score"], abs=2e-6)
    _, plain = post(api)
    assert "explain" not in plain


def test_the_context_route_ranks_with_the_weights_and_explains_them(
    store: MemoryKnowledgeStore,
) -> None:
    api = KnowledgeApi(store, weights=RankWeights({"manual": 5.0}, lesson=1.0, extra_lessons=0))
    route = "/v1/agents/ops-bot/contexts/runbooks/context"
    answer = api.handle("POST", route, json.dumps({"query": "disk full"}))
    assert answer.status == 200
    # The deployment's weights: the manual note first, as the search ranks it.
    assert answer.body["passages"][0]["document_path"] == "note.md"
    _, searched = post(api)
    assert paths(searched)[0] == "note.md"
    body = {"query": "disk full", "origin_weights": {"manual": 0.1}}
    answer = api.handle("POST", route, json.dumps(body))
    assert answer.body["passages"][0]["document_path"] != "note.md"
    explained = api.handle("POST", route, json.dumps({"query": "disk full", "explain": True}))
    assert explained.status == 200, explained.body
    trace = explained.body["explain"]
    assert trace["searches"][0]["weights"]["origins"]["manual"] == 5.0
    assert trace["budget"]["kept"] == len(explained.body["passages"])
    for index, chunk in enumerate(trace["chunks"]):
        assert explain.recompute(chunk, trace, index) == pytest.approx(
            chunk["rank_score"], abs=2e-6
        )
        assert explain.recompute_relevance(trace, index) == pytest.approx(chunk["score"], abs=2e-6)
    for agent_wide in ("/v1/agents/ops-bot/context", route):
        refused = api.handle("POST", agent_wide, json.dumps({"query": "disk", "explain": "yes"}))
        assert (refused.status, refused.body["field"]) == (400, "explain")


def test_a_page_of_documents_gets_no_lesson_extras(store: MemoryKnowledgeStore) -> None:
    api = KnowledgeApi(store, weights=RankWeights(lesson=1.0, extra_lessons=2))
    _, full = post(api, max_results=10, group_by="document")
    assert "lesson.md" in paths(full)[1:]
    _, page = post(api, max_results=1, group_by="document", explain=True)
    assert paths(page) == paths(full)[:1]
    assert "extra" not in page["results"][0]
    assert page["results"][0]["matching_chunks"] >= 1
    assert page["explain"]["searches"][0]["page"]["group_by"] == "document"
    assert page["explain"]["searches"][0]["page"]["extra_lessons"] == 0
