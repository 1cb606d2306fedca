"""What stands between a remote MCP client and the MCP function in AWS, on loopback.

- ``Issuer``: an OAuth/OIDC token issuer with its own RSA key: its discovery documents
  (``/.well-known/openid-configuration``, ``/.well-known/oauth-authorization-server``), its
  JWKS, and a token endpoint for the client credentials grant (HTTP Basic client
  authentication), which signs RS256 tokens with the claims configured per client. For a
  browser's public client (``public_clients``: its redirect URI and the user it signs in)
  the authorization code grant with PKCE: ``/authorize`` signs that user in at once and
  sends the browser back with a one-use code bound to the client, the redirect URI and
  the S256 code challenge; the token endpoint trades it only for the matching
  ``code_verifier``, for an access token and an ID token (with the request's nonce). Its
  answers carry ``Access-Control-Allow-Origin: *``, as a public issuer's do for pages on
  other origins. A test also signs tokens directly (``token``), expired or for another
  audience.
- ``Gateway``: API Gateway's HTTP API in front of the function, over TLS (a certificate of
  its own for 127.0.0.1, ``ssl_context`` trusts it): the routes ``template.yaml`` gives
  the MCP function (or, ``template_routes``, every route the template declares for the
  functions a test runs, greedy ``{proxy+}`` included), each turned into a payload 2.0
  event and handed to its function's ``lambda_handler``, one at a time as one Lambda
  container runs them. Routes with the
  JWT authorizer get what API Gateway's authorizer does before the Lambda runs: the
  bearer token's signature checked against the issuer's JWKS (found through its OpenID
  discovery document), RS256, the issuer, the audience (``aud``, or ``client_id`` when
  the token has no ``aud``, as for Cognito access tokens), ``exp``/``nbf``; a failure is
  the gateway's own 401 ``{"message":"Unauthorized"}``, which the function never sees.
  The claims reach the event as API Gateway passes them: strings, arrays as ``"[a b]"``.
  In IAM mode the gateway checks the request's SigV4 signature (``execute-api``, the
  signed headers as received, the body's hash) against the test's credentials and
  forwards it with the ``iam`` context; a missing or wrong signature is its 403. Which
  principal may invoke which path is IAM's policy evaluation, tested on the template
  (tests/unit/aws/test_template.py).

The test plays API Gateway; the code under test is ``functions/mcp/app.py`` as deployed.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import http.server
import ipaddress
import json
import re
import ssl
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import jwt
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

AUDIENCE = "kb-mcp-clients"
MCP_ROUTE = "/mcp/agents/{agent}/contexts/{context}"
METADATA_ROUTE = "/.well-known/oauth-protected-resource"


def _serve(handler: type[http.server.BaseHTTPRequestHandler], **attributes: Any) -> Any:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    for name, value in attributes.items():
        setattr(server, name, value)
    return server


@dataclass
class Issuer:
    """The token issuer (module docstring). ``clients``: client id -> (secret, claims)."""

    url: str
    key: rsa.RSAPrivateKey
    kid: str
    clients: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    public_clients: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    """client id -> (its redirect URI, the claims of the user ``/authorize`` signs in)."""
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    access_lifetime: int = 300
    tokens_issued: int = 0

    def token(
        self,
        claims: Mapping[str, Any],
        *,
        lifetime: int = 300,
        audience: str | None = AUDIENCE,
        key: rsa.RSAPrivateKey | None = None,
        issuer: str | None = None,
    ) -> str:
        now = int(time.time())
        payload: dict[str, Any] = {
            "iss": issuer or self.url,
            "sub": str(claims.get("sub", "agent-runner")),
            "iat": now,
            "nbf": now - 5,
            "exp": now + lifetime,
            "jti": uuid.uuid4().hex,
            **claims,
        }
        if audience is not None:
            payload["aud"] = audience
        return jwt.encode(payload, key or self.key, algorithm="RS256", headers={"kid": self.kid})

    def jwks(self) -> dict[str, Any]:
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**public, "kid": self.kid, "use": "sig", "alg": "RS256"}]}

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.url,
            "jwks_uri": f"{self.url}/jwks",
            "token_endpoint": f"{self.url}/token",
            "authorization_endpoint": f"{self.url}/authorize",
            "grant_types_supported": ["client_credentials", "authorization_code"],
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "none"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "subject_types_supported": ["public"],
        }

    def authorize(self, query: Mapping[str, str]) -> str | None:
        """Where ``/authorize`` sends the browser: the registered redirect URI with a code
        and the state, or ``None`` (a 400) for an unknown client, another redirect URI or
        no S256 challenge."""
        known = self.public_clients.get(query.get("client_id", ""))
        if (
            known is None
            or query.get("redirect_uri") != known[0]
            or query.get("response_type") != "code"
            or query.get("code_challenge_method") != "S256"
            or not query.get("code_challenge")
        ):
            return None
        code = uuid.uuid4().hex
        self.codes[code] = {**query, "user": known[1]}
        separator = "&" if "?" in known[0] else "?"
        back = {"code": code, "state": query.get("state", "")}
        return known[0] + separator + urllib.parse.urlencode(back)

    def _exchange(self, form: Mapping[str, str]) -> dict[str, Any] | None:
        """The authorization code grant of a public client: the code once, for the
        client and redirect URI it was issued to, with the verifier of its challenge."""
        issued = self.codes.pop(form.get("code", ""), None)
        verifier = form.get("code_verifier", "")
        if (
            issued is None
            or form.get("client_id") != issued["client_id"]
            or form.get("redirect_uri") != issued["redirect_uri"]
        ):
            return None
        digest = hashlib.sha256(verifier.encode()).digest()
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != issued["code_challenge"]:
            return None
        self.tokens_issued += 1
        user = issued["user"]
        access = {"client_id": issued["client_id"], "scope": issued.get("scope", ""), **user}
        answer: dict[str, Any] = {
            "access_token": self.token(access, lifetime=self.access_lifetime),
            "token_type": "Bearer",
            "expires_in": self.access_lifetime,
        }
        if "openid" in issued.get("scope", "").split():
            identity = {"sub": user.get("sub", "user"), "nonce": issued.get("nonce", "")}
            if "preferred_username" in user:
                identity["preferred_username"] = user["preferred_username"]
            answer["id_token"] = self.token(identity, audience=issued["client_id"])
        return answer

    def grant(self, authorization: str | None, form: Mapping[str, str]) -> dict[str, Any] | None:
        """A client credentials or (a public client's) authorization code grant: the
        token response, or ``None`` when refused."""
        if form.get("grant_type") == "authorization_code":
            return self._exchange(form)
        if form.get("grant_type") != "client_credentials" or not authorization:
            return None
        scheme, _, encoded = authorization.partition(" ")
        if scheme.lower() != "basic":
            return None
        client_id, _, secret = base64.b64decode(encoded).decode().partition(":")
        client_id, secret = urllib.parse.unquote(client_id), urllib.parse.unquote(secret)
        known = self.clients.get(client_id)
        if known is None or known[0] != secret:
            return None
        self.tokens_issued += 1
        claims = {"client_id": client_id, "sub": client_id, **known[1]}
        return {
            "access_token": self.token(claims, audience=AUDIENCE),
            "token_type": "Bearer",
            "expires_in": 300,
        }


class _IssuerHandler(http.server.BaseHTTPRequestHandler):
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Access-Control-Allow-Origin", "*")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        issuer: Issuer = self.server.issuer
        parts = urllib.parse.urlsplit(self.path)
        path = parts.path
        if path == "/authorize":
            location = issuer.authorize(dict(urllib.parse.parse_qsl(parts.query)))
            if location is None:
                self._json(400, {"error": "invalid_request"})
                return
            self.send_response(302)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path in (
            "/.well-known/openid-configuration",
            "/.well-known/oauth-authorization-server",
        ):
            self._json(200, issuer.discovery())
        elif path == "/jwks":
            self._json(200, issuer.jwks())
        else:
            self._json(404, {"error": "not_found"})

    def do_POST(self) -> None:
        issuer: Issuer = self.server.issuer
        length = int(self.headers.get("Content-Length") or 0)
        form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
        if urllib.parse.urlsplit(self.path).path != "/token":
            self._json(404, {"error": "not_found"})
            return
        answer = issuer.grant(self.headers.get("Authorization"), form)
        if answer is None:
            self._json(401, {"error": "invalid_client"})
        else:
            self._json(200, answer)


@contextmanager
def running_issuer() -> Iterator[Issuer]:
    server = _serve(_IssuerHandler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    server.issuer = Issuer(url, key, kid=uuid.uuid4().hex[:8])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.issuer
    finally:
        server.shutdown()
        server.server_close()


def _api_gateway_claims(claims: Mapping[str, Any]) -> dict[str, str]:
    """Claims as the HTTP API's JWT authorizer hands them to the integration: strings,
    arrays as ``"[a b]"``."""
    shown: dict[str, str] = {}
    for name, value in claims.items():
        if isinstance(value, list):
            shown[name] = "[" + " ".join(str(item) for item in value) + "]"
        else:
            shown[name] = str(value)
    return shown


class Authorizer:
    """API Gateway's JWT authorizer for one issuer and audience list (module docstring)."""

    def __init__(self, issuer: str, audiences: list[str]) -> None:
        self.issuer = issuer
        self.audiences = audiences
        with urllib.request.urlopen(f"{issuer}/.well-known/openid-configuration", timeout=10) as r:
            jwks_uri = json.loads(r.read())["jwks_uri"]
        self._keys = jwt.PyJWKClient(jwks_uri, cache_keys=True)

    def claims(self, authorization: str | None) -> dict[str, Any] | None:
        """The verified claims of ``Authorization: Bearer <jwt>``, or ``None``."""
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        try:
            key = self._keys.get_signing_key_from_jwt(token)
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=["RS256"],
                issuer=self.issuer,
                options={"verify_aud": False, "require": ["exp", "iss"]},
                leeway=0,
            )
        except jwt.PyJWTError:
            return None
        audience = claims.get("aud", claims.get("client_id"))
        audiences = audience if isinstance(audience, list) else [audience]
        if not any(a in self.audiences for a in audiences):
            return None
        return claims


