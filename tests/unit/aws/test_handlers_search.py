"""functions/search/app.py with the API Gateway HTTP API (v2) samples and the memory store.

Search results against a real OpenSearch node are in
tests/integration/aws/test_handlers_opensearch.py; here the store is the in-memory one
injected into the handler's container, and S3/SQS (reindex) are moto's.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import boto3
import pytest
from lambda_support import (
    BUCKET,
    REPO_ROOT,
    LambdaContext,
    emitted_metrics,
    load_event,
    load_handler,
    log_records,
    run_queue_through,
    use_fake_aws,
)
from moto import mock_aws

from knowledge.aws.event_indexing import EventIndexer
from knowledge.aws.reindex_queue import ReindexQueue, ScopeReindexer
from knowledge.aws.settings import LambdaSettings
from knowledge.core.errors import StoreUnavailableError
from knowledge.core.model import DEFAULT_MIN_SCORE, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.ingest.pipeline import upsert_document
from knowledge.ingest.sources.s3 import S3DocumentSource
from knowledge.service.api import KnowledgeApi
from knowledge.service.routes import ROUTES
from knowledge.stores.memory import MemoryKnowledgeStore

RUNBOOKS = KnowledgeScope("ops-bot", "runbooks")
MANUALS = KnowledgeScope("ops-bot", "manuals")


def document(path: str, text: str) -> SourceDocument:
    data = text.encode("utf-8")
    return SourceDocument(path=path, size=len(data), read=lambda: data)


@pytest.fixture
def store() -> MemoryKnowledgeStore:
    store = MemoryKnowledgeStore()
    upsert_document(
        store,
        RUNBOOKS,
        document("deploy.md", "# Deploy\n\nTo rollback a failed deployment run helm rollback."),
    )
    upsert_document(
        store, RUNBOOKS, document("장애 대응/배포 실패.md", "# 배포 실패\n\n배포 실패 시 롤백한다.")
    )
    upsert_document(
        store, MANUALS, document("helm.md", "# Helm\n\nhelm rollback takes a revision.")
    )
    upsert_document(
        store,
        KnowledgeScope("other-bot", "runbooks"),
        document("secret.md", "rollback of other-bot"),
    )
    return store


@dataclass
class Search:
    module: ModuleType

    def invoke(self, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        response = self.module.lambda_handler(event, LambdaContext())
        assert response["headers"]["Content-Type"] == "application/json"
        return response["statusCode"], json.loads(response["body"])


@pytest.fixture
def search(
    monkeypatch: pytest.MonkeyPatch, store: MemoryKnowledgeStore, capsys: pytest.CaptureFixture[str]
) -> Search:
    module = load_handler("search", monkeypatch)
    module.container.api = KnowledgeApi(store, reindex=module.queue_reindex)
    return Search(module)


def with_body(event: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    event = copy.deepcopy(event)
    event["body"] = json.dumps(body)
    event["isBase64Encoded"] = False
    return event


def test_health(search):
    assert search.invoke(load_event("api_health.json")) == (
        200,
        {"status": "ok", "store": "memory"},
    )


def test_search_one_scope(search, capsys):
    status, body = search.invoke(load_event("api_search.json"))
    assert status == 200
    assert body["query"] == "rollback a failed deployment"
    assert body["mode"] == "keyword"
    assert [r["document_path"] for r in body["results"]] == ["deploy.md"]
    (result,) = body["results"]
    assert 0.0 <= result["score"] <= 1.0
    assert result["chunk_index"] == 0
    assert isinstance(body["took_ms"], float)
    out = capsys.readouterr().out
    (line,) = [r for r in log_records(out) if r["message"] == "search"]
    assert (line["agent"], line["context"], line["mode"], line["results"]) == (
        "ops-bot",
        "runbooks",
        "keyword",
        1,
    )
    assert "took_ms" in line
    assert "rollback" not in json.dumps(line), "query text is not logged"
    metrics = emitted_metrics(out)
    assert metrics["Searches"] == 1
    assert metrics["SearchResults"] == 1
    assert "SearchLatency" in metrics


def test_search_with_a_base64_korean_body(search):
    status, body = search.invoke(load_event("api_search_korean_base64.json"))
    assert status == 200
    assert body["query"] == "배포 실패"
    assert [r["document_path"] for r in body["results"]] == ["장애 대응/배포 실패.md"]


def test_agent_wide_search_covers_every_context_of_that_agent_only(search):
    status, body = search.invoke(load_event("api_search_agent.json"))
    assert status == 200
    paths = sorted(r["document_path"] for r in body["results"])
    assert paths == ["deploy.md", "helm.md"]
    assert "secret.md" not in paths


def test_no_results_is_an_empty_success(search):
    event = with_body(load_event("api_search.json"), {"query": "kubernetes autoscaling"})
    status, body = search.invoke(event)
    took_ms = body.pop("took_ms")  # how long it took is the machine's business, not a bound
    assert isinstance(took_ms, float)
    assert took_ms >= 0.0
    assert (status, body) == (
        200,
        {
            "query": "kubernetes autoscaling",
            "mode": "keyword",
            "min_score": DEFAULT_MIN_SCORE,
            "evidence": "none",
            "results": [],
        },
    )


@pytest.mark.parametrize(
    ("sample", "field"),
    [
        ("api_search_malformed_json.json", "body"),
        ("api_search_no_body.json", "body"),
        ("api_search_missing_query.json", "query"),
        ("api_search_bad_mode.json", "mode"),
        ("api_search_bad_max_results.json", "max_results"),
        ("api_search_unknown_field.json", "limit"),
        ("api_search_invalid_agent.json", "agent"),
        ("api_status_invalid_context.json", "context"),
    ],
)
def test_bad_requests_are_400_naming_the_field(search, capsys, sample, field):
    status, body = search.invoke(load_event(sample))
    assert status == 400
    assert body["field"] == field
    assert body["error"]
    assert "Traceback" not in body["error"]
    assert emitted_metrics(capsys.readouterr().out)["ClientErrors"] == 1


def test_vector_mode_on_a_keyword_store_is_a_400(search):
    event = with_body(load_event("api_search.json"), {"query": "rollback", "mode": "vector"})
    status, body = search.invoke(event)
    assert (status, body["field"]) == (400, "mode")


def test_status(search):
    status, body = search.invoke(load_event("api_status.json"))
    assert status == 200
    assert (body["agent"], body["context"]) == ("ops-bot", "runbooks")
    assert body["document_count"] == 2
    assert body["state"] == "READY"


@pytest.mark.parametrize(
    "route", [r for r in ROUTES if r.function == "search"], ids=lambda r: r.name
)
def test_every_route_of_the_table_for_this_function_is_served(search, route, monkeypatch):
    """The search function registers its routes from the one table (knowledge.service.routes):
    each is answered by its view, none falls through to the 404 of an unknown route."""
    monkeypatch.delenv("INDEX_QUEUE_URL", raising=False)  # reindex: a 503, no SQS call
    path = route.path.format(agent="ops-bot", context="runbooks", path="deploy.md", name="x")
    event = copy.deepcopy(load_event("api_status.json"))
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = route.method
    event["routeKey"] = event["requestContext"]["routeKey"] = f"{route.method} {route.path}"
    event["body"], event["isBase64Encoded"] = '{"query": "rollback", "path": "a.md"}', False
    status, body = search.invoke(event)
    assert not str(body.get("error", "")).startswith("no route"), (status, body)


def test_unknown_route_is_a_json_404(search):
    status, body = search.invoke(load_event("api_unknown_route.json"))
    assert status == 404
    assert body == {"error": "no route for GET /v1/agents/ops-bot", "field": None}


class BrokenStore(MemoryKnowledgeStore):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    def search(self, scope: KnowledgeScope, query: SearchQuery) -> Any:
        raise self.error


@pytest.mark.parametrize(
    ("error", "status", "message"),
    [
        (StoreUnavailableError("connection refused"), 503, "the index backend is unavailable"),
        (RuntimeError("secret internals /var/task/x.py"), 500, "internal error"),
    ],
)
def test_backend_failures_map_to_5xx_without_a_trace(search, error, status, message):
    search.module.container.api = KnowledgeApi(BrokenStore(error))
    code, body = search.invoke(load_event("api_search.json"))
    assert code == status
    assert body["error"].startswith(message)
    assert "/var/task" not in body["error"]


def test_errors_outside_the_api_object_use_the_same_mapping(search, monkeypatch, capsys):
    # Building the store fails (bad configuration): the exception handler answers.
    search.module.container.api = None
    monkeypatch.delenv("OPENSEARCH_URL", raising=False)
    event = load_event("api_health.json")
    status, body = search.invoke(event)
    assert status == 503
    assert body["request_id"] == event["requestContext"]["requestId"]
    assert "OPENSEARCH_URL" not in body["error"]
    logged = [r for r in log_records(capsys.readouterr().out) if r["level"] == "ERROR"]
    assert any("OPENSEARCH_URL" in r["message"] for r in logged)


def test_store_is_created_once_per_container(monkeypatch, capsys):
    monkeypatch.setenv("OPENSEARCH_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hashing")
    module = load_handler("search", monkeypatch)
    assert module.container.api is None
    module.lambda_handler(load_event("api_health.json"), LambdaContext())
    api = module.container.api
    module.lambda_handler(load_event("api_health.json"), LambdaContext())
    assert api is not None
    assert module.container.api is api
    assert api.store.name == "opensearch"


def test_cold_import_loads_no_sdk():
    """Keyword mode must not pay for openai, opensearch-py, boto3 or any document extractor at
    import. (Powertools
    imports the bare ``botocore`` package for its user-agent hook: well under a millisecond.)"""
    code = f"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location("app", {str(REPO_ROOT / "functions/search/app.py")!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
heavy = ("openai", "opensearchpy", "boto3", "botocore.session", "numpy", "pypdfium2", "docx",
         "pptx", "openpyxl", "lxml", "PIL", "csv", "knowledge.extraction.pdf",
         "knowledge.extraction.html")
print(sorted(m for m in heavy if m in sys.modules))
"""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"POWERTOOLS_METRICS_NAMESPACE": "Test", "PATH": ""},
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"


