"""The template's OpenSearch policies against what the store really sends (issue 8, item 12).

A recording HTTP proxy on loopback sits in front of the real node. The search function's
calls (keyword, vector, hybrid search, agent-wide search, status, the documents listing,
the reindex listing)
and the indexer's (create the index, index, overwrite, delete, replace a scope) go
through it; each request becomes its IAM action and resource ARN, which the evaluated
template must allow for that role, and the search role must refuse every indexer write.
When the store starts calling another path, this fails and names it.

Also: ``OPENSEARCH_REPLICAS`` (set by the template from the domain shape) is what the
node gives the index the store creates (item 14).
"""

from __future__ import annotations

import fnmatch
import json
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cfn_template import CREATED_DOMAIN_NAME, Stack, allows, load_template

from knowledge.aws.settings import LambdaSettings, build_store
from knowledge.core.model import SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import delete_document, reindex_source, upsert_document
from knowledge.ingest.sources.folders import LocalDirectorySource

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]

DOMAIN = f"arn:aws:es:us-east-1:123456789012:domain/{CREATED_DOMAIN_NAME}"
_BULK_OPS = ("index", "create", "update", "delete")
_ACTIONS = {"GET": "ESHttpGet", "HEAD": "ESHttpHead", "POST": "ESHttpPost", "PUT": "ESHttpPut"}


class RecordingProxy:
    """Forwards every request to the node and records ``(method, path)``, and the
    indexes the bodies of ``_bulk``/``_msearch`` requests name."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.calls: list[tuple[str, str]] = []
        self.named_indexes: list[tuple[str, str]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                path = self.path.split("?", 1)[0]
                proxy.calls.append((self.command, path))
                proxy.named_indexes.extend((path, i) for i in explicit_indexes(path, body))
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                request = urllib.request.Request(
                    proxy.target + self.path, data=body, method=self.command, headers=headers
                )
                try:
                    with urllib.request.urlopen(request, timeout=30) as answer:
                        status, data, reply = answer.status, answer.read(), answer.headers
                except urllib.error.HTTPError as error:
                    status, data, reply = error.code, error.read(), error.headers
                self.send_response(status)
                self.send_header("Content-Type", reply.get("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _forward

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def take(self) -> list[tuple[str, str]]:
        calls, self.calls = self.calls, []
        return calls


@pytest.fixture
def proxy(opensearch_url: str) -> Iterator[RecordingProxy]:
    recording = RecordingProxy(opensearch_url)
    recording.thread.start()
    try:
        yield recording
    finally:
        recording.server.shutdown()
        recording.server.server_close()


def explicit_indexes(path: str, body: bytes | None) -> list[str]:
    """The indexes named inside a ``_bulk`` (action meta lines) or ``_msearch`` (header
    lines) body: what ``rest.action.multi.allow_explicit_index: false`` refuses."""
    if body is None or not path.endswith(("/_bulk", "/_msearch")):
        return []
    named: list[str] = []
    for line in body.decode("utf-8").splitlines():
        item = json.loads(line) if line.strip() else None
        if not isinstance(item, dict):
            continue
        if path.endswith("/_msearch") and "index" in item:
            named.append(str(item["index"]))
        if path.endswith("/_bulk") and len(item) == 1:
            ((op, meta),) = item.items()
            if op in _BULK_OPS and isinstance(meta, dict) and "_index" in meta:
                named.append(str(meta["_index"]))
    return named


def root_calls(calls: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Requests to a domain-level API (``/_bulk``, ``/_msearch``, ``/_cluster/...``)."""
    return [(m, p) for m, p in calls if p.lstrip("/").startswith("_")]


def store_env(url: str, index: str, **extra: str) -> dict[str, str]:
    return {
        "OPENSEARCH_URL": url,
        "OPENSEARCH_INDEX": index,
        "OPENSEARCH_AUTH": "none",
        "OPENSEARCH_DEFAULT_MODE": "hybrid",
        **extra,
    }


def document(path: str, text: str) -> SourceDocument:
    data = text.encode("utf-8")
    return SourceDocument(path=path, size=len(data), read=lambda: data)


