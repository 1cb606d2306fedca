"""``knowledge.core.documents`` (cursors, limits, paths), the OpenSearch listing bodies as data,
and the documents routes of ``knowledge.service.api`` on the memory store."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from knowledge.core.documents import decode_cursor, encode_cursor, validate_document_path
from knowledge.core.errors import ValidationError
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.ingest.pipeline import upsert_document
from knowledge.service.api import KnowledgeApi, parse_documents_query
from knowledge.stores.memory import MemoryKnowledgeStore
from knowledge.stores.opensearch.read.listing import (
    document_record_body,
    documents_page_body,
    parse_documents,
    replaced_generations,
    replaced_shown_body,
)

SCOPE = KnowledgeScope("ops-bot", "runbooks")


def raw_cursor(payload: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


def test_a_cursor_carries_its_scope_and_last_path() -> None:
    cursor = encode_cursor(SCOPE, "장애/배포.md")
    assert decode_cursor(SCOPE, cursor) == "장애/배포.md"
    assert decode_cursor(SCOPE, None) is None
    assert decode_cursor(SCOPE, raw_cursor({"v": 1, "a": "ops-bot", "c": "runbooks", "p": "x"}))


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"v": 1, "a": "other-bot", "c": "runbooks", "p": "x"}, "another scope"),
        ({"v": 1, "a": "ops-bot", "c": "manuals", "p": "x"}, "another scope"),
        ({"v": 2, "a": "ops-bot", "c": "runbooks", "p": "x"}, "not a cursor"),
        ({"v": 1, "a": "ops-bot", "c": "runbooks", "p": 3}, "not a cursor"),
        (["ops-bot", "runbooks", "x"], "not a cursor"),
    ],
)
def test_a_forged_or_foreign_cursor_is_refused(payload: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as caught:
        decode_cursor(SCOPE, raw_cursor(payload))
    assert caught.value.field == "cursor"


@pytest.mark.parametrize(
    "path", ["", "/a.md", "a//b.md", "a/./b.md", "../b.md", "a/..", "a/", "a\x00b", "x" * 1025]
)
def test_bad_document_paths_are_refused(path: str) -> None:
    with pytest.raises(ValidationError) as caught:
        validate_document_path(path)
    assert caught.value.field == "path"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        # C1 controls: U+0085 (NEL) is a line break to str.splitlines(), U+009B a
        # terminal's escape introducer; DEL and the C0 controls were refused already.
        ("a\x85b.md", "must not contain control characters"),
        ("a\x80.md", "must not contain control characters"),
        ("docs/\x9b31m.md", "must not contain control characters"),
        ("a\x7f.md", "must not contain control characters"),
        ("a\u2028b.md", "must not contain a line or paragraph separator (U+2028, U+2029)"),
        ("a\u2029b.md", "must not contain a line or paragraph separator (U+2028, U+2029)"),
    ],
)
def test_a_path_with_a_c1_control_or_a_line_separator_is_refused(path: str, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        validate_document_path(path, "path")
    assert (caught.value.field, caught.value.message) == ("path", message)


def test_a_path_with_printable_text_beyond_latin_1_is_accepted() -> None:
    for path in ("배포/가이드.md", "caf\u00e9.md", "a\u00a0b.md", "\u00a1hola.md"):
        assert validate_document_path(path, "path") == path


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", (100, None)),
        (None, (100, None)),
        ("limit=1000", (1000, None)),
        ("limit=7&cursor=abc", (7, "abc")),
        ("cursor=a%2Bb", (100, "a+b")),
    ],
)
def test_documents_query_strings(query: str | None, expected: tuple[int, str | None]) -> None:
    assert parse_documents_query(query) == expected


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=99999999999999999999", "limit"),
        ("limit=-1", "limit"),
        ("limit=1.5", "limit"),
        ("limit=", "limit"),
        ("limit=%D9%A1", "limit"),  # an Arabic-Indic digit: isdigit() but not ASCII
        ("limit=1&limit=2", "limit"),
        ("cursor=", "cursor"),
        ("offset=3", "offset"),
        ("limit=%FF", "query"),
    ],
)
def test_bad_documents_query_strings_name_the_parameter(query: str, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_documents_query(query)
    assert caught.value.field == field


def test_a_limit_of_many_digits_is_shown_as_sent() -> None:
    # The message says what the caller sent, not a number the code put in its place.
    with pytest.raises(ValidationError) as caught:
        parse_documents_query("limit=1000000000000")
    assert caught.value.field == "limit"
    assert "1000000000000" in caught.value.message
    assert "1001" not in caught.value.message


def test_page_body_filters_on_the_scope_and_records_and_resumes_after_the_path() -> None:
    assert documents_page_body(SCOPE, 101, "b.md") == {
        "size": 101,
        "track_total_hits": False,
        "_source": {
            "includes": [
                "document_path",
                "format",
                "origin",
                "size",
                "chunk_count",
                "version",
                "content_hash",
                "indexed_at",
                "generation",
                "problem",
                "replaces",
            ]
        },
        "query": {
            "bool": {
                "filter": [
                    {"term": {"agent": "ops-bot"}},
                    {"term": {"context": "runbooks"}},
                    {"term": {"record": "document"}},
                ],
                "should": [
                    {"exists": {"field": "generation"}},
                    {"exists": {"field": "problem_at"}},
                ],
                "minimum_should_match": 1,
            }
        },
        "sort": [{"document_path": {"order": "asc"}}],
        "search_after": ["b.md"],
    }
    assert "search_after" not in documents_page_body(SCOPE, 10, None)
    one = document_record_body(SCOPE, "a/b.md")
    assert one["query"]["bool"]["filter"][-1] == {"term": {"document_path": "a/b.md"}}
    assert one["size"] == 1


def test_parse_documents_reads_indexed_and_problem_only_records() -> None:
    response = {
        "hits": {
            "hits": [
                {
                    "_id": "1",
                    "_source": {
                        "document_path": "a.md",
                        "format": "markdown",
                        "origin": "upload",
                        "size": 12,
                        "chunk_count": 2,
                        "version": "v1",
                        "content_hash": "h",
                        "indexed_at": "2026-03-14T09:26:53.000001Z",
                        "generation": "1-x",
                        "problem": None,
                    },
                },
                {"_id": "2", "_source": {"document_path": "b.pdf", "problem": "no text"}},
                {"_id": "3", "_source": {"problem": "no path: skipped"}},
            ]
        }
    }
    a, b = parse_documents(response)
    assert a.to_dict() == {
        "path": "a.md",
        "indexed": True,
        "stale": False,
        "origin": "upload",
        "format": "markdown",
        "size": 12,
        "chunk_count": 2,
        "version": "v1",
        "content_hash": "h",
        "indexed_at": "2026-03-14T09:26:53.000001+00:00",
        "problem": None,
    }
    assert (b.path, b.indexed, b.chunk_count, b.problem) == ("b.pdf", False, 0, "no text")


def _page_with_replacements() -> dict[str, Any]:
    def record(path: str, generation: str, replaces: str | None) -> dict[str, Any]:
        source = {"document_path": path, "generation": generation, "content_hash": path}
        if replaces is not None:
            source["replaces"] = replaces
        when = {"indexed_at": "2026-03-14T09:26:53Z"}
        return {"_id": path, "_source": {**source, **when, "chunk_count": 1, "version": "v2"}}

    hits = [record("a.md", "2-a", "1-a"), record("b.md", "2-b", "1-b"), record("c.md", "1-c", None)]
    return {"hits": {"hits": hits}}


def test_a_page_asks_which_replaced_generations_searches_still_show() -> None:
    page = _page_with_replacements()
    replaced = replaced_generations(page)
    assert replaced == {"a.md": "1-a", "b.md": "1-b"}
    assert replaced_generations({"hits": {"hits": []}}) == {}
    assert replaced_shown_body(SCOPE, replaced) == {
        "size": 0,
        "track_total_hits": False,
        "query": {
            "bool": {
                "filter": [
                    {"term": {"agent": "ops-bot"}},
                    {"term": {"context": "runbooks"}},
                    {"terms": {"document_path": ["a.md", "b.md"]}},
                    {"terms": {"generation": ["1-a", "1-b"]}},
                ]
            }
        },
        "aggs": {"shown_generations": {"terms": {"field": "generation", "size": 2}}},
    }


def test_a_listed_document_whose_replaced_generation_is_still_shown_reads_not_indexed() -> None:
    page = _page_with_replacements()
    shown = {"aggregations": {"shown_generations": {"buckets": [{"key": "1-b", "doc_count": 3}]}}}
    a, b, c = parse_documents(page, shown)
    assert (a.path, a.indexed, a.content_hash, a.version) == ("a.md", True, "a.md", "v2")
    assert (b.path, b.indexed, b.content_hash, b.version) == ("b.md", False, None, None)
    assert (c.path, c.indexed) == ("c.md", True)
    # without the second answer (no record on the page replaced anything) all read indexed
    assert [d.indexed for d in parse_documents(page)] == [True, True, True]


@pytest.fixture
def api() -> KnowledgeApi:
    store = MemoryKnowledgeStore()
    data = b"# Setup\n\nhelm install\n"
    for path in ("guides/setup.md", "a b.md"):
        upsert_document(store, SCOPE, SourceDocument(path=path, size=len(data), read=lambda: data))
    return KnowledgeApi(store)


def test_routes_for_documents(api: KnowledgeApi) -> None:
    base = "/v1/agents/ops-bot/contexts/runbooks/documents"
    listed = api.handle("GET", base + "?limit=1")
    assert listed.status == 200
    assert [d["path"] for d in listed.body["documents"]] == ["a b.md"]
    rest = api.handle("GET", f"{base}?cursor={listed.body['next_cursor']}")
    assert [d["path"] for d in rest.body["documents"]] == ["guides/setup.md"]
    assert api.handle("GET", base + "/guides%2Fsetup.md").body["chunk_count"] == 1
    assert api.handle("GET", base + "/a%20b.md").body["path"] == "a b.md"
    assert api.handle("GET", base + "/guides/setup.md").status == 404  # one segment only
    refused = api.handle("POST", base)
    assert (refused.status, refused.headers["Allow"]) == (405, "GET")
    encoded_agent = api.handle("GET", "/v1/agents/%6Fps-bot/contexts/runbooks/documents")
    assert (encoded_agent.status, encoded_agent.body["field"]) == (400, "agent")


@pytest.mark.parametrize("path", ["\ud800", "docs/a\udfff.md"])
def test_a_path_that_is_not_text_is_refused(path: str) -> None:
    with pytest.raises(ValidationError) as caught:
        validate_document_path(path, "path")
    assert (caught.value.field, caught.value.message) == (
        "path",
        "must be text (it holds an unpaired surrogate)",
    )