# --- reindex (moto S3 + SQS) ------------------------------------------------------------------


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any, str, str]]:
    use_fake_aws(monkeypatch)
    with mock_aws():
        s3 = boto3.client("s3")
        sqs = boto3.client("sqs")
        s3.create_bucket(Bucket=BUCKET)
        queue_url = sqs.create_queue(QueueName="document-events")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        yield s3, sqs, queue_url, queue_arn


def test_reindex_answers_at_once_and_the_indexer_brings_the_scope_in_line(
    search, store, aws, monkeypatch, capsys
):
    s3, sqs, queue_url, queue_arn = aws
    # The bucket now has deploy.md (changed), a new runbook, and no longer the Korean one.
    s3.put_object(
        Bucket=BUCKET,
        Key="ops-bot/runbooks/deploy.md",
        Body=b"# Deploy\n\nUse argo rollouts undo to roll back.",
    )
    s3.put_object(Bucket=BUCKET, Key="ops-bot/runbooks/scale.md", Body=b"# Scale\n\nkubectl scale")
    s3.put_object(Bucket=BUCKET, Key="ops-bot/manuals/helm.md", Body=b"# Helm")  # other scope
    search.module.container.reindex_queue = ReindexQueue(queue_url, BUCKET, client=sqs)

    status, body = search.invoke(load_event("api_reindex.json"))
    assert status == 202
    assert body == {"agent": "ops-bot", "context": "runbooks", "status": "accepted"}
    assert emitted_metrics(capsys.readouterr().out)["ReindexRequests"] == 1
    # One message, no listing: the route answers at once whatever the scope's size.
    (message,) = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]
    assert json.loads(message["Body"])["type"] == "knowledge.reindex_scope"
    sqs.change_message_visibility(
        QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
    )

    # The indexer function consumes the queue: the scope step, then one message per key.
    monkeypatch.setenv("DOCUMENTS_BUCKET", BUCKET)
    indexer = load_handler("indexer", monkeypatch)
    indexer.container.settings = LambdaSettings.from_env()
    source = S3DocumentSource(BUCKET, client=s3)
    indexer.container.indexer = EventIndexer(
        store, source, expander=ScopeReindexer(queue_url, source, client=sqs)
    )
    responses = run_queue_through(indexer, sqs, queue_url, queue_arn)
    assert all(r == {"batchItemFailures": []} for r in responses)
    assert sorted(store.stored_documents(RUNBOOKS)) == ["deploy.md", "scale.md"]
    hits = store.search(RUNBOOKS, SearchQuery("argo"))
    assert [h.document_path for h in hits] == ["deploy.md"]
    assert sorted(store.stored_documents(MANUALS)) == ["helm.md"], "other scopes untouched"


