"""The knowledge console on the deployed stack, in a real headless Chromium.

API Gateway is ``mcp_gateway.Gateway`` over TLS with the routes ``template.yaml``
declares for the search and console functions when ``ConsoleClientId`` is set (the
console's public, every API route behind the stack's JWT authorizer); the functions are
``functions/console/app.py`` and ``functions/search/app.py`` as deployed, on a real
OpenSearch node and moto's S3, SQS and DynamoDB in server mode (``ThreadedMotoServer``,
which the browser reaches: the presigned upload is posted to it). The token issuer is
``mcp_gateway.Issuer`` on loopback, with the console registered as a public client.

The browser signs in through the authorization code flow with PKCE, sees a scope,
uploads a file through the presigned POST (the indexer then indexes it from the
bucket's notification), and the page says in words when the sign-in expired or the API
refused the token; the API itself refuses a call without a token.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib.util
import json
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from cfn_template import Stack, load_template
from chromium import chromium, wait
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from lambda_support import (
    BUCKET,
    REPO_ROOT,
    LambdaContext,
    load_handler,
    run_queue_through,
    use_fake_aws,
)
from mcp_gateway import AUDIENCE, Gateway, Issuer, running_gateway, running_issuer, template_routes
from moto.server import ThreadedMotoServer
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

pytestmark = pytest.mark.integration

CLIENT_ID = "kb-console"
USER = {
    "sub": "alice",
    "preferred_username": "alice",
    "agents": ["ops-bot"],
    "agents_write": ["ops-bot"],
}
SCOPE = "/v1/agents/ops-bot/contexts/runbooks"
DEPLOY = "# Deploy\n\nRoll back with `helm rollback api 0` and watch the pods.\n"
UPLOADED = "# Pager\n\nThe wombatpager escalates after five minutes.\n"


def parameters(issuer: str = "https://issuer.example.com") -> dict[str, str]:
    """The stack's parameters: jwt mode with the console on."""
    return {
        "ApiAuthMode": "jwt",
        "JwtIssuer": issuer,
        "JwtAudience": AUDIENCE,
        "ConsoleClientId": CLIENT_ID,
    }


