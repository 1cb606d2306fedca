"""template.yaml as data (issue 8, items 10, 12, 14, 15, 16): least-privilege policies, per-agent
API grants, both auth modes, domain shapes, alarms, Serverless policies, tags.

The policies are evaluated for given parameters (``cfn_template.Stack``) and checked by
matching request ARNs against them the way IAM does; which requests the store really
sends is recorded against the real node in tests/integration/aws/test_stack_iam.py.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from cfn_template import CREATED_DOMAIN_NAME, PSEUDO, Stack, allows, as_list, load_template

from knowledge.aws.events import ActionKind, parse_s3_record

TEMPLATE = load_template()
DOMAIN = f"arn:aws:es:us-east-1:123456789012:domain/{CREATED_DOMAIN_NAME}"
EXISTING = "arn:aws:es:us-east-1:123456789012:domain/shared-search"
CREATED = {"CreateDomain": "true", "EmbeddingProvider": "hashing"}
YOURS = {"CreateDomain": "false", "OpenSearchEndpoint": "https://x.example"}


def es(domain: str, method: str, path: str) -> tuple[str, str]:
    """The IAM action and resource of an HTTP request to a domain."""
    action = {"GET": "ESHttpGet", "HEAD": "ESHttpHead", "POST": "ESHttpPost", "PUT": "ESHttpPut"}
    return f"es:{action.get(method, 'ESHttpDelete')}", f"{domain}/{path.lstrip('/')}"


SEARCH_CALLS = [
    ("POST", "/knowledge/_search"),
    ("GET", "/knowledge/_search"),
    ("POST", "/knowledge/_msearch"),
    ("GET", "/knowledge/_mapping"),
]
WRITES = [
    ("POST", "/knowledge/_bulk"),
    ("POST", "/knowledge/_delete_by_query"),
    ("POST", "/knowledge/_update_by_query"),
    ("PUT", "/knowledge"),
    ("DELETE", "/knowledge"),
    ("PUT", "/knowledge/_doc/1"),
    ("POST", "/knowledge/_doc"),
    ("POST", "/knowledge/_update/1"),
    ("DELETE", "/knowledge/_doc/1"),
    ("PUT", "/knowledge/_settings"),
    ("POST", "/knowledge/_refresh"),
    ("PUT", "/_cluster/settings"),
]


def in_agent_index(calls: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The same calls on an agent's own index (``IndexPerAgent=true``)."""
    return [(m, p.replace("/knowledge", "/knowledge-agent-ops-bot", 1)) for m, p in calls]


OTHER_INDEX_READS = [
    ("POST", "/payroll/_search"),
    ("POST", "/payroll/_msearch"),
    ("GET", "/payroll/_doc/1"),
    ("GET", "/_cat/indices"),
]
# Multi requests at the domain root could name any index in their bodies: no role may
# send them (the store puts the index in the path).
ROOT_MULTI = [
    ("POST", "/_msearch"),
    ("GET", "/_msearch"),
    ("POST", "/_bulk"),
    ("PUT", "/_bulk"),
    ("POST", "/_mget"),
]


def domain_policy_for(stack: Stack, role: str) -> list[dict[str, Any]]:
    domain = stack.resources()["OpenSearchDomain"]
    statements = stack.evaluate(domain["Properties"]["AccessPolicies"])["Statement"]
    return [s for s in statements if f"{role}.Arn" in as_list(s["Principal"]["AWS"])]


def role_policies(parameters: dict[str, str], function: str) -> dict[str, list[dict[str, Any]]]:
    """What grants ``function`` its OpenSearch calls, by where it is: its role's policy,
    and for a domain the stack creates, the domain's access policy too."""
    stack = Stack(TEMPLATE, parameters)
    policies = {"role": stack.statements(function)}
    if parameters.get("CreateDomain") == "true":
        policies["domain access policy"] = domain_policy_for(stack, f"{function}Role")
    return policies


# A domain the stack creates, and an existing one; the shared index, and one per agent.
ON_EACH_DOMAIN = pytest.mark.parametrize(
    ("parameters", "domain"),
    [
        (CREATED, DOMAIN),
        ({**YOURS, "OpenSearchResourceArn": EXISTING}, EXISTING),
    ],
)
ON_EACH_LAYOUT = pytest.mark.parametrize("per_agent", [False, True], ids=["shared", "per-agent"])


def layout(
    parameters: dict[str, str], per_agent: bool, calls: list[tuple[str, str]]
) -> tuple[dict[str, str], list[tuple[str, str]], list[tuple[str, str]]]:
    """The parameters for the layout, the calls in its index, the same in the other's
    (the grants name only the layout chosen)."""
    if not per_agent:
        return parameters, calls, in_agent_index(calls)
    return {**parameters, "IndexPerAgent": "true"}, in_agent_index(calls), calls


@pytest.mark.parametrize("function", ["SearchFunction", "McpFunction"])
@ON_EACH_LAYOUT
@ON_EACH_DOMAIN
def test_search_role_is_read_only_on_its_index(
    parameters: dict[str, str], domain: str, per_agent: bool, function: str
) -> None:
    """The search function and the MCP function (the same reads behind MCP) alike."""
    parameters, reads, other_reads = layout(parameters, per_agent, SEARCH_CALLS)
    _, writes, other_writes = layout(parameters, per_agent, WRITES)
    for where, statements in role_policies(parameters, function).items():
        es_actions = {a for s in statements for a in as_list(s["Action"]) if a.startswith("es:")}
        assert es_actions == {"es:ESHttpGet", "es:ESHttpPost"}, where
        for method, path in reads:
            assert allows(statements, *es(domain, method, path)), (where, method, path)
        refused = writes + other_reads + other_writes + OTHER_INDEX_READS + ROOT_MULTI
        for method, path in refused:
            assert not allows(statements, *es(domain, method, path)), (where, method, path)


