"""``KnowledgeClient`` over real HTTP: the local server, a SigV4-verifying server, retries.

The SigV4 server recomputes the signature from the bytes that arrived on the wire with
botocore's own signer and the secret key only it and the test know; it does not look at
what the client meant to send.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from botocore.auth import SigV4Auth as BotocoreSigV4
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials, RefreshableCredentials
from local_stack import local_server

from knowledge.client import (
    AccessDeniedError,
    ApiError,
    BearerAuth,
    KnowledgeClient,
    ServiceUnavailableError,
    SigV4Auth,
)
from knowledge.config import open_store
from knowledge.core.errors import NotFoundError, StoreUnavailableError, ValidationError
from knowledge.core.model import IndexState, SearchMode, SearchQuery
from knowledge.core.rank_weights import RankWeights
from knowledge.core.scope import KnowledgeScope
from knowledge.local.server import LocalServer
from knowledge.service.api import parse_search_request

pytestmark = pytest.mark.integration

ACCESS_KEY = "AKIDEXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
REGION = "eu-west-1"

RUNBOOK = "# Rolling back\n\n## Helm\n\nRun helm rollback checkout-api to the previous revision.\n"


# --- the local server ------------------------------------------------------------------


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalServer]:
    files = {
        "ops-bot/runbooks/rollback.md": RUNBOOK,
        "ops-bot/notes/helm.md": "# Helm notes\n\nhelm charts\n",
        "other-bot/secret/s.md": "# helm secret\n\nhelm\n",
    }
    with local_server(tmp_path, files) as server:
        yield server


def test_search_status_and_reindex_against_the_local_server(local: LocalServer) -> None:
    client = KnowledgeClient(local.url)
    scope = KnowledgeScope("ops-bot", "runbooks")

    response = client.search_response(scope, SearchQuery("helm rollback", max_results=3))
    assert response.mode is SearchMode.KEYWORD
    assert [r.document_path for r in response.results] == ["rollback.md"]
    assert 0.0 < response.results[0].score <= 1.0
    assert response.results[0].metadata["source_key"] == "ops-bot/runbooks/rollback.md"

    status = client.status(scope)
    assert (status.document_count, status.state) == (1, IndexState.READY)
    assert (status.embedded_chunks, status.reused_chunks) == (status.chunk_count, 0)
    assert status.chunk_count > 0

    reindexed = client.reindex(scope)
    assert reindexed["indexed_documents"] == 1
    assert client.health()["status"] == "ok"


def test_explain_and_weights_travel_through_the_client(local: LocalServer) -> None:
    from knowledge.ranking import explain

    client = KnowledgeClient(local.url)
    scope = KnowledgeScope("ops-bot", "runbooks")
    query = SearchQuery("helm rollback", max_results=3, mode=SearchMode.HYBRID)
    plain = client.search_response(scope, query)
    assert plain.explain is None
    response = client.search_response(
        scope, query, explain=True, origin_weights={"upload": 0.5}, lesson_weight=2.0
    )
    assert response.explain is not None
    search = response.explain["searches"][0]
    assert (search["weights"]["origins"]["upload"], search["weights"]["lesson"]) == (0.5, 2.0)
    assert search["query"]["terms"] == ["helm", "rollback"]
    assert [r.rank_score for r in response.results] == [
        pytest.approx(r.rank_score * 0.5, abs=2e-6) for r in plain.results
    ]
    # A weight moves the ranking, not the absolute relevance.
    assert [r.score for r in response.results] == [r.score for r in plain.results]
    for index, result in enumerate(response.results):
        recomputed = explain.recompute(result.to_dict(), response.explain, index)
        assert recomputed == pytest.approx(result.rank_score, abs=2e-6)
        relevance = explain.recompute_relevance(response.explain, index)
        assert relevance == pytest.approx(result.score, abs=2e-6)
    with pytest.raises(ValidationError) as caught:
        client.search_response(scope, query, origin_weights={"shared": 100})
    assert caught.value.field == "origin_weights.shared"


def test_a_reranking_server_answers_rerank_scores_through_the_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kb serve with a reranking stage (Bedrock ``Rerank`` through boto3, answered by the
    fake endpoint on loopback): the client reads the rerank and search scores."""

    from fake_rerank import fake_rerank_server

    from knowledge.reranking import RerankingStage
    from knowledge.reranking.bedrock import BedrockReranker

    for name, value in {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
    }.items():
        monkeypatch.setenv(name, value)
    root = tmp_path / "bucket"
    (root / "ops-bot" / "runbooks").mkdir(parents=True)
    (root / "ops-bot" / "runbooks" / "a.md").write_text("helm helm helm\n", "utf-8")
    (root / "ops-bot" / "runbooks" / "b.md").write_text("helm rollback steps\n", "utf-8")
    arn = f"arn:aws:bedrock:{REGION}::foundation-model/amazon.rerank-v1:0"
    with (
        fake_rerank_server(arn) as fake,
        closing(
            open_store(db_path=tmp_path / "k.db", embedder_name="hashing", environ={}, create=True)
        ) as store,
    ):
        reranker = BedrockReranker("amazon.rerank-v1:0", region=REGION, endpoint_url=fake.url)
        server = LocalServer(
            root, store, host="127.0.0.1", port=0, reranking=RerankingStage(reranker)
        )
        server.start()
        try:
            scope = KnowledgeScope("ops-bot", "runbooks")
            # min_score 0: a.md holds one of the two words, weak evidence (the order is
            # the subject).
            query = SearchQuery("helm rollback", max_results=5, min_score=0.0)
            plain = store.search(scope, query)
            response = KnowledgeClient(server.url).search_response(scope, query)
        finally:
            server.stop()
    assert fake.problems == []
    searched = {r.document_path: r for r in plain}
    # the fake's word overlap: b.md has both words, a.md one of two
    assert [(r.document_path, r.rerank_score) for r in response.results] == [
        ("b.md", 1.0),
        ("a.md", 0.5),
    ]
    for result in response.results:
        store_result = searched[result.document_path]
        # The reranker orders (rank_score); the store's ranking score is search_score; the
        # absolute relevance is the store's.
        assert result.rank_score == result.rerank_score
        assert result.search_score == pytest.approx(store_result.rank_score, abs=1e-6)
        assert result.score == pytest.approx(store_result.score, abs=1e-6)