def load_function(name: str) -> ModuleType:
    """A fresh copy of ``functions/<name>/app.py``."""
    path = REPO_ROOT / "functions" / name / "app.py"
    spec = importlib.util.spec_from_file_location(f"{name}_app_{uuid.uuid4().hex[:8]}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Deployed:
    gateway: Gateway
    issuer: Issuer
    indexer: ModuleType
    s3: Any
    sqs: Any
    queue_url: str
    queue_arn: str

    def call(self, method: str, route: str, token: str | None = None) -> tuple[int, Any]:
        request = urllib.request.Request(self.gateway.url + route, method=method)
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(
                request, timeout=30, context=self.gateway.ssl_context
            ) as answer:
                return answer.status, json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def drain(self) -> None:
        responses = run_queue_through(self.indexer, self.sqs, self.queue_url, self.queue_arn)
        assert all(r == {"batchItemFailures": []} for r in responses), responses


def spki_hash(context: ssl.SSLContext) -> str:
    """The SHA-256 of the gateway certificate's public key, as Chromium's
    ``--ignore-certificate-errors-spki-list`` takes it: the browser trusts that one key."""
    [der] = context.get_ca_certs(binary_form=True)
    key = x509.load_der_x509_certificate(der).public_key()
    spki = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


@contextlib.contextmanager
def moto_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """moto on loopback; every AWS client (the functions' and the test's) goes there."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    try:
        yield url
    finally:
        # moto's state is the process's: nothing of this test is left for the next one.
        reset = urllib.request.Request(f"{url}/moto-api/reset", method="POST")
        urllib.request.urlopen(reset, timeout=30).close()
        server.stop()


@pytest.fixture
def deployed(opensearch_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployed]:
    """The stack in jwt mode with the console on; the test's marker starts the node."""
    index = f"test_console_{uuid.uuid4().hex[:12]}"
    use_fake_aws(monkeypatch)
    with moto_server(monkeypatch), running_issuer() as issuer:
        s3, sqs = boto3.client("s3"), boto3.client("sqs")
        s3.create_bucket(Bucket=BUCKET)
        queue_url = sqs.create_queue(QueueName="document-events")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        s3.put_bucket_notification_configuration(
            Bucket=BUCKET,
            NotificationConfiguration={
                "QueueConfigurations": [{"QueueArn": queue_arn, "Events": ["s3:ObjectCreated:*"]}]
            },
        )
        boto3.client("dynamodb").create_table(
            TableName="write-quotas",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        for name, value in {
            "OPENSEARCH_URL": opensearch_url,
            "OPENSEARCH_INDEX": index,
            "OPENSEARCH_WAIT_FOR_REFRESH": "true",
            "OPENSEARCH_REFRESH_INTERVAL": "100ms",
            "EMBEDDING_PROVIDER": "hashing",
            "DOCUMENTS_BUCKET": BUCKET,
            "INDEX_QUEUE_URL": queue_url,
            "WRITE_QUOTA_TABLE": "write-quotas",
            # What template.yaml gives the search and console functions in jwt mode.
            "API_AUTH": "jwt",
            "JWT_AGENTS_CLAIM": "agents",
            "JWT_AGENTS_WRITE_CLAIM": "agents_write",
            "JWT_REINDEX_SCOPE": "kb/reindex",
            "JWT_ISSUER": issuer.url,
            "CONSOLE_CLIENT_ID": CLIENT_ID,
            "CONSOLE_SCOPES": "openid",
        }.items():
            monkeypatch.setenv(name, value)
        indexer = load_handler("indexer", monkeypatch)
        search = load_handler("search", monkeypatch)
        console = load_function("console")
        s3.put_object(Bucket=BUCKET, Key="ops-bot/runbooks/deploy.md", Body=DEPLOY.encode())
        routes = template_routes(
            parameters(), {"SearchIntegration": search, "ConsoleIntegration": console}
        )
        try:
            with running_gateway(search, "jwt", LambdaContext, issuer, routes=routes) as gateway:
                issuer.public_clients[CLIENT_ID] = (gateway.url + "/console/signin.html", USER)
                # The bucket's CORS rule as the template has it, for this API's origin.
                bucket = Stack(load_template(), parameters()).resources()["DocumentsBucket"]
                rules = Stack(load_template(), parameters()).evaluate(
                    bucket["Properties"]["CorsConfiguration"]
                )["CorsRules"]
                assert rules[0]["AllowedOrigins"] == [
                    "https://KnowledgeHttpApi.Ref.execute-api.us-east-1.amazonaws.com"
                ]
                rules[0]["AllowedOrigins"] = [gateway.url]
                rules[0]["MaxAgeSeconds"] = rules[0].pop("MaxAge")  # CloudFormation's name
                s3.put_bucket_cors(Bucket=BUCKET, CORSConfiguration={"CORSRules": rules})
                stack = Deployed(gateway, issuer, indexer, s3, sqs, queue_url, queue_arn)
                stack.drain()  # deploy.md, from the bucket's notification
                yield stack
        finally:
            for module in (indexer, search):
                built = module.container.indexer if module is indexer else module.container.api
                if built is not None:
                    built.store.close()
            request = urllib.request.Request(f"{opensearch_url}/{index}", method="DELETE")
            with contextlib.suppress(OSError):
                urllib.request.urlopen(request, timeout=30).close()


@contextlib.contextmanager
def browser_for(gateway: Gateway, profile: Path) -> Iterator[WebDriver]:
    """Chromium trusting the gateway's certificate (its key only)."""
    assert gateway.ssl_context is not None
    trust = f"--ignore-certificate-errors-spki-list={spki_hash(gateway.ssl_context)}"
    driver = chromium(profile, flags=[trust])
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def browser(deployed: Deployed, tmp_path: Path) -> Iterator[WebDriver]:
    with browser_for(deployed.gateway, tmp_path / "chromium") as driver:
        yield driver


def text_of(driver: WebDriver, element_id: str) -> str:
    return str(driver.find_element(By.ID, element_id).text)


def until_text(driver: WebDriver, element_id: str, expected: str) -> None:
    wait(driver).until(lambda d: expected in text_of(d, element_id))


def script_errors(driver: WebDriver) -> list[str]:
    """The page's JavaScript errors (a refused request's "Failed to load resource" line is
    the API answering, not an error of the page)."""
    return [
        entry["message"]
        for entry in driver.get_log("browser")  # type: ignore[attr-defined]
        if entry["level"] == "SEVERE" and "Failed to load resource" not in entry["message"]
    ]


@pytest.mark.opensearch
def test_the_api_refuses_a_call_without_a_token_and_answers_one_with(deployed: Deployed) -> None:
    status, body = deployed.call("GET", f"{SCOPE}/status")
    assert (status, body) == (401, {"message": "Unauthorized"})
    token = deployed.issuer.token({"agents": ["ops-bot"]})
    status, body = deployed.call("GET", f"{SCOPE}/status", token)
    assert (status, body["document_count"]) == (200, 1)
    # The console's own routes are public, and only GET.
    status, config = deployed.call("GET", "/console/config.json")
    assert status == 200
    assert config == {
        "auth": "jwt",
        "issuer": deployed.issuer.url,
        "client_id": CLIENT_ID,
        "scopes": "openid",
        "uploads": "presigned",
        "agents_claim": "agents",
    }
    assert deployed.call("POST", "/console/config.json")[0] == 404  # no such route


@pytest.mark.opensearch
def test_sign_in_see_a_scope_upload_through_the_presigned_post(
    deployed: Deployed, browser: WebDriver, tmp_path: Path
) -> None:
    url = deployed.gateway.url
    browser.get(f"{url}/console/scope.html?agent=ops-bot&context=runbooks")
    until_text(browser, "auth-line", "Not signed in.")
    until_text(browser, "status-message", "Not signed in: sign in (top of the page).")

    # Authorization code + PKCE: the issuer signs alice in and sends the browser back.
    browser.find_element(By.ID, "sign-in").click()
    wait(browser).until(lambda d: d.current_url.startswith(f"{url}/console/scope.html"))
    until_text(browser, "auth-line", "Signed in as alice until")
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#status .status"))
    assert "Documents\n1" in text_of(browser, "status")
    stored = browser.execute_script(
        "return [Object.keys(localStorage), JSON.parse(sessionStorage.getItem("
        "'kb-console.session')).accessToken]"
    )
    assert stored[0] == []  # nothing of the sign-in in localStorage
    assert deployed.gateway.authorizer is not None
    assert deployed.gateway.authorizer.claims(f"Bearer {stored[1]}")["sub"] == "alice"
    assert deployed.issuer.codes == {}  # the code was spent

    # The scope list names the agents the token's claim grants (no server list, no
    # Settings), and a deployed stack has no playground to link to.
    browser.get(f"{url}/console/")
    row = "#scopes tr[data-scope='ops-bot/runbooks']"
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, row))
    until_text(browser, "scopes-message", "Scopes of the agents your sign-in may read.")
    assert browser.find_elements(By.CSS_SELECTOR, "nav a[href='../']") == []
    browser.get(f"{url}/console/scope.html?agent=ops-bot&context=runbooks")
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#status .status"))

    # A file goes to the bucket through the presigned POST, then through the pipeline.
    upload = tmp_path / "pager.md"
    upload.write_text(UPLOADED, "utf-8")
    browser.find_element(By.ID, "file-input").send_keys(str(upload))
    browser.find_element(By.ID, "upload-button").click()
    item = "#uploads li[data-path='pager.md']"
    wait(browser).until(
        lambda d: (
            d.find_element(By.CSS_SELECTOR, item).get_attribute("data-state")
            in ("accepted", "refused")
        )
    )
    assert browser.find_element(By.CSS_SELECTOR, item).get_attribute("data-state") == "accepted"
    stored_object = deployed.s3.get_object(Bucket=BUCKET, Key="ops-bot/runbooks/pager.md")
    assert stored_object["Body"].read().decode() == UPLOADED
    assert stored_object["Metadata"] == {"kb-upload": "1"}
    deployed.drain()  # the bucket's notification, through the indexer
    wait(browser).until(
        lambda d: d.find_element(By.CSS_SELECTOR, item).get_attribute("data-state") == "indexed"
    )
    assert "Searchable" in browser.find_element(By.CSS_SELECTOR, item).text

    # An expired sign-in is said as such, and no request goes out with it.
    browser.execute_script(
        "const s = JSON.parse(sessionStorage.getItem('kb-console.session'));"
        "s.expiresAt = Date.now() - 60000;"
        "sessionStorage.setItem('kb-console.session', JSON.stringify(s));"
    )
    refused = deployed.gateway.refused
    browser.refresh()
    until_text(browser, "auth-line", "Your sign-in expired at")
    until_text(browser, "status-message", "Your sign-in expired at")
    assert deployed.gateway.refused == refused
    # A token the API refuses (401) is said too.
    browser.execute_script(
        "sessionStorage.setItem('kb-console.session', JSON.stringify("
        "{accessToken: 'not-a-token', expiresAt: Date.now() + 60000, name: 'alice'}));"
    )
    browser.refresh()
    until_text(browser, "status-message", "The API did not accept your sign-in")
    assert deployed.gateway.refused > refused
    browser.find_element(By.ID, "sign-out").click()
    until_text(browser, "auth-line", "Not signed in.")
    assert browser.execute_script("return sessionStorage.getItem('kb-console.session')") is None
    assert script_errors(browser) == []


