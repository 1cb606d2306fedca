"""The ``KnowledgeSearch`` tool's ranking controls (knowledge.agent_tools.tool_controls): what a
model may pass (group_by, origin_weights, lesson_weight, explain), checked as the HTTP API
checks them; what stays the host's (the scope, the default weights, the extra lessons)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from knowledge.agent_tools.tool import KnowledgeSearchTool, ToolContext
from knowledge.core.model import SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.ingest.pipeline import upsert_document
from knowledge.ranking import explain
from knowledge.ranking.origin_weights import RankWeights
from knowledge.stores.memory import MemoryKnowledgeStore

SCOPE = KnowledgeScope("ops-bot", "runbooks")
OWN = {
    "disk.md": ("disk full: free space on the volume", {}),
    "note.md": ("a manual note on the disk being full", {"origin": "manual"}),
    "lesson.md": ("lesson: a full disk stops the queue", {"kind": "lesson"}),
    "other.md": ("disk disk disk quota", {}),
}
NEUTRAL_HOST = RankWeights(lesson=1.0, extra_lessons=0)


@pytest.fixture
def store() -> Iterator[MemoryKnowledgeStore]:
    store = MemoryKnowledgeStore()
    for path, (text, metadata) in OWN.items():
        data = text.encode()
        upsert_document(
            store, SCOPE, SourceDocument(path, len(data), lambda d=data: d, metadata=metadata)
        )
    other = b"disk full on another agent"
    upsert_document(
        store, KnowledgeScope("hr-bot", "x"), SourceDocument("x.md", len(other), lambda: other)
    )
    yield store
    store.close()


def run(store: Any, weights: RankWeights | None = NEUTRAL_HOST, **arguments: Any) -> Any:
    context = ToolContext(store=store, scope=SCOPE, weights=weights)
    return KnowledgeSearchTool().run({"query": "disk full", **arguments}, context)


def first_path(result: Any) -> str:
    header = next(line for line in result.content.splitlines() if line.startswith("[1] "))
    return header.split()[1]


def test_a_models_origin_weight_moves_that_origins_results(store: MemoryKnowledgeStore) -> None:
    plain = run(store)
    assert first_path(plain) != "note.md"
    lifted = run(store, origin_weights={"manual": 5})
    assert not lifted.is_error, lifted.content
    assert first_path(lifted) == "note.md"
    lowered = run(store, weights=RankWeights({"manual": 5.0}), origin_weights={"manual": 0.1})
    assert first_path(lowered) != "note.md"  # the model's weight over the host's
    assert first_path(run(store, weights=RankWeights({"manual": 5.0}))) == "note.md"


def test_a_models_lesson_weight_lifts_the_lesson_card(store: MemoryKnowledgeStore) -> None:
    assert first_path(run(store)) != "lesson.md"
    assert first_path(run(store, lesson_weight=10)) == "lesson.md"


def test_group_by_document_lists_each_document_once(store: MemoryKnowledgeStore) -> None:
    result = run(store, group_by="document", max_results=10)
    headers = [line.split()[1] for line in result.content.splitlines() if line[:1] == "["]
    assert sorted(headers) == sorted(OWN)


def test_explain_appends_the_trace_and_hands_it_to_the_host(store: MemoryKnowledgeStore) -> None:
    result = run(store, explain=True, origin_weights={"manual": 2}, max_tokens=60)
    assert not result.is_error, result.content
    answer, _, trace_text = result.content.partition("\n\n--- explain ---\n")
    assert trace_text.startswith("search 0: memory ops-bot/runbooks (")
    assert "  terms: disk, full" in trace_text
    trace = result.trace
    assert trace is not None
    assert trace["searches"][0]["weights"]["origins"]["manual"] == 2.0
    weights = NEUTRAL_HOST.override({"manual": 2.0})
    searched = store.search(SCOPE, SearchQuery("disk full", weights=weights))
    assert len(trace["results"]) == len(searched)
    for index, hit in enumerate(searched):
        assert explain.recompute(hit.to_dict(), trace, index) == pytest.approx(
            hit.rank_score, abs=2e-6
        )
        assert explain.recompute_relevance(trace, index) == pytest.approx(hit.score, abs=2e-6)
    budget = trace["budget"]
    assert budget["max_tokens"] == 60
    assert budget["used_tokens"] <= 60
    assert budget["dropped"]  # 60 tokens hold a passage or two, the trace says which not
    assert "dropped to stay within max_tokens=60" in answer
    assert "--- explain ---" not in run(store).content
    assert run(store).trace is None


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"origin_weights": {"manual": 50}}, "origin_weights.manual: must be between 0.1 and 10.0"),
        ({"origin_weights": {"vault": 2}}, "origin_weights: 'vault' is not an origin"),
        ({"origin_weights": "manual=2"}, "origin_weights: must be an object of origin: weight"),
        ({"lesson_weight": 0}, "lesson_weight: must be between 0.1 and 10.0, got 0"),
        ({"lesson_weight": True}, "lesson_weight: must be a number between 0.1 and 10.0"),
        ({"group_by": "page"}, "group_by: 'page' is not one of: document"),
        ({"explain": "yes"}, "explain: must be true or false"),
        # The host's, never the model's: the scope, and the extras past max_results.
        ({"extra_lessons": 5}, "extra_lessons: is not a known property"),
        ({"agent": "hr-bot"}, "agent: is not a known property"),
        ({"context": "x"}, "context: is not a known property"),
        ({"cross_context": True}, "cross_context: is not a known property"),
    ],
)
def test_a_bad_control_is_an_invalid_parameter_and_nothing_is_searched(
    arguments: dict[str, Any], message: str
) -> None:
    class Refusing:
        def search(self, scope: KnowledgeScope, query: Any) -> list[Any]:
            raise AssertionError("searched")

    result = run(Refusing(), **arguments)
    assert result.is_error
    assert result.content.startswith(f"Invalid parameter: {message}"), result.content


def test_no_weight_reaches_another_agent(store: MemoryKnowledgeStore) -> None:
    result = run(store, origin_weights={"upload": 10, "shared": 10}, lesson_weight=10)
    assert "x.md" not in result.content
    assert result.content.startswith('Found 4 results for "disk full"')
