"""OpenSearch refusing the function's own role is named (issue 30, item 4).

A deployed stack whose data access policy names the wrong collection (Serverless), or whose
domain's access policy or fine-grained access control mapping leaves the function's role
out, answers every call with a 403. The status route (the search function, and
``KnowledgeClient`` / ``kb status --api-url`` in front of it) must say that OpenSearch
refused the function's role and what to check, without an ARN or a URL; the log keeps the
detail. A loopback server answers 403 the way each kind of OpenSearch does; the handler
builds its store from the environment the template gives it, as in AWS.
"""

from __future__ import annotations

import contextlib
import json
import urllib.parse
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

import pytest
from json_http import JsonHandler, serving
from lambda_support import LambdaContext, load_event, load_handler, use_fake_aws

from knowledge.client import KnowledgeClient, ServiceUnavailableError
from knowledge.core.errors import STORE_ACCESS_DENIED
from knowledge.core.scope import KnowledgeScope

pytestmark = [pytest.mark.integration]

ROLE = "arn:aws:sts::123456789012:assumed-role/kb-SearchFunctionRole-AbC/kb-search"
# What each kind of OpenSearch answers a principal its policies leave out.
DENIED = "no permissions for [indices:data/read/search] and User"
REFUSALS: dict[str, tuple[str, dict[str, Any]]] = {
    # Serverless: no data access policy grants the role this collection/index.
    "serverless data access policy": (
        "aoss",
        {
            "status": 403,
            "request-id": "0a1b2c",
            "error": {"reason": "403 Forbidden", "type": "Forbidden"},
        },
    ),
    # A managed domain whose access policy does not name the role.
    "domain access policy": (
        "es",
        {
            "Message": f"User: {ROLE} is not authorized to perform: es:ESHttpGet because "
            "no resource-based policy allows the es:ESHttpGet action"
        },
    ),
    # Fine-grained access control: the role is not mapped to an OpenSearch role.
    "fine-grained access control": (
        "es",
        {
            "error": {
                "root_cause": [
                    {
                        "type": "security_exception",
                        "reason": f"{DENIED} [name={ROLE}, backend_roles=[{ROLE}]]",
                    }
                ],
                "type": "security_exception",
                "reason": f"{DENIED} [name={ROLE}]",
            },
            "status": 403,
        },
    ),
}