_SIGV4 = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
    r"execute-api/aws4_request, SignedHeaders=(?P<signed>[^,]+), "
    r"Signature=(?P<signature>[0-9a-f]{64})"
)


def sigv4_valid(credentials: Credentials, method: str, url: str, headers: Any, body: bytes) -> bool:
    """Whether the request carries a valid SigV4 signature for ``execute-api`` by
    ``credentials``: the signature recomputed over the signed headers as received."""
    match = _SIGV4.fullmatch(headers.get("Authorization") or "")
    if match is None or match["key"] != credentials.access_key:
        return False
    signed = match["signed"].split(";")
    received = {name: headers.get(name) for name in signed}
    if any(value is None for value in received.values()):
        return False
    request = AWSRequest(method=method, url=url, data=body, headers=received)
    request.context["timestamp"] = received.get("x-amz-date") or ""
    signer = SigV4Auth(credentials, "execute-api", match["region"])
    expected = signer.signature(
        signer.string_to_sign(request, signer.canonical_request(request)), request
    )
    return expected == match["signature"]


@dataclass
class Route:
    method: str
    path: str
    authorized: bool  # behind the stack's authorizer (JWT or IAM); False: public
    function: ModuleType | None = None  # None: the gateway's function

    def match(self, method: str, path: str) -> dict[str, str] | None:
        if method != self.method:
            return None
        pattern, actual = self.path.strip("/").split("/"), path.strip("/").split("/")
        if pattern[-1].endswith("+}"):  # greedy: one segment or more, not an empty one
            head = len(pattern) - 1
            rest = "/".join(actual[head:])
            if len(actual) <= head or not rest or path.endswith("/"):
                return None
            captured = self._segments(pattern[:head], actual[:head])
            if captured is None:
                return None
            return {**captured, pattern[-1].strip("{+}"): urllib.parse.unquote(rest)}
        if len(pattern) != len(actual):
            return None
        return self._segments(pattern, actual)

    @staticmethod
    def _segments(pattern: list[str], actual: list[str]) -> dict[str, str] | None:
        captured = {}
        for expected, segment in zip(pattern, actual, strict=True):
            if expected.startswith("{"):
                if not segment:
                    return None
                captured[expected.strip("{}")] = urllib.parse.unquote(segment)
            elif expected != segment:
                return None
        return captured


