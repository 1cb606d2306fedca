"""The deployed stack as a remote MCP server: the official MCP SDK client over streamable
HTTP, through API Gateway (played by ``mcp_gateway.Gateway``: routes, TLS, the JWT
authorizer against a loopback issuer), to ``functions/mcp/app.py`` as deployed, on moto's
S3 and SQS and a real OpenSearch node.

Nothing is injected into the function: it builds its store, embedder and reindex queue
from the environment ``template.yaml`` gives it, as in AWS (the node is local, the
embedder the offline hashing one). The documents are indexed by the indexer function
from S3 notifications.
"""

from __future__ import annotations

import contextlib
import json
import urllib.request
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import anyio
import boto3
import botocore.session
import httpx2
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from lambda_support import (
    BUCKET,
    LambdaContext,
    load_handler,
    s3_notification,
    sqs_event,
    use_fake_aws,
)
from mcp import Client, ClientSession, MCPError
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.auth.utils import build_protected_resource_metadata_discovery_urls
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthToken, ProtectedResourceMetadata
from mcp.shared.auth_utils import check_resource_allowed
from mcp_gateway import Gateway, Issuer, running_gateway, running_issuer
from moto import mock_aws

from knowledge.client.auth import SigV4Auth

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]

DEPLOY = """# Deploy

## Rollback

If a deployment fails, roll back with `helm rollback api 0` and watch the pods.
"""
NOTES = "# Helm notes\n\nThe helm charts live in the deploy repository.\n"
PAYROLL = "# Payroll\n\nThe helm rollback of the salaries is a secret of the payroll team.\n"
OPS = {"agents": ["ops-bot"]}
REINDEXER = {"agents": ["ops-bot"], "scope": "openid kb/reindex"}


@dataclass
class Remote:
    """The MCP function behind the gateway, the issuer, the queue and the index."""

    gateway: Gateway
    issuer: Issuer
    mcp: ModuleType
    sqs: Any
    queue_url: str

    def url(self, agent: str = "ops-bot", context: str = "runbooks") -> str:
        return self.gateway.mcp_url(agent, context)

    def http(self, token: str | None = None, **options: Any) -> httpx2.AsyncClient:
        """An HTTP client that trusts the gateway's certificate, with ``token`` as bearer."""
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        return httpx2.AsyncClient(
            verify=self.gateway.ssl_context, headers=headers, timeout=60, **options
        )

    def session(
        self,
        token: str | None,
        body: Callable[[Client], Awaitable[Any]],
        *,
        url: str | None = None,
        mode: str = "auto",
        auth: httpx2.Auth | None = None,
    ) -> Any:
        """Connect the SDK's ``Client`` to ``url`` with ``token`` (or ``auth``) and return
        what ``body`` returns (within 60 s)."""

        async def go() -> Any:
            with anyio.fail_after(60):
                async with self.http(token, auth=auth) as http:
                    transport = streamable_http_client(url or self.url(), http_client=http)
                    async with Client(transport, mode=mode) as client:  # type: ignore[arg-type]
                        return await body(client)

        return anyio.run(go)

    def raw(
        self, method: str, url: str, token: str | None = None, body: Any = None
    ) -> httpx2.Response:
        async def go() -> httpx2.Response:
            async with self.http(token) as http:
                return await http.request(
                    method,
                    url,
                    json=body,
                    headers={"accept": "application/json, text/event-stream"},
                )

        return anyio.run(go)


def _index(indexer: ModuleType, s3: Any, key: str, text: str, sequencer: str) -> None:
    s3.put_object(Bucket=BUCKET, Key=key, Body=text.encode("utf-8"))
    event = sqs_event(s3_notification("ObjectCreated:Put", key, sequencer))
    assert indexer.lambda_handler(event, LambdaContext()) == {"batchItemFailures": []}


