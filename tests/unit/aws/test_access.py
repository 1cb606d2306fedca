"""knowledge.aws.access: the per-agent check of the JWT mode (issue 8, item 10b)."""

from __future__ import annotations

from typing import Any

import pytest

from knowledge.aws.access import AccessPolicy, Operation, agents_in_claim
from knowledge.core.errors import AccessDeniedError, ConfigurationError

JWT = AccessPolicy(mode="jwt", reindex_scope="kb/reindex")


def context(claims: dict[str, Any] | None, scopes: list[str] | None = None) -> dict[str, Any]:
    if claims is None:
        return {"requestId": "r-1"}
    return {"requestId": "r-1", "authorizer": {"jwt": {"claims": claims, "scopes": scopes}}}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["ops-bot", "support-bot"], {"ops-bot", "support-bot"}),
        ("[ops-bot support-bot]", {"ops-bot", "support-bot"}),  # how HTTP API passes arrays
        ("ops-bot,support-bot", {"ops-bot", "support-bot"}),
        ("ops-bot support-bot", {"ops-bot", "support-bot"}),
        ('["ops-bot","support-bot"]', {"ops-bot", "support-bot"}),
        ("ops-bot", {"ops-bot"}),
        ("", set()),
        (None, set()),
        (42, set()),
        ([1, None, ""], set()),
    ],
)
def test_agents_claim_forms(value: object, expected: set[str]) -> None:
    assert agents_in_claim(value) == expected


def test_iam_mode_leaves_the_decision_to_the_gateway() -> None:
    AccessPolicy(mode="iam").check(context(None), "ops-bot", Operation.REINDEX)


def test_jwt_mode_allows_an_agent_the_token_lists() -> None:
    JWT.check(context({"agents": "[ops-bot support-bot]"}), "support-bot", Operation.SEARCH)
    JWT.check(context({"agents": "ops-bot"}), "ops-bot", Operation.STATUS)


@pytest.mark.parametrize(
    ("claims", "agent"),
    [
        ({"agents": "[support-bot]"}, "ops-bot"),
        ({"agents": "ops-bot-2"}, "ops-bot"),  # no prefix match
        ({"agents": "OPS-BOT"}, "ops-bot"),  # names are case-sensitive, as in S3
        ({"agents": "*"}, "ops-bot"),  # no wildcard
        ({"sub": "user-1"}, "ops-bot"),  # claim missing
        ({"agent": "ops-bot"}, "ops-bot"),  # another claim name
    ],
)
def test_jwt_mode_refuses_an_agent_the_token_does_not_list(
    claims: dict[str, Any], agent: str
) -> None:
    with pytest.raises(AccessDeniedError) as raised:
        JWT.check(context(claims), agent, Operation.SEARCH)
    assert raised.value.field == "agent"
    assert "support-bot" not in raised.value.message  # the grants are not echoed


def test_jwt_mode_without_claims_fails_closed() -> None:
    with pytest.raises(AccessDeniedError):
        JWT.check(context(None), "ops-bot", Operation.SEARCH)
    with pytest.raises(AccessDeniedError):
        JWT.check(None, "ops-bot", Operation.SEARCH)


def test_reindex_needs_its_own_scope() -> None:
    claims = {"agents": "ops-bot"}
    with pytest.raises(AccessDeniedError) as raised:
        JWT.check(context(claims, ["kb/search"]), "ops-bot", Operation.REINDEX)
    assert raised.value.field == "operation"
    JWT.check(context(claims, ["kb/search", "kb/reindex"]), "ops-bot", Operation.REINDEX)
    # Cognito access tokens carry scopes in the "scope" claim
    JWT.check(context({**claims, "scope": "kb/search kb/reindex"}), "ops-bot", Operation.REINDEX)
    # the scope does not widen the agents
    with pytest.raises(AccessDeniedError):
        JWT.check(context({"agents": "x"}, ["kb/reindex"]), "ops-bot", Operation.REINDEX)


def test_reindex_without_a_configured_scope_is_refused_to_every_token() -> None:
    policy = AccessPolicy(mode="jwt")
    with pytest.raises(AccessDeniedError):
        policy.check(context({"agents": "ops-bot"}, ["kb/reindex"]), "ops-bot", Operation.REINDEX)