@ON_EACH_LAYOUT
@ON_EACH_DOMAIN
def test_indexer_role_is_scoped_to_its_index(
    parameters: dict[str, str], domain: str, per_agent: bool
) -> None:
    calls = [c for c in SEARCH_CALLS if not c[1].endswith("/_msearch")]
    calls += [("HEAD", "/knowledge"), *(w for w in WRITES if w[1] != "/_cluster/settings")]
    parameters, needed, other = layout(parameters, per_agent, calls)
    for where, statements in role_policies(parameters, "IndexerFunction").items():
        for method, path in needed:
            assert allows(statements, *es(domain, method, path)), (where, method, path)
        for method, path in [
            *other,
            *OTHER_INDEX_READS,
            *ROOT_MULTI,
            ("PUT", "/_cluster/settings"),
            ("DELETE", "/payroll"),
            ("POST", "/payroll/_delete_by_query"),
            ("PUT", "/_snapshot/repo"),
        ]:
            assert not allows(statements, *es(domain, method, path)), (where, method, path)


@ON_EACH_LAYOUT
def test_serverless_data_access_policy_is_created_read_for_search_write_for_indexer(
    per_agent: bool,
) -> None:
    stack = Stack(
        TEMPLATE,
        {
            "OpenSearchService": "aoss",
            "CreateCollection": "true",
            "ServerlessCollectionName": "kb",
            "IndexPerAgent": str(per_agent).lower(),
        },
    )
    resources = stack.resources()
    for name in ("ServerlessCollection", "ServerlessEncryptionPolicy", "ServerlessNetworkPolicy"):
        assert name in resources
    assert resources["ServerlessCollection"]["Properties"]["Type"] == "VECTORSEARCH"
    policy = json.loads(
        stack.evaluate(resources["ServerlessDataAccessPolicy"]["Properties"])["Policy"]
    )
    by_principal = {tuple(p["Principal"]): p["Rules"] for p in policy}
    search = by_principal[("SearchFunctionRole.Arn", "McpFunctionRole.Arn")]
    indexer = by_principal[("IndexerFunctionRole.Arn",)]
    assert {r["ResourceType"] for r in search + indexer} == {"index"}
    assert set(search[0]["Permission"]) == {"aoss:ReadDocument", "aoss:DescribeIndex"}
    assert "aoss:WriteDocument" in indexer[0]["Permission"]
    assert "aoss:DeleteIndex" not in indexer[0]["Permission"]
    index = "knowledge-agent-*" if per_agent else "knowledge"
    assert search[0]["Resource"] == indexer[0]["Resource"] == [f"index/kb/{index}"]
    assert global_env(stack)["OPENSEARCH_INDEX_PER_AGENT"] == str(per_agent).lower()
    # The roles reach the created collection (and nothing else) through IAM as well.
    for function in ("SearchFunction", "McpFunction", "IndexerFunction"):
        aoss = [
            s for s in stack.statements(function) if "aoss:APIAccessAll" in as_list(s["Action"])
        ]
        assert [s["Resource"] for s in aoss] == ["ServerlessCollection.Arn"]


def test_an_existing_collection_gets_the_data_access_policy_too() -> None:
    arn = "arn:aws:aoss:us-east-1:123456789012:collection/abc123"
    stack = Stack(
        TEMPLATE,
        {
            "OpenSearchService": "aoss",
            "ServerlessCollectionArn": arn,
            "ServerlessCollectionName": "shared",
        },
    )
    resources = stack.resources()
    assert "ServerlessCollection" not in resources
    assert "OpenSearchDomain" not in resources
    policy = json.loads(
        stack.evaluate(resources["ServerlessDataAccessPolicy"]["Properties"])["Policy"]
    )
    assert {r for p in policy for rule in p["Rules"] for r in rule["Resource"]} == {
        "index/shared/knowledge"
    }
    # The endpoint comes from the ARN (its id, the stack's region); IAM names that ARN.
    assert global_env(stack)["OPENSEARCH_URL"] == "https://abc123.us-east-1.aoss.amazonaws.com"
    assert global_env(stack)["OPENSEARCH_SERVICE"] == "aoss"
    for function in ("SearchFunction", "McpFunction", "IndexerFunction"):
        statements = stack.statements(function)
        assert allows(statements, "aoss:APIAccessAll", arn)
        assert not any(a.startswith("es:") for s in statements for a in as_list(s["Action"]))
    # No domain, so no domain alarm (their dimension would name nothing).
    assert not [r for r in resources.values() if "AWS/ES" in str(r)]


def api_arn(method: str, path: str) -> str:
    return (
        f"arn:aws:execute-api:us-east-1:123456789012:KnowledgeHttpApi.Ref/$default/{method}{path}"
    )


def agent_policy(stack: Stack, name: str, tag: str) -> list[dict[str, Any]]:
    """A managed policy with ``${aws:PrincipalTag/kb-agent}`` resolved as IAM would for a
    principal tagged ``kb-agent=<tag>``."""
    document = stack.evaluate(stack.resources()[name]["Properties"]["PolicyDocument"])
    text = json.dumps(document["Statement"]).replace("${aws:PrincipalTag/kb-agent}", tag)
    statements: list[dict[str, Any]] = json.loads(text)
    return statements