@contextlib.contextmanager
def deployed(opensearch_url: str, monkeypatch: pytest.MonkeyPatch, mode: str) -> Iterator[Remote]:
    """The MCP and indexer functions on one index, bucket and queue, behind the gateway."""
    index = f"test_mcp_{uuid.uuid4().hex[:12]}"
    use_fake_aws(monkeypatch)
    with mock_aws(), running_issuer() as issuer:
        s3, sqs = boto3.client("s3"), boto3.client("sqs")
        s3.create_bucket(Bucket=BUCKET)
        queue_url = sqs.create_queue(QueueName="document-events")["QueueUrl"]
        for name, value in {
            "OPENSEARCH_URL": opensearch_url,
            "OPENSEARCH_INDEX": index,
            "OPENSEARCH_DEFAULT_MODE": "hybrid",
            "OPENSEARCH_WAIT_FOR_REFRESH": "true",
            "OPENSEARCH_REFRESH_INTERVAL": "100ms",
            "EMBEDDING_PROVIDER": "hashing",
            "DOCUMENTS_BUCKET": BUCKET,
            "INDEX_QUEUE_URL": queue_url,
            # What template.yaml gives the MCP function (ApiAuthMode, JwtIssuer, ...).
            "API_AUTH": mode,
            "JWT_ISSUER": issuer.url if mode == "jwt" else "",
            "JWT_AGENTS_CLAIM": "agents",
            "JWT_REINDEX_SCOPE": "kb/reindex",
        }.items():
            monkeypatch.setenv(name, value)
        indexer = load_handler("indexer", monkeypatch)
        _index(indexer, s3, "ops-bot/runbooks/deploy.md", DEPLOY, "0065F2A1B3C4D5E6F7")
        _index(indexer, s3, "ops-bot/notes/helm.md", NOTES, "0065F2A1B3C4D5E6F8")
        _index(indexer, s3, "hr-bot/payroll/salaries.md", PAYROLL, "0065F2A1B3C4D5E6F9")
        function = load_handler("mcp", monkeypatch)
        try:
            with running_gateway(
                function, mode, LambdaContext, issuer if mode == "jwt" else None
            ) as gateway:
                yield Remote(gateway, issuer, function, sqs, queue_url)
        finally:
            for module in (indexer, function):
                built = module.container.indexer if module is indexer else module.container.api
                if built is not None:
                    built.store.close()
            request = urllib.request.Request(f"{opensearch_url}/{index}", method="DELETE")
            with contextlib.suppress(OSError):
                urllib.request.urlopen(request, timeout=30).close()


@pytest.fixture
def remote(opensearch_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Remote]:
    with deployed(opensearch_url, monkeypatch, "jwt") as stack:
        yield stack


@pytest.fixture
def remote_iam(opensearch_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Remote]:
    with deployed(opensearch_url, monkeypatch, "iam") as stack:
        yield stack


def refused_by_the_server(connect: Callable[[], Any]) -> bool:
    """Whether connecting failed with the SDK's error for a refused HTTP request (an
    ``MCPError``, possibly inside the client's task group's exception group)."""
    try:
        connect()
    except BaseException as exc:
        pending: list[BaseException] = [exc]
        while pending:
            current = pending.pop()
            if isinstance(current, MCPError):
                return True
            if isinstance(current, BaseExceptionGroup):
                pending.extend(current.exceptions)
        raise
    return False


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


def test_the_sdk_client_lists_tools_searches_and_reads_its_scope(remote: Remote) -> None:
    token = remote.issuer.token(OPS)

    async def body(client: Client) -> dict[str, Any]:
        return {
            "tools": await client.list_tools(),
            "hit": await client.call_tool("knowledge_search", {"query": "helm rollback"}),
            "none": await client.call_tool("knowledge_search", {"query": "kubernetes quota"}),
            "status": await client.call_tool("knowledge_status", {}),
            "documents": await client.call_tool("knowledge_documents", {"limit": 10}),
            "prompts": await client.list_prompts(),
            "prompt": await client.get_prompt("knowledge_context", {"query": "helm rollback"}),
        }

    out = remote.session(token, body)
    tools = {tool.name: tool for tool in out["tools"].tools}
    assert set(tools) == {"knowledge_search", "knowledge_status", "knowledge_documents"}
    assert tools["knowledge_search"].input_schema["additionalProperties"] is False
    assert tools["knowledge_search"].output_schema is not None
    hit = out["hit"]
    assert not hit.is_error
    assert "[1] deploy.md" in text_of(hit)
    results = hit.structured_content["results"]
    assert [(r["source"], r["agent"], r["context"]) for r in results] == [
        ("deploy.md", "ops-bot", "runbooks")
    ]
    assert text_of(out["none"]) == "No relevant documents found for: kubernetes quota"
    assert text_of(out["status"]).startswith("Knowledge scope ops-bot/runbooks: READY")
    listed = out["documents"].structured_content
    assert [d["path"] for d in listed["documents"]] == ["deploy.md"]
    assert [p.name for p in out["prompts"].prompts] == ["knowledge_context"]
    prompt = out["prompt"].messages[0].content.text
    assert "deploy.md" in prompt
    assert "helm rollback api 0" in prompt
    # Every request went through the authorizer and reached the function as an event.
    assert {e["routeKey"] for e in remote.gateway.events} == {
        "POST /mcp/agents/{agent}/contexts/{context}"
    }


