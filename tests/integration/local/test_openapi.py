"""``docs/openapi.yaml`` is valid and says exactly what the code serves.

- the document is a valid OpenAPI 3.1 description (openapi-spec-validator);
- its (method, path) pairs equal the routes of ``knowledge.service.api`` and the HTTP API events
  of ``template.yaml``, in both directions;
- real answers of ``kb serve`` (success and error) validate against its schemas.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from openapi_spec_validator import validate

from knowledge.aws.mcp_endpoint import MCP_ROUTES, METADATA_ROUTES
from knowledge.config import open_store
from knowledge.core.model import IndexOptions
from knowledge.local.server import LocalServer
from knowledge.service.routes import ROUTES

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
SPEC_PATH = REPO / "docs" / "openapi.yaml"
HTTP_METHODS = {"get", "post", "put", "delete", "patch", "head", "options", "trace"}


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(SPEC_PATH.read_text("utf-8"))
    return loaded


def spec_routes(spec: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (method.upper(), path)
        for path, item in spec["paths"].items()
        for method in item
        if method in HTTP_METHODS
    }


def test_the_document_is_valid_openapi(spec: dict[str, Any]) -> None:
    validate(spec)
    assert spec["openapi"].startswith("3.1")


def test_every_served_route_is_described_and_vice_versa(spec: dict[str, Any]) -> None:
    served = {(route.method, route.path) for route in ROUTES}  # both front ends register these
    assert spec_routes(spec) == served


class _CfnLoader(yaml.SafeLoader):
    """Reads a CloudFormation template: intrinsic tags (!Ref, !Sub, ...) become plain data."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return {suffix: loader.construct_scalar(node)}
    if isinstance(node, yaml.SequenceNode):
        return {suffix: loader.construct_sequence(node)}
    return {suffix: loader.construct_mapping(node)}


_CfnLoader.add_multi_constructor("!", _tag)


def test_the_template_routes_are_the_described_routes(spec: dict[str, Any]) -> None:
    """Every route of the template is described, except the MCP function's: the MCP
    endpoint speaks JSON-RPC and describes its tools itself (``tools/list``), and its
    protected resource metadata is for OAuth clients, and the console's are its pages (for
    a browser); an agent gateway given this document must not turn them into tools."""
    template = yaml.load((REPO / "template.yaml").read_text("utf-8"), Loader=_CfnLoader)
    deployed = set()
    for resource in template["Resources"].values():
        if resource.get("Type") == "AWS::ApiGatewayV2::Route":
            method, _, path = resource["Properties"]["RouteKey"].partition(" ")
            deployed.add((method.upper(), path))
        for event in (resource.get("Properties", {}).get("Events") or {}).values():
            if event.get("Type") == "HttpApi":  # SAM's shorthand, should a route use it
                props = event["Properties"]
                deployed.add((props["Method"].upper(), props["Path"]))
    mcp = set(MCP_ROUTES) | set(METADATA_ROUTES)
    console = {("GET", "/console"), ("GET", "/console/{proxy+}")}
    assert not (mcp | console) & spec_routes(spec)
    assert deployed == spec_routes(spec) | mcp | console


def test_every_operation_is_ready_for_an_agent_gateway(spec: dict[str, Any]) -> None:
    """The document as an agent gateway's OpenAPI target, as it is: each operation becomes
    a tool named by its ``operationId`` (unique, a tool name's alphabet) and described by
    a text whose first sentence says when a model should call it; every security
    requirement names a defined scheme, the schemes of both auth modes exist, and the
    operations that ask a token for the reindex scope are exactly the template's routes
    with ``AuthorizationScopes``, with the template's default scope."""
    schemes = spec["components"]["securitySchemes"]
    assert (schemes["sigv4"]["type"], schemes["sigv4"]["in"]) == ("apiKey", "header")
    assert (schemes["jwt"]["type"], schemes["jwt"]["scheme"]) == ("http", "bearer")
    template = yaml.load((REPO / "template.yaml").read_text("utf-8"), Loader=_CfnLoader)
    reindex_scope = template["Parameters"]["JwtReindexScope"]["Default"]
    names: list[str] = []
    scoped: set[tuple[str, str]] = set()
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            if method not in HTTP_METHODS:
                continue
            name = operation.get("operationId")
            assert name, (method, path)
            assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,63}", name), name
            names.append(name)
            description = " ".join(operation.get("description", "").split())
            assert description.startswith("Call this "), name
            assert len(description.split(". ")[0].split()) >= 8, f"{name}: say when to call it"
            requirements = operation.get("security", spec["security"])
            assert {"sigv4", "jwt"} <= {s for r in requirements for s in r}, name
            for requirement in requirements:
                assert set(requirement) <= set(schemes), name
                if requirement.get("jwt"):
                    assert requirement["jwt"] == [reindex_scope], name
                    scoped.add((method.upper(), path))
    assert len(names) == len(set(names))
    needs_scope = {
        tuple(resource["Properties"]["RouteKey"].split(" ", 1))
        for resource in template["Resources"].values()
        if resource.get("Type") == "AWS::ApiGatewayV2::Route"
        and "AuthorizationScopes" in resource["Properties"]
    }
    assert scoped == needs_scope


