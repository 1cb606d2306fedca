"""The deploy rehearsal (issue 30): template.yaml expanded by the SAM translator for every
parameter set that matters, its constraints and Rules evaluated as CloudFormation
evaluates them, its conditions resolved, and what it would create checked across
resources (``deploy_rehearsal``). No AWS account: what CloudFormation would refuse, or
create and then fail on, is found here.

- Working sets (the defaults, every ``--parameter-overrides`` example in docs/deploy.md,
  created and existing domain, created and existing collection, iam and jwt, openai,
  bedrock and hashing, two stacks side by side, the longest stack name) pass the
  constraints and Rules, and deploy with every reference resolved, names within their
  limits and unique per stack, grants naming the resources created, alarm dimensions
  naming the domain.
- Every mismatched combination is refused before anything is created, by a Rule or a
  parameter constraint whose message names what to set; and every combination of the
  OpenSearch parameters that is not refused deploys consistently.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from typing import Any

import pytest
from cfn_template import REPO_ROOT, load_template
from deploy_rehearsal import (
    RULE_FUNCTIONS,
    Deployment,
    parameter_problems,
    refusals,
    rehearse,
    schema_problems,
    token,
)

pytestmark = [pytest.mark.integration]

TEMPLATE = load_template()
ACCOUNT, REGION = "123456789012", "us-east-1"
DEV = ("knowledge-dev", "51af3dc0-da77-11e4-872e-1234567db123")
PROD = ("knowledge-prod", "9c1e5a70-1f2b-11f0-8a6d-0a1b2c3d4e5f")
LONGEST = ("K" + "x" * 126 + "9", "0f0e0d0c-0b0a-4909-8807-060504030201")  # 128 characters
DOMAIN_ARN = f"arn:aws:es:{REGION}:{ACCOUNT}:domain/shared-search"
DOMAIN_URL = f"https://search-shared-search-abc123.{REGION}.es.amazonaws.com"
COLLECTION_ARN = f"arn:aws:aoss:{REGION}:{ACCOUNT}:collection/abc123def456"
SECRET = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:knowledge-search/openai-AbCdEf"
ISSUER = f"https://cognito-idp.{REGION}.amazonaws.com/{REGION}_EXAMPLE"
YOUR_DOMAIN = {"CreateDomain": "false", "OpenSearchEndpoint": DOMAIN_URL}
YOUR_COLLECTION = {"OpenSearchService": "aoss", "ServerlessCollectionArn": COLLECTION_ARN}


def docs_examples() -> dict[str, dict[str, str]]:
    """Every ``--parameter-overrides`` of docs/deploy.md, as the parameters it sets."""
    text = (REPO_ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    blocks = "\n".join(re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL))
    examples: dict[str, dict[str, str]] = {}
    for number, command in enumerate(re.findall(r"sam deploy(?:[^\n]*\\\n)*[^\n]*", blocks)):
        if "--parameter-overrides" not in command:
            continue
        overrides = command.split("--parameter-overrides", 1)[1]
        pairs = re.findall(r"([A-Za-z0-9]+)=(\S+)", overrides)
        examples[f"docs/deploy.md example {number}"] = dict(pairs)
    return examples


WORKING: dict[str, dict[str, str]] = {
    "defaults": {},
    "created domain, production": {"DomainShape": "production", "AlarmEmail": "ops@example.com"},
    "existing domain": {**YOUR_DOMAIN, "OpenSearchResourceArn": DOMAIN_ARN, "IndexReplicas": "1"},
    "created collection": {"OpenSearchService": "aoss", "CreateCollection": "true"},
    "created collection, named": {
        "OpenSearchService": "aoss",
        "CreateCollection": "true",
        "ServerlessCollectionName": "team-knowledge",
    },
    "existing collection": {**YOUR_COLLECTION, "ServerlessCollectionName": "shared"},
    "jwt": {"ApiAuthMode": "jwt", "JwtIssuer": ISSUER, "JwtAudience": "client-a,client-b"},
    "openai": {"EmbeddingProvider": "openai", "OpenAIApiKeySecretArn": SECRET},
    "hashing, your alarm topic": {
        "EmbeddingProvider": "hashing",
        "AlarmTopicArn": f"arn:aws:sns:{REGION}:{ACCOUNT}:ops",
    },
    "reranking": {"RerankModelId": "amazon.rerank-v1:0"},
    "index per agent": {"IndexPerAgent": "true", "IndexName": "kb"},
    "index per agent, created collection": {
        "IndexPerAgent": "true",
        "OpenSearchService": "aoss",
        "CreateCollection": "true",
    },
    **docs_examples(),
}
# Two stacks side by side in one account and region, and the longest stack name.
BESIDE: dict[str, tuple[dict[str, str], tuple[str, str]]] = {
    "defaults beside": ({}, PROD),
    "created collection beside": (WORKING["created collection"], PROD),
    "longest stack name": (WORKING["created collection"], LONGEST),
}


@pytest.fixture(scope="module")
def deployments() -> dict[str, Deployment]:
    """Every working set translated once (one translator process for all of them)."""
    names = [*WORKING, *BESIDE]
    sets = [*WORKING.values(), *(p for p, _ in BESIDE.values())]
    stacks = [DEV] * len(WORKING) + [s for _, s in BESIDE.values()]
    return dict(zip(names, rehearse(sets, stacks), strict=True))


def test_the_docs_examples_are_found() -> None:
    examples = docs_examples()
    assert examples, "docs/deploy.md has no sam deploy --parameter-overrides example"
    assert all(examples.values()), examples


def test_rules_use_only_the_functions_cloudformation_allows_there() -> None:
    def functions(value: Any) -> set[str]:
        if isinstance(value, list):
            return set().union(*(functions(v) for v in value)) if value else set()
        if isinstance(value, dict):
            keys = {k for k in value if k.startswith("Fn::") or k in ("Ref", "Condition")}
            return keys.union(*(functions(v) for v in value.values()))
        return set()

    used = functions(TEMPLATE["Rules"])
    assert used <= RULE_FUNCTIONS | {"Ref"}, used - RULE_FUNCTIONS
    broken = {**TEMPLATE, "Rules": {"R": {"Assertions": [{"Assert": {"Fn::Split": []}}]}}}
    with pytest.raises(ValueError, match="Fn::Split"):
        refusals(broken, {})


@pytest.mark.parametrize("name", WORKING)
def test_working_sets_pass_the_constraints_and_rules(name: str) -> None:
    assert parameter_problems(TEMPLATE, WORKING[name]) == []
    assert refusals(TEMPLATE, WORKING[name]) == []


def test_every_working_set_deploys_with_every_reference_resolved(
    deployments: dict[str, Deployment],
) -> None:
    problems = {name: d.problems for name, d in deployments.items() if d.problems}
    assert problems == {}


def test_the_defaults_deploy_a_small_domain_and_bedrock_with_no_secret(
    deployments: dict[str, Deployment],
) -> None:
    stack = deployments["defaults"]
    (domain,) = stack.of_type("AWS::OpenSearchService::Domain").values()
    assert domain["ClusterConfig"]["InstanceType"] == "t3.small.search"
    assert domain["ClusterConfig"]["InstanceCount"] == 1
    assert str(domain["EBSOptions"]["VolumeSize"]) == "10"
    assert not stack.of_type("AWS::OpenSearchServerless::Collection")
    for function in ("SearchFunction", "IndexerFunction"):
        env = stack.environment(function)
        assert env["OPENSEARCH_URL"] == "https://" + token("OpenSearchDomain", "DomainEndpoint")
        assert env["OPENSEARCH_SERVICE"] == "es"
        assert env["OPENSEARCH_REPLICAS"] == "0"
        assert env["EMBEDDING_PROVIDER"] == "bedrock"
        titan = f"arn:aws:bedrock:{REGION}::foundation-model/amazon.titan-embed-text-v2:0"
        statements = stack.role_statements(f"{function}Role")
        assert any(
            titan == s["Resource"] and s["Action"] == "bedrock:InvokeModel" for s in statements
        )
        assert not any("secretsmanager" in json.dumps(s) for s in statements)


def test_the_intake_and_the_two_lanes_deploy_with_their_caps_and_grants(
    deployments: dict[str, Deployment],
) -> None:
    """The event source mappings SAM makes: the dispatcher on the intake, the indexer on
    the express lane (IndexerMaxConcurrency) and the bulk lane (BulkMaxConcurrency); the
    dispatcher's role sends to the two work queues only (and counts what it sends in the
    progress table), the indexer's backs off and queues reindex steps on them."""
    for name, stack in deployments.items():
        mappings = {
            (m["EventSourceArn"], m["FunctionName"]): m
            for m in stack.of_type("AWS::Lambda::EventSourceMapping").values()
        }
        intake = mappings[(token("DocumentEventsQueue", "Arn"), token("DispatcherFunction"))]
        express = mappings[(token("DocumentExpressQueue", "Arn"), token("IndexerFunction"))]
        bulk = mappings[(token("DocumentBulkQueue", "Arn"), token("IndexerFunction"))]
        assert str(intake["BatchSize"]) == stack.values["DispatcherBatchSize"], name
        assert intake["ScalingConfig"] == {"MaximumConcurrency": 2}, name
        caps = (express["ScalingConfig"], bulk["ScalingConfig"])
        assert caps == (
            {"MaximumConcurrency": stack.values["IndexerMaxConcurrency"]},
            {"MaximumConcurrency": stack.values["BulkMaxConcurrency"]},
        ), name
        assert len([m for m in mappings if m[0] == token("DocumentEventsQueue", "Arn")]) == 1
        work_queues = sorted(
            [token("DocumentExpressQueue", "Arn"), token("DocumentBulkQueue", "Arn")]
        )
        granted = [s for s in stack.role_statements("DispatcherFunctionRole") if "Sid" in s]
        sends = [s for s in granted if str(s["Action"]).startswith("sqs:")]
        assert [(s["Sid"], s["Action"], sorted(s["Resource"])) for s in sends] == [
            ("ForwardToWorkQueues", "sqs:SendMessage", work_queues)
        ], name
        # ...and counts what it forwards per scope, for the status route's progress
        progress = token("IndexProgressTable", "Arn")
        assert [(s["Sid"], s["Action"], s["Resource"]) for s in granted if s not in sends] == [
            ("CountQueuedEvents", "dynamodb:UpdateItem", progress)
        ], name
        (backoff,) = [
            s
            for s in stack.role_statements("IndexerFunctionRole")
            if s.get("Sid") == "QueueReindexStepsAndBackOff"
        ]
        assert sorted(backoff["Resource"]) == work_queues, name
        dispatcher = stack.environment("DispatcherFunction")
        assert dispatcher["EXPRESS_QUEUE_URL"] == token("DocumentExpressQueue"), name
        assert dispatcher["BULK_QUEUE_URL"] == token("DocumentBulkQueue"), name
        assert stack.environment("IndexerFunction")["BULK_QUEUE_URL"] == token(
            "DocumentBulkQueue"
        ), name