def test_documents_through_the_client_match_the_store(local: LocalServer) -> None:
    client = KnowledgeClient(local.url)
    scope = KnowledgeScope("ops-bot", "runbooks")
    folder = local.root / "ops-bot" / "runbooks" / "장애 대응"
    folder.mkdir()
    (folder / "배포 #1?.md").write_text("# 배포\n\n롤백\n", "utf-8")
    client.reindex(scope)
    first = client.list_documents(scope, limit=1)
    assert [d.path for d in first.documents] == ["rollback.md"]
    assert first.documents[0].size == len(RUNBOOK.encode())
    assert first.documents[0].format == "markdown"
    assert first.next_cursor is not None
    second = client.list_documents(scope, limit=1, cursor=first.next_cursor)
    assert [d.path for d in second.documents] == ["장애 대응/배포 #1?.md"]
    assert second.next_cursor is None
    # A path with '/', ' ', '#' and '?' travels as one encoded segment.
    one = client.get_document(scope, "장애 대응/배포 #1?.md")
    assert one is not None
    assert one.chunk_count == 1
    assert client.get_document(scope, "missing.md") is None
    assert client.get_document(KnowledgeScope("other-bot", "secret"), "rollback.md") is None
    with pytest.raises(ValidationError) as bad:
        client.list_documents(KnowledgeScope("ops-bot", "notes"), cursor=first.next_cursor)
    assert bad.value.field == "cursor"


def test_cross_context_search_stays_inside_the_agent(local: LocalServer) -> None:
    client = KnowledgeClient(local.url)
    results = client.search(
        KnowledgeScope("ops-bot", "runbooks"), SearchQuery("helm", cross_context=True)
    )
    assert sorted(r.document_path for r in results) == ["helm.md", "rollback.md"]


def test_paging_and_the_per_document_cap_travel_to_the_server(local: LocalServer) -> None:
    # rollback.md has two chunks under "Rolling back": the page after the first holds the
    # other one, and a cap of one chunk per document leaves the first alone.
    client = KnowledgeClient(local.url)
    scope = KnowledgeScope("ops-bot", "runbooks")

    def keys(query: SearchQuery) -> list[tuple[str, int]]:
        return [(r.document_path, r.chunk_index) for r in client.search(scope, query)]

    whole = keys(SearchQuery("rolling back", max_results=2))
    assert sorted(whole) == [("rollback.md", 0), ("rollback.md", 1)]
    assert keys(SearchQuery("rolling back", max_results=1, offset=1)) == whole[1:]
    capped = SearchQuery("rolling back", max_results=2, max_chunks_per_document=1)
    assert keys(capped) == whole[:1]