# --- real answers against the schemas -------------------------------------------------


def schema_of(spec: dict[str, Any], ref: str) -> dict[str, Any]:
    """A JSON Schema 2020-12 document for one component, with its ``$ref``s resolvable."""
    return {"$ref": ref, "components": spec["components"]}


def response_schema(spec: dict[str, Any], method: str, path: str, status: int) -> dict[str, Any]:
    response = spec["paths"][path][method.lower()]["responses"][str(status)]
    if "$ref" in response:
        name = response["$ref"].rsplit("/", 1)[-1]
        response = spec["components"]["responses"][name]
    inner = response["content"]["application/json"]["schema"]
    return {**inner, "components": spec["components"]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    tmp = tmp_path_factory.mktemp("openapi")
    root = tmp / "bucket"
    (root / "ops-bot" / "runbooks").mkdir(parents=True)
    (root / "ops-bot" / "runbooks" / "rollback.md").write_text(
        "# Rollback\n\n## Helm\n\nhelm rollback checkout-api\n", "utf-8"
    )
    (root / "ops-bot" / "runbooks" / "blob.md").write_bytes(b"\x00\x01\x02binary")
    with closing(
        open_store(db_path=tmp / "k.db", embedder_name="hashing", environ={}, create=True)
    ) as store:
        local = LocalServer(root, store, host="127.0.0.1", port=0, poll_interval=0.2)
        local.start()
        try:
            yield local
        finally:
            local.stop()


def call(base: str, method: str, path: str, body: Any = None) -> tuple[int, Any, dict[str, str]]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read()), dict(error.headers)


CASES = [
    ("POST", "/v1/agents/{agent}/contexts/{context}/search", {"query": "helm"}, 200),
    ("POST", "/v1/agents/{agent}/search", {"query": "helm", "mode": "hybrid"}, 200),
    ("POST", "/v1/agents/{agent}/contexts/{context}/search", {"query": "x", "max_results": 0}, 400),
    ("POST", "/v1/agents/{agent}/contexts/{context}/search", {"query": "x", "nope": 1}, 400),
    ("POST", "/v1/agents/{agent}/search", {"query": "x", "cross_context": False}, 400),
    (
        "POST",
        "/v1/agents/{agent}/contexts/{context}/search",
        {"query": "helm", "explain": True, "origin_weights": {"upload": 0.5}, "lesson_weight": 2},
        200,
    ),
    (
        "POST",
        "/v1/agents/{agent}/contexts/{context}/search",
        {"query": "x", "origin_weights": {"vault": 2}},
        400,
    ),
    (
        "POST",
        "/v1/agents/{agent}/contexts/{context}/search",
        {
            "query": "helm",
            "filter": {
                "and": [
                    {"field": "format", "op": "eq", "value": "markdown"},
                    {"not": {"field": "document_path", "op": "in", "value": ["blob.md"]}},
                    {"field": "indexed_at", "op": "gte", "value": "2020-01-01"},
                ]
            },
        },
        200,
    ),
    (
        "POST",
        "/v1/agents/{agent}/contexts/{context}/search",
        {"query": "x", "filter": {"and": [{"field": "a", "op": "in", "value": 1}]}},
        400,
    ),
    (
        "POST",
        "/v1/agents/{agent}/contexts/{context}/search",
        {"query": "helm", "group_by": "document"},
        200,
    ),
    (
        "POST",
        "/v1/agents/{agent}/contexts/{context}/search",
        {"query": "x", "group_by": "file"},
        400,
    ),
    (
        "POST",
        "/v1/agents/{agent}/contexts/{context}/context",
        {"query": "helm", "max_tokens": 80},
        200,
    ),
    ("POST", "/v1/agents/{agent}/context", {"query": "helm rollback"}, 200),
    (
        "POST",
        "/v1/agents/{agent}/contexts/{context}/context",
        {"query": "helm", "max_tokens": 30, "explain": True},
        200,
    ),
    ("POST", "/v1/agents/{agent}/context", {"query": "helm rollback", "explain": True}, 200),
    ("POST", "/v1/agents/{agent}/contexts/{context}/context", {"query": "x", "max_tokens": 0}, 400),
    ("GET", "/v1/agents/{agent}/contexts/{context}/status", None, 200),
    ("POST", "/v1/agents/{agent}/contexts/{context}/reindex", None, 200),
    ("GET", "/v1/health", None, 200),
    ("GET", "/v1/agents/{agent}/contexts/{context}/documents", None, 200),
    ("GET", "/v1/agents/{agent}/contexts/{context}/documents/{path}", None, 200),
    ("GET", "/v1/agents/{agent}/contexts", None, 200),
    ("GET", "/v1/agents/{agent}/shared", None, 200),
]