def test_iam_mode_per_agent_policy_grants_only_the_tagged_agent() -> None:
    stack = Stack(TEMPLATE, CREATED)
    search = agent_policy(stack, "AgentSearchPolicy", "ops-bot")
    invoke = "execute-api:Invoke"
    for method, path in [
        ("POST", "/v1/agents/ops-bot/contexts/runbooks/search"),
        ("POST", "/v1/agents/ops-bot/search"),
        ("POST", "/v1/agents/ops-bot/contexts/runbooks/context"),
        ("POST", "/v1/agents/ops-bot/context"),
        ("GET", "/v1/agents/ops-bot/contexts/runbooks/status"),
        ("GET", "/v1/agents/ops-bot/contexts/runbooks/documents"),
        ("GET", "/v1/agents/ops-bot/contexts/runbooks/documents/guides%2Fsetup.md"),
        ("GET", "/v1/agents/ops-bot/contexts/runbooks/documents/guides%2Fsetup.md/chunks"),
        ("GET", "/v1/agents/ops-bot/contexts"),
        ("GET", "/v1/agents/ops-bot/shared"),
        ("GET", "/v1/health"),
    ]:
        assert allows(search, invoke, api_arn(method, path)), path
    for method, path in [
        ("POST", "/v1/agents/support-bot/contexts/runbooks/search"),
        ("POST", "/v1/agents/support-bot/search"),
        ("POST", "/v1/agents/ops-bot-2/search"),
        ("POST", "/v1/agents/ops/search"),
        ("POST", "/v1/agents/support-bot/contexts/runbooks/context"),
        ("POST", "/v1/agents/support-bot/context"),
        ("GET", "/v1/agents/support-bot/contexts/runbooks/status"),
        ("GET", "/v1/agents/support-bot/contexts/runbooks/documents"),
        ("GET", "/v1/agents/support-bot/contexts/runbooks/documents/a.md"),
        ("GET", "/v1/agents/ops-bot-2/contexts/runbooks/documents"),
        ("GET", "/v1/agents/support-bot/contexts/runbooks/documents/a.md/chunks"),
        ("GET", "/v1/agents/support-bot/contexts"),
        ("GET", "/v1/agents/ops-bot-2/contexts"),
        ("GET", "/v1/agents/support-bot/shared"),
        ("POST", "/v1/agents/ops-bot/contexts/runbooks/documents"),  # read only
        ("POST", "/v1/agents/ops-bot/contexts/runbooks/reindex"),  # granted apart
    ]:
        assert not allows(search, invoke, api_arn(method, path)), path
    reindex = agent_policy(stack, "AgentReindexPolicy", "ops-bot")
    assert allows(reindex, invoke, api_arn("POST", "/v1/agents/ops-bot/contexts/runbooks/reindex"))
    assert not allows(reindex, invoke, api_arn("POST", "/v1/agents/ops-bot/contexts/x/search"))
    assert not allows(reindex, invoke, api_arn("POST", "/v1/agents/support-bot/contexts/x/reindex"))


def test_iam_mode_writes_are_granted_apart_per_agent() -> None:
    stack = Stack(TEMPLATE, CREATED)
    invoke = "execute-api:Invoke"
    writes = [
        ("PUT", "/v1/agents/ops-bot/contexts/runbooks/documents/a.md"),
        ("DELETE", "/v1/agents/ops-bot/contexts/runbooks/documents/guides%2Fa.md"),
        ("POST", "/v1/agents/ops-bot/contexts/runbooks/uploads"),
    ]
    search = agent_policy(stack, "AgentSearchPolicy", "ops-bot")
    reindex = agent_policy(stack, "AgentReindexPolicy", "ops-bot")
    write = agent_policy(stack, "AgentWritePolicy", "ops-bot")
    for method, path in writes:
        assert not allows(search, invoke, api_arn(method, path)), path
        assert not allows(reindex, invoke, api_arn(method, path)), path
        assert allows(write, invoke, api_arn(method, path)), path
        other = path.replace("ops-bot", "support-bot")
        assert not allows(write, invoke, api_arn(method, other)), other
    for method, path in [
        ("POST", "/v1/agents/ops-bot/contexts/runbooks/search"),
        ("GET", "/v1/agents/ops-bot/contexts/runbooks/documents/a.md"),
        ("POST", "/v1/agents/ops-bot/contexts/runbooks/reindex"),
    ]:
        assert not allows(write, invoke, api_arn(method, path)), path


def test_iam_mode_a_library_grant_is_no_grant_on_the_shared_owners_routes() -> None:
    """SharedLibraryGrants puts a library into an agent's searches; the agent's own
    principal (tagged ``kb-agent=ops-bot``) still reaches no ``_shared`` route, and no
    policy of the stack lets anyone write it."""
    stack = Stack(TEMPLATE, {**CREATED, "SharedLibraryGrants": "ops-bot=playbooks"})
    invoke = "execute-api:Invoke"
    library = "/v1/agents/_shared/contexts/playbooks"
    policies = [
        agent_policy(stack, name, "ops-bot")
        for name in ("AgentSearchPolicy", "AgentReindexPolicy", "AgentWritePolicy")
    ]
    for method, path in [
        ("POST", f"{library}/search"),
        ("POST", "/v1/agents/_shared/search"),
        ("POST", f"{library}/context"),
        ("GET", f"{library}/status"),
        ("GET", f"{library}/documents"),
        ("GET", f"{library}/documents/incident.md"),
        ("GET", f"{library}/documents/incident.md/chunks"),
        ("GET", "/v1/agents/_shared/contexts"),
        ("GET", "/v1/agents/_shared/shared"),
        ("POST", f"{library}/reindex"),
        ("PUT", f"{library}/documents/x.md"),
        ("DELETE", f"{library}/documents/incident.md"),
        ("POST", f"{library}/uploads"),
    ]:
        for statements in policies:
            assert not allows(statements, invoke, api_arn(method, path)), path
    assert allows(policies[0], invoke, api_arn("POST", "/v1/agents/ops-bot/contexts/r/search"))
    search = stack.resources()["SearchFunction"]["Properties"]["Environment"]["Variables"]
    assert stack.evaluate(search)["KB_SHARED_GRANTS"] == "ops-bot=playbooks"


