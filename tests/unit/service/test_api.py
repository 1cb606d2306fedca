"""knowledge.service.api: request parsing, routing and the one error-to-response mapping."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from knowledge.core.errors import (
    AccessDeniedError,
    ConfigurationError,
    EmbeddingError,
    EmbeddingMismatchError,
    InvalidScopeError,
    NotFoundError,
    StoreAccessDeniedError,
    StoreError,
    StoreUnavailableError,
    ValidationError,
)
from knowledge.core.model import (
    DEFAULT_MIN_SCORE,
    FileProblem,
    IndexResult,
    IndexState,
    IndexStatus,
    SearchMode,
    SearchQuery,
    SearchResult,
)
from knowledge.core.scope import KnowledgeScope
from knowledge.service.api import (
    AGENT_WIDE_CONTEXT,
    MAX_BODY_BYTES,
    ApiResponse,
    KnowledgeApi,
    error_response,
    parse_search_request,
    path_segment,
    request_body,
)


class FakeStore:
    """Records searches; answers with canned results or raises a given exception."""

    name = "fake"
    supported_modes = frozenset(SearchMode)
    default_mode = SearchMode.HYBRID
    embedder = None

    def __init__(
        self, results: list[SearchResult] | None = None, error: Exception | None = None
    ) -> None:
        self.results = results or []
        self.error = error
        self.searches: list[tuple[KnowledgeScope, SearchQuery]] = []
        self.status_calls: list[KnowledgeScope] = []

    def search(self, scope: KnowledgeScope, query: SearchQuery) -> list[SearchResult]:
        self.searches.append((scope, query))
        if self.error is not None:
            raise self.error
        return list(self.results)

    def status(self, scope: KnowledgeScope) -> IndexStatus:
        self.status_calls.append(scope)
        if self.error is not None:
            raise self.error
        return IndexStatus(
            3,
            12,
            datetime(2024, 5, 1, 12, 0, tzinfo=UTC),
            IndexState.READY,
            embedded_chunks=2,
            reused_chunks=10,
        )

    def close(self) -> None:
        pass


def result(path: str = "runbooks/deploy.md", score: float = 0.9) -> SearchResult:
    return SearchResult(
        document_path=path,
        chunk_index=2,
        content="배포 실패 시 롤백 절차",
        score=score,
        keyword_score=1.0,
        vector_score=0.8,
        metadata={"title": "Rollback"},
    )


@pytest.fixture
def store() -> FakeStore:
    return FakeStore([result()])


@pytest.fixture
def api(store: FakeStore) -> KnowledgeApi:
    return KnowledgeApi(store, reindex=lambda scope: IndexResult(indexed_documents=2))


SEARCH = "/v1/agents/ops-bot/contexts/runbooks/search"


# --- parse_search_request -------------------------------------------------------------


def test_parse_full_request() -> None:
    body = {
        "query": "rollback",
        "mode": "KEYWORD",
        "max_results": 7,
        "min_score": 0.25,
        "file_patterns": ["*.md", "runbooks/*"],
        "metadata": {"team": "payments"},
        "cross_context": True,
    }
    query = parse_search_request(json.dumps(body).encode())
    assert query == SearchQuery(
        text="rollback",
        mode=SearchMode.KEYWORD,
        max_results=7,
        min_score=0.25,
        file_patterns=("*.md", "runbooks/*"),
        metadata={"team": "payments"},
        cross_context=True,
    )


def test_parse_defaults_and_default_mode() -> None:
    query = parse_search_request('{"query": "x"}', default_mode="vector")
    assert (query.mode, query.max_results) == (SearchMode.VECTOR, 5)
    # Omitted or null: not given, so the default floor applies to the best result only
    # (answer nothing below it, else every ranked result); a given one to every result.
    assert query.min_score is None
    assert (query.evidence_floor, query.result_floor) == (DEFAULT_MIN_SCORE, 0.0)
    assert parse_search_request('{"query": "x", "min_score": null}').min_score is None
    given = parse_search_request('{"query": "x", "min_score": 0}')
    assert (given.min_score, given.evidence_floor, given.result_floor) == (0.0, 0.0, 0.0)
    assert (query.file_patterns, dict(query.metadata), query.cross_context) == ((), {}, False)
    assert parse_search_request({"query": "x"}).mode is None


def test_parse_null_means_not_given() -> None:
    query = parse_search_request('{"query": "x", "mode": null, "max_results": null}')
    assert query.mode is None
    assert query.max_results == 5


def test_parse_top_k_is_max_results_and_source_type_is_origin() -> None:
    assert parse_search_request({"query": "x", "top_k": 3}).max_results == 3
    assert parse_search_request({"query": "x", "top_k": 3, "max_results": 3}).max_results == 3
    assert parse_search_request({"query": "x", "top_k": None, "max_results": 4}).max_results == 4
    query = parse_search_request({"query": "x", "metadata": {"source_type": "repo"}})
    assert dict(query.metadata) == {"origin": "repo"}
    raw = {"field": "source_type", "op": "in", "value": ["repo", "manual"]}
    aliased = parse_search_request({"query": "x", "filter": raw}).filter
    plain = parse_search_request({"query": "x", "filter": {**raw, "field": "origin"}}).filter
    assert aliased == plain


def test_parse_single_file_pattern_string() -> None:
    assert parse_search_request({"query": "x", "file_patterns": "*.md"}).file_patterns == ("*.md",)


def test_parse_keeps_korean_text() -> None:
    raw = json.dumps({"query": "배포 실패 시 롤백 절차"}, ensure_ascii=False).encode("utf-8")
    assert parse_search_request(raw).text == "배포 실패 시 롤백 절차"


@pytest.mark.parametrize(
    ("body", "field", "fragment"),
    [
        ({"query": "   "}, "query", "non-blank"),
        ({"query": 3}, "query", "non-blank"),
        ({}, "query", "required"),
        ({"query": "x", "max_results": 0}, "max_results", "between 1 and 100"),
        ({"query": "x", "max_results": 1000}, "max_results", "between 1 and 100"),
        ({"query": "x", "max_results": 2.5}, "max_results", "integer"),
        ({"query": "x", "max_results": True}, "max_results", "integer"),
        ({"query": "x", "min_score": -0.1}, "min_score", "between 0 and 1"),
        ({"query": "x", "min_score": 1.5}, "min_score", "between 0 and 1"),
        ({"query": "x", "min_score": "x"}, "min_score", "number"),
        ({"query": "x", "mode": "fuzzy"}, "mode", "keyword, vector, hybrid"),
        ({"query": "x", "mode": 3}, "mode", "not one of"),
        ({"query": "x", "file_patterns": 3}, "file_patterns", "glob"),
        ({"query": "x", "file_patterns": ["*.md", 3]}, "file_patterns", "glob"),
        ({"query": "x", "file_patterns": [" "]}, "file_patterns", "non-blank"),
        (
            {"query": "x", "file_patterns": [f"d{i}/*" for i in range(101)]},
            "file_patterns",
            "at most 100 patterns, got 101",
        ),
        ({"query": "x", "metadata": ["team"]}, "metadata", "object"),
        ({"query": "x", "metadata": {"team": 1}}, "metadata", "strings"),
        ({"query": "x", "cross_context": "yes"}, "cross_context", "true or false"),
        ({"query": "x", "limit": 3}, "limit", "not a known field"),
        ({"query": "x", "top_k": 3, "max_results": 4}, "top_k", "max_results"),
        ({"query": "x", "top_k": 0}, "top_k", "between 1 and 100, got 0"),
        ({"query": "x", "top_k": "3"}, "top_k", "integer"),
        ({"query": "x", "zeta": 1, "alpha": 2}, "alpha", "not a known field"),
    ],
)
def test_parse_rejects_bad_fields(body: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_search_request(json.dumps(body))
    assert info.value.field == field
    assert fragment in info.value.message


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b'{"query": ', "malformed JSON"),
        (b"{'query': 'x'}", "malformed JSON"),
        (b'{"query": "x", "min_score": NaN}', "malformed JSON: NaN is not valid JSON"),
        (b"[1, 2]", "must be a JSON object, got an array"),
        (b'"query"', "must be a JSON object, got a string"),
        (b"null", "must be a JSON object, got null"),
        (b"\xff\xfe", "UTF-8"),
        (b"", "is required"),
        (b"  \n", "is required"),
        (b"[" * 100_00 + b"]" * 100_00, "malformed JSON"),
    ],
)
def test_parse_rejects_bad_bodies(raw: bytes, fragment: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_search_request(raw)
    assert info.value.field == "body"
    assert fragment in info.value.message


def test_parse_rejects_none_body() -> None:
    with pytest.raises(ValidationError) as info:
        parse_search_request(None)
    assert info.value.field == "body"


def test_parse_body_size_limit() -> None:
    padding = " " * (MAX_BODY_BYTES - len(b'{"query": "x"}'))
    assert parse_search_request(('{"query": "x"}' + padding).encode()).text == "x"
    with pytest.raises(ValidationError) as info:
        parse_search_request(('{"query": "x"} ' + padding).encode())
    assert info.value.field == "body"
    assert str(MAX_BODY_BYTES) in info.value.message


# --- search ---------------------------------------------------------------------------


def test_search_response_shape(api: KnowledgeApi, store: FakeStore) -> None:
    response = api.handle("POST", SEARCH, b'{"query": "rollback", "max_results": 3}')
    assert response.status == 200
    body = response.body
    assert set(body) == {"query", "mode", "min_score", "evidence", "results", "took_ms"}
    assert body["query"] == "rollback"
    assert body["mode"] == "hybrid"  # the store's default when none is asked
    assert body["min_score"] == DEFAULT_MIN_SCORE  # the floor the best result had to reach
    assert body["evidence"] == result().strength == "strong"  # the best result's (0.9)
    # The result as the store made it, with the design's names and where it came from.
    assert body["results"] == [
        {
            **result().to_dict(),
            "source_type": None,
            "title": "Rollback",
            "agent": "ops-bot",
            "context": "runbooks",
        }
    ]
    assert body["results"][0]["strength"] == "strong"
    given = api.handle("POST", SEARCH, b'{"query": "rollback", "min_score": 0.25}').body
    assert given["min_score"] == 0.25  # the request's floor
    assert isinstance(body["took_ms"], float)
    scope, query = store.searches[0]
    assert scope == KnowledgeScope("ops-bot", "runbooks")
    assert (query.max_results, query.cross_context) == (3, False)


def test_search_reports_requested_mode(api: KnowledgeApi) -> None:
    assert api.handle("POST", SEARCH, {"query": "x", "mode": "keyword"}).body["mode"] == "keyword"


def test_api_default_mode_applies_when_request_names_none(store: FakeStore) -> None:
    api = KnowledgeApi(store, default_mode=SearchMode.VECTOR)
    assert api.search("ops-bot", "runbooks", '{"query": "x"}').body["mode"] == "vector"
    assert store.searches[0][1].mode is SearchMode.VECTOR


def test_search_korean_round_trip(api: KnowledgeApi, store: FakeStore) -> None:
    raw = json.dumps({"query": "배포실패"}, ensure_ascii=False).encode("utf-8")
    response = api.handle("POST", SEARCH, raw)
    assert response.body["query"] == "배포실패"
    assert store.searches[0][1].text == "배포실패"
    encoded = response.to_json()
    assert "배포실패".encode() in encoded
    assert json.loads(encoded)["results"][0]["content"] == "배포 실패 시 롤백 절차"


def test_search_empty_result_is_200(store: FakeStore) -> None:
    store.results = []
    response = KnowledgeApi(store).handle("POST", SEARCH, '{"query": "nothing"}')
    assert (response.status, response.body["results"]) == (200, [])
    assert response.body["evidence"] == "none"


def test_agent_wide_search_is_cross_context(api: KnowledgeApi, store: FakeStore) -> None:
    response = api.handle("POST", "/v1/agents/ops-bot/search", '{"query": "x"}')
    assert response.status == 200
    scope, query = store.searches[0]
    assert scope.agent == "ops-bot"
    assert scope.context == AGENT_WIDE_CONTEXT
    assert query.cross_context is True


def test_agent_wide_search_refuses_explicit_single_context(
    api: KnowledgeApi, store: FakeStore
) -> None:
    response = api.handle(
        "POST", "/v1/agents/ops-bot/search", '{"query": "x", "cross_context": false}'
    )
    assert response.status == 400
    assert response.body["field"] == "cross_context"
    assert store.searches == []


def test_context_search_may_widen_to_agent(api: KnowledgeApi, store: FakeStore) -> None:
    api.handle("POST", SEARCH, '{"query": "x", "cross_context": true}')
    assert store.searches[0][1].cross_context is True


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"query": ""}', "query"),
        (b'{"query": "x", "max_results": 0}', "max_results"),
        (b'{"query": "x", "max_results": 1000}', "max_results"),
        (b'{"query": "x", "min_score": -0.1}', "min_score"),
        (b'{"query": "x", "min_score": 1.5}', "min_score"),
        (b'{"query": "x", "min_score": "x"}', "min_score"),
        (b'{"query": "x", "mode": "semantic"}', "mode"),
        (b'{"query": "x"', "body"),
        (b"[]", "body"),
        (b'{"query": "x", "limit": 3}', "limit"),
        (None, "body"),
        # A blank key matches nothing any store holds (a sidecar cannot set one): it was a
        # 200 with no results, where the filter language's blank field is a 400.
        (b'{"query": "x", "metadata": {"": "a"}}', "metadata"),
        (b'{"query": "x", "metadata": {"  ": "a"}}', "metadata"),
    ],
)
def test_search_bad_input_is_400_with_field(
    api: KnowledgeApi, store: FakeStore, body: bytes | None, field: str
) -> None:
    response = api.handle("POST", SEARCH, body)
    assert response.status == 400
    assert response.body["field"] == field
    assert set(response.body) == {"error", "field"}
    assert response.body["error"]
    assert store.searches == []


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/agents/a%20b/contexts/runbooks/search", "agent"),
        ("/v1/agents/../contexts/runbooks/search", "agent"),
        ("/v1/agents/ops-bot/contexts/../search", "context"),
        ("/v1/agents/ops-bot/contexts/./search", "context"),
        (f"/v1/agents/{'a' * 65}/contexts/runbooks/search", "agent"),
        (f"/v1/agents/ops-bot/contexts/{'c' * 65}/search", "context"),
        ("/v1/agents/ops%2Fbot/contexts/runbooks/search", "agent"),
        ("/v1/agents//contexts/runbooks/search", "agent"),
        ("/v1/agents/%EB%B4%87/search", "agent"),
    ],
)
def test_invalid_scope_segments_are_400(
    api: KnowledgeApi, store: FakeStore, path: str, field: str
) -> None:
    response = api.handle("POST", path, b'{"query": "x"}')
    assert response.status == 400
    assert response.body["field"] == field
    assert store.searches == []


def test_segment_of_64_chars_is_fine(api: KnowledgeApi, store: FakeStore) -> None:
    response = api.handle(
        "POST", f"/v1/agents/{'a' * 64}/contexts/runbooks/search", b'{"query":"x"}'
    )
    assert response.status == 200
    assert store.searches[0][0].agent == "a" * 64


def test_invalid_scope_on_status_and_reindex(api: KnowledgeApi) -> None:
    assert api.status("a b", "runbooks").body["field"] == "agent"
    assert api.reindex("ops-bot", "..").body["field"] == "context"
    assert api.handle("GET", "/v1/agents/a b/contexts/x/status").status == 400


# --- status, reindex, health ------------------------------------------------------------


def test_status(api: KnowledgeApi, store: FakeStore) -> None:
    response = api.handle("GET", "/v1/agents/ops-bot/contexts/runbooks/status")
    assert response.status == 200
    assert response.body == {
        "agent": "ops-bot",
        "context": "runbooks",
        "document_count": 3,
        "chunk_count": 12,
        "embedded_chunks": 2,
        "reused_chunks": 10,
        "last_indexed_at": "2024-05-01T12:00:00+00:00",
        "state": "READY",
        "message": None,
        "problems": [],
        "progress": None,
        "unread_files": {},
    }
    assert store.status_calls == [KnowledgeScope("ops-bot", "runbooks")]


def test_status_goes_through_the_given_status_hook(store: FakeStore) -> None:
    seen: list[tuple[KnowledgeScope, IndexStatus]] = []

    def indexing(scope: KnowledgeScope, status: IndexStatus) -> IndexStatus:
        seen.append((scope, status))
        return IndexStatus(status.document_count, 0, None, IndexState.INDEXING, "busy")

    api = KnowledgeApi(store, status=indexing)
    response = api.handle("GET", "/v1/agents/ops-bot/contexts/runbooks/status")
    assert response.status == 200
    assert response.body["state"] == "INDEXING"
    assert response.body["message"] == "busy"
    assert response.body["document_count"] == 3
    assert [(scope, status.state) for scope, status in seen] == [
        (KnowledgeScope("ops-bot", "runbooks"), IndexState.READY)
    ]


def test_reindex_calls_back_with_scope(store: FakeStore) -> None:
    calls: list[KnowledgeScope] = []

    def reindex(scope: KnowledgeScope) -> IndexResult:
        calls.append(scope)
        return IndexResult(
            indexed_documents=2, indexed_chunks=9, errors=(FileProblem("x.md", "broken"),)
        )

    response = KnowledgeApi(store, reindex=reindex).handle(
        "POST", "/v1/agents/ops-bot/contexts/runbooks/reindex"
    )
    assert response.status == 200
    assert calls == [KnowledgeScope("ops-bot", "runbooks")]
    assert response.body["agent"] == "ops-bot"
    assert response.body["context"] == "runbooks"
    assert response.body["indexed_documents"] == 2
    assert response.body["errors"] == [{"path": "x.md", "reason": "broken"}]


def test_reindex_without_callback_is_503(
    store: FakeStore, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="knowledge.service.api"):
        response = KnowledgeApi(store).handle(
            "POST", "/v1/agents/ops-bot/contexts/runbooks/reindex", request_id="req-7"
        )
    assert response.status == 503
    assert response.body["error"].startswith("the service is misconfigured")
    assert response.body["request_id"] == "req-7"
    assert "re-indexing is not configured" in caplog.text  # the operator reads why


def test_reindex_of_unknown_scope_is_404(store: FakeStore) -> None:
    def reindex(scope: KnowledgeScope) -> IndexResult:
        raise NotFoundError(f"no folder for scope {scope}")

    response = KnowledgeApi(store, reindex=reindex).reindex("ops-bot", "nope")
    assert response == ApiResponse(
        404, {"error": "no folder for scope ops-bot/nope", "field": None}
    )


def test_health(api: KnowledgeApi) -> None:
    assert api.handle("GET", "/v1/health") == ApiResponse(200, {"status": "ok", "store": "fake"})


# --- routing ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/v1",
        "/v2/health",
        "/v1/agents/ops-bot",
        "/v1/agents/ops-bot/contexts/runbooks",
        "/v1/agents/ops-bot/contexts/runbooks/delete",
        "/v1/agents/ops-bot/contexts/runbooks/search/extra",
    ],
)
def test_unknown_path_is_404(api: KnowledgeApi, path: str) -> None:
    response = api.handle("POST", path, b'{"query": "x"}')
    assert response.status == 404
    assert response.body["field"] is None
    assert response.body["error"]


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("GET", SEARCH, "POST"),
        ("DELETE", SEARCH, "POST"),
        ("POST", "/v1/health", "GET"),
        ("POST", "/v1/agents/ops-bot/contexts/runbooks/status", "GET"),
        ("GET", "/v1/agents/ops-bot/contexts/runbooks/reindex", "POST"),
        ("PUT", "/v1/agents/ops-bot/search", "POST"),
    ],
)
def test_wrong_method_is_405(api: KnowledgeApi, method: str, path: str, allowed: str) -> None:
    response = api.handle(method, path, b'{"query": "x"}')
    assert response.status == 405
    assert response.headers == {"Allow": allowed}
    assert response.body["field"] is None


def test_query_string_and_trailing_slash_and_lowercase_method(
    api: KnowledgeApi, store: FakeStore
) -> None:
    assert api.handle("get", "/v1/health/?verbose=1").status == 200
    assert api.handle("post", SEARCH + "/", b'{"query": "x"}').status == 200


# --- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "status", "field", "fragment"),
    [
        (ValidationError("query", "must be a non-blank string"), 400, "query", "non-blank"),
        (InvalidScopeError("agent", "'a b' is bad"), 400, "agent", "'a b' is bad"),
        (NotFoundError("no such scope"), 404, None, "no such scope"),
        (ConfigurationError("OPENAI_API_KEY is not set"), 503, None, "misconfigured"),
        (
            EmbeddingMismatchError("index built with hashing/256, not openai/1536"),
            503,
            None,
            "misconfigured",
        ),
        (StoreUnavailableError("cannot reach the node"), 503, None, "unavailable"),
        (EmbeddingError("rate limited"), 502, None, "embedding provider failed"),
        (StoreError("bulk write failed"), 500, None, "index backend failed"),
        (
            StoreAccessDeniedError(
                "OpenSearch at https://abc.us-east-1.aoss.amazonaws.com refused to search "
                "(403): User: arn:aws:sts::123456789012:assumed-role/kb-search/x"
            ),
            503,
            None,
            "OpenSearch refused the function's role",
        ),
    ],
)
def test_error_mapping(exc: Exception, status: int, field: str | None, fragment: str) -> None:
    response = error_response(exc)
    assert response.status == status
    assert response.body["field"] == field
    assert fragment in response.body["error"]
    assert "arn:" not in response.body["error"]
    assert "https://" not in response.body["error"]


@pytest.mark.parametrize(
    "call",
    [
        lambda api: api.handle("POST", SEARCH, b'{"query": "x"}'),
        lambda api: api.handle("GET", "/v1/agents/ops-bot/contexts/runbooks/status"),
    ],
)
def test_unexpected_error_is_500_without_trace(
    call: Callable[[KnowledgeApi], ApiResponse], caplog: pytest.LogCaptureFixture
) -> None:
    secret = "secret-detail-in-exception"
    api = KnowledgeApi(FakeStore(error=KeyError(secret)))
    with caplog.at_level(logging.ERROR, logger="knowledge.service.api"):
        response = call(api)
    assert response.status == 500
    assert response.body["error"].startswith("internal error (request id ")
    assert response.body["field"] is None
    assert response.body["request_id"] in response.body["error"]
    assert secret not in response.to_json().decode()
    assert "Traceback" not in response.to_json().decode()
    # ... but the operator gets the traceback in the log
    assert any(r.exc_info and r.exc_info[1] is not None for r in caplog.records)
    assert secret in caplog.text


def test_reindex_unexpected_error_is_500(store: FakeStore) -> None:
    def reindex(scope: KnowledgeScope) -> IndexResult:
        raise RuntimeError("disk on fire")

    response = KnowledgeApi(store, reindex=reindex).reindex("ops-bot", "runbooks")
    assert response.status == 500
    assert "disk" not in response.body["error"]


def test_to_json_is_utf8_without_escapes() -> None:
    encoded = ApiResponse(200, {"query": "롤백"}).to_json()
    assert encoded == '{"query": "롤백"}'.encode()


def test_status_problems_are_listed_most_recent_first_and_capped() -> None:
    from datetime import UTC, datetime

    from knowledge.core.model import FileProblem, IndexState, IndexStatus

    problems = tuple(FileProblem(f"doc-{i}.pdf", "encrypted PDF") for i in range(150))
    status = IndexStatus(1, 2, datetime(2024, 5, 1, tzinfo=UTC), IndexState.READY, None, problems)
    listed = status.to_dict()["problems"]
    assert len(listed) == 100
    assert listed[0] == {"document_path": "doc-0.pdf", "reason": "encrypted PDF"}
    assert listed[-1] == {"document_path": "doc-99.pdf", "reason": "encrypted PDF"}


# --- path segments as sent (issue 8, item 11) ----------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "field"),
    [
        ("POST", "/v1/agents/%6Fps-bot/contexts/runbooks/search", "agent"),
        ("POST", "/v1/agents/ops-bot/contexts/%72unbooks/search", "context"),
        ("POST", "/v1/agents/%6F%70%73-bot/search", "agent"),
        ("GET", "/v1/agents/%6Fps-bot/contexts/runbooks/status", "agent"),
        ("POST", "/v1/agents/ops-bot/contexts/runbook%73/reindex", "context"),
        ("POST", "/v1/agents/ops%2dbot/search", "agent"),
    ],
)
def test_percent_encoded_segments_are_400_even_when_they_decode_to_a_valid_name(
    store: FakeStore, method: str, path: str, field: str
) -> None:
    reindexed: list[KnowledgeScope] = []

    def reindex(scope: KnowledgeScope) -> IndexResult:
        reindexed.append(scope)
        return IndexResult()

    response = KnowledgeApi(store, reindex=reindex).handle(method, path, b'{"query": "x"}')
    assert response.status == 400
    assert response.body["field"] == field
    assert "percent-encoded" in response.body["error"]
    assert store.searches == []
    assert store.status_calls == []
    assert reindexed == []


def test_path_segment_accepts_the_plain_name_and_rejects_its_encoding() -> None:
    assert path_segment("agent", "ops-bot") == "ops-bot"
    with pytest.raises(InvalidScopeError) as raised:
        path_segment("agent", "%6Fps-bot")
    assert raised.value.field == "agent"


def test_unknown_path_with_an_encoded_segment_is_still_404(api: KnowledgeApi) -> None:
    assert api.handle("GET", "/v1/agents/%6Fps-bot/nothing").status == 404


# --- bodies that are not text (base64 non-UTF-8, lone surrogates) --------------------------


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b'{"query": "\\ud800"}', "query"),
        (b'{"query": "ok \\udfff end"}', "query"),
        (b'{"query": "x", "metadata": {"team": "\\ud83d"}}', "metadata"),
        (b'{"query": "x", "file_patterns": ["*.md", "\\udc00"]}', "file_patterns"),
    ],
)
def test_lone_surrogate_escapes_are_400_naming_the_field(
    api: KnowledgeApi, store: FakeStore, raw: bytes, field: str
) -> None:
    response = api.handle("POST", SEARCH, raw)
    assert response.status == 400
    assert response.body["field"] == field
    assert "surrogate" in response.body["error"]
    assert store.searches == []
    response.to_json()  # the answer itself can be sent


def test_a_lone_surrogate_in_a_key_is_400(api: KnowledgeApi, store: FakeStore) -> None:
    response = api.handle("POST", SEARCH, b'{"query": "x", "\\ud800": 1}')
    assert response.status == 400
    assert store.searches == []
    response.to_json()


def test_a_surrogate_pair_is_text_and_searches(api: KnowledgeApi, store: FakeStore) -> None:
    response = api.handle("POST", SEARCH, b'{"query": "\\ud83d\\ude00 rollback"}')
    assert response.status == 200
    assert store.searches[0][1].text == "\U0001f600 rollback"


def test_base64_body_is_decoded_to_bytes_and_non_utf8_is_a_400(api: KnowledgeApi) -> None:
    import base64

    raw = request_body(base64.b64encode(b'{"query": "\xff\xfe"}').decode(), base64_encoded=True)
    assert raw == b'{"query": "\xff\xfe"}'
    response = api.handle("POST", SEARCH, raw)
    assert (response.status, response.body["field"]) == (400, "body")
    assert "UTF-8" in response.body["error"]


def test_body_marked_base64_that_is_not_base64_is_a_400() -> None:
    with pytest.raises(ValidationError) as raised:
        request_body("not base64 at all!", base64_encoded=True)
    assert raised.value.field == "body"
    assert request_body('{"query": "x"}', base64_encoded=False) == '{"query": "x"}'
    assert request_body(None, base64_encoded=True) is None


# --- 5xx bodies: a plain message and the request id, details only in the log (item 13) ---

_LEAKY = [
    StoreUnavailableError(
        "OpenSearch at https://search-kb-a1b2c3.us-east-1.es.amazonaws.com is unreachable: "
        "ConnectionError(<urllib3.connection.HTTPSConnection object at 0x7f>: Failed to "
        "establish a new connection: [Errno 111] Connection refused)"
    ),
    ConfigurationError(
        "secret arn:aws:secretsmanager:us-east-1:123456789012:secret:kb/openai-AbCdEf: "
        "cannot be read (AccessDeniedException)"
    ),
    EmbeddingError("OpenAI at https://api.openai.com/v1/embeddings answered 500"),
    StoreError("OpenSearch at https://search-kb-a1b2c3.us-east-1.es.amazonaws.com failed"),
]


@pytest.mark.parametrize("error", _LEAKY, ids=lambda e: type(e).__name__)
def test_5xx_bodies_hide_urls_library_details_and_arns(
    error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    api = KnowledgeApi(FakeStore(error=error))
    with caplog.at_level(logging.ERROR, logger="knowledge.service.api"):
        response = api.search("ops-bot", "runbooks", b'{"query": "x"}', request_id="Usm-req-1")
    assert response.status >= 500
    text = response.to_json().decode()
    for leak in ("https://", "amazonaws", "urllib3", "arn:", "secretsmanager", "Errno"):
        assert leak not in text, leak
    assert response.body["request_id"] == "Usm-req-1"
    assert "Usm-req-1" in response.body["error"]
    # The operator finds the detail in the log, under the same id.
    record = next(r for r in caplog.records if r.name == "knowledge.service.api")
    assert getattr(record, "request_id", None) == "Usm-req-1"
    assert str(error) in record.getMessage()


def test_access_denied_is_a_403_naming_the_field() -> None:
    response = error_response(AccessDeniedError("agent", "not granted"))
    assert response == ApiResponse(403, {"error": "not granted", "field": "agent"})


def test_parse_paging_and_per_document_cap() -> None:
    query = parse_search_request(
        {"query": "x", "max_results": 10, "offset": 20, "max_chunks_per_document": 1}
    )
    assert (query.offset, query.max_results, query.max_chunks_per_document) == (20, 10, 1)
    defaults = parse_search_request({"query": "x"})
    assert (defaults.offset, defaults.max_chunks_per_document) == (0, 3)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"offset": 96, "max_results": 5}, "offset"),
        ({"offset": -1}, "offset"),
        ({"offset": "2"}, "offset"),
        ({"max_chunks_per_document": 0}, "max_chunks_per_document"),
        ({"max_chunks_per_document": True}, "max_chunks_per_document"),
    ],
)
def test_parse_refuses_bad_paging(fields: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_search_request({"query": "x", **fields})
    assert info.value.field == field