@pytest.mark.opensearch
def test_a_forged_sign_in_is_refused_with_the_reason(
    deployed: Deployed, browser: WebDriver
) -> None:
    """A code arriving at signin.html without this tab's state is not traded."""
    url = deployed.gateway.url
    browser.get(f"{url}/console/signin.html?code=stolen&state=guessed")
    until_text(browser, "signin-message", "its state does not match")
    assert browser.execute_script("return sessionStorage.getItem('kb-console.session')") is None
    assert deployed.issuer.tokens_issued == 0


def test_in_iam_mode_the_pages_say_a_browser_cannot_sign_the_api_s_requests(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """IAM mode with the console on: the pages are served, say plainly that a browser
    cannot sign SigV4, and the API's own 403 (the gateway's, unsigned) says the same."""
    use_fake_aws(monkeypatch)
    for name, value in {
        "API_AUTH": "iam",
        "CONSOLE_CLIENT_ID": "any",
        "DOCUMENTS_BUCKET": BUCKET,
    }.items():
        monkeypatch.setenv(name, value)
    console = load_function("console")
    routes = template_routes(
        {"ApiAuthMode": "iam", "ConsoleClientId": "any"},
        # The search function is never reached: the gateway refuses the unsigned calls.
        {"SearchIntegration": console, "ConsoleIntegration": console},
    )
    with (
        running_gateway(console, "iam", LambdaContext, routes=routes) as gateway,
        browser_for(gateway, tmp_path / "chromium") as browser,
    ):
        browser.get(f"{gateway.url}/console/scope.html?agent=ops-bot&context=runbooks")
        until_text(browser, "auth-line", "a browser cannot sign them without AWS credentials")
        until_text(browser, "status-message", "takes SigV4-signed requests only")
        assert browser.find_elements(By.ID, "sign-in") == []
        assert gateway.events
        assert all(e["rawPath"].startswith("/console/") for e in gateway.events)
        assert gateway.refused > 0
        assert script_errors(browser) == []