def routes(stack: Stack) -> dict[str, dict[str, Any]]:
    return {
        r["Properties"]["RouteKey"]: stack.evaluate(r["Properties"])
        for r in stack.resources().values()
        if r["Type"] == "AWS::ApiGatewayV2::Route"
    }


def test_iam_mode_every_route_needs_sigv4() -> None:
    found = routes(Stack(TEMPLATE, CREATED))
    # 12 read/reindex routes, 3 write routes, 5 repository routes, 3 of the MCP endpoint;
    # no protected resource metadata (there is no token issuer in iam mode).
    assert len(found) == 23
    for key, route in found.items():
        assert route["AuthorizationType"] == "AWS_IAM", key
        assert "AuthorizerId" not in route


def test_jwt_mode_every_route_needs_a_token_and_reindex_its_scope() -> None:
    stack = Stack(
        TEMPLATE,
        {
            **CREATED,
            "ApiAuthMode": "jwt",
            "JwtIssuer": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_EXAMPLE",
            "JwtAudience": "client-a,client-b",
        },
    )
    resources = stack.resources()
    authorizer = stack.evaluate(resources["JwtAuthorizer"]["Properties"])
    assert authorizer["AuthorizerType"] == "JWT"
    assert authorizer["JwtConfiguration"]["Audience"] == ["client-a", "client-b"]
    assert "AgentSearchPolicy" not in resources
    found = routes(stack)
    public = {key for key, route in found.items() if route["AuthorizationType"] == "NONE"}
    # The protected resource metadata MCP clients read before they hold a token, only.
    assert public == {
        "GET /.well-known/oauth-protected-resource",
        "GET /.well-known/oauth-protected-resource/mcp/agents/{agent}/contexts/{context}",
    }
    for key in public:
        assert found[key]["Target"] == "integrations/McpIntegration.Ref"
        assert "AuthorizerId" not in found[key]
    for key, route in found.items():
        if key in public:
            continue
        assert route["AuthorizationType"] == "JWT", key
        assert route["AuthorizerId"] == "JwtAuthorizer.Ref"
        manages = key.endswith(("/reindex", "/sync")) or key.startswith(
            (
                "POST /v1/agents/{agent}/contexts/{context}/repos",
                "DELETE /v1/agents/{agent}/contexts/{context}/repos",
            )
        )
        if manages:  # reindex and the repository sources are granted apart from reading
            assert route["AuthorizationScopes"] == ["kb/reindex"]
        else:
            assert "AuthorizationScopes" not in route
    env = stack.evaluate(resources["SearchFunction"]["Properties"]["Environment"])["Variables"]
    assert env["API_AUTH"] == "jwt"
    assert env["JWT_AGENTS_CLAIM"] == "agents"
    assert env["JWT_REINDEX_SCOPE"] == "kb/reindex"
    assert env["JWT_AGENTS_WRITE_CLAIM"] == "agents_write"


def global_env(stack: Stack) -> dict[str, Any]:
    variables: dict[str, Any] = stack.evaluate(
        TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]
    )
    return variables


def test_created_domain_refuses_an_index_named_in_multi_request_bodies() -> None:
    stack = Stack(TEMPLATE, CREATED)
    domain = stack.evaluate(stack.resources()["OpenSearchDomain"]["Properties"])
    assert domain["AdvancedOptions"]["rest.action.multi.allow_explicit_index"] == "false"


@pytest.mark.parametrize(
    "parameters",
    [
        CREATED,
        {"OpenSearchService": "aoss", "CreateCollection": "true", "ServerlessCollectionName": "kb"},
    ],
)
def test_search_role_may_only_put_and_delete_documents(parameters: dict[str, str]) -> None:
    """The reindex route queues one message; the indexer lists the bucket, not search. The
    write routes put and delete objects of the documents bucket, nothing else (the
    status's repository summaries are read under .kb@repos/ only: the test below)."""
    s3 = [
        statement
        for statement in Stack(TEMPLATE, parameters).statements("SearchFunction")
        if any(a.startswith("s3:") for a in as_list(statement["Action"]))
        and not statement["Sid"].startswith("ReadRepoSyncSummaries")
        and statement["Sid"] != "ListRepoSyncSummaries"
    ]
    assert len(s3) == 1, s3
    assert sorted(as_list(s3[0]["Action"])) == ["s3:DeleteObject", "s3:PutObject"]
    assert as_list(s3[0]["Resource"]) == ["DocumentsBucket.Arn/*"]