def test_the_handshake_era_client_works_as_well(remote: Remote) -> None:
    """An older client (the ``initialize`` handshake, then one POST per message) gets the
    same tools; the stateless server sets no session id, so the client opens no GET
    stream and sends no DELETE."""
    token = remote.issuer.token(OPS)

    async def go() -> Any:
        with anyio.fail_after(60):
            async with (
                remote.http(token) as http,
                streamable_http_client(remote.url(), http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                listed = await session.list_tools()
                found = await session.call_tool("knowledge_search", {"query": "rollback"})
                return listed, found

    listed, found = anyio.run(go)
    assert {t.name for t in listed.tools} == {
        "knowledge_search",
        "knowledge_status",
        "knowledge_documents",
    }
    assert "[1] deploy.md" in text_of(found)
    methods = {e["requestContext"]["http"]["method"] for e in remote.gateway.events}
    assert methods == {"POST"}


def test_another_agents_scope_and_bad_tokens_are_refused(remote: Remote) -> None:
    issuer = remote.issuer
    payroll = remote.url("hr-bot", "payroll")

    # A valid token for ops-bot, at hr-bot's endpoint: the function's 403.
    response = remote.raw("POST", payroll, issuer.token(OPS), {"jsonrpc": "2.0", "id": 1})
    assert response.status_code == 403
    body = response.json()
    assert body["error"]["message"].startswith("Forbidden: ")
    assert "hr-bot" in body["error"]["message"]
    assert "arn:" not in response.text
    assert "Traceback" not in response.text

    async def listed(client: Client) -> Any:
        return await client.list_tools()

    assert refused_by_the_server(lambda: remote.session(issuer.token(OPS), listed, url=payroll))

    # Missing, expired, foreign-signed, other-audience, other-issuer tokens: the gateway's
    # 401, before the function runs.
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    invocations = len(remote.gateway.events)
    for token in (
        None,
        "not-a-jwt",
        issuer.token(OPS, lifetime=-60),
        issuer.token(OPS, key=stranger),
        issuer.token(OPS, audience="someone-else"),
        issuer.token(OPS, issuer="https://issuer.example"),
    ):
        response = remote.raw("POST", remote.url(), token, {"jsonrpc": "2.0", "id": 1})
        assert response.status_code == 401, token
        assert response.json() == {"message": "Unauthorized"}
        assert refused_by_the_server(lambda: remote.session(token, listed))  # noqa: B023
    assert len(remote.gateway.events) == invocations, "no refused token reached the function"


def test_nothing_a_model_sends_widens_the_scope(remote: Remote) -> None:
    token = remote.issuer.token({"agents": "ops-bot"})  # the claim as a string, too

    async def body(client: Client) -> dict[str, Any]:
        return {
            "agent": await client.call_tool(
                "knowledge_search", {"query": "helm", "agent": "hr-bot"}
            ),
            "context": await client.call_tool(
                "knowledge_search", {"query": "helm", "context": "payroll"}
            ),
            "secret": await client.call_tool("knowledge_search", {"query": "salaries payroll"}),
            "other": await client.call_tool("knowledge_search", {"query": "helm charts"}),
            "reindex": await client.call_tool("knowledge_reindex", {}),
        }

    out = remote.session(token, body)
    for name in ("agent", "context"):
        assert out[name].is_error
        assert "Invalid parameter" in text_of(out[name])
    assert "salaries.md" not in text_of(out["secret"])
    assert "secret of the payroll team" not in text_of(out["secret"])
    for result in out["other"].structured_content["results"]:
        assert (result["agent"], result["context"]) == ("ops-bot", "runbooks")
    assert out["reindex"].is_error
    assert "Unknown tool" in text_of(out["reindex"])


def test_reindex_is_a_tool_only_for_a_token_granted_it(remote: Remote) -> None:
    async def body(client: Client) -> Any:
        listed = await client.list_tools()
        return listed, await client.call_tool("knowledge_reindex", {})

    listed, reindexed = remote.session(remote.issuer.token(REINDEXER), body)
    assert "knowledge_reindex" in {tool.name for tool in listed.tools}
    assert not reindexed.is_error, text_of(reindexed)
    assert reindexed.structured_content["agent"] == "ops-bot"
    assert reindexed.structured_content["context"] == "runbooks"
    messages = remote.sqs.receive_message(QueueUrl=remote.queue_url, MaxNumberOfMessages=10)
    bodies = [json.loads(m["Body"]) for m in messages.get("Messages", [])]
    assert [(b["type"], b["agent"], b["context"]) for b in bodies] == [
        ("knowledge.reindex_scope", "ops-bot", "runbooks")
    ]


def test_get_and_delete_are_405_and_the_metadata_is_public(remote: Remote) -> None:
    token = remote.issuer.token(OPS)
    for method in ("GET", "DELETE"):
        response = remote.raw(method, remote.url(), token)
        assert response.status_code == 405, method
        assert response.headers["allow"] == "POST"

    # Where the SDK looks when the gateway's 401 names no metadata (it cannot): the
    # path-suffixed well-known URL first, then the root one. No token needed.
    urls = build_protected_resource_metadata_discovery_urls(None, remote.url())
    assert urls == [
        f"{remote.gateway.url}/.well-known/oauth-protected-resource/mcp/agents/ops-bot/contexts/runbooks",
        f"{remote.gateway.url}/.well-known/oauth-protected-resource",
    ]
    for url, resource in zip(urls, [remote.url(), remote.gateway.url], strict=True):
        response = remote.raw("GET", url)
        assert response.status_code == 200, url
        metadata = ProtectedResourceMetadata.model_validate(response.json())
        assert str(metadata.resource) == resource
        assert [str(s).rstrip("/") for s in metadata.authorization_servers] == [remote.issuer.url]
        assert metadata.bearer_methods_supported == ["header"]
        assert check_resource_allowed(remote.url(), str(metadata.resource))
    assert remote.raw("GET", urls[0].replace("ops-bot", "%6Fps-bot")).status_code == 404


def test_a_client_with_client_credentials_discovers_the_issuer_and_connects(
    remote: Remote,
) -> None:
    """The MCP authorization flow end to end: the gateway's 401, the protected resource
    metadata, the issuer's metadata, a client credentials token, the retried request."""
    remote.issuer.clients["ops-agent"] = ("s3cret", {"agents": ["ops-bot"]})

    class Memory:
        def __init__(self) -> None:
            self.tokens: OAuthToken | None = None

        async def get_tokens(self) -> OAuthToken | None:
            return self.tokens

        async def set_tokens(self, tokens: OAuthToken) -> None:
            self.tokens = tokens

        async def get_client_info(self) -> Any:
            return None

        async def set_client_info(self, info: Any) -> None:
            return None

    provider = ClientCredentialsOAuthProvider(
        server_url=remote.url(),
        storage=Memory(),
        client_id="ops-agent",
        client_secret="s3cret",
        issuer=remote.issuer.url,
    )

    async def go() -> Any:
        with anyio.fail_after(60):
            async with remote.http(auth=provider) as http:
                transport = streamable_http_client(remote.url(), http_client=http)
                async with Client(transport) as client:  # type: ignore[arg-type]
                    return await client.call_tool("knowledge_search", {"query": "rollback"})

    found = anyio.run(go)
    assert "[1] deploy.md" in text_of(found)
    assert remote.issuer.tokens_issued == 1
    assert remote.gateway.refused >= 1, "the first request had no token"


class SignedRequests(httpx2.Auth):
    """SigV4 for ``execute-api`` over the package's signer, as docs/agents.md shows it."""

    requires_request_body = True

    def __init__(self, signer: SigV4Auth) -> None:
        self.signer = signer

    def auth_flow(self, request: httpx2.Request) -> Iterator[httpx2.Request]:
        headers = {"host": request.url.netloc.decode(), "content-type": "application/json"}
        self.signer.apply(request.method, str(request.url), headers, request.content)
        request.headers.update({k: v for k, v in headers.items() if k != "host"})
        yield request


def test_iam_mode_signed_requests_get_the_tools_without_reindex_or_metadata(
    remote_iam: Remote,
) -> None:
    """The client signs with SigV4 (the gateway checks the signature); the path's agent is
    what AgentSearchPolicy granted (IAM's evaluation, tested on the template). Reindex is
    granted on its own route, which an MCP request does not take: never a tool here."""

    async def body(client: Client) -> Any:
        return await client.list_tools(), await client.call_tool(
            "knowledge_search", {"query": "helm rollback"}
        )

    agent = botocore.session.Session()  # the agent role's credentials, which IAM knows
    credentials = remote_iam.gateway.credentials
    agent.set_credentials(credentials.access_key, credentials.secret_key, credentials.token)
    signed = SignedRequests(SigV4Auth(region="us-east-1", session=agent))
    listed, found = remote_iam.session(None, body, auth=signed)
    assert {t.name for t in listed.tools} == {
        "knowledge_search",
        "knowledge_status",
        "knowledge_documents",
    }
    assert "[1] deploy.md" in text_of(found)
    metadata = remote_iam.gateway.url + "/.well-known/oauth-protected-resource"
    assert remote_iam.raw("GET", metadata).status_code == 404  # no such route in IAM mode
    invocations = len(remote_iam.gateway.events)
    stranger = botocore.session.Session()
    stranger.set_credentials("AKIDSTRANGER", "not-the-secret")
    for auth in (None, SignedRequests(SigV4Auth(region="us-east-1", session=stranger))):
        assert refused_by_the_server(lambda: remote_iam.session(None, body, auth=auth))  # noqa: B023
    assert len(remote_iam.gateway.events) == invocations, "unsigned requests never ran"
