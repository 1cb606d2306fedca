"""The console's settings and headers on the deployed stack (``knowledge.aws.console_site``)
and in the package (``knowledge.service.console``), and what template.yaml publishes."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from importlib import resources
from typing import Any

import pytest
from cfn_template import Stack, load_template

from knowledge.aws.console_site import ConsoleSite, bucket_origins, origin_of
from knowledge.core.errors import ConfigurationError
from knowledge.service.console import ConsoleSettings, console_file, security_headers

ISSUER = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_EXAMPLE"
TOKEN_ENDPOINT = "https://kb-example.auth.eu-west-1.amazoncognito.com/oauth2/token"
JWT_ENV = {
    "API_AUTH": "jwt",
    "JWT_ISSUER": ISSUER + "/",
    "CONSOLE_CLIENT_ID": "4example",
    "CONSOLE_SCOPES": "openid  kb/reindex",
    "JWT_AGENTS_CLAIM": "custom:agents",
    "DOCUMENTS_BUCKET": "kb-123456789012-abc",
    "AWS_REGION": "eu-west-1",
}
CONSOLE = resources.files("knowledge").joinpath("local", "static", "console")


def event(path: str, method: str = "GET") -> dict[str, Any]:
    return {"rawPath": path, "requestContext": {"http": {"method": method, "path": path}}}


def cognito(issuer: str) -> dict[str, Any]:
    """The issuer's discovery document, as a Cognito pool's names its token endpoint."""
    assert issuer == ISSUER
    return {"issuer": ISSUER, "token_endpoint": TOKEN_ENDPOINT}


def site(env: dict[str, str] = JWT_ENV) -> ConsoleSite:
    built = ConsoleSite.from_env(env)
    built.discover = cognito
    return built


def test_jwt_mode_config_names_the_issuer_the_client_and_presigned_uploads() -> None:
    answer = site().respond(event("/console/config.json"))
    assert answer["statusCode"] == 200
    assert answer["headers"]["Content-Type"] == "application/json; charset=utf-8"
    assert json.loads(answer["body"]) == {
        "auth": "jwt",
        "issuer": ISSUER,
        "client_id": "4example",
        "scopes": "openid kb/reindex",
        "uploads": "presigned",
        "agents_claim": "custom:agents",
    }


def test_iam_mode_config_names_no_issuer() -> None:
    env = {**JWT_ENV, "API_AUTH": "iam"}
    config = json.loads(ConsoleSite.from_env(env).respond(event("/console/config.json"))["body"])
    assert (config["auth"], config["issuer"], config["client_id"]) == ("iam", "", "")
    assert config["agents_claim"] == ""


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        ({"JWT_ISSUER": ""}, "JWT_ISSUER"),
        ({"CONSOLE_CLIENT_ID": " "}, "CONSOLE_CLIENT_ID"),
        ({"API_AUTH": "cookie"}, "API_AUTH"),
    ],
)
def test_a_missing_or_wrong_setting_is_named(changed: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        ConsoleSite.from_env({**JWT_ENV, **changed})


def test_the_pages_may_reach_this_origin_the_issuer_its_token_endpoint_and_the_bucket() -> None:
    headers = site().respond(event("/console/index.html"))["headers"]
    policy = dict(
        part.strip().split(" ", 1) for part in headers["Content-Security-Policy"].split(";")
    )
    assert policy["connect-src"].split() == [
        "'self'",
        "https://cognito-idp.eu-west-1.amazonaws.com",
        "https://kb-example.auth.eu-west-1.amazoncognito.com",
        "https://kb-123456789012-abc.s3.amazonaws.com",
        "https://kb-123456789012-abc.s3.eu-west-1.amazonaws.com",
    ]
    assert policy["default-src"] == "'none'"
    assert policy["script-src"] == policy["style-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'"
    assert policy["base-uri"] == policy["form-action"] == "'none'"
    assert "unsafe" not in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "no-referrer"
    assert headers["X-Frame-Options"] == "DENY"


def test_an_issuer_that_does_not_answer_leaves_its_own_origin_and_is_asked_a_minute_later() -> None:
    now = [1000.0]
    built = ConsoleSite.from_env(JWT_ENV)
    built.clock = lambda: now[0]
    calls: list[str] = []
    answers: list[Exception | dict[str, Any]] = [OSError("connection refused"), cognito(ISSUER)]

    def discover(issuer: str) -> dict[str, Any]:
        calls.append(issuer)
        answer = answers[min(len(calls), len(answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    built.discover = discover
    issuer_only = ("https://cognito-idp.eu-west-1.amazonaws.com",)
    assert built.issuer_origins() == issuer_only
    now[0] += 59  # not on every file of the page
    assert built.issuer_origins() == issuer_only
    assert len(calls) == 1
    now[0] += 2
    assert built.issuer_origins()[1] == "https://kb-example.auth.eu-west-1.amazoncognito.com"
    built.issuer_origins()
    assert len(calls) == 2  # asked again after the minute, then kept


def test_bucket_origins_follow_the_region_and_an_endpoint_override() -> None:
    assert bucket_origins("b", "cn-north-1") == (
        "https://b.s3.amazonaws.com.cn",
        "https://b.s3.cn-north-1.amazonaws.com.cn",
    )
    assert bucket_origins("b", "us-east-1", "http://127.0.0.1:5000/") == ("http://127.0.0.1:5000",)
    assert bucket_origins("", "us-east-1") == ()
    assert origin_of("no scheme") == ""


def test_every_console_file_is_served_with_its_type_and_nothing_else() -> None:
    console = site()
    page = console.respond(event("/console/scope.html"))
    assert (page["statusCode"], page["headers"]["Content-Type"]) == (
        200,
        "text/html; charset=utf-8",
    )
    assert page["body"] == CONSOLE.joinpath("scope.html").read_text("utf-8")
    script = console.respond(event("/console/auth.js"))
    assert script["headers"]["Content-Type"] == "text/javascript; charset=utf-8"
    for path in (
        "/console/../app.py",
        "/console/%2e%2e/app.py",
        "/console/nothing.html",
        "/console/static/console/api.js",
        "/v1/health",
    ):
        assert console.respond(event(path))["statusCode"] == 404, path
    redirect = console.respond(event("/console"))
    assert (redirect["statusCode"], redirect["headers"]["Location"]) == (
        302,
        "/console/index.html",
    )
    assert console.respond(event("/console/index.html", "POST"))["statusCode"] == 405
    assert all(
        "Content-Security-Policy" in console.respond(event(p))["headers"]
        for p in ("/console", "/console/x", "/console/config.json")
    )


class _Scripts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.inline: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = {name for name, _ in attrs}
        if tag == "script" and "src" not in names:
            self.inline.append(f"<{tag}> without src")
        self.inline.extend(f"{tag} {n}" for n in names if n.startswith("on") or n == "style")
        if tag == "style":
            self.inline.append("<style>")


@pytest.mark.parametrize(
    "name", sorted(e.name for e in CONSOLE.iterdir() if e.name.endswith(".html"))
)
def test_no_page_needs_an_inline_script_or_style(name: str) -> None:
    """The policy allows no inline script or style: a page that had one would break."""
    parser = _Scripts()
    parser.feed(CONSOLE.joinpath(name).read_text("utf-8"))
    assert parser.inline == []


def test_kb_serve_ships_the_settings_of_a_server_without_sign_in() -> None:
    shipped = json.loads(CONSOLE.joinpath("config.json").read_text("utf-8"))
    assert shipped == json.loads(ConsoleSettings("none").to_json())
    assert console_file("/console/config.json") == (
        "console/config.json",
        "application/json; charset=utf-8",
    )


def test_the_policy_lists_each_origin_once() -> None:
    policy = security_headers(["https://a", "https://a", ""])["Content-Security-Policy"]
    assert re.search(r"connect-src 'self' https://a;", policy)


# --- template.yaml ------------------------------------------------------------------------

JWT = {
    "ApiAuthMode": "jwt",
    "JwtIssuer": ISSUER,
    "JwtAudience": "4example",
}
TEMPLATE = load_template()


def console_resources(parameters: dict[str, str]) -> dict[str, dict[str, Any]]:
    stack = Stack(TEMPLATE, parameters)
    return {n: r for n, r in stack.resources().items() if n.startswith("Console")}


def test_no_console_unless_a_client_id_is_given() -> None:
    assert console_resources(JWT) == {}
    bucket = Stack(TEMPLATE, JWT).resources()["DocumentsBucket"]["Properties"]
    assert "CorsConfiguration" not in Stack(TEMPLATE, JWT).evaluate(bucket)


def test_the_console_is_public_get_only_reads_nothing_and_its_bucket_rule_is_post_only() -> None:
    parameters = {**JWT, "ConsoleClientId": "4example", "ConsoleScopes": "openid kb/reindex"}
    stack = Stack(TEMPLATE, parameters)
    found = {n: stack.evaluate(r["Properties"]) for n, r in console_resources(parameters).items()}
    routes = {p["RouteKey"]: p for p in found.values() if "RouteKey" in p}
    assert set(routes) == {"GET /console", "GET /console/{proxy+}"}
    for route in routes.values():
        assert route["AuthorizationType"] == "NONE"
        assert route["Target"] == "integrations/ConsoleIntegration.Ref"
    function = found["ConsoleFunction"]
    assert "Policies" not in function  # no AWS call: SAM's basic execution role only
    assert function["Environment"]["Variables"] == {
        "POWERTOOLS_SERVICE_NAME": "knowledge-console",
        "API_AUTH": "jwt",
        "JWT_ISSUER": ISSUER,
        "CONSOLE_CLIENT_ID": "4example",
        "CONSOLE_SCOPES": "openid kb/reindex",
        "JWT_AGENTS_CLAIM": "agents",
    }
    assert function["Layers"] == ["KnowledgeLayer.Ref"]
    assert found["ConsoleFunctionApiPermission"]["SourceArn"].endswith("/*/GET/console*")
    bucket = stack.evaluate(stack.resources()["DocumentsBucket"]["Properties"])
    assert bucket["CorsConfiguration"] == {
        "CorsRules": [
            {
                "AllowedMethods": ["POST"],
                "AllowedOrigins": [
                    "https://KnowledgeHttpApi.Ref.execute-api.us-east-1.amazonaws.com"
                ],
                "MaxAge": 3600,
            }
        ]
    }
    # Every other route keeps the JWT authorizer.
    others = [
        stack.evaluate(r["Properties"])
        for r in stack.resources().values()
        if r["Type"] == "AWS::ApiGatewayV2::Route"
    ]
    public = {r["RouteKey"] for r in others if r["AuthorizationType"] == "NONE"}
    assert public == {
        "GET /console",
        "GET /console/{proxy+}",
        "GET /.well-known/oauth-protected-resource",
        "GET /.well-known/oauth-protected-resource/mcp/agents/{agent}/contexts/{context}",
    }