@pytest.mark.parametrize(("shape", "nodes", "replicas"), [("dev", 1, "0"), ("production", 3, "2")])
def test_replicas_follow_the_domain_shape(shape: str, nodes: int, replicas: str) -> None:
    stack = Stack(TEMPLATE, {**CREATED, "DomainShape": shape})
    cluster = stack.evaluate(stack.resources()["OpenSearchDomain"]["Properties"]["ClusterConfig"])
    assert cluster["InstanceCount"] == nodes
    assert global_env(stack)["OPENSEARCH_REPLICAS"] == replicas
    assert int(replicas) < nodes, "a replica needs another data node, or the cluster stays yellow"
    if shape == "production":
        assert cluster["ZoneAwarenessEnabled"] is True
        assert cluster["ZoneAwarenessConfig"] == {"AvailabilityZoneCount": 3}
        assert cluster["DedicatedMasterEnabled"] is True
        assert cluster["DedicatedMasterCount"] == 3
    else:
        assert cluster["ZoneAwarenessEnabled"] is False
        assert cluster["DedicatedMasterEnabled"] is False
        assert "DedicatedMasterCount" not in cluster


def test_replicas_can_be_set_for_an_existing_domain() -> None:
    stack = Stack(
        TEMPLATE,
        {
            **YOURS,
            "OpenSearchResourceArn": EXISTING,
            "IndexReplicas": "1",
        },
    )
    assert global_env(stack)["OPENSEARCH_REPLICAS"] == "1"


def test_domain_alarms_notify_a_topic_created_by_default() -> None:
    stack = Stack(TEMPLATE, CREATED)
    resources = stack.resources()
    assert "AlarmTopic" in resources
    alarms = {
        stack.evaluate(r["Properties"])["MetricName"]: stack.evaluate(r["Properties"])
        for r in resources.values()
        if r["Type"] == "AWS::CloudWatch::Alarm"
    }
    assert {
        "ClusterStatus.red",
        "ClusterStatus.yellow",
        "FreeStorageSpace",
        "JVMMemoryPressure",
        "ThreadpoolWriteRejected",
        "ClusterIndexWritesBlocked",
        "ApproximateNumberOfMessagesVisible",
    } <= set(alarms)
    for metric, alarm in alarms.items():
        assert alarm["AlarmActions"] == ["AlarmTopic.Ref"], metric
        if alarm["Namespace"] == "AWS/ES":
            dims = {d["Name"]: d["Value"] for d in alarm["Dimensions"]}
            assert dims == {"DomainName": "OpenSearchDomain.Ref", "ClientId": "123456789012"}


def test_an_existing_domain_gets_its_alarms_on_a_given_topic() -> None:
    topic = "arn:aws:sns:us-east-1:123456789012:ops"
    stack = Stack(
        TEMPLATE,
        {
            **YOURS,
            "OpenSearchResourceArn": EXISTING,
            "AlarmTopicArn": topic,
        },
    )
    resources = stack.resources()
    assert "AlarmTopic" not in resources
    red = stack.evaluate(resources["ClusterRedAlarm"]["Properties"])
    assert red["AlarmActions"] == [topic]
    assert {"Name": "DomainName", "Value": "shared-search"} in red["Dimensions"]


def test_functions_are_traced() -> None:
    assert TEMPLATE["Globals"]["Function"]["Tracing"] == "Active"


def test_bucket_notifications_cover_every_event_that_changes_a_document() -> None:
    stack = Stack(TEMPLATE, CREATED)
    bucket = stack.evaluate(stack.resources()["DocumentsBucket"]["Properties"])
    events = {c["Event"] for c in bucket["NotificationConfiguration"]["QueueConfigurations"]}
    assert events == {
        "s3:ObjectCreated:*",
        "s3:ObjectRemoved:*",
        "s3:LifecycleExpiration:*",
        "s3:ObjectRestore:Completed",
    }
    # ... and the indexer acts on each of them (an ignored event would be a silent gap).
    for name, kind in [
        ("ObjectCreated:Put", ActionKind.UPSERT),
        ("ObjectRemoved:DeleteMarkerCreated", ActionKind.DELETE),
        ("LifecycleExpiration:Delete", ActionKind.DELETE),
        ("LifecycleExpiration:DeleteMarkerCreated", ActionKind.DELETE),
        ("ObjectRestore:Completed", ActionKind.UPSERT),
    ]:
        record = {
            "eventName": name,
            "s3": {"bucket": {"name": "b"}, "object": {"key": "ops-bot/runbooks/a.md"}},
        }
        assert parse_s3_record(record).kind is kind, name


# Every resource type the template uses: tagged where CloudFormation supports tags.
TAGGABLE = {
    "AWS::SQS::Queue": "list",
    "AWS::S3::Bucket": "list",
    "AWS::Logs::LogGroup": "list",
    "AWS::OpenSearchService::Domain": "list",
    "AWS::CloudWatch::Alarm": "list",
    "AWS::SNS::Topic": "list",
    "AWS::OpenSearchServerless::Collection": "list",
    "AWS::ApiGatewayV2::Api": "map",
    "AWS::ApiGatewayV2::Stage": "map",
    "AWS::Serverless::Function": "globals",
    "AWS::IAM::Role": "list",
    "AWS::DynamoDB::Table": "list",
}
UNTAGGABLE = {
    "AWS::Serverless::LayerVersion",
    "AWS::SQS::QueuePolicy",
    "AWS::S3::BucketPolicy",
    "AWS::SNS::Subscription",
    "AWS::ApiGatewayV2::Integration",
    "AWS::ApiGatewayV2::Route",
    "AWS::ApiGatewayV2::Authorizer",
    "AWS::Lambda::Permission",
    "AWS::IAM::ManagedPolicy",
    "AWS::OpenSearchServerless::SecurityPolicy",
    "AWS::OpenSearchServerless::AccessPolicy",
    "AWS::Scheduler::Schedule",  # no Tags property
}


