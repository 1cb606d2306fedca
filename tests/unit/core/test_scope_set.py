"""The scope set of a search (``knowledge.core.scope_set``) and what each store builds of it:
pure functions, tested as data."""

from __future__ import annotations

import pytest

from knowledge.core.errors import ValidationError
from knowledge.core.model import SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.scope_set import (
    MAX_SHARED_LIBRARIES,
    SHARED_CONTEXT_KEY,
    check_libraries,
    hit_scope,
    library_hit,
    marked,
    searched_scopes,
    statistics_owner,
)
from knowledge.stores.embedded.candidates import pairs_condition, scope_condition
from knowledge.stores.opensearch.read.queries import vector_search_body
from knowledge.stores.opensearch.request_filters import searched_scope_filters

OPS = KnowledgeScope("ops-bot", "runbooks")
PLAYBOOKS = KnowledgeScope("_shared", "playbooks")
POLICIES = KnowledgeScope("_shared", "policies")


def test_libraries_are_shared_scopes_only_distinct_and_bounded() -> None:
    assert check_libraries([PLAYBOOKS, POLICIES, PLAYBOOKS]) == (PLAYBOOKS, POLICIES)
    assert SearchQuery("x", shared_libraries=[PLAYBOOKS]).shared_libraries == (PLAYBOOKS,)
    assert SearchQuery("x", shared_libraries=[]).shared_libraries == ()
    for bad in (
        PLAYBOOKS,
        "_shared/playbooks",
        ["_shared/playbooks"],
        [KnowledgeScope("support-bot", "faq")],
        [KnowledgeScope("ops-bot", "_shared")],
        [KnowledgeScope("_shared", f"c{n}") for n in range(MAX_SHARED_LIBRARIES + 1)],
    ):
        with pytest.raises(ValidationError) as refused:
            SearchQuery("x", shared_libraries=bad)  # type: ignore[arg-type]
        assert refused.value.field == "shared_libraries"


def test_searched_scopes_put_the_caller_first() -> None:
    assert searched_scopes(OPS, False, ()) == [("ops-bot", "runbooks")]
    assert searched_scopes(OPS, True, (PLAYBOOKS, POLICIES)) == [
        ("ops-bot", None),
        ("_shared", "playbooks"),
        ("_shared", "policies"),
    ]
    # The caller is the library owner itself: nothing is searched twice.
    assert searched_scopes(PLAYBOOKS, False, (PLAYBOOKS, POLICIES)) == [
        ("_shared", "playbooks"),
        ("_shared", "policies"),
    ]
    assert searched_scopes(PLAYBOOKS, True, (PLAYBOOKS,)) == [("_shared", None)]


def test_a_hit_is_marked_only_when_it_came_from_a_library() -> None:
    libraries = (PLAYBOOKS,)
    assert library_hit(OPS, libraries, "_shared", "playbooks") == PLAYBOOKS
    assert library_hit(OPS, libraries, "_shared", "policies") is None  # not in the set
    assert library_hit(OPS, libraries, "ops-bot", "playbooks") is None  # the caller's own
    assert library_hit(PLAYBOOKS, libraries, "_shared", "playbooks") is None
    assert marked({"a": 1}, PLAYBOOKS) == {"a": 1, SHARED_CONTEXT_KEY: "_shared/playbooks"}
    assert marked({"a": 1}, None) == {"a": 1}


@pytest.mark.parametrize(
    ("pairs", "sql", "params"),
    [
        ([("a", "x")], "c.agent = ? AND c.context = ?", ["a", "x"]),
        ([("a", None)], "c.agent = ?", ["a"]),
        (
            [("a", "x"), ("_shared", "p"), ("_shared", "q")],
            "((c.agent = ? AND c.context = ?) OR (c.agent = ? AND c.context IN (?, ?)))",
            ["a", "x", "_shared", "p", "q"],
        ),
        (
            [("a", None), ("_shared", "p")],
            "((c.agent = ?) OR (c.agent = ? AND c.context = ?))",
            ["a", "_shared", "p"],
        ),
    ],
)
def test_the_embedded_scope_condition(
    pairs: list[tuple[str, str | None]], sql: str, params: list[str]
) -> None:
    assert pairs_condition(pairs, "c.") == (sql, params)


def test_the_embedded_condition_of_a_query_covers_its_libraries() -> None:
    query = SearchQuery("x", shared_libraries=(PLAYBOOKS,))
    assert scope_condition(OPS, query) == (
        "((agent = ? AND context = ?) OR (agent = ? AND context = ?))",
        ["ops-bot", "runbooks", "_shared", "playbooks"],
    )


def test_the_opensearch_scope_filter_is_one_should_of_scope_terms() -> None:
    assert searched_scope_filters(OPS) == [
        {"term": {"agent": "ops-bot"}},
        {"term": {"context": "runbooks"}},
    ]
    expected = [
        {
            "bool": {
                "should": [
                    {"bool": {"filter": [{"term": {"agent": "ops-bot"}}]}},
                    {
                        "bool": {
                            "filter": [
                                {"term": {"agent": "_shared"}},
                                {"terms": {"context": ["playbooks", "policies"]}},
                            ]
                        }
                    },
                ],
                "minimum_should_match": 1,
            }
        }
    ]
    filters = searched_scope_filters(OPS, cross_context=True, libraries=(PLAYBOOKS, POLICIES))
    assert filters == expected
    # Inside the knn clause too: the engine filters while it walks the graph.
    body = vector_search_body([1.0, 0.0], filters, 10)
    assert body["query"]["knn"]["embedding"]["filter"] == {"bool": {"filter": expected}}


def test_each_library_owns_its_statistics_and_no_agent_shares_them() -> None:
    assert statistics_owner("ops-bot", "runbooks") == statistics_owner("ops-bot", "x") == "ops-bot"
    assert statistics_owner("_shared", "playbooks") == "_shared/playbooks"
    assert statistics_owner("_shared", "policies") != statistics_owner("_shared", "playbooks")
    # An agent name has no "/": no agent's statistics are ever a library's.
    with pytest.raises(ValidationError):
        KnowledgeScope("_shared/playbooks", "x")


NOTES = KnowledgeScope("ops-bot", "notes")


@pytest.mark.parametrize(
    ("cross_context", "metadata", "expected"),
    [
        # One context: that context, whatever the key says.
        (False, {"source_key": "x.md"}, OPS),
        (False, {}, OPS),
        # Across contexts: the context of the bucket-style key.
        (True, {"source_key": "ops-bot/notes/x.md"}, NOTES),
        (True, {"source_key": "ops-bot/notes/sub/x.md"}, None),  # another document's key
        (True, {"source_key": "x.md"}, None),  # indexed before keys named their scope
        (True, {}, None),
        (True, {"source_key": "hr-bot/payroll/x.md"}, None),  # never another agent
        (True, {"source_key": "ops-bot/a/b/x.md"}, None),
        (True, {"source_key": "ops-bot/../x.md"}, None),  # not a scope
        # A library hit names its library, in either kind of search.
        (False, {SHARED_CONTEXT_KEY: "_shared/playbooks", "source_key": "x.md"}, PLAYBOOKS),
        (True, {SHARED_CONTEXT_KEY: "_shared/playbooks"}, PLAYBOOKS),
    ],
)
def test_hit_scope(
    cross_context: bool, metadata: dict[str, str], expected: KnowledgeScope | None
) -> None:
    assert hit_scope(OPS, cross_context, "x.md", metadata) == expected