def template_routes(
    parameters: Mapping[str, str], functions: Mapping[str, ModuleType]
) -> list[Route]:
    """Every route ``template.yaml`` declares for ``parameters`` whose integration is one
    of ``functions`` (integration resource name -> the function's module), public
    (``AuthorizationType: NONE``) or behind the stack's authorizer."""
    from cfn_template import Stack, load_template

    stack = Stack(load_template(), parameters)
    routes = []
    for resource in stack.resources().values():
        if resource["Type"] != "AWS::ApiGatewayV2::Route":
            continue
        properties = stack.evaluate(resource["Properties"])
        integration = properties["Target"].removeprefix("integrations/").removesuffix(".Ref")
        if integration in functions:
            method, path = properties["RouteKey"].split(" ", 1)
            public = properties["AuthorizationType"] == "NONE"
            routes.append(Route(method, path, not public, functions[integration]))
    return routes


def mcp_routes(mode: str) -> list[Route]:
    """The MCP function's routes in ``template.yaml``: the endpoint's three methods, and in
    JWT mode the two public metadata routes."""
    routes = [Route(m, MCP_ROUTE, True) for m in ("POST", "GET", "DELETE")]
    if mode == "jwt":
        routes += [
            Route("GET", METADATA_ROUTE, False),
            Route("GET", METADATA_ROUTE + MCP_ROUTE, False),
        ]
    return routes