def test_reindex_of_an_invalid_scope_is_a_400_and_queues_nothing(search, aws):
    _, sqs, queue_url, _ = aws
    search.module.container.reindex_queue = ReindexQueue(queue_url, BUCKET, client=sqs)
    event = load_event("api_reindex.json")
    event["rawPath"] = event["requestContext"]["http"]["path"] = (
        "/v1/agents/ops-bot/contexts/run%20books/reindex"
    )
    status, body = search.invoke(event)
    assert (status, body["field"]) == (400, "context")
    assert sqs.receive_message(QueueUrl=queue_url).get("Messages", []) == []


def test_reindex_without_a_queue_configured_is_a_503(search, monkeypatch):
    monkeypatch.delenv("INDEX_QUEUE_URL", raising=False)
    monkeypatch.setenv("DOCUMENTS_BUCKET", BUCKET)
    status, body = search.invoke(load_event("api_reindex.json"))
    assert status == 503
    assert "INDEX_QUEUE_URL" not in body["error"]  # in the log, not in the answer
    assert body["request_id"]


# --- issue 8: path segments, bodies, error bodies, JWT tenancy, logs, cold start ------------


def with_raw_path(event: dict[str, Any], path: str) -> dict[str, Any]:
    event = copy.deepcopy(event)
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    return event