def test_custom_claim_name() -> None:
    policy = AccessPolicy(mode="jwt", agents_claim="custom:agents")
    policy.check(context({"custom:agents": "ops-bot"}), "ops-bot", Operation.SEARCH)
    with pytest.raises(AccessDeniedError):
        policy.check(context({"agents": "ops-bot"}), "ops-bot", Operation.SEARCH)


def test_from_env_and_bad_settings() -> None:
    policy = AccessPolicy.from_env(
        {"API_AUTH": "JWT", "JWT_AGENTS_CLAIM": "kb_agents", "JWT_REINDEX_SCOPE": "kb/reindex"}
    )
    assert policy == AccessPolicy("jwt", "kb_agents", "kb/reindex")
    assert AccessPolicy.from_env({}) == AccessPolicy("iam")
    with pytest.raises(ConfigurationError, match="API_AUTH"):
        AccessPolicy.from_env({"API_AUTH": "none"})


def test_writes_need_the_agent_in_the_write_claim_too() -> None:
    readers = context({"agents": "ops-bot"})
    with pytest.raises(AccessDeniedError) as refused:
        JWT.check(readers, "ops-bot", Operation.WRITE)
    assert refused.value.field == "operation"
    JWT.check(readers, "ops-bot", Operation.SEARCH)
    writers = context({"agents": "ops-bot", "agents_write": "[ops-bot]"})
    JWT.check(writers, "ops-bot", Operation.WRITE)
    with pytest.raises(AccessDeniedError):  # the write claim alone grants nothing
        JWT.check(context({"agents_write": "ops-bot"}), "ops-bot", Operation.WRITE)
    with pytest.raises(AccessDeniedError):
        JWT.check(writers, "support-bot", Operation.WRITE)
    custom = AccessPolicy.from_env({"API_AUTH": "jwt", "JWT_AGENTS_WRITE_CLAIM": "custom:w"})
    custom.check(context({"agents": "a", "custom:w": "a"}), "a", Operation.WRITE)
    with pytest.raises(ConfigurationError):
        AccessPolicy(mode="jwt", agents_write_claim="agents")  # one claim for both: no apart
    AccessPolicy(mode="iam").check(None, "ops-bot", Operation.WRITE)  # the route's IAM grant


def test_a_route_of_reads_grants_reindex_only_as_the_token_does() -> None:
    """The remote MCP endpoint is one route (granted like search) whose tools also read the
    status and documents and, where granted, reindex (``AccessPolicy.grants``)."""
    reader = context({"agents": "ops-bot"}, ["openid"])
    manager = context({"agents": "ops-bot", "scope": "openid kb/reindex"})
    other = context({"agents": "support-bot", "scope": "kb/reindex"})
    search = Operation.SEARCH
    for operation in (Operation.STATUS, Operation.DOCUMENTS):
        assert JWT.grants(reader, "ops-bot", operation, route=search)
    assert not JWT.grants(reader, "ops-bot", Operation.REINDEX, route=search)
    assert JWT.grants(manager, "ops-bot", Operation.REINDEX, route=search)
    assert not JWT.grants(other, "ops-bot", Operation.REINDEX, route=search)
    assert not JWT.grants(context(None), "ops-bot", Operation.STATUS, route=search)
    assert not JWT.grants(manager, "ops-bot", Operation.WRITE, route=search)


def test_iam_mode_grants_only_what_the_routes_own_policy_covers() -> None:
    """IAM granted the literal path the request took; the reindex and write policies are on
    other paths, invisible from this request: never granted through a read route."""
    iam = AccessPolicy(mode="iam")
    search = Operation.SEARCH
    assert iam.grants(context(None), "ops-bot", Operation.SEARCH, route=search)
    assert iam.grants(context(None), "ops-bot", Operation.STATUS, route=search)
    assert iam.grants(context(None), "ops-bot", Operation.DOCUMENTS, route=search)
    assert not iam.grants(context(None), "ops-bot", Operation.REINDEX, route=search)
    assert not iam.grants(context(None), "ops-bot", Operation.WRITE, route=search)
    reindex = Operation.REINDEX
    assert iam.grants(context(None), "ops-bot", Operation.REINDEX, route=reindex)
    assert not iam.grants(context(None), "ops-bot", Operation.SEARCH, route=reindex)