def _target(stack: Deployment) -> tuple[str, str, str]:
    """(kind, the ARN the grants must name, the name of the domain or collection)."""
    domains = stack.of_type("AWS::OpenSearchService::Domain")
    collections = stack.of_type("AWS::OpenSearchServerless::Collection")
    given = stack.values
    if domains:
        (domain,) = domains.values()
        name = domain["DomainName"]
        return "es", f"arn:aws:es:{REGION}:{ACCOUNT}:domain/{name}", name
    if collections:
        (collection,) = collections.values()
        return "aoss", token("ServerlessCollection", "Arn"), collection["Name"]
    if given["OpenSearchService"] == "aoss":
        return "aoss", given["ServerlessCollectionArn"], given["ServerlessCollectionName"]
    arn = given["OpenSearchResourceArn"]
    return "es", arn, arn.split("domain/", 1)[1]


def _grants(stack: Deployment, role: str, prefix: str) -> list[str]:
    return [
        resource
        for statement in stack.role_statements(role)
        if any(str(a).startswith(prefix) for a in _listed(statement["Action"]))
        for resource in _listed(statement["Resource"])
    ]


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_grants_and_endpoints_name_the_opensearch_resource_of_the_stack(
    deployments: dict[str, Deployment],
) -> None:
    for name, stack in deployments.items():
        kind, arn, target = _target(stack)
        env = stack.environment("SearchFunction")
        assert env["OPENSEARCH_SERVICE"] == kind, name
        for role in ("SearchFunctionRole", "McpFunctionRole", "IndexerFunctionRole"):
            es, aoss = _grants(stack, role, "es:"), _grants(stack, role, "aoss:")
            if kind == "es":
                assert es, (name, role)
                assert all(r.startswith(f"{arn}/") for r in es), (name, role, es)
                assert aoss == [], (name, role)
            else:
                assert aoss == [arn], (name, role, aoss)
                assert es == [], (name, role, es)
        policies = stack.of_type("AWS::OpenSearchServerless::AccessPolicy")
        if kind == "aoss":
            assert env["OPENSEARCH_URL"].endswith(".aoss.amazonaws.com") or env[
                "OPENSEARCH_URL"
            ] == token("ServerlessCollection", "CollectionEndpoint"), name
            (policy,) = policies.values()
            document = json.loads(policy["Policy"])
            principals = {p for statement in document for p in statement["Principal"]}
            assert principals == {
                token("SearchFunctionRole", "Arn"),
                token("McpFunctionRole", "Arn"),
                token("IndexerFunctionRole", "Arn"),
            }, name
            indexes = {r for s in document for rule in s["Rules"] for r in rule["Resource"]}
            assert {i.split("/")[1] for i in indexes} == {target}, name
            for security in stack.of_type("AWS::OpenSearchServerless::SecurityPolicy").values():
                document = json.loads(security["Policy"])
                rules = document["Rules"] if isinstance(document, dict) else document[0]["Rules"]
                assert rules[0]["Resource"] == [f"collection/{target}"], name
        else:
            assert policies == {}, name
            if "OpenSearchDomain" in stack.created:
                access = stack.properties["OpenSearchDomain"]["AccessPolicies"]["Statement"]
                for statement in access:
                    assert all(r.startswith(f"{arn}/") for r in statement["Resource"]), name