@pytest.mark.parametrize(
    ("sample", "path", "field"),
    [
        ("api_search.json", "/v1/agents/%6Fps-bot/contexts/runbooks/search", "agent"),
        ("api_search.json", "/v1/agents/ops-bot/contexts/run%62ooks/search", "context"),
        ("api_search_agent.json", "/v1/agents/%6Fps-bot/search", "agent"),
        ("api_status.json", "/v1/agents/%6Fps-bot/contexts/runbooks/status", "agent"),
        ("api_reindex.json", "/v1/agents/%6Fps-bot/contexts/runbooks/reindex", "agent"),
    ],
)
def test_percent_encoded_path_segments_are_400(search, sample, path, field):
    # API Gateway hands the path to the function as sent (rawPath); served as "ops-bot"
    # it would sidestep an IAM Deny written on .../agents/ops-bot/*.
    status, body = search.invoke(with_raw_path(load_event(sample), path))
    assert (status, body["field"]) == (400, field)
    assert "percent-encoded" in body["error"]


def test_base64_body_that_is_not_utf8_is_a_400(search):
    event = load_event("api_search_non_utf8_base64.json")
    status, body = search.invoke(event)
    assert (status, body["field"]) == (400, "body")
    assert "UTF-8" in body["error"]


def test_json_with_a_lone_surrogate_escape_is_a_400(search):
    event = load_event("api_search_lone_surrogate.json")
    status, body = search.invoke(event)
    assert (status, body["field"]) == (400, "query")