class RefusingNode:
    """Answers every request with ``body`` and a 403, as OpenSearch does to a principal
    that no policy grants; records the paths asked for."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.paths: list[str] = []
        node = self

        class Handler(JsonHandler):
            def _refuse(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                node.paths.append(self.path)
                self.send_json(403, body)

            do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _refuse

        self._serving = contextlib.ExitStack()
        self.url = self._serving.enter_context(
            serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler))
        )

    def close(self) -> None:
        self._serving.close()


@contextlib.contextmanager
def refused_function(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, Any, RefusingNode]]:
    """(service, the search function configured as the template does, the node)."""
    service, body = REFUSALS[kind]
    node = RefusingNode(body)
    use_fake_aws(monkeypatch)
    for name, value in {
        "OPENSEARCH_URL": node.url,
        "OPENSEARCH_SERVICE": service,
        "OPENSEARCH_INDEX": "knowledge",
        "OPENSEARCH_AUTH": "sigv4",  # as the template sets it; the node ignores it
        "EMBEDDING_PROVIDER": "hashing",
        "OPENSEARCH_DEFAULT_MODE": "keyword",
        "INDEX_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/q",
    }.items():
        monkeypatch.setenv(name, value)
    try:
        yield service, load_handler("search", monkeypatch), node
    finally:
        node.close()


@pytest.fixture(params=list(REFUSALS))
def refused(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, Any, RefusingNode]]:
    with refused_function(request.param, monkeypatch) as found:
        yield found


def _status_event(agent: str = "ops-bot", context: str = "runbooks") -> dict[str, Any]:
    event = load_event("api_status.json")
    path = f"/v1/agents/{agent}/contexts/{context}/status"
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["pathParameters"] = {"agent": agent, "context": context}
    return event


def test_status_says_opensearch_refused_the_role_and_what_to_check(
    refused: tuple[str, Any, RefusingNode], capsys: pytest.CaptureFixture[str]
) -> None:
    service, search, node = refused
    response = search.lambda_handler(_status_event(), LambdaContext())
    assert node.paths, "the status route never reached OpenSearch"
    assert response["statusCode"] == 503
    body = json.loads(response["body"])
    assert body["error"].startswith(STORE_ACCESS_DENIED)
    assert "refused the function's role" in body["error"]
    assert "data access policy" in body["error"]
    assert "fine-grained access control" in body["error"]
    for leak in ("arn:", "127.0.0.1", "http", "assumed-role"):
        assert leak not in response["body"], leak
    # The log says which policy, for this service, and what OpenSearch answered.
    logged = capsys.readouterr().out
    assert "refused the function's role" in logged
    expected = "data access policy" if service == "aoss" else "domain's access policy"
    assert expected in logged
    assert body["request_id"] in logged


def test_health_still_answers(refused: tuple[str, Any, RefusingNode]) -> None:
    _, search, _ = refused
    response = search.lambda_handler(load_event("api_health.json"), LambdaContext())
    assert response["statusCode"] == 200


class LambdaGateway:
    """A loopback stand-in for API Gateway in front of the search function: each GET on
    the status route becomes the function's event; its answer goes back as is."""

    def __init__(self, function: Any) -> None:
        self.calls = 0
        gateway = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                gateway.calls += 1
                parts = urllib.parse.urlsplit(self.path).path.strip("/").split("/")
                response = function.lambda_handler(
                    _status_event(parts[2], parts[4]), LambdaContext()
                )
                payload = response["body"].encode("utf-8")
                self.send_response(response["statusCode"])
                for name, value in (response.get("headers") or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._serving = contextlib.ExitStack()
        self.url = self._serving.enter_context(
            serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler))
        )

    def close(self) -> None:
        self._serving.close()


def test_the_client_and_kb_name_the_refusal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from knowledge.local.cli import main as kb

    with refused_function("serverless data access policy", monkeypatch) as (_, search, _):
        gateway = LambdaGateway(search)
        try:
            client = KnowledgeClient(gateway.url, retries=0)
            with pytest.raises(ServiceUnavailableError) as caught:
                client.status(KnowledgeScope("ops-bot", "runbooks"))
            assert "OpenSearch refused the function's role" in str(caught.value)
            assert "data access policy" in str(caught.value)
            capsys.readouterr()
            scope = ["--agent", "ops-bot", "--context", "runbooks"]
            assert kb(["status", *scope, "--api-url", gateway.url]) == 1
            err = capsys.readouterr().err
            assert "OpenSearch refused the function's role" in err
            assert "Traceback" not in err
        finally:
            gateway.close()


def test_the_client_does_not_retry_a_refusal_that_retrying_cannot_cure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A refused role is a configuration to fix, not a busy backend: the 503 says it is not
    retryable, and the client raises at once with the server's advice instead of retrying
    and then saying the API "did not answer"."""
    with refused_function("domain access policy", monkeypatch) as (_, search, _):
        response = search.lambda_handler(_status_event(), LambdaContext())
        assert json.loads(response["body"])["retryable"] is False
        gateway = LambdaGateway(search)
        try:
            client = KnowledgeClient(gateway.url, retries=3, backoff=0.01)
            with pytest.raises(ServiceUnavailableError) as caught:
                client.status(KnowledgeScope("ops-bot", "runbooks"))
            assert gateway.calls == 1
            assert caught.value.status == 503
            assert "did not answer" not in str(caught.value)
            assert "OpenSearch refused the function's role" in str(caught.value)
        finally:
            gateway.close()