def test_a_filter_travels_to_the_server(local: LocalServer) -> None:
    client = KnowledgeClient(local.url)
    scope = KnowledgeScope("ops-bot", "runbooks")
    helm_only = {
        "and": [
            {"field": "document_path", "op": "in", "value": ["helm.md", "nope.md"]},
            {"field": "indexed_at", "op": "gte", "value": "2000-01-01"},
            {"not": {"field": "format", "op": "eq", "value": True}},
        ]
    }
    query = SearchQuery("helm", cross_context=True, filter=helm_only)
    assert [r.document_path for r in client.search(scope, query)] == ["helm.md"]


def test_server_errors_become_clear_exceptions(local: LocalServer) -> None:
    client = KnowledgeClient(local.url)
    scope = KnowledgeScope("ops-bot", "runbooks")
    path = f"/v1/agents/{scope.agent}/contexts/{scope.context}/search"
    with pytest.raises(ValidationError) as bad:
        client._call("POST", path, {"query": "helm", "max_results": 0})
    assert bad.value.field == "max_results"
    with pytest.raises(NotFoundError):
        client._call("GET", "/v1/nothing-here")


def test_an_unreachable_api_is_unavailable_after_retries() -> None:
    with closing(__import__("socket").socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        client = KnowledgeClient(f"http://127.0.0.1:{port}", retries=1, backoff=0.01)
        with pytest.raises(StoreUnavailableError, match="did not answer after 2 attempt"):
            client.status(KnowledgeScope("ops-bot", "runbooks"))


def test_bad_base_url_is_refused() -> None:
    with pytest.raises(ValidationError) as bad:
        KnowledgeClient("file:///etc/passwd")
    assert bad.value.field == "base_url"


# --- a scripted server: retries, Retry-After, bearer tokens, SigV4 ---------------------


class _Scripted(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _ScriptedHandler)
        self.replies: list[tuple[int, dict[str, Any], dict[str, str]]] = []
        self.seen: list[dict[str, Any]] = []
        self.verify_sigv4 = False
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


def _verify_sigv4(method: str, url: str, headers: dict[str, str], body: bytes) -> str | None:
    """Recompute the signature with botocore from what arrived; ``None`` when it matches."""
    auth = headers.get("Authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return "not SigV4"
    parts = auth[len("AWS4-HMAC-SHA256 ") :].split(",")
    fields = dict(part.strip().split("=", 1) for part in parts)
    access_key, date, region, service, _ = fields["Credential"].split("/")
    signed = fields["SignedHeaders"].split(";")
    if access_key != ACCESS_KEY or service != "execute-api" or region != REGION:
        return f"wrong credential scope {fields['Credential']}"
    lowered = {k.lower(): v for k, v in headers.items()}
    request = AWSRequest(
        method=method, url=url, data=body, headers={h: lowered[h] for h in signed if h != "host"}
    )
    request.context["timestamp"] = lowered["x-amz-date"]
    token = lowered.get("x-amz-security-token")
    signer = BotocoreSigV4(Credentials(ACCESS_KEY, SECRET_KEY, token), "execute-api", region)
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    if expected != fields["Signature"]:
        return "signature does not match"
    if not lowered["x-amz-date"].startswith(date):
        return "date mismatch"
    return None


class _ScriptedHandler(BaseHTTPRequestHandler):
    server: _Scripted

    def _reply(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = dict(self.headers.items())
        with self.server.lock:
            self.server.seen.append({"method": self.command, "headers": headers, "body": body})
            if self.server.verify_sigv4:
                url = f"http://{self.headers['Host']}{self.path}"
                problem = _verify_sigv4(self.command, url, headers, body)
                if problem is not None:
                    reply = (403, {"message": f"Forbidden: {problem}"}, {})
                else:
                    reply = self.server.replies.pop(0)
            else:
                reply = self.server.replies.pop(0)
        status, payload, extra = reply
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("apigw-requestid", f"req-{len(self.server.seen)}")
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = _reply
    do_POST = _reply

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def scripted() -> Iterator[_Scripted]:
    server = _Scripted()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


STATUS_BODY = {
    "agent": "ops-bot",
    "context": "runbooks",
    "document_count": 2,
    "chunk_count": 5,
    "last_indexed_at": "2026-11-30T08:00:00+00:00",
    "state": "READY",
    "message": None,
    "problems": [{"document_path": "scan.pdf", "reason": "encrypted PDF"}],
}


def test_429_and_503_are_retried_with_retry_after(scripted: _Scripted) -> None:
    scripted.replies = [
        (429, {"message": "Too Many Requests"}, {"Retry-After": "0.05"}),
        (503, {"error": "the index backend is unavailable"}, {}),
        (200, STATUS_BODY, {}),
    ]
    client = KnowledgeClient(scripted.url, retries=2, backoff=0.01)
    status = client.status(KnowledgeScope("ops-bot", "runbooks"))
    assert status.document_count == 2
    assert status.problems[0].reason == "encrypted PDF"
    assert len(scripted.seen) == 3


def test_a_retry_after_date_is_honoured(scripted: _Scripted) -> None:
    # Retry-After as an HTTP-date 3 s ahead (1 s resolution: a wait of 2-3 s). Read as
    # "no hint", the client retried after its own 0.01 s backoff.
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=3), usegmt=True)
    scripted.replies = [
        (429, {"message": "Too Many Requests"}, {"Retry-After": when}),
        (200, STATUS_BODY, {}),
    ]
    client = KnowledgeClient(scripted.url, retries=1, backoff=0.01)
    started = time.monotonic()
    assert client.status(KnowledgeScope("ops-bot", "runbooks")).document_count == 2
    assert time.monotonic() - started >= 1.5
    assert len(scripted.seen) == 2


def test_retries_end_in_service_unavailable_with_the_request_id(scripted: _Scripted) -> None:
    scripted.replies = [(503, {"error": "the index backend is unavailable"}, {})] * 2
    client = KnowledgeClient(scripted.url, retries=1, backoff=0.01)
    with pytest.raises(ServiceUnavailableError) as failed:
        client.status(KnowledgeScope("ops-bot", "runbooks"))
    assert failed.value.status == 503
    assert "(request id req-2)" in str(failed.value)


def test_other_statuses_are_api_errors_and_not_retried(scripted: _Scripted) -> None:
    scripted.replies = [(409, {"error": "conflict"}, {})]
    client = KnowledgeClient(scripted.url, retries=3, backoff=0.01)
    with pytest.raises(ApiError) as failed:
        client.reindex(KnowledgeScope("ops-bot", "runbooks"))
    assert failed.value.status == 409
    assert len(scripted.seen) == 1


def test_bearer_token_is_sent_fresh_each_attempt(scripted: _Scripted) -> None:
    scripted.replies = [(503, {}, {}), (200, STATUS_BODY, {})]
    tokens = iter(["t1", "t2"])
    client = KnowledgeClient(scripted.url, auth=BearerAuth(lambda: next(tokens)), backoff=0.01)
    client.status(KnowledgeScope("ops-bot", "runbooks"))
    assert [s["headers"]["Authorization"] for s in scripted.seen] == ["Bearer t1", "Bearer t2"]


def test_every_field_of_a_query_reaches_the_server(scripted: _Scripted) -> None:
    # The server's own parser reads what arrived: it must rebuild the query the caller
    # made, field by field (a field the client leaves out is silently its default there).
    query = SearchQuery(
        "배포 실패",
        mode=SearchMode.HYBRID,
        max_results=7,
        min_score=0.25,
        file_patterns=("**/*.md", "notes/*"),
        metadata={"team": "sre"},
        cross_context=False,
        offset=14,
        max_chunks_per_document=1,
        filter={"field": "year", "op": "gte", "value": 2024},
        weights=RankWeights({"shared": 0.5}, lesson=2.0, extra_lessons=0),
        group_by="document",
    )
    known = {f.name for f in dataclasses.fields(SearchQuery)}
    assert known == {
        "text",
        "mode",
        "max_results",
        "min_score",
        "file_patterns",
        "metadata",
        "cross_context",  # the route: /v1/agents/{agent}/search
        "offset",
        "max_chunks_per_document",
        "filter",
        "weights",
        "group_by",
        "shared_libraries",  # never sent: the server's grant (the client refuses it)
    }, "a new query field: set it above and make the client send it"
    scripted.replies = [(200, {"query": query.text, "mode": "hybrid", "results": []}, {})]
    KnowledgeClient(scripted.url).search(KnowledgeScope("ops-bot", "runbooks"), query)
    assert parse_search_request(scripted.seen[0]["body"]) == query


def test_403_is_access_denied(scripted: _Scripted) -> None:
    scripted.replies = [(403, {"message": "Forbidden"}, {})]
    with pytest.raises(AccessDeniedError):
        KnowledgeClient(scripted.url).status(KnowledgeScope("ops-bot", "runbooks"))


class _Session:
    """A botocore-session stand-in that hands out the given credentials (test input)."""

    def __init__(self, credentials: Any, region: str | None = REGION) -> None:
        self._credentials = credentials
        self._region = region

    def get_credentials(self) -> Any:
        return self._credentials

    def get_config_variable(self, name: str) -> str | None:
        return self._region if name == "region" else None


def test_sigv4_signature_verifies_on_the_wire(scripted: _Scripted) -> None:
    scripted.verify_sigv4 = True
    search_body = {"query": "배포 실패", "mode": "keyword", "results": [], "took_ms": 1.0}
    scripted.replies = [(200, search_body, {}), (200, STATUS_BODY, {})]
    client = KnowledgeClient(
        scripted.url, auth=SigV4Auth(session=_Session(Credentials(ACCESS_KEY, SECRET_KEY, "tok")))
    )
    scope = KnowledgeScope("ops-bot", "runbooks")
    assert client.search(scope, SearchQuery("배포 실패", metadata={"team": "sre"})) == []
    assert client.status(scope).chunk_count == 5
    assert scripted.seen[0]["headers"]["X-Amz-Security-Token"] == "tok"


def test_sigv4_with_a_wrong_secret_is_refused_by_the_verifier(scripted: _Scripted) -> None:
    scripted.verify_sigv4 = True
    client = KnowledgeClient(
        scripted.url, auth=SigV4Auth(session=_Session(Credentials(ACCESS_KEY, "not-the-secret")))
    )
    with pytest.raises(AccessDeniedError, match="signature does not match"):
        client.status(KnowledgeScope("ops-bot", "runbooks"))


def test_sigv4_refreshes_expiring_credentials(scripted: _Scripted) -> None:
    scripted.verify_sigv4 = True
    scripted.replies = [(200, STATUS_BODY, {})] * 2
    refreshes: list[int] = []

    def refresh() -> dict[str, str]:
        refreshes.append(1)
        # Already inside the refresh window: every use asks for new credentials.
        expiry = datetime.now(UTC) + timedelta(seconds=30)
        return {
            "access_key": ACCESS_KEY,
            "secret_key": SECRET_KEY,
            "token": f"session-{len(refreshes)}",
            "expiry_time": expiry.isoformat(),
        }

    credentials = RefreshableCredentials.create_from_metadata(
        refresh(), refresh_using=refresh, method="test"
    )
    client = KnowledgeClient(scripted.url, auth=SigV4Auth(session=_Session(credentials)))
    scope = KnowledgeScope("ops-bot", "runbooks")
    client.status(scope)
    client.status(scope)
    tokens = [s["headers"]["X-Amz-Security-Token"] for s in scripted.seen]
    assert len(set(tokens)) == 2  # each request signed with the credentials fresh at the time


def test_region_is_read_from_an_api_gateway_url() -> None:
    auth = SigV4Auth(session=_Session(None, region=None))
    assert auth.region_for("https://abc123.execute-api.ap-northeast-2.amazonaws.com/") == (
        "ap-northeast-2"
    )
    with pytest.raises(ValidationError) as bad:
        auth.region_for("https://kb.example.com")
    assert bad.value.field == "region"


# --- kb --api-url ---------------------------------------------------------------------


def test_kb_search_status_reindex_through_the_api(
    local: LocalServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from knowledge.local.cli import main as kb

    scoped = ["--agent", "ops-bot", "--context", "runbooks", "--api-url", local.url]
    assert kb(["search", "helm rollback", *scoped]) == 0
    out = capsys.readouterr().out
    # Passed the default floor: at least partial evidence.
    assert re.match(r'Found 1 result for "helm rollback" \(best evidence: (strong|partial)\):', out)
    assert kb(["status", *scoped, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["document_count"] == 1
    assert kb(["reindex", *scoped, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["indexed_documents"] == 1
    assert kb(["documents", *scoped]) == 0
    out = capsys.readouterr().out
    assert out.startswith("rollback.md  [upload, markdown, ")
    assert ", 2 chunks, " in out
    assert kb(["documents", *scoped, "--limit", "0"]) == 2
    assert "limit" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["search", "context"])
def test_kb_through_the_api_sends_only_the_weights_asked_for(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--lesson-weight`` alone overrides the lesson weight alone: the deployment's origin
    weights and extra lessons stand (they were sent back as 1.0 and the default 2)."""
    from knowledge.local.cli import main as kb

    monkeypatch.setenv("KB_ORIGIN_WEIGHTS", "manual=5")  # the deployment's, read by kb serve
    monkeypatch.setenv("KB_LESSON_EXTRA", "0")
    with local_server(tmp_path, {"ops-bot/runbooks/rollback.md": RUNBOOK}) as server:
        monkeypatch.delenv("KB_ORIGIN_WEIGHTS")  # the CLI's own environment plays no part
        monkeypatch.delenv("KB_LESSON_EXTRA")
        scoped = ["--agent", "ops-bot", "--context", "runbooks", "--api-url", server.url]
        argv = [command, "helm rollback", *scoped, "--lesson-weight", "2", "--explain", "--json"]
        assert kb(argv) == 0
        weights = json.loads(capsys.readouterr().out)["explain"]["searches"][0]["weights"]
        assert weights["origins"]["manual"] == 5.0
        assert (weights["lesson"], weights["extra_lessons"]) == (2.0, 0)
        argv = [command, "helm rollback", *scoped, "--origin-weight", "repo=0.5", "--json"]
        assert kb([*argv, "--explain"]) == 0
        weights = json.loads(capsys.readouterr().out)["explain"]["searches"][0]["weights"]
        assert (weights["origins"]["manual"], weights["origins"]["repo"]) == (5.0, 0.5)


def test_the_tool_over_the_api_sends_the_models_controls_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``KnowledgeSearch`` tool over a deployed API: a model's ``lesson_weight`` and
    ``explain`` travel, the deployment's origin weights and extras stand."""
    from knowledge.agent_tools.tool import KnowledgeSearchTool, ToolContext

    monkeypatch.setenv("KB_ORIGIN_WEIGHTS", "manual=5")
    monkeypatch.setenv("KB_LESSON_EXTRA", "0")
    with local_server(tmp_path, {"ops-bot/runbooks/rollback.md": RUNBOOK}) as server:
        context = ToolContext(
            store=KnowledgeClient(server.url), scope=KnowledgeScope("ops-bot", "runbooks")
        )
        arguments = {"query": "helm rollback", "lesson_weight": 2, "explain": True}
        result = KnowledgeSearchTool().run(arguments, context)
        assert not result.is_error, result.content
        assert result.trace is not None
        weights = result.trace["searches"][0]["weights"]
        assert (weights["origins"]["manual"], weights["lesson"], weights["extra_lessons"]) == (
            5.0,
            2.0,
            0,
        )
        assert "weights: upload=1 repo=1 manual=5 shared=1 lesson=2" in result.content
        grouped = KnowledgeSearchTool().run({"query": "helm", "group_by": "document"}, context)
        assert re.match(
            r'Found 1 result for "helm" \(best evidence: (strong|partial)\):', grouped.content
        )


def test_kb_reindex_without_an_api_url_says_what_to_do(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from knowledge.local.cli import main as kb

    assert kb(["reindex", "--agent", "ops-bot", "--context", "runbooks"]) == 2
    assert "give --api-url" in capsys.readouterr().err


def test_kb_against_an_unreachable_api_is_one_line_exit_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from knowledge.local.cli import main as kb

    argv = ["status", "--agent", "a", "--context", "c", "--api-url", "http://127.0.0.1:9"]
    assert kb(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("kb: error: GET /v1/agents/a/contexts/c/status: the API did not answer")
    assert "Traceback" not in err