def test_503_body_is_plain_with_the_request_id_and_the_log_has_the_detail(search, capsys):
    url = "https://search-kb-a1b2c3.us-east-1.es.amazonaws.com"
    search.module.container.api = KnowledgeApi(
        BrokenStore(StoreUnavailableError(f"OpenSearch at {url} is unreachable: urllib3 ..."))
    )
    event = load_event("api_search.json")
    status, body = search.invoke(event)
    assert status == 503
    request_id = event["requestContext"]["requestId"]
    assert body["request_id"] == request_id
    assert url not in json.dumps(body)
    assert "urllib3" not in json.dumps(body)
    errors = [r for r in log_records(capsys.readouterr().out) if r["level"] == "ERROR"]
    assert errors, "the detail must be logged"
    assert url in errors[0]["message"]
    assert errors[0]["correlation_id"] == request_id


class LoggingStore(MemoryKnowledgeStore):
    """Logs through a ``knowledge.*`` logger the way the package's own modules do."""

    def search(self, scope: KnowledgeScope, query: SearchQuery) -> Any:
        import logging

        logging.getLogger("knowledge.stores.test").info("searching %s", scope)
        return super().search(scope, query)


def test_the_knowledge_package_logs_json_at_info_with_the_correlation_id(monkeypatch, capsys):
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "INFO")
    module = load_handler("search", monkeypatch)
    module.container.api = KnowledgeApi(LoggingStore())
    event = load_event("api_search.json")
    module.lambda_handler(event, LambdaContext())
    records = [
        r
        for r in log_records(capsys.readouterr().out)
        if r["message"] == "searching ops-bot/runbooks"
    ]
    assert len(records) == 1
    assert records[0]["level"] == "INFO"
    assert records[0]["correlation_id"] == event["requestContext"]["requestId"]
    assert records[0]["name"] == "knowledge.stores.test"


def test_cold_start_metric_is_emitted_once(monkeypatch, store, capsys):
    from aws_lambda_powertools.metrics.provider import cold_start

    cold_start.reset_cold_start_flag()  # a new container: earlier tests ran in this process
    module = load_handler("search", monkeypatch)
    module.container.api = KnowledgeApi(store, reindex=module.queue_reindex)
    module.lambda_handler(load_event("api_health.json"), LambdaContext())
    module.lambda_handler(load_event("api_health.json"), LambdaContext())
    assert emitted_metrics(capsys.readouterr().out).get("ColdStart") == 1


def jwt_event(sample: str, claims: dict[str, Any] | None, scopes: list[str] | None = None):
    event = load_event(sample)
    if claims is None:
        event["requestContext"].pop("authorizer", None)
    else:
        event["requestContext"]["authorizer"] = {"jwt": {"claims": claims, "scopes": scopes}}
    return event


@pytest.fixture
def jwt_search(search, monkeypatch) -> Search:
    monkeypatch.setenv("API_AUTH", "jwt")
    monkeypatch.setenv("JWT_REINDEX_SCOPE", "kb/reindex")
    search.module.container.access = None
    return search


def test_jwt_sample_event_searches_its_agent(jwt_search):
    status, body = jwt_search.invoke(load_event("api_search_jwt.json"))
    assert status == 200
    assert body["results"]


@pytest.mark.parametrize(
    "sample", ["api_search.json", "api_search_agent.json", "api_status.json", "api_reindex.json"]
)
def test_jwt_mode_refuses_an_agent_the_token_does_not_grant(jwt_search, sample):
    event = jwt_event(sample, {"sub": "u-1", "agents": "[support-bot other-bot]"}, ["kb/reindex"])
    status, body = jwt_search.invoke(event)
    assert (status, body["field"]) == (403, "agent")


def test_jwt_mode_without_a_token_is_a_403(jwt_search):
    status, _ = jwt_search.invoke(jwt_event("api_search.json", None))
    assert status == 403


def test_jwt_agents_claim_grants_search_and_status(jwt_search):
    claims = {"sub": "u-1", "agents": "[ops-bot support-bot]"}
    assert jwt_search.invoke(jwt_event("api_search.json", claims))[0] == 200
    assert jwt_search.invoke(jwt_event("api_search_agent.json", claims))[0] == 200
    assert jwt_search.invoke(jwt_event("api_status.json", claims))[0] == 200