def test_every_taggable_resource_is_tagged() -> None:
    expected = {"app": "knowledge-search", "stack": PSEUDO["AWS::StackName"]}
    stack = Stack(TEMPLATE, CREATED)
    for name, resource in TEMPLATE["Resources"].items():
        kind = resource["Type"]
        assert kind in TAGGABLE or kind in UNTAGGABLE, f"{name}: decide whether {kind} is tagged"
        if kind not in TAGGABLE:
            continue
        if TAGGABLE[kind] == "globals":
            tags = stack.evaluate(
                resource["Properties"].get("Tags", TEMPLATE["Globals"]["Function"]["Tags"])
            )
            assert TEMPLATE["Globals"]["Function"]["PropagateTags"] is True
        else:
            raw = stack.evaluate(resource["Properties"].get("Tags"))
            assert raw is not None, f"{name} has no Tags"
            tags = raw if TAGGABLE[kind] == "map" else {t["Key"]: t["Value"] for t in raw}
        assert tags == expected, name


@pytest.mark.parametrize(
    ("provider", "weights"),
    [("hashing", (0.7, 0.3)), ("bedrock", (0.3, 0.7)), ("openai", (0.3, 0.7))],
)
def test_hybrid_weights_default_to_the_embedders_own(
    provider: str, weights: tuple[float, float]
) -> None:
    """The template passes no weights unless the operator sets them, so the store picks
    the embedder's measured ones (issue 11): 0.7/0.3 for hashing, 0.3/0.7 otherwise."""
    from knowledge.ranking.fusion import hybrid_weights
    from knowledge.stores.opensearch import OpenSearchConfig

    stack = Stack(TEMPLATE, {**CREATED, "EmbeddingProvider": provider})
    env = {
        k: str(v)
        for k, v in stack.evaluate(TEMPLATE["Globals"]["Function"])["Environment"][
            "Variables"
        ].items()
    }
    config = OpenSearchConfig.from_env(
        {**env, "AWS_REGION": "us-east-1"}, url="https://search.example"
    )
    assert (config.keyword_weight, config.vector_weight) == (None, None)
    embedder = {"hashing": "hashing", "bedrock": "bedrock:x", "openai": "openai:x"}[provider]
    assert hybrid_weights(embedder) == weights


def test_hybrid_weights_set_by_the_operator_reach_the_store() -> None:
    from knowledge.stores.opensearch import OpenSearchConfig

    stack = Stack(TEMPLATE, {**CREATED, "KeywordWeight": "0.5", "VectorWeight": "0.5"})
    env = {
        k: str(v)
        for k, v in stack.evaluate(TEMPLATE["Globals"]["Function"])["Environment"][
            "Variables"
        ].items()
    }
    config = OpenSearchConfig.from_env(
        {**env, "AWS_REGION": "us-east-1"}, url="https://search.example"
    )
    assert (config.keyword_weight, config.vector_weight) == (0.5, 0.5)


RERANK_MODEL = "arn:aws:bedrock:us-east-1::foundation-model/amazon.rerank-v1:0"


def test_no_reranking_and_no_bedrock_rerank_permission_by_default() -> None:
    stack = Stack(TEMPLATE, CREATED)
    search = stack.evaluate(stack.resources()["SearchFunction"]["Properties"])
    assert search["Environment"]["Variables"]["RERANK_MODEL_ID"] == ""
    statements = stack.statements("SearchFunction")
    assert not allows(statements, "bedrock:Rerank", "*")
    assert not allows(statements, "bedrock:InvokeModel", RERANK_MODEL)


def test_reranking_grants_rerank_and_invoke_on_that_model_only() -> None:
    stack = Stack(TEMPLATE, {**CREATED, "RerankModelId": "amazon.rerank-v1:0", "RerankTopN": "30"})
    search = stack.evaluate(stack.resources()["SearchFunction"]["Properties"])
    variables = search["Environment"]["Variables"]
    assert (variables["RERANK_MODEL_ID"], str(variables["RERANK_TOP_N"])) == (
        "amazon.rerank-v1:0",
        "30",
    )
    statements = stack.statements("SearchFunction")
    assert allows(statements, "bedrock:Rerank", "*")
    assert allows(statements, "bedrock:InvokeModel", RERANK_MODEL)
    other = "arn:aws:bedrock:us-east-1::foundation-model/cohere.rerank-v3-5:0"
    assert not allows(statements, "bedrock:InvokeModel", other)
    assert not allows(statements, "bedrock:InvokeModelWithResponseStream", RERANK_MODEL)
    # the indexer never reranks
    indexer = stack.statements("IndexerFunction")
    assert not allows(indexer, "bedrock:Rerank", "*")
    assert not allows(indexer, "bedrock:InvokeModel", RERANK_MODEL)


def test_the_search_function_builds_the_reranker_the_template_configures() -> None:
    from knowledge.aws.settings import LambdaSettings, build_reranking

    stack = Stack(TEMPLATE, {**CREATED, "RerankModelId": "cohere.rerank-v3-5:0"})
    search = stack.evaluate(stack.resources()["SearchFunction"]["Properties"])
    env = {k: str(v) for k, v in search["Environment"]["Variables"].items()}
    stage = build_reranking(LambdaSettings.from_env(env))
    assert stage is not None
    assert (stage.reranker.name, stage.top_n) == ("bedrock:cohere.rerank-v3-5:0", 20)
    off = Stack(TEMPLATE, CREATED).evaluate(
        Stack(TEMPLATE, CREATED).resources()["SearchFunction"]["Properties"]
    )
    env = {k: str(v) for k, v in off["Environment"]["Variables"].items()}
    assert build_reranking(LambdaSettings.from_env(env)) is None