def test_grants_name_the_index_layout_the_functions_use(
    deployments: dict[str, Deployment],
) -> None:
    """The shared index, or with IndexPerAgent=true the agent indexes, and not the other."""
    for name, stack in deployments.items():
        per_agent = stack.values["IndexPerAgent"] == "true"
        index = stack.values["IndexName"] + ("-agent-*" if per_agent else "")
        for function in ("SearchFunction", "McpFunction", "IndexerFunction", "RepoFunction"):
            env = stack.environment(function)
            assert env["OPENSEARCH_INDEX_PER_AGENT"] == str(per_agent).lower(), (name, function)
            assert env["OPENSEARCH_INDEX"] == stack.values["IndexName"], (name, function)
        kind, arn, target = _target(stack)
        if kind == "aoss":
            (policy,) = stack.of_type("AWS::OpenSearchServerless::AccessPolicy").values()
            named = {
                r for s in json.loads(policy["Policy"]) for u in s["Rules"] for r in u["Resource"]
            }
            assert named == {f"index/{target}/{index}"}, name
            continue
        for role in ("SearchFunctionRole", "IndexerFunctionRole"):
            grants = _grants(stack, role, "es:")
            indexes = {r.removeprefix(f"{arn}/").split("/", 1)[0] for r in grants}
            assert indexes == {index}, (name, role, grants)