def test_jwt_reindex_needs_the_reindex_scope(jwt_search, aws):
    _, sqs, queue_url, _ = aws
    jwt_search.module.container.reindex_queue = ReindexQueue(queue_url, BUCKET, client=sqs)
    claims = {"sub": "u-1", "agents": "ops-bot"}
    status, body = jwt_search.invoke(jwt_event("api_reindex.json", claims, ["kb/search"]))
    assert (status, body["field"]) == (403, "operation")
    assert sqs.receive_message(QueueUrl=queue_url).get("Messages", []) == []
    status, _ = jwt_search.invoke(jwt_event("api_reindex.json", claims, ["kb/reindex"]))
    assert status == 202


def test_detailed_tracing_creates_the_tracer_on_the_first_request_only_when_asked(
    monkeypatch, store
):
    module = load_handler("search", monkeypatch)
    module.container.api = KnowledgeApi(store, reindex=module.queue_reindex)
    module.lambda_handler(load_event("api_health.json"), LambdaContext())
    assert module.container.tracer is None  # default: no X-Ray SDK import at all
    monkeypatch.setenv("KB_DETAILED_TRACING", "true")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")  # no X-Ray daemon here
    response = module.lambda_handler(load_event("api_health.json"), LambdaContext())
    assert response["statusCode"] == 200
    assert module.container.tracer is not None


# --- documents --------------------------------------------------------------------------


def test_documents_pages_through_the_scope_from_the_index(search):
    status, body = search.invoke(load_event("api_documents.json"))  # limit=1
    assert status == 200
    assert (body["agent"], body["context"]) == ("ops-bot", "runbooks")
    assert [d["path"] for d in body["documents"]] == ["deploy.md"]
    (first,) = body["documents"]
    assert first["indexed"] is True
    assert first["chunk_count"] == 1
    assert first["format"] == "markdown"
    event = load_event("api_documents.json")
    event["rawQueryString"] = f"limit=1&cursor={body['next_cursor']}"
    status, body = search.invoke(event)
    assert status == 200
    assert [d["path"] for d in body["documents"]] == ["장애 대응/배포 실패.md"]
    assert body["next_cursor"] is None


def test_one_document_by_its_url_encoded_path(search):
    status, body = search.invoke(load_event("api_document.json"))
    assert status == 200
    assert body["path"] == "장애 대응/배포 실패.md"
    assert body["size"] == len("# 배포 실패\n\n배포 실패 시 롤백한다.".encode())


@pytest.mark.parametrize(
    ("query", "field"),
    [("limit=0", "limit"), ("limit=1001", "limit"), ("limit=x", "limit"), ("cursor=zz", "cursor")],
)
def test_documents_bad_parameters_are_400_naming_them(search, query, field):
    event = load_event("api_documents.json")
    event["rawQueryString"] = query
    status, body = search.invoke(event)
    assert (status, body["field"]) == (400, field)


def test_a_cursor_of_another_agent_is_refused(search, store):
    other_scope = KnowledgeScope("other-bot", "runbooks")
    upsert_document(store, other_scope, document("zz.md", "more of other-bot"))
    event = load_event("api_documents.json")  # limit=1
    event["rawPath"] = "/v1/agents/other-bot/contexts/runbooks/documents"
    status, body = search.invoke(event)
    assert status == 200
    assert [d["path"] for d in body["documents"]] == ["secret.md"]
    # other-bot's cursor used on ops-bot's listing: refused, never a page of either.
    event = load_event("api_documents.json")
    event["rawQueryString"] = f"limit=1&cursor={body['next_cursor']}"
    status, body = search.invoke(event)
    assert (status, body["field"]) == (400, "cursor")