class _GatewayHandler(http.server.BaseHTTPRequestHandler):
    server: Any
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers.items():
            if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _handle(self) -> None:
        gateway: Gateway = self.server.gateway
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        raw_path, _, query = self.path.partition("?")
        for route in gateway.routes:
            captured = route.match(self.command, raw_path)
            if captured is not None:
                break
        else:
            self._send(404, {"Content-Type": "application/json"}, b'{"message":"Not Found"}')
            return
        authorizer: dict[str, Any] | None = None
        if route.authorized and gateway.mode == "jwt":
            claims = gateway.authorizer.claims(self.headers.get("Authorization"))  # type: ignore[union-attr]
            if claims is None:
                gateway.refused += 1
                self._send(
                    401,
                    {"Content-Type": "application/json", "WWW-Authenticate": "Bearer"},
                    b'{"message":"Unauthorized"}',
                )
                return
            authorizer = {"jwt": {"claims": _api_gateway_claims(claims), "scopes": None}}
        elif route.authorized:
            url = gateway.url + self.path
            if not sigv4_valid(gateway.credentials, self.command, url, self.headers, body):
                gateway.refused += 1
                self._send(
                    403,
                    {"Content-Type": "application/json"},
                    b'{"message":"Forbidden"}',
                )
                return
            authorizer = {"iam": {"accountId": "123456789012", "userArn": gateway.iam_caller}}
        event = gateway.event(self.command, raw_path, query, route, captured, self.headers, body)
        if authorizer is not None:
            event["requestContext"]["authorizer"] = authorizer
        with gateway.lock:  # one Lambda container runs one invocation at a time
            gateway.events.append(event)
            response = gateway.invoke(event, route)
        payload = response.get("body") or ""
        data = base64.b64decode(payload) if response.get("isBase64Encoded") else payload.encode()
        self._send(int(response["statusCode"]), response.get("headers") or {}, data)

    do_GET = do_POST = do_DELETE = do_PUT = _handle