DOCUMENT_CASES = [
    # (request path under the scope, status, the spec's path template)
    ("/documents?limit=1", 200, "/documents"),
    ("/documents?limit=0", 400, "/documents"),
    ("/documents?limit=5&cursor=not-a-cursor", 400, "/documents"),
    ("/documents?offset=3", 400, "/documents"),
    ("/documents/blob.md", 200, "/documents/{path}"),
    ("/documents/missing.md", 404, "/documents/{path}"),
    ("/documents/a%2F..%2Fb.md", 400, "/documents/{path}"),
    ("/documents/rollback.md/chunks?limit=1", 200, "/documents/{path}/chunks"),
    ("/documents/rollback.md/chunks?limit=0", 400, "/documents/{path}/chunks"),
    ("/documents/rollback.md/chunks?cursor=not-a-cursor", 400, "/documents/{path}/chunks"),
    ("/documents/blob.md/chunks", 404, "/documents/{path}/chunks"),  # a problem only
    ("/documents/a%2F..%2Fb.md/chunks", 400, "/documents/{path}/chunks"),
]


@pytest.mark.parametrize(("method", "template", "body", "status"), CASES)
def test_real_answers_match_the_described_schemas(
    spec: dict[str, Any],
    server: LocalServer,
    method: str,
    template: str,
    body: Any,
    status: int,
) -> None:
    path = template.replace("{agent}", "ops-bot").replace("{context}", "runbooks")
    path = path.replace("{path}", "rollback.md")
    got, answer, _ = call(server.url, method, path, body)
    assert got == status, answer
    jsonschema.validate(answer, response_schema(spec, method, template, status))
    if body is not None and status == 200:
        request = "ContextRequest" if template.endswith("/context") else "SearchRequest"
        jsonschema.validate(body, schema_of(spec, f"#/components/schemas/{request}"))


@pytest.mark.parametrize(("request_path", "status", "template"), DOCUMENT_CASES)
def test_documents_answers_match_the_described_schemas(
    spec: dict[str, Any], server: LocalServer, request_path: str, status: int, template: str
) -> None:
    scope = "/v1/agents/ops-bot/contexts/runbooks"
    got, answer, _ = call(server.url, "GET", scope + request_path)
    assert got == status, answer
    jsonschema.validate(
        answer,
        response_schema(spec, "GET", "/v1/agents/{agent}/contexts/{context}" + template, status),
    )
    if request_path == "/documents?limit=1":
        assert [d["path"] for d in answer["documents"]] == ["blob.md"]  # by path
        assert answer["next_cursor"]
    if request_path == "/documents/rollback.md/chunks?limit=1":
        assert answer["chunks"][0]["heading_path"] == ["Rollback"]
        assert answer["next_cursor"]  # the Helm section is the next chunk
    if request_path == "/documents/blob.md":  # a binary file: only a problem, no version
        assert (answer["indexed"], answer["chunk_count"]) == (False, 0)
        assert answer["problem"]


