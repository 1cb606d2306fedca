"""The search filter language: validation with exact positions, limits, the tree, the
evaluator, and the two pure translations (OpenSearch bodies as data, SQL run on SQLite).

Expected values are literals written from docs/filters.md, not computed by the code."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from datetime import UTC, datetime
from typing import Any

import pytest

from knowledge.core.errors import ValidationError
from knowledge.core.filter_language import (
    MAX_FILTER_DEPTH,
    MAX_FILTER_NODES,
    MAX_FILTER_STRING_BYTES,
    MAX_IN_VALUES,
    AllOf,
    AnyOf,
    Comparison,
    Not,
    filter_to_json,
    matches_filter,
    parse_filter,
)
from knowledge.core.model import SearchQuery
from knowledge.service.api import KnowledgeApi, parse_search_request
from knowledge.stores.embedded.filter_sql import filter_sql, register_functions
from knowledge.stores.memory import MemoryKnowledgeStore
from knowledge.stores.opensearch.filter_query import filter_query


def cmp(field: str, op: str, value: Any) -> dict[str, Any]:
    return {"field": field, "op": op, "value": value}


# --- validation: every kind of bad filter names its exact position ------------------------

BAD: list[tuple[object, str, str]] = [
    ("team", "filter", "must be an object"),
    ([], "filter", "must be an object"),
    ({}, "filter.field", "is required"),
    ({"and": []}, "filter.and", "non-empty list"),
    ({"or": {"field": "a"}}, "filter.or", "non-empty list"),
    ({"and": [cmp("a", "eq", "x")], "or": []}, "filter", "must be alone"),
    ({"not": [cmp("a", "eq", "x")]}, "filter.not", "must be an object"),
    ({"field": "a", "op": "eq"}, "filter.value", "is required"),
    ({"field": "a", "value": 1}, "filter.op", "is required"),
    ({**cmp("a", "eq", 1), "extra": 1}, "filter.extra", "is not a filter key"),
    (cmp("", "eq", "x"), "filter.field", "non-empty string"),
    (cmp(7, "eq", "x"), "filter.field", "non-empty string"),
    (cmp('a"b', "eq", "x"), "filter.field", "metadata key"),
    (cmp("a b", "eq", "x"), "filter.field", "metadata key"),
    (cmp("a*", "eq", "x"), "filter.field", "metadata key"),
    (cmp("a", "like", "x"), "filter.op", "must be one of"),
    (cmp("a", "eq", None), "filter.value", "string, a number or a boolean"),
    (cmp("a", "eq", {"x": 1}), "filter.value", "string, a number or a boolean"),
    (cmp("a", "eq", ["x"]), "filter.value", "string, a number or a boolean"),
    (cmp("a", "in", "x"), "filter.value", "must be a non-empty list for 'in'"),
    (cmp("a", "nin", []), "filter.value", "must be a non-empty list for 'nin'"),
    (cmp("a", "in", ["x", None]), "filter.value[1]", "string, a number or a boolean"),
    (cmp("a", "in", ["x", 1]), "filter.value", "all strings or all numbers"),
    (cmp("a", "starts_with", 1), "filter.value", "must be a string for 'starts_with'"),
    (cmp("a", "contains", True), "filter.value", "must be a string for 'contains'"),
    (cmp("document_path", "gt", 3), "filter.value", "compares strings only"),
    (cmp("document_path", "in", [1, 2]), "filter.op", "compares strings only"),
    (cmp("indexed_at", "starts_with", "2024"), "filter.op", "'indexed_at' takes only"),
    (cmp("indexed_at", "gt", 2024), "filter.value", "ISO 8601"),
    (cmp("indexed_at", "gt", "yesterday"), "filter.value", "ISO 8601"),
    (
        {"and": [cmp("a", "eq", 1), cmp("b", "eq", 2), cmp("c", "in", "x")]},
        "filter.and[2].value",
        "must be a non-empty list for 'in'",
    ),
    (
        {"or": [cmp("a", "eq", 1), {"not": {"and": [cmp("b", "gt", float("inf"))]}}]},
        "filter.or[1].not.and[0].value",
        "finite number",
    ),
]


@pytest.mark.parametrize(("raw", "field", "message"), BAD)
def test_bad_filters_name_the_position(raw: object, field: str, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_filter(raw)
    assert info.value.field == field
    assert message in info.value.message


def _nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = cmp("a", "eq", "x")
    for _ in range(depth - 1):
        node = {"not": node}
    return node


def test_depth_limit() -> None:
    assert MAX_FILTER_DEPTH == 8
    parse_filter(_nested(8))
    with pytest.raises(ValidationError) as info:
        parse_filter(_nested(9))
    assert info.value.field == "filter" + ".not" * 8
    assert "deeper than 8" in info.value.message


def test_node_limit() -> None:
    assert MAX_FILTER_NODES == 100
    parse_filter({"and": [cmp("a", "eq", i) for i in range(99)]})  # 1 + 99 nodes
    with pytest.raises(ValidationError) as info:
        parse_filter({"and": [cmp("a", "eq", i) for i in range(100)]})
    assert info.value.field == "filter.and[99]"
    assert "more than 100" in info.value.message


def test_in_list_and_string_limits() -> None:
    assert (MAX_IN_VALUES, MAX_FILTER_STRING_BYTES) == (100, 1024)
    parse_filter(cmp("a", "in", list(range(100))))
    with pytest.raises(ValidationError) as info:
        parse_filter(cmp("a", "in", list(range(101))))
    assert (info.value.field, info.value.message) == (
        "filter.value",
        "must hold at most 100 values for 'in'",
    )
    parse_filter(cmp("a", "eq", "é" * 512))  # 1024 bytes
    with pytest.raises(ValidationError) as info:
        parse_filter(cmp("a", "eq", "é" * 512 + "x"))
    assert info.value.field == "filter.value"
    with pytest.raises(ValidationError) as info:
        parse_filter(cmp("a", "in", ["x", "y" * 1025]))
    assert info.value.field == "filter.value[1]"


def test_the_tree_is_immutable_and_normalised() -> None:
    tree = parse_filter(
        {
            "and": [
                cmp("team", "in", ["sre", "dev"]),
                {"not": cmp("draft", "eq", True)},
                {"or": [cmp("indexed_at", "gte", "2024-05-01T14:00:00+02:00")]},
            ]
        }
    )
    assert tree == AllOf(
        (
            Comparison("team", "in", ("sre", "dev")),
            Not(Comparison("draft", "eq", "true")),
            AnyOf((Comparison("indexed_at", "gte", datetime(2024, 5, 1, 12, tzinfo=UTC)),)),
        )
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        tree.children = ()  # type: ignore[misc]
    hash(tree)


# --- the evaluator ------------------------------------------------------------------------

META = {"team": "sre", "year": "2024", "n": 7, "tags": ["ops", "k8s"], "flag": True}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (cmp("team", "eq", "sre"), True),
        (cmp("year", "gt", 2023.5), True),  # "2024" spells a number
        (cmp("year", "gt", "2024"), False),
        (cmp("n", "eq", "7"), True),  # a number's JSON spelling
        (cmp("n", "lt", 10), True),
        (cmp("n", "lt", "10"), False),  # as text "7" > "10"
        (cmp("team", "gt", 1), False),  # not a number: no numeric match
        (cmp("tags", "eq", "k8s"), True),
        (cmp("tags", "ne", "k8s"), False),
        (cmp("tags", "contains", "8"), True),
        (cmp("flag", "eq", True), True),
        (cmp("flag", "eq", "true"), True),
        (cmp("missing", "nin", ["x"]), True),
        (cmp("document_path", "starts_with", "runbooks/"), True),
        (cmp("indexed_at", "lt", "2024-05-02"), True),
        (cmp("indexed_at", "gt", "2024-05-01T13:00:00+02:00"), True),
        (cmp("indexed_at", "gt", "2024-05-01T12:00:00Z"), False),
    ],
)
def test_matches_filter(raw: dict[str, Any], expected: bool) -> None:
    node = parse_filter(raw)
    at = datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert matches_filter(node, path="runbooks/a.md", metadata=META, indexed_at=at) is expected


# --- OpenSearch: bodies as data -----------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "body"),
    [
        (cmp("team", "eq", "sre"), {"term": {"metadata.team": "sre"}}),
        (cmp("year", "gte", 2024), {"range": {"metadata.year.number": {"gte": 2024}}}),
        (cmp("year", "lt", "2024"), {"range": {"metadata.year": {"lt": "2024"}}}),
        (
            cmp("team", "ne", "sre"),
            {"bool": {"must_not": [{"term": {"metadata.team": "sre"}}]}},
        ),
        (cmp("tags", "in", ["a", "b"]), {"terms": {"metadata.tags": ["a", "b"]}}),
        (
            cmp("n", "nin", [1, 2]),
            {"bool": {"must_not": [{"terms": {"metadata.n.number": [1, 2]}}]}},
        ),
        (
            cmp("document_path", "starts_with", "runbooks/"),
            {"prefix": {"document_path": {"value": "runbooks/"}}},
        ),
        (
            cmp("team", "contains", "a*b?c\\"),
            {"wildcard": {"metadata.team": {"value": "*a\\*b\\?c\\\\*"}}},
        ),
        (
            cmp("indexed_at", "gt", "2024-05-01"),
            {"range": {"indexed_at": {"gt": "2024-05-01T00:00:00+00:00"}}},
        ),
        (
            {"or": [cmp("a", "eq", 1), {"not": cmp("b", "eq", True)}]},
            {
                "bool": {
                    "should": [
                        {"term": {"metadata.a.number": 1}},
                        {"bool": {"must_not": [{"term": {"metadata.b": "true"}}]}},
                    ],
                    "minimum_should_match": 1,
                }
            },
        ),
        (
            {"and": [cmp("a", "eq", "x")]},
            {"bool": {"filter": [{"term": {"metadata.a": "x"}}]}},
        ),
    ],
)
def test_opensearch_query(raw: dict[str, Any], body: dict[str, Any]) -> None:
    assert filter_query(parse_filter(raw)) == body


# --- SQL: run on SQLite against literal rows ----------------------------------------------


@pytest.fixture
def chunks() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    register_functions(conn)
    conn.execute("CREATE TABLE chunks (id INTEGER, doc_id TEXT, path TEXT, metadata TEXT)")
    conn.execute("CREATE TABLE documents (doc_id TEXT, indexed_at TEXT)")
    rows = [
        (1, "d1", "a/one.md", {"year": "2023", "tags": ["ops", "k8s"], "flag": True, "x": 0.5}),
        (2, "d2", "a/two.md", {"year": 2024, "tags": ["ops"], "flag": False}),
        (3, "d3", "b/three.md", {"year": "soon", "team": "it's"}),
    ]
    for rowid, doc, path, meta in rows:
        conn.execute("INSERT INTO chunks VALUES (?, ?, ?, ?)", (rowid, doc, path, json.dumps(meta)))
    conn.executemany(
        "INSERT INTO documents VALUES (?, ?)",
        [
            ("d1", "2024-01-01T00:00:00.000000+00:00"),
            ("d2", "2024-06-01T00:00:00.000000+00:00"),
            ("d3", "2025-01-01T00:00:00.000000+00:00"),
        ],
    )
    return conn


@pytest.mark.parametrize(
    ("raw", "ids"),
    [
        (cmp("year", "gte", 2023), [1, 2]),
        (cmp("year", "eq", "2024"), [2]),
        (cmp("year", "gt", "2024"), [3]),
        (cmp("tags", "eq", "k8s"), [1]),
        (cmp("tags", "nin", ["k8s"]), [2, 3]),
        (cmp("flag", "eq", True), [1]),
        (cmp("flag", "in", ["false"]), [2]),
        (cmp("x", "eq", "0.5"), [1]),
        (cmp("x", "lt", 1), [1]),
        (cmp("team", "eq", "it's"), [3]),
        (cmp("team", "contains", "'"), [3]),
        (cmp("document_path", "starts_with", "a/"), [1, 2]),
        (cmp("document_path", "starts_with", "a%"), []),
        (cmp("document_path", "ne", "a/one.md"), [2, 3]),
        (cmp("indexed_at", "gte", "2024-06-01"), [2, 3]),
        (cmp("indexed_at", "lt", "2024-06-01T02:00:00+02:00"), [1]),
        (cmp("indexed_at", "lte", "2024-06-01T02:00:00+02:00"), [1, 2]),
        ({"or": [cmp("year", "eq", 2023), {"not": cmp("tags", "eq", "ops")}]}, [1, 3]),
        ({"and": [cmp("tags", "eq", "ops"), cmp("year", "gt", 2023)]}, [2]),
    ],
)
def test_sql(chunks: sqlite3.Connection, raw: dict[str, Any], ids: list[int]) -> None:
    sql, params = filter_sql(parse_filter(raw))
    found = chunks.execute(f"SELECT c.id FROM chunks AS c WHERE {sql} ORDER BY c.id", params)
    assert [row[0] for row in found] == ids


def test_sql_text_never_holds_a_value() -> None:
    hostile = "x') OR 1=1 --"
    sql, params = filter_sql(
        parse_filter({"or": [cmp("team", "eq", hostile), cmp("document_path", "in", [hostile])]})
    )
    assert hostile not in sql
    assert "OR 1=1" not in sql
    assert params.count(hostile) == 2


def test_json_form_reads_back_as_the_same_tree() -> None:
    raw = {
        "or": [
            cmp("year", "in", [2023, 2024.5]),
            {"not": cmp("indexed_at", "lt", "2024-05-01T14:00:00+02:00")},
            {"and": [cmp("flag", "eq", True), cmp("document_path", "contains", "a")]},
        ]
    }
    tree = parse_filter(raw)
    assert filter_to_json(tree) == {
        "or": [
            cmp("year", "in", [2023, 2024.5]),
            {"not": cmp("indexed_at", "lt", "2024-05-01T12:00:00+00:00")},
            {"and": [cmp("flag", "eq", "true"), cmp("document_path", "contains", "a")]},
        ]
    }
    assert parse_filter(json.loads(json.dumps(filter_to_json(tree)))) == tree


# --- the request field --------------------------------------------------------------------


def test_search_request_takes_a_filter() -> None:
    query = parse_search_request({"query": "q", "filter": cmp("team", "eq", "sre")})
    assert query.filter == Comparison("team", "eq", "sre")
    assert parse_search_request({"query": "q", "filter": None}).filter is None
    assert SearchQuery("q", filter=cmp("a", "eq", 1)).filter == Comparison("a", "eq", 1)


def test_a_bad_filter_is_a_400_naming_the_position() -> None:
    api = KnowledgeApi(MemoryKnowledgeStore())
    body = {
        "query": "q",
        "filter": {"and": [cmp("a", "eq", 1), cmp("b", "eq", 2), cmp("c", "in", 3)]},
    }
    response = api.handle("POST", "/v1/agents/a/contexts/c/search", json.dumps(body))
    assert response.status == 400
    assert response.body == {
        "error": "must be a non-empty list for 'in'",
        "field": "filter.and[2].value",
    }
    deep = {"query": "q", "filter": _nested(50)}
    response = api.handle("POST", "/v1/agents/a/search", json.dumps(deep))
    assert response.status == 400
    assert "deeper than 8" in response.body["error"]