@pytest.mark.parametrize(
    ("segment", "status", "field"),
    [
        ("missing.md", 404, None),
        ("secret.md", 404, None),  # other-bot's document, not in ops-bot/runbooks
        ("a%2F..%2Fsecret.md", 400, "path"),
        ("%2Fdeploy.md", 400, "path"),
        ("%FF.md", 400, "path"),
    ],
)
def test_one_document_missing_or_invalid(search, segment, status, field):
    event = load_event("api_document.json")
    event["rawPath"] = f"/v1/agents/ops-bot/contexts/runbooks/documents/{segment}"
    answer, body = search.invoke(event)
    assert (answer, body["field"]) == (status, field)


def test_jwt_mode_documents_need_the_agent_in_the_token(jwt_search):
    refused = {"sub": "u-1", "agents": "[support-bot other-bot]"}
    for sample in ("api_documents.json", "api_document.json"):
        status, body = jwt_search.invoke(jwt_event(sample, refused))
        assert (status, body["field"]) == (403, "agent"), sample
        assert jwt_search.invoke(jwt_event(sample, {"sub": "u-1", "agents": "ops-bot"}))[0] == 200


def test_explain_through_the_lambda_shows_the_korean_terms_and_recomputes_scores(
    search: Search, store: MemoryKnowledgeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from knowledge.ranking import explain

    # The deployment's weights come from the template's parameters (the environment).
    monkeypatch.setenv("KB_ORIGIN_WEIGHTS", "upload=0.5")
    search.module.container.api = KnowledgeApi(store)
    event = with_body(load_event("api_search.json"), {"query": "배포했다 실패", "explain": True})
    status, body = search.invoke(event)
    assert status == 200
    trace = body["explain"]
    assert trace["searches"][0]["query"]["terms"] == ["배포", "실패"]
    assert trace["searches"][0]["weights"]["origins"]["upload"] == 0.5
    assert [r["document_path"] for r in body["results"]] == ["장애 대응/배포 실패.md"]
    assert body["results"][0]["rank_score"] == pytest.approx(0.5)
    for index, result in enumerate(body["results"]):
        assert explain.recompute(result, trace, index) == pytest.approx(
            result["rank_score"], abs=2e-6
        )
        assert explain.recompute_relevance(trace, index) == pytest.approx(result["score"], abs=2e-6)


def read_route_event(route_key: str, path: str, claims: dict[str, Any] | None) -> dict[str, Any]:
    """A GET of one of the agent's read routes on the HTTP API, with the token's claims."""
    event = jwt_event("api_document.json", claims)
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["routeKey"] = event["requestContext"]["routeKey"] = f"GET {route_key}"
    event["rawQueryString"] = ""
    return event


AGENT_READS = [
    (
        "/v1/agents/{agent}/contexts/{context}/documents/{path}/chunks",
        "/v1/agents/ops-bot/contexts/runbooks/documents/deploy.md/chunks",
    ),
    ("/v1/agents/{agent}/contexts", "/v1/agents/ops-bot/contexts"),
    ("/v1/agents/{agent}/shared", "/v1/agents/ops-bot/shared"),
]


@pytest.mark.parametrize(("route_key", "path"), AGENT_READS)
def test_jwt_mode_the_agents_read_routes_need_the_agent_in_the_token(
    jwt_search: Search, route_key: str, path: str
) -> None:
    refused = {"sub": "u-1", "agents": "[support-bot other-bot]"}
    status, body = jwt_search.invoke(read_route_event(route_key, path, refused))
    assert (status, body["field"]) == (403, "agent")
    granted = {"sub": "u-1", "agents": "ops-bot"}
    status, body = jwt_search.invoke(read_route_event(route_key, path, granted))
    assert status == 200, body
    assert body["agent"] == "ops-bot"


def test_the_agents_contexts_and_a_documents_chunks_through_the_lambda(search: Search) -> None:
    status, body = search.invoke(read_route_event(*AGENT_READS[1], None))
    assert status == 200
    assert [c["context"] for c in body["contexts"]] == ["manuals", "runbooks"]
    status, body = search.invoke(read_route_event(*AGENT_READS[0], None))
    assert status == 200
    assert [c["content"] for c in body["chunks"]] == [
        "# Deploy\n\nTo rollback a failed deployment run helm rollback."
    ]