def test_a_405_is_described_with_its_allow_header(
    spec: dict[str, Any], server: LocalServer
) -> None:
    template = "/v1/agents/{agent}/contexts/{context}/status"
    got, answer, headers = call(server.url, "POST", "/v1/agents/ops-bot/contexts/runbooks/status")
    assert got == 405
    jsonschema.validate(answer, response_schema(spec, "GET", template, 405))
    assert headers["Allow"] == "GET"


def test_the_described_request_schema_refuses_what_the_server_refuses(
    spec: dict[str, Any],
) -> None:
    schema = schema_of(spec, "#/components/schemas/SearchRequest")
    bad_filters = (
        {"and": []},
        {"field": "a", "op": "like", "value": 1},
        {"field": "a b", "op": "eq", "value": 1},
        {"field": "a", "op": "eq"},
        {"and": [{"field": "a", "op": "eq", "value": 1}], "or": []},
    )
    for bad in (
        {},
        {"query": ""},
        {"query": "x", "max_results": 101},
        {"query": "x", "x": 1},
        {"query": "x", "origin_weights": {"vault": 2}},
        {"query": "x", "origin_weights": {"shared": 50}},
        {"query": "x", "lesson_weight": 0},
        {"query": "x", "explain": "yes"},
        {"query": "x", "max_tokens": 10},  # the context route's field only
        {"query": "x", "group_by": "page"},
        *({"query": "x", "filter": f} for f in bad_filters),
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    context = schema_of(spec, "#/components/schemas/ContextRequest")
    jsonschema.validate({"query": "x", "max_tokens": 10, "group_by": "document"}, context)
    jsonschema.validate({"query": "x", "origin_weights": {"shared": 0.5}}, context)
    jsonschema.validate({"query": "x", "explain": True}, context)  # the trace, with the budget
    for bad in (
        {"query": "x", "max_tokens": 0},
        {"query": "x", "x": 1},
        {"max_tokens": 5},
        {"query": "x", "explain": "yes"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, context)
    segment = spec["components"]["schemas"]["ScopeSegment"]["pattern"]
    assert re.fullmatch(segment, "ops-bot")
    assert not re.fullmatch(segment, "..")
    assert not re.fullmatch(segment, "a/b")


WRITE_CASES = [
    # (method, the spec's path template, request path under the scope, body, status)
    ("PUT", "/documents/{path}", "/documents/notes%2Fa.md?origin=manual", b"# A\n", 202),
    ("PUT", "/documents/{path}", "/documents/_repos%2Fa.md", b"# A\n", 400),
    ("DELETE", "/documents/{path}", "/documents/notes%2Fa.md", None, 202),
    ("DELETE", "/documents/{path}", "/documents/missing.md", None, 404),
    ("POST", "/uploads", "/uploads", {"path": "big.pdf"}, 400),
]


@pytest.mark.parametrize(("method", "template", "request_path", "body", "status"), WRITE_CASES)
def test_write_answers_match_the_described_schemas(
    spec: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
    method: str,
    template: str,
    request_path: str,
    body: Any,
    status: int,
) -> None:
    root = tmp_path_factory.mktemp("writes") / "bucket"
    (root / "ops-bot" / "runbooks" / "notes").mkdir(parents=True)
    (root / "ops-bot" / "runbooks" / "notes" / "a.md").write_text("# A\n", "utf-8")
    with closing(
        open_store(db_path=root.parent / "k.db", embedder_name="hashing", create=True)
    ) as store:
        local = LocalServer(root, store, port=0, poll_interval=0.2, allow_writes=True)
        local.start()
        try:
            scope = "/v1/agents/ops-bot/contexts/runbooks"
            if isinstance(body, bytes):
                request = urllib.request.Request(
                    local.url + scope + request_path, data=body, method=method
                )
                request.add_header("Content-Type", "text/markdown")
                try:
                    with urllib.request.urlopen(request, timeout=10) as response:
                        got, answer = response.status, json.loads(response.read())
                except urllib.error.HTTPError as error:
                    with error:
                        got, answer = error.code, json.loads(error.read())
            else:
                got, answer, _ = call(local.url, method, scope + request_path, body)
        finally:
            local.stop()
    assert got == status, answer
    path = "/v1/agents/{agent}/contexts/{context}" + template
    jsonschema.validate(answer, response_schema(spec, method, path, status))


def test_a_body_over_the_document_limit_is_a_described_413(
    spec: dict[str, Any], tmp_path: Path
) -> None:
    # A server whose indexer takes 1,000 bytes at most, so the body is small enough to
    # arrive whole before the server answers without reading it.
    root = tmp_path / "bucket"
    (root / "ops-bot" / "runbooks").mkdir(parents=True)
    with closing(
        open_store(db_path=tmp_path / "k.db", embedder_name="hashing", create=True)
    ) as store:
        options = IndexOptions(max_document_bytes=1000)
        local = LocalServer(root, store, port=0, allow_writes=True, options=options)
        local.start()
        try:
            path = "/v1/agents/ops-bot/contexts/runbooks/documents/big.md"
            request = urllib.request.Request(local.url + path, data=b"a" * 1001, method="PUT")
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=10)
            with refused.value:
                got, answer = refused.value.code, json.loads(refused.value.read())
        finally:
            local.stop()
    assert (got, answer["field"]) == (413, "body"), answer
    template = "/v1/agents/{agent}/contexts/{context}/documents/{path}"
    jsonschema.validate(answer, response_schema(spec, "PUT", template, 413))


def test_writes_off_is_a_described_403(spec: dict[str, Any], server: LocalServer) -> None:
    path = "/v1/agents/ops-bot/contexts/runbooks/documents/rollback.md"
    got, answer, _ = call(server.url, "DELETE", path)
    assert got == 403, answer
    template = "/v1/agents/{agent}/contexts/{context}/documents/{path}"
    jsonschema.validate(answer, response_schema(spec, "DELETE", template, 403))


@pytest.mark.parametrize(
    ("method", "template", "request_path", "body"),
    [
        ("PUT", "/documents/{path}", "/documents/b.md", b"# B\n"),
        ("DELETE", "/documents/{path}", "/documents/a.md", None),
        ("POST", "/uploads", "/uploads", {"path": "big.pdf", "size": 10}),
    ],
)
def test_a_write_over_the_agents_limit_is_a_described_429_with_retry_after(
    spec: dict[str, Any],
    tmp_path: Path,
    method: str,
    template: str,
    request_path: str,
    body: Any,
) -> None:
    from knowledge.service.write_quotas import WriteLimits

    root = tmp_path / "bucket"
    (root / "ops-bot" / "runbooks").mkdir(parents=True)
    with closing(
        open_store(db_path=tmp_path / "k.db", embedder_name="hashing", create=True)
    ) as store:
        # A fixed quota clock: both requests fall in one window, 30 s before its end.
        local = LocalServer(
            root,
            store,
            port=0,
            allow_writes=True,
            write_limits=WriteLimits(1, 0, 0),
            quota_clock=lambda: 1_800_000_030.0,
        )
        local.start()
        try:
            scope = "/v1/agents/ops-bot/contexts/runbooks"
            first = urllib.request.Request(
                local.url + scope + "/documents/a.md", data=b"# A\n", method="PUT"
            )
            with urllib.request.urlopen(first, timeout=10) as response:
                assert response.status == 202
            if isinstance(body, bytes):
                request = urllib.request.Request(
                    local.url + scope + request_path, data=body, method=method
                )
                with pytest.raises(urllib.error.HTTPError) as refused:
                    urllib.request.urlopen(request, timeout=10)
                with refused.value:
                    got, answer = refused.value.code, json.loads(refused.value.read())
                    headers = dict(refused.value.headers)
            else:
                got, answer, headers = call(local.url, method, scope + request_path, body)
        finally:
            local.stop()
    assert got == 429, answer
    assert headers["Retry-After"] == "30"
    assert answer["retry_after"] == 30
    path = "/v1/agents/{agent}/contexts/{context}" + template
    jsonschema.validate(answer, response_schema(spec, method, path, 429))
    described = spec["components"]["responses"]["TooManyWrites"]
    assert "Retry-After" in described["headers"]
    operation = spec["paths"][path][method.lower()]
    assert operation["responses"]["429"] == {"$ref": "#/components/responses/TooManyWrites"}