def test_iam_mode_repos_routes_read_with_search_and_manage_with_reindex() -> None:
    stack = Stack(TEMPLATE, CREATED)
    search = agent_policy(stack, "AgentSearchPolicy", "ops-bot")
    reindex = agent_policy(stack, "AgentReindexPolicy", "ops-bot")
    invoke = "execute-api:Invoke"
    base = "/v1/agents/ops-bot/contexts/runbooks/repos"
    reads = [("GET", base), ("GET", base + "/docs")]
    manages = [("POST", base), ("DELETE", base + "/docs"), ("POST", base + "/docs/sync")]
    for method, path in reads:
        assert allows(search, invoke, api_arn(method, path)), path
        assert not allows(reindex, invoke, api_arn(method, path)), path
    for method, path in manages:
        assert allows(reindex, invoke, api_arn(method, path)), path
        assert not allows(search, invoke, api_arn(method, path)), path
        other = path.replace("ops-bot", "support-bot")
        assert not allows(reindex, invoke, api_arn(method, other)), other


def test_repos_function_reads_only_its_prefixes_and_kb_repo_secrets() -> None:
    stack = Stack(TEMPLATE, CREATED)
    function = stack.resources()["RepoFunction"]["Properties"]
    statements = {s["Sid"]: s for p in function["Policies"] for s in stack.evaluate(p)["Statement"]}
    objects = statements["RepoObjects"]["Resource"]
    assert all(r.endswith(("/.kb@repos/*", "/*/*/_repos/*")) for r in objects)
    assert statements["ReadRepoCredentials"]["Resource"].endswith(":secret:kb-repo/*")
    assert statements["ReadRepoCredentials"]["Action"] == "secretsmanager:GetSecretValue"
    schedule = stack.evaluate(stack.resources()["RepoSyncSchedule"]["Properties"])
    assert schedule["ScheduleExpression"] == "rate(24 hours)"
    hourly = Stack(TEMPLATE, {**CREATED, "RepoSyncIntervalHours": "1"})
    assert (
        hourly.evaluate(hourly.resources()["RepoSyncSchedule"]["Properties"])["ScheduleExpression"]
        == "rate(1 hour)"
    )


def test_the_search_function_reads_the_repo_sync_summaries_only() -> None:
    """The scope's status shows each repository's last sync (``repos``): the search
    function reads the summaries (and, for one written before them, the states) under
    .kb@repos/, never a registration, the kept trees or a document, and lists only
    .kb@repos/."""
    statements = Stack(TEMPLATE, CREATED).statements("SearchFunction")
    key = "DocumentsBucket.Arn/.kb@repos/ops-bot/runbooks/docs"
    assert allows(statements, "s3:GetObject", key + ".status.json")
    assert allows(statements, "s3:GetObject", key + ".state.json")
    for other in (key + ".json", key + ".trees", "DocumentsBucket.Arn/ops-bot/runbooks/a.md"):
        assert not allows(statements, "s3:GetObject", other)
    listing = [s for s in statements if "s3:ListBucket" in as_list(s["Action"])]
    assert len(listing) == 1
    assert listing[0]["Resource"] == "DocumentsBucket.Arn"
    assert listing[0]["Condition"] == {"StringLike": {"s3:prefix": [".kb@repos/*"]}}


# --- write quotas (knowledge.service.write_quotas, knowledge.aws.write_quotas) --------------


def test_the_write_quota_table_is_on_demand_encrypted_and_expires_its_windows() -> None:
    table = Stack(TEMPLATE, CREATED).resources()["WriteQuotaTable"]["Properties"]
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert table["KeySchema"] == [{"AttributeName": "id", "KeyType": "HASH"}]
    assert table["AttributeDefinitions"] == [{"AttributeName": "id", "AttributeType": "S"}]
    # The attribute knowledge.aws.write_quotas writes as each window's end.
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert table["SSESpecification"] == {"SSEEnabled": True}


@pytest.mark.parametrize("parameters", [CREATED, {**YOURS, "ApiAuthMode": "jwt"}])
def test_only_the_search_function_may_count_writes_and_only_update_items(
    parameters: dict[str, str],
) -> None:
    stack = Stack(TEMPLATE, parameters)
    table = "WriteQuotaTable.Arn"
    search = stack.statements("SearchFunction")
    dynamodb = [
        s
        for s in search
        if any(a.startswith("dynamodb:") for a in as_list(s["Action"]))
        and table in as_list(s["Resource"])
    ]
    assert len(dynamodb) == 1, dynamodb
    assert as_list(dynamodb[0]["Action"]) == ["dynamodb:UpdateItem"]
    assert as_list(dynamodb[0]["Resource"]) == [table]
    for action in ("GetItem", "PutItem", "DeleteItem", "Query", "Scan", "DeleteTable"):
        assert not allows(search, f"dynamodb:{action}", table), action
    assert not allows(search, "dynamodb:UpdateItem", "arn:aws:dynamodb:us-east-1:1:table/other")
    for function, resource in TEMPLATE["Resources"].items():
        if resource["Type"] != "AWS::Serverless::Function" or function == "SearchFunction":
            continue
        others = stack.statements(function)
        assert not allows(others, "dynamodb:UpdateItem", table), function