def requests_as_iam(calls: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [
        (f"es:{_ACTIONS.get(method, 'ESHttpDelete')}", f"{DOMAIN}/{path.lstrip('/')}")
        for method, path in calls
    ]


def run_both_functions(
    proxy: RecordingProxy, env: dict[str, str], tmp_path: Path
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The indexer's calls (create the index, index, overwrite, delete, replace the scope)
    and the search function's (every route's store calls), as recorded by the proxy."""
    scope = KnowledgeScope("ops-bot", "runbooks")
    settings = LambdaSettings(embedding_provider="hashing")
    indexer = build_store(settings, env=env, embedder=HashingEmbedder())
    try:
        upsert_document(indexer, scope, document("a.md", "# Deploy\n\nhelm rollback " * 30))
        upsert_document(indexer, scope, document("b.md", "# Scale\n\nkubectl scale"))
        upsert_document(indexer, scope, document("a.md", "# Deploy\n\nargo rollouts undo"))
        delete_document(indexer, scope, "b.md")
        (tmp_path / "c.md").write_text("# New\n\nfresh start", encoding="utf-8")
        reindex_source(indexer, scope, LocalDirectorySource(tmp_path))
        library = KnowledgeScope("_shared", "playbooks")
        upsert_document(indexer, library, document("p.md", "# Playbook\n\nrollback drill"))
        not_granted = KnowledgeScope("_shared", "secret")
        upsert_document(indexer, not_granted, document("s.md", "# Secret\n\nrollback plan"))
        writes = proxy.take()
        # Straight to the node (not recorded): the library's new index is searchable now.
        refresh = f"{proxy.target}/{env['OPENSEARCH_INDEX']}*/_refresh"
        urllib.request.urlopen(urllib.request.Request(refresh, method="POST"), timeout=30).close()
    finally:
        indexer.close()
    searcher = build_store(settings, env=env, embedder=HashingEmbedder())
    try:
        for mode in SearchMode:
            assert isinstance(searcher.search(scope, SearchQuery("rollback", mode=mode)), list)
        searcher.search(scope, SearchQuery("rollback", cross_context=True))
        for mode in SearchMode:  # a granted agent: its scope and its library in one request
            query = SearchQuery("rollback", mode=mode, shared_libraries=(library,))
            assert any(h.origin == "shared" for h in searcher.search(scope, query)), mode
        searcher.status(scope)
        searcher.stored_documents(scope)  # the reindex route lists what is indexed
        searcher.list_documents(scope, limit=1)  # the documents routes
        searcher.get_document(scope, "c.md")
        reads = proxy.take()
    finally:
        searcher.close()
    return writes, reads


def delete_indexes(opensearch_url: str, pattern: str) -> None:
    request = urllib.request.Request(f"{opensearch_url}/{pattern}", method="DELETE")
    urllib.request.urlopen(request, timeout=30).close()


@pytest.mark.parametrize("per_agent", [False, True], ids=["shared-index", "index-per-agent"])
def test_template_policies_allow_exactly_what_each_function_calls(
    proxy: RecordingProxy, opensearch_url: str, tmp_path: Path, per_agent: bool
) -> None:
    index = f"kb_iam_{uuid.uuid4().hex[:12]}"
    template = load_template()
    parameters = {"CreateDomain": "true", "IndexName": index}
    stack = Stack(template, {**parameters, "IndexPerAgent": str(per_agent).lower()})
    search_policy = stack.statements("SearchFunction")
    # The MCP function's tools make the search function's reads (the same KnowledgeApi).
    mcp_policy = stack.statements("McpFunction")
    indexer_policy = stack.statements("IndexerFunction")
    # The layout the functions use is the one the template gives them.
    variables = stack.evaluate(template["Globals"]["Function"]["Environment"]["Variables"])
    env = store_env(
        proxy.url, index, OPENSEARCH_INDEX_PER_AGENT=variables["OPENSEARCH_INDEX_PER_AGENT"]
    )
    other = Stack(template, {**parameters, "IndexPerAgent": str(not per_agent).lower()})
    try:
        writes, reads = run_both_functions(proxy, env, tmp_path)
    finally:
        delete_indexes(opensearch_url, f"{index}*")

    assert writes
    assert reads
    assert any(p.endswith("/_msearch") for _, p in reads), "hybrid search uses _msearch"
    # A granted agent's search reads its own index and its library's (each library has
    # an index of its own) in one request, an explicit list: never the library it is not
    # granted, never a pattern.
    both = f"/{index}-agent-ops-bot,{index}-agent-__shared_-playbooks/_search"
    assert (both in {p for _, p in reads}) is per_agent
    assert not [p for _, p in reads if "*" in p or "__shared_-secret" in p]
    if per_agent:
        created = {p for m, p in writes if m == "PUT" and p.count("/") == 1}
        assert {f"/{index}-agent-__shared_-playbooks", f"/{index}-agent-__shared_-secret"} <= (
            created
        )
    assert root_calls(writes + reads) == []
    assert proxy.named_indexes == []
    for action, resource in requests_as_iam(writes):
        assert allows(indexer_policy, action, resource), f"indexer may not {action} {resource}"
    for action, resource in requests_as_iam(reads):
        assert allows(search_policy, action, resource), f"search may not {action} {resource}"
        assert allows(mcp_policy, action, resource), f"mcp may not {action} {resource}"
    # The grants name only the layout chosen: the other layout's grants refuse its calls.
    for action, resource in requests_as_iam(writes):
        assert not allows(other.statements("IndexerFunction"), action, resource), resource
    for action, resource in requests_as_iam(reads):
        assert not allows(other.statements("SearchFunction"), action, resource), resource
    # Read-only: every write the indexer made is refused to the search and MCP roles.
    refused = [
        (a, r)
        for a, r in requests_as_iam(writes)
        if not allows(search_policy, a, r) and not allows(mcp_policy, a, r)
    ]
    write_paths = {p for m, p in writes if m in ("PUT", "DELETE") or "_bulk" in p}
    assert write_paths, "the recorded writes include bulk requests or index creation"
    for method, path in writes:
        if method in ("PUT", "DELETE") or "_bulk" in path or "_delete_by_query" in path:
            action = f"es:{_ACTIONS.get(method, 'ESHttpDelete')}"
            assert (action, f"{DOMAIN}/{path.lstrip('/')}") in refused, (method, path)


@pytest.mark.parametrize("per_agent", [False, True], ids=["shared-index", "index-per-agent"])
def test_serverless_mode_calls_no_root_path_either(
    proxy: RecordingProxy, opensearch_url: str, tmp_path: Path, fake_aws: None, per_agent: bool
) -> None:
    """service=aoss on the local node (it ignores the SigV4 headers): the Serverless write
    path (server ids, deletes by search + bulk) names its index in the path as well, and
    every index a path names is one the evaluated data access policy grants that role
    (with an index per agent: the agent's and each library's, inside ``<IndexName>-agent-*``)."""
    index = f"kb_iam_{uuid.uuid4().hex[:12]}"
    env = store_env(
        proxy.url,
        index,
        OPENSEARCH_AUTH="sigv4",
        OPENSEARCH_SERVICE="aoss",
        AWS_REGION="us-east-1",
        OPENSEARCH_VECTOR_ENGINE="lucene",
        OPENSEARCH_INDEX_PER_AGENT=str(per_agent).lower(),
    )
    try:
        writes, reads = run_both_functions(proxy, env, tmp_path)
    finally:
        delete_indexes(opensearch_url, f"{index}*")
    assert any(p.endswith("/_bulk") for _, p in writes)
    assert any(p.endswith("/_msearch") for _, p in reads)
    assert root_calls(writes + reads) == []
    assert proxy.named_indexes == []
    stack = Stack(
        load_template(),
        {
            "OpenSearchService": "aoss",
            "CreateCollection": "true",
            "ServerlessCollectionName": "kb",
            "IndexName": index,
            "IndexPerAgent": str(per_agent).lower(),
        },
    )
    policy = json.loads(
        stack.evaluate(stack.resources()["ServerlessDataAccessPolicy"]["Properties"])["Policy"]
    )
    granted = {p["Principal"][0]: p["Rules"][0]["Resource"] for p in policy}
    for role, calls in (("SearchFunctionRole.Arn", reads), ("IndexerFunctionRole.Arn", writes)):
        named = {name for _, path in calls for name in path.lstrip("/").split("/")[0].split(",")}
        assert named, role
        for name in named:
            assert any(fnmatch.fnmatchcase(f"index/kb/{name}", r) for r in granted[role]), name
    if per_agent:
        assert f"/{index}-agent-ops-bot,{index}-agent-__shared_-playbooks/_search" in {
            p for _, p in reads
        }


@pytest.mark.parametrize("replicas", ["0", "2"])
def test_replicas_setting_reaches_the_index_the_store_creates(
    opensearch_url: str, replicas: str
) -> None:
    import json

    index = f"kb_replicas_{uuid.uuid4().hex[:12]}"
    env = store_env(opensearch_url, index, OPENSEARCH_REPLICAS=replicas)
    store = build_store(LambdaSettings(embedding_provider="hashing"), env=env)
    try:
        upsert_document(store, KnowledgeScope("ops-bot", "runbooks"), document("a.md", "# A\n\nx"))
        with urllib.request.urlopen(f"{opensearch_url}/{index}/_settings", timeout=30) as r:
            settings = json.loads(r.read())
    finally:
        store.close()
        urllib.request.urlopen(
            urllib.request.Request(f"{opensearch_url}/{index}", method="DELETE"), timeout=30
        ).close()
    assert settings[index]["settings"]["index"]["number_of_replicas"] == replicas