def test_domain_alarms_exist_only_for_a_domain_and_name_it(
    deployments: dict[str, Deployment],
) -> None:
    for name, stack in deployments.items():
        kind, _, target = _target(stack)
        alarms = [
            a
            for a in stack.of_type("AWS::CloudWatch::Alarm").values()
            if a["Namespace"] == "AWS/ES"
        ]
        if kind == "aoss":
            assert alarms == [], name
            continue
        assert len(alarms) == 6, name
        expected = token("OpenSearchDomain") if "OpenSearchDomain" in stack.created else target
        for alarm in alarms:
            dimensions = {d["Name"]: d["Value"] for d in alarm["Dimensions"]}
            assert dimensions == {"DomainName": expected, "ClientId": ACCOUNT}, name


# Names AWS keeps per account and region: (resource type, property, pattern).
SCOPED_NAMES = [
    ("AWS::OpenSearchService::Domain", "DomainName", r"[a-z][a-z0-9-]{2,27}"),
    ("AWS::OpenSearchServerless::Collection", "Name", r"[a-z][a-z0-9-]{2,31}"),
    ("AWS::OpenSearchServerless::SecurityPolicy", "Name", r"[a-z][a-z0-9-]{2,31}"),
    ("AWS::OpenSearchServerless::AccessPolicy", "Name", r"[a-z][a-z0-9-]{2,31}"),
    ("AWS::Lambda::LayerVersion", "LayerName", r"[a-zA-Z0-9-_]{1,140}"),
    ("AWS::Logs::LogGroup", "LogGroupName", r"[.\-_/#A-Za-z0-9]{1,512}"),
    ("AWS::S3::Bucket", "BucketName", r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"),
]


def scoped_names(stack: Deployment) -> set[tuple[str, str]]:
    names = set()
    for kind, prop, pattern in SCOPED_NAMES:
        for resource, properties in stack.of_type(kind).items():
            if prop not in properties:
                continue
            value = properties[prop]
            assert re.fullmatch(pattern, value), f"{resource}.{prop} {value!r} breaks {pattern}"
            scope = properties.get("Type", "") if "SecurityPolicy" in kind else ""
            names.add((kind + scope, value))
    return names


def test_names_are_within_their_limits(deployments: dict[str, Deployment]) -> None:
    for stack in deployments.values():
        scoped_names(stack)


def test_properties_meet_their_resource_types_schemas(deployments: dict[str, Deployment]) -> None:
    """Every created resource's string properties against the CloudFormation provider
    schema of its type (the longest stack name included)."""
    problems = {name: schema_problems(d) for name, d in deployments.items()}
    assert {name: p for name, p in problems.items() if p} == {}


@pytest.mark.parametrize(
    ("first", "second"),
    [("defaults", "defaults beside"), ("created collection", "created collection beside")],
)
def test_two_stacks_side_by_side_share_no_name(
    deployments: dict[str, Deployment], first: str, second: str
) -> None:
    assert scoped_names(deployments[first]).isdisjoint(scoped_names(deployments[second]))
    assert scoped_names(deployments[first]), "no named resource found"


def test_serverless_policies_are_compact_json(deployments: dict[str, Deployment]) -> None:
    stack = deployments["created collection"]
    kinds = ("SecurityPolicy", "AccessPolicy")
    for kind in kinds:
        for policy in stack.of_type(f"AWS::OpenSearchServerless::{kind}").values():
            text = policy["Policy"]
            assert json.dumps(json.loads(text), separators=(",", ":")) == text


# Each mismatch, and a word of the fix its message must name.
MISMATCHES: list[tuple[str, dict[str, str], str]] = [
    (
        "collection ARN as the domain ARN",
        {**YOUR_DOMAIN, "OpenSearchResourceArn": COLLECTION_ARN},
        "ServerlessCollectionArn",
    ),
    (
        "es ARN naming a collection",
        {**YOUR_DOMAIN, "OpenSearchResourceArn": f"arn:aws:es:{REGION}:{ACCOUNT}:collection/abc"},
        "domain/NAME",
    ),
    (
        "aoss ARN naming a domain",
        {
            **YOUR_COLLECTION,
            "ServerlessCollectionArn": f"arn:aws:aoss:{REGION}:{ACCOUNT}:domain/abc",
            "ServerlessCollectionName": "x-kb",
        },
        "collection/ID",
    ),
    (
        "collection endpoint for a domain",
        {
            **YOUR_DOMAIN,
            "OpenSearchEndpoint": f"https://abc.{REGION}.aoss.amazonaws.com",
            "OpenSearchResourceArn": DOMAIN_ARN,
        },
        "ServerlessCollectionArn",
    ),
    (
        "endpoint with aoss",
        {**YOUR_COLLECTION, "ServerlessCollectionName": "shared", "OpenSearchEndpoint": DOMAIN_URL},
        "leave OpenSearchEndpoint empty",
    ),
    (
        "domain ARN with aoss",
        {
            **YOUR_COLLECTION,
            "ServerlessCollectionName": "shared",
            "OpenSearchResourceArn": DOMAIN_ARN,
        },
        "ServerlessCollectionArn",
    ),
    (
        "collection ARN with es",
        {"ServerlessCollectionArn": COLLECTION_ARN},
        "OpenSearchService=aoss",
    ),
    ("collection name with es", {"ServerlessCollectionName": "shared"}, "OpenSearchService=aoss"),
    (
        "collection name without its ARN",
        {"OpenSearchService": "aoss", "ServerlessCollectionName": "shared"},
        "set ServerlessCollectionArn",
    ),
    ("collection ARN without its name", YOUR_COLLECTION, "set ServerlessCollectionName"),
    ("aoss with nothing", {"OpenSearchService": "aoss"}, "CreateCollection=true"),
    ("created collection with es", {"CreateCollection": "true"}, "OpenSearchService=aoss"),
    (
        "created collection and an ARN",
        {
            "OpenSearchService": "aoss",
            "CreateCollection": "true",
            "ServerlessCollectionArn": COLLECTION_ARN,
        },
        "leave ServerlessCollectionArn empty",
    ),
    (
        "your domain, no endpoint",
        {"CreateDomain": "false", "OpenSearchResourceArn": DOMAIN_ARN},
        "set OpenSearchEndpoint",
    ),
    ("your domain, no ARN", YOUR_DOMAIN, "set OpenSearchResourceArn"),
    (
        "created domain and an endpoint",
        {"OpenSearchEndpoint": DOMAIN_URL, "OpenSearchResourceArn": DOMAIN_ARN},
        "CreateDomain=false",
    ),
    ("dev domain with replicas", {"IndexReplicas": "2"}, "IndexReplicas"),
    ("jwt without issuer", {"ApiAuthMode": "jwt", "JwtAudience": "a"}, "set JwtIssuer"),
    ("jwt without audience", {"ApiAuthMode": "jwt", "JwtIssuer": ISSUER}, "set JwtAudience"),
    ("openai without a key", {"EmbeddingProvider": "openai"}, "set OpenAIApiKeySecretArn"),
    (
        "e-mail with your topic",
        {"AlarmTopicArn": f"arn:aws:sns:{REGION}:{ACCOUNT}:ops", "AlarmEmail": "a@example.com"},
        "leave AlarmEmail empty",
    ),
    (
        "collection name too long",
        {
            "OpenSearchService": "aoss",
            "CreateCollection": "true",
            "ServerlessCollectionName": "k" * 33,
        },
        "3-32",
    ),
]


@pytest.mark.parametrize(("case", "parameters", "fix"), MISMATCHES, ids=[m[0] for m in MISMATCHES])
def test_a_mismatch_is_refused_with_what_to_set(
    case: str, parameters: dict[str, str], fix: str
) -> None:
    messages = parameter_problems(TEMPLATE, parameters) + [
        f"{rule}: {text}" for rule, text in refusals(TEMPLATE, parameters)
    ]
    assert messages, f"{case}: nothing refuses {parameters}"
    assert any(fix in m for m in messages), messages


def test_every_assertion_of_every_rule_refuses_one_of_the_mismatches() -> None:
    """No Rule is dead, and each AssertDescription is checked above by some mismatch."""
    every = {
        (name, " ".join(a["AssertDescription"].split()))
        for name, rule in TEMPLATE["Rules"].items()
        for a in rule["Assertions"]
    }
    refused = {r for _, parameters, _ in MISMATCHES for r in refusals(TEMPLATE, parameters)}
    assert every - refused == set()


# Every combination of the OpenSearch parameters: what the Rules let through must deploy.
COMBINATIONS = {
    "OpenSearchService": ["es", "aoss"],
    "CreateDomain": ["true", "false"],
    "CreateCollection": ["false", "true"],
    "OpenSearchEndpoint": ["", DOMAIN_URL],
    "OpenSearchResourceArn": ["", DOMAIN_ARN],
    "ServerlessCollectionArn": ["", COLLECTION_ARN],
    "ServerlessCollectionName": ["", "shared"],
}


def accepted_combinations() -> list[dict[str, str]]:
    accepted = []
    for values in itertools.product(*COMBINATIONS.values()):
        parameters = dict(zip(COMBINATIONS, values, strict=True))
        if not parameter_problems(TEMPLATE, parameters) and not refusals(TEMPLATE, parameters):
            accepted.append(parameters)
    return accepted


def test_every_combination_the_rules_accept_deploys_consistently() -> None:
    accepted = accepted_combinations()
    kinds = {(p["OpenSearchService"], p["CreateDomain"], p["CreateCollection"]) for p in accepted}
    # es: created or yours; aoss: created (named or not) or yours. Nothing else gets through.
    assert len(accepted) == 8, accepted  # CreateDomain is ignored with aoss: twice each
    assert ("es", "true", "false") in kinds
    assert ("es", "false", "false") in kinds
    assert ("aoss", "true", "true") in kinds
    stacks = rehearse(accepted, [DEV] * len(accepted))
    for parameters, stack in zip(accepted, stacks, strict=True):
        assert stack.problems == [], (parameters, stack.problems)
        kind, arn, _ = _target(stack)
        assert kind == parameters["OpenSearchService"], parameters
        assert arn, parameters


def test_translated_template_keeps_the_rules_and_constraints(
    deployments: dict[str, Deployment],
) -> None:
    """What CloudFormation checks is the translated template: SAM must not drop them."""
    translated: Mapping[str, Any] = deployments["defaults"].template
    assert translated["Rules"] == json.loads(json.dumps(TEMPLATE["Rules"]))
    assert translated["Parameters"] == json.loads(json.dumps(TEMPLATE["Parameters"]))


def test_the_rehearsal_finds_what_cloudformation_would_fail_on() -> None:
    """The checks themselves: the old template's domain alarm on a collection ARN (no
    element 1 after splitting on "domain/"), a Ref and a GetAtt to resources that are not
    created, a DependsOn on one, and a name too long for its type's schema."""
    template: dict[str, Any] = {
        "Parameters": {"Arn": {"Type": "String", "Default": COLLECTION_ARN}},
        "Conditions": {"Never": {"Fn::Equals": ["a", "b"]}},
        "Resources": {
            "Maybe": {"Type": "AWS::SNS::Topic", "Condition": "Never"},
            "Alarm": {
                "Type": "AWS::CloudWatch::Alarm",
                "DependsOn": ["Maybe"],
                "Properties": {
                    "Dimensions": [
                        {
                            "Name": "DomainName",
                            "Value": {
                                "Fn::Select": [1, {"Fn::Split": ["domain/", {"Ref": "Arn"}]}]
                            },
                        }
                    ],
                    "AlarmActions": [{"Ref": "Maybe"}, {"Fn::Sub": "${Missing.Arn}"}],
                    "OKActions": [{"Fn::GetAtt": ["Policy", "Endpoint"]}],
                },
            },
        },
    }
    template["Resources"]["Policy"] = {
        "Type": "AWS::OpenSearchServerless::SecurityPolicy",
        "Properties": {"Name": {"Fn::Sub": "${Arn}-enc"}, "Type": "network", "Policy": "[]"},
    }
    stack = Deployment(template, {}, {"AWS::Region": REGION})
    found = schema_problems(stack)
    assert [p for p in found if "Policy.Name" in p], found
    assert "GetAtt Policy.Endpoint: AWS::OpenSearchServerless::SecurityPolicy has no such" in (
        " ".join(found)
    )
    problems = stack.problems
    assert len(problems) == 4, problems
    assert any("Fn::Select index 1" in p for p in problems)
    assert any("Ref Maybe" in p for p in problems)
    assert any("GetAtt Missing.Arn" in p for p in problems)
    assert any("DependsOn Maybe" in p for p in problems)


# Every pair of choices across the stack's independent settings (round 11's probe): the
# working sets above change one setting at a time, the combinations above only the
# OpenSearch parameters. Each choice is the parameters it takes (jwt needs its issuer and
# audience, openai its secret): a greedy all-pairs cover, a couple of dozen stacks.
CHOICES: dict[str, dict[str, dict[str, str]]] = {
    "search": {
        "created domain": {},
        "production domain": {"DomainShape": "production", "IndexReplicas": "1"},
        "your domain": {**YOUR_DOMAIN, "OpenSearchResourceArn": DOMAIN_ARN},
        "created collection": WORKING["created collection"],
        "your collection": {**YOUR_COLLECTION, "ServerlessCollectionName": "shared"},
    },
    "auth": {
        "iam": {},
        "jwt": {"ApiAuthMode": "jwt", "JwtIssuer": ISSUER, "JwtAudience": "client-a"},
    },
    "embedder": {
        "bedrock": {},
        "openai": {"EmbeddingProvider": "openai", "OpenAIApiKeySecretArn": SECRET},
        "hashing": {"EmbeddingProvider": "hashing", "DefaultSearchMode": "keyword"},
    },
    "layout": {"one index": {}, "index per agent": {"IndexPerAgent": "true"}},
    "rerank": {"none": {}, "bedrock": {"RerankModelId": "amazon.rerank-v1:0"}},
    "alarms": {
        "created topic": {},
        "e-mail": {"AlarmEmail": "ops@example.com"},
        "your topic": {"AlarmTopicArn": f"arn:aws:sns:{REGION}:{ACCOUNT}:ops"},
    },
    "schedule": {
        "daily": {},
        "hourly": {"RepoSyncIntervalHours": "1"},
        "monthly": {"RepoSyncIntervalHours": "720"},
    },
    "extras": {
        "none": {},
        "all": {
            "DocumentsBucketName": "team-knowledge-docs",
            "SharedLibraryGrants": "ops-bot=playbooks,policies; support-bot=playbooks",
            "RepoAllowedNetworks": "10.0.0.0/8,fd00::/8",
            "OriginWeights": "shared=0.5,manual=1.2",
            "KeywordWeight": "0.3",
            "VectorWeight": "0.7",
            "DetailedTracing": "true",
            "LogLevel": "DEBUG",
            "MaxDocumentMiB": "16",
        },
    },
}


def all_pairs(choices: Mapping[str, Mapping[str, Any]]) -> list[dict[str, str]]:
    """Choice names per dimension such that every pair of choices of two dimensions is in
    some row (greedy: each row takes, dimension by dimension, the choice covering the most
    pairs not yet covered)."""
    dimensions = list(choices)
    uncovered = {
        ((a, x), (b, y))
        for a, b in itertools.combinations(dimensions, 2)
        for x in choices[a]
        for y in choices[b]
    }
    rows: list[dict[str, str]] = []
    while uncovered:
        ((first, value), _) = min(uncovered)
        row = {first: value}
        for dimension in dimensions:
            if dimension in row:
                continue
            row[dimension] = max(
                choices[dimension],
                key=lambda c, d=dimension: sum(  # type: ignore[misc]
                    ((k, row[k]), (d, c)) in uncovered or ((d, c), (k, row[k])) in uncovered
                    for k in row
                ),
            )
        uncovered -= {((a, row[a]), (b, row[b])) for a, b in itertools.combinations(dimensions, 2)}
        rows.append(row)
    return rows


def test_every_pair_of_settings_deploys_with_its_conditions_resolved() -> None:
    rows = all_pairs(CHOICES)
    assert len(rows) <= 25, len(rows)
    sets = []
    for row in rows:
        parameters = {k: v for d, choice in row.items() for k, v in CHOICES[d][choice].items()}
        assert parameter_problems(TEMPLATE, parameters) == [], row
        assert refusals(TEMPLATE, parameters) == [], row
        sets.append(parameters)
    for row, parameters, stack in zip(rows, sets, rehearse(sets, [DEV] * len(sets)), strict=True):
        assert stack.problems == [], (row, stack.problems)
        assert schema_problems(stack) == [], row
        search = stack.environment("SearchFunction")
        indexer = stack.environment("IndexerFunction")
        assert search["API_AUTH"] == parameters.get("ApiAuthMode", "iam"), row
        assert indexer["EMBEDDING_PROVIDER"] == parameters.get("EmbeddingProvider", "bedrock")
        assert indexer["OPENSEARCH_SERVICE"] == _target(stack)[0], row
        assert search["KB_SHARED_GRANTS"] == parameters.get("SharedLibraryGrants", ""), row
        # The upload grant's limit is the indexer's (knowledge.aws.bucket_writes).
        limit = parameters.get("MaxDocumentMiB", "64")
        assert search["MAX_DOCUMENT_MIB"] == indexer["MAX_DOCUMENT_MIB"] == limit, row
        secret_read = any(
            "secretsmanager:GetSecretValue" in json.dumps(s)
            for s in stack.role_statements("SearchFunctionRole")
        )
        assert secret_read == (row["embedder"] == "openai"), row
        topics = stack.of_type("AWS::SNS::Topic")
        assert bool(topics) == (row["alarms"] != "your topic"), row
        authorizers = json.dumps(stack.of_type("AWS::ApiGatewayV2::Authorizer"))
        assert (ISSUER in authorizers) == (row["auth"] == "jwt"), row
        # The remote MCP endpoint: authorized as the search routes, and in jwt mode its
        # metadata on unauthenticated routes naming the issuer.
        mcp = stack.environment("McpFunction")
        assert mcp["API_AUTH"] == search["API_AUTH"], row
        assert mcp["JWT_ISSUER"] == parameters.get("JwtIssuer", ""), row
        public = {
            route["RouteKey"]
            for route in stack.of_type("AWS::ApiGatewayV2::Route").values()
            if route["AuthorizationType"] == "NONE"
        }
        metadata = "GET /.well-known/oauth-protected-resource"
        expected = {metadata, f"{metadata}/mcp/agents/{{agent}}/contexts/{{context}}"}
        assert public == (expected if row["auth"] == "jwt" else set()), row
        (schedule,) = stack.of_type("AWS::Scheduler::Schedule").values()
        hours = parameters.get("RepoSyncIntervalHours", "24")
        unit = "hour" if hours == "1" else "hours"
        assert schedule["ScheduleExpression"] == f"rate({hours} {unit})", row


# Counts: a fraction passed CloudFormation's Number check (MinValue/MaxValue only) and then
# failed late: rate(1.5 hours), BatchSize 2.5 and VolumeSize 10.5 at resource creation (a
# rollback after the domain's 20 minutes), HnswM/EfSearch/RerankTopN/MaxDocumentMiB only at
# the functions' first request (every call a 503 from a stack that deployed "fine").
INTEGER_SETTINGS = {
    "DomainVolumeSize": (10, 100),
    "HnswM": (2, 100),
    "HnswEfConstruction": (2, 10000),
    "EfSearch": (0, 10000),
    "RerankTopN": (1, 100),
    "MaxDocumentMiB": (1, 1024),
    "IndexerBatchSize": (1, 100),
    "IndexerMaxConcurrency": (2, 1000),
    "BulkMaxConcurrency": (2, 1000),
    "DispatcherBatchSize": (1, 1000),
    "ExpressMaxEvents": (1, 100),
    "ExpressMaxObjectMiB": (1, 1024),
    "MaxReceiveCount": (1, 1000),
    "RepoSyncIntervalHours": (1, 720),
    "NoncurrentVersionRetentionDays": (1, 99999),
}


@pytest.mark.parametrize("name", INTEGER_SETTINGS)
def test_a_count_takes_exactly_the_integers_of_its_range(name: str) -> None:
    low, high = INTEGER_SETTINGS[name]
    for value in (low, (low + high) // 2, high):
        assert parameter_problems(TEMPLATE, {name: str(value)}) == [], value
    for wrong in ("2.5", f"{low}.0", f"0{low}", "1e1", str(low - 1), str(high + 1), "", "ten"):
        problems = parameter_problems(TEMPLATE, {name: wrong})
        assert problems, f"{name}={wrong!r} is accepted"
        assert any(f"an integer from {low} to {high}" in p for p in problems), problems


def test_every_count_of_the_template_is_checked_as_an_integer() -> None:
    """No Number parameter left whose value a resource or a function takes as an integer:
    the Numbers left are the ones a float is right for."""
    numbers = {n for n, spec in TEMPLATE["Parameters"].items() if spec["Type"] == "Number"}
    # LogRetentionDays has AllowedValues: CloudFormation takes exactly those.
    assert numbers == {"LessonWeight", "FreeStorageAlarmMiB", "LogRetentionDays"}