def test_the_write_limits_reach_the_search_function_as_its_settings_read_them() -> None:
    from knowledge.aws.settings import LambdaSettings
    from knowledge.service.write_quotas import DEFAULT_WRITE_LIMITS, MIB

    chosen = {"WriteRequestsPerMinute": "30", "WriteMiBPerMinute": "0"}
    for parameters, expected in (
        (CREATED, DEFAULT_WRITE_LIMITS),
        ({**CREATED, **chosen, "MaxDocumentsPerScope": "500"}, None),
    ):
        stack = Stack(TEMPLATE, parameters)
        search = stack.resources()["SearchFunction"]["Properties"]["Environment"]["Variables"]
        environment = {k: str(v) for k, v in stack.evaluate(search).items()}
        assert environment["WRITE_QUOTA_TABLE"] == "WriteQuotaTable.Ref"
        limits = LambdaSettings.from_env(environment).write_limits
        if expected is not None:
            assert limits == expected
        else:
            assert (limits.requests_per_minute, limits.bytes_per_minute) == (30, 0)
            assert limits.documents_per_scope == 500
    assert DEFAULT_WRITE_LIMITS.bytes_per_minute == 256 * MIB
    for name in ("WriteRequestsPerMinute", "WriteMiBPerMinute", "MaxDocumentsPerScope"):
        pattern = TEMPLATE["Parameters"][name]["AllowedPattern"]
        assert re.fullmatch(pattern, "0"), name  # 0: no limit
        for refused in ("-1", "2.5", "010", "", "1e3"):
            assert not re.fullmatch(pattern, refused), (name, refused)


JWT = {
    **CREATED,
    "ApiAuthMode": "jwt",
    "JwtIssuer": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_EXAMPLE",
    "JwtAudience": "client-a",
}


def test_iam_mode_the_mcp_endpoint_is_granted_with_search_per_agent() -> None:
    """The MCP endpoint's scope is in its path, so AgentSearchPolicy grants it per agent as
    it grants the search routes; the reindex and write policies do not (the endpoint offers
    no reindex tool in iam mode: knowledge.aws.mcp_endpoint)."""
    stack = Stack(TEMPLATE, CREATED)
    invoke = "execute-api:Invoke"
    search = agent_policy(stack, "AgentSearchPolicy", "ops-bot")
    others = [
        agent_policy(stack, name, "ops-bot") for name in ("AgentReindexPolicy", "AgentWritePolicy")
    ]
    for method in ("POST", "GET", "DELETE"):
        own = api_arn(method, "/mcp/agents/ops-bot/contexts/runbooks")
        assert allows(search, invoke, own), method
        assert not any(allows(policy, invoke, own) for policy in others), method
        for path in (
            "/mcp/agents/support-bot/contexts/runbooks",
            "/mcp/agents/ops-bot-2/contexts/runbooks",
            "/mcp/agents/_shared/contexts/playbooks",
        ):
            assert not allows(search, invoke, api_arn(method, path)), (method, path)
    assert not allows(search, invoke, api_arn("PUT", "/mcp/agents/ops-bot/contexts/runbooks"))


@pytest.mark.parametrize("parameters", [CREATED, JWT], ids=["iam", "jwt"])
def test_the_mcp_function_reads_and_queues_granted_reindexes_only(
    parameters: dict[str, str],
) -> None:
    stack = Stack(TEMPLATE, parameters)
    statements = stack.statements("McpFunction")
    bucket = "DocumentsBucket.Arn"
    for action in ("s3:PutObject", "s3:DeleteObject", "s3:GetObject", "s3:ListBucket"):
        assert not allows(statements, action, f"{bucket}/ops-bot/runbooks/a.md"), action
        assert not allows(statements, action, bucket), action
    assert not any(a.startswith("dynamodb:") for s in statements for a in as_list(s["Action"]))
    queue = "DocumentEventsQueue.Arn"
    # The reindex tool exists in jwt mode only (a token with JwtReindexScope).
    assert allows(statements, "sqs:SendMessage", queue) is (parameters is JWT)
    assert not allows(statements, "sqs:ReceiveMessage", queue)
    resources = stack.resources()
    function = stack.evaluate(resources["McpFunction"]["Properties"])
    assert function["Layers"] == ["McpLayer.Ref"]
    assert function["LoggingConfig"] == {"LogGroup": "McpLogGroup.Ref"}
    env = function["Environment"]["Variables"]
    assert env["API_AUTH"] == parameters.get("ApiAuthMode", "iam")
    assert env["JWT_ISSUER"] == parameters.get("JwtIssuer", "")
    assert env["JWT_REINDEX_SCOPE"] == "kb/reindex"
    search = stack.evaluate(resources["SearchFunction"]["Properties"])["Environment"]["Variables"]
    for shared in ("JWT_AGENTS_CLAIM", "KB_SHARED_GRANTS", "RERANK_MODEL_ID", "KB_ORIGIN_WEIGHTS"):
        assert env[shared] == search[shared], shared
    log_group = stack.evaluate(resources["McpLogGroup"]["Properties"])
    assert log_group["LogGroupName"] == "/aws/lambda/kb-test-mcp"  # the stack name, -mcp
    permission = stack.evaluate(resources["McpFunctionApiPermission"]["Properties"])
    assert permission["Principal"] == "apigateway.amazonaws.com"


def test_the_mcp_routes_are_the_endpoints_routes() -> None:
    from knowledge.aws.mcp_endpoint import MCP_ROUTES, METADATA_ROUTES

    def served(parameters: dict[str, str]) -> set[tuple[str, str]]:
        return {
            tuple(key.split(" ", 1))  # type: ignore[misc]
            for key, route in routes(Stack(TEMPLATE, parameters)).items()
            if route["Target"] == "integrations/McpIntegration.Ref"
        }

    assert served(CREATED) == set(MCP_ROUTES)
    assert served(JWT) == set(MCP_ROUTES) | set(METADATA_ROUTES)