@dataclass
class Gateway:
    """The API Gateway stand-in (module docstring); ``url`` is its ``https://`` origin."""

    function: ModuleType
    mode: str
    routes: list[Route]
    authorizer: Authorizer | None
    context_factory: Callable[[], Any]
    url: str = ""
    ssl_context: ssl.SSLContext | None = None
    iam_caller: str = "arn:aws:sts::123456789012:assumed-role/ops-bot-runner/agent"
    credentials: Credentials = field(
        default_factory=lambda: Credentials("AKIDOPSBOTRUNNER", "ops-bot-secret", "ops-bot-token")
    )
    lock: threading.Lock = field(default_factory=threading.Lock)
    events: list[dict[str, Any]] = field(default_factory=list)
    refused: int = 0

    def mcp_url(self, agent: str, context: str) -> str:
        return self.url + MCP_ROUTE.format(agent=agent, context=context)

    def event(
        self,
        method: str,
        raw_path: str,
        query: str,
        route: Route,
        captured: Mapping[str, str],
        headers: Any,
        body: bytes,
    ) -> dict[str, Any]:
        """A payload 2.0 event, shaped like ``events/api_search.json``."""
        joined: dict[str, str] = {}
        for name, value in headers.items():
            key = name.lower()
            joined[key] = f"{joined[key]},{value}" if key in joined else value
        domain = self.url.removeprefix("https://")
        request_id = base64.b64encode(uuid.uuid4().bytes[:10]).decode()
        event: dict[str, Any] = {
            "version": "2.0",
            "routeKey": f"{method} {route.path}",
            "rawPath": raw_path,
            "rawQueryString": query,
            "headers": joined,
            "requestContext": {
                "accountId": "123456789012",
                "apiId": "a1b2c3d4e5",
                "domainName": domain,
                "domainPrefix": "a1b2c3d4e5",
                "http": {
                    "method": method,
                    "path": raw_path,
                    "protocol": "HTTP/1.1",
                    "sourceIp": "127.0.0.1",
                    "userAgent": joined.get("user-agent", ""),
                },
                "requestId": request_id,
                "routeKey": f"{method} {route.path}",
                "stage": "$default",
                "time": datetime.datetime.now(datetime.UTC).strftime("%d/%b/%Y:%H:%M:%S +0000"),
                "timeEpoch": int(time.time() * 1000),
            },
            "isBase64Encoded": False,
        }
        if captured:
            event["pathParameters"] = dict(captured)
        if body:
            try:
                event["body"] = body.decode("utf-8")
            except UnicodeDecodeError:
                event["body"], event["isBase64Encoded"] = base64.b64encode(body).decode(), True
        return event

    def invoke(self, event: dict[str, Any], route: Route | None = None) -> dict[str, Any]:
        function = route.function if route is not None and route.function else self.function
        response: dict[str, Any] = function.lambda_handler(event, self.context_factory())
        return response


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, as PEM files."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "gateway.pem", folder / "gateway.key"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


@contextmanager
def running_gateway(
    function: ModuleType,
    mode: str,
    context_factory: Callable[[], Any],
    issuer: Issuer | None = None,
    routes: list[Route] | None = None,
) -> Iterator[Gateway]:
    """The stand-in in front of ``function`` (its ``lambda_handler``), over TLS, for the
    MCP function's routes or ``routes``."""
    authorizer = Authorizer(issuer.url, [AUDIENCE]) if issuer is not None else None
    chosen = mcp_routes(mode) if routes is None else routes
    gateway = Gateway(function, mode, chosen, authorizer, context_factory)
    server = _serve(_GatewayHandler, gateway=gateway)
    with tempfile.TemporaryDirectory(prefix="kb-gateway-") as tmp:
        cert_file, key_file = _certificate(Path(tmp))
        serving = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        serving.load_cert_chain(cert_file, key_file)
        server.socket = serving.wrap_socket(server.socket, server_side=True)
        trusting = ssl.create_default_context(cafile=str(cert_file))
    gateway.url = f"https://127.0.0.1:{server.server_address[1]}"
    gateway.ssl_context = trusting
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield gateway
    finally:
        server.shutdown()
        server.server_close()
