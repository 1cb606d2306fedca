"""The knowledge console on the deployed stack: its pages on the HTTP API's own origin.

The console function answers ``GET /console`` and ``GET /console/{proxy+}`` (public
routes: a browser cannot send a token with a page load) from the files the package
ships (``knowledge.service.console``), so the pages and the API share one origin and
the API needs no CORS. ``config.json`` is generated from the stack's parameters: the
auth mode, and in JWT mode the issuer, the console's public OAuth client id and the
scopes it asks for; uploads go through the presigned POST of ``POST .../uploads``.

Every answer carries ``knowledge.service.console.security_headers``; the policy lets the
pages reach this origin, the token issuer (its discovery document, and its token
endpoint, found once per container in that document: a Cognito pool's token endpoint is
on another host than its issuer; an issuer that does not answer is asked again a minute
later, not on every file of a page) and the documents bucket (the presigned POST's
``https://BUCKET.s3.amazonaws.com/``, or its regional name; ``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL`` when set, as botocore uses them). Stdlib only: nothing here slows a
cold start.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from knowledge.aws.environment import EnvironmentReader
from knowledge.core.errors import ConfigurationError
from knowledge.service.console import (
    CONFIG_NAME,
    CONSOLE_PATH,
    ConsoleSettings,
    console_file,
    read_console_file,
    security_headers,
)

__all__ = ["ConsoleSite", "bucket_origins", "origin_of"]

logger = logging.getLogger(__name__)

_DISCOVERY_TIMEOUT_S = 3.0
_DISCOVERY_RETRY_S = 60.0

Discover = Callable[[str], Mapping[str, Any]]


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, or ``""`` when it has none."""
    parts = urllib.parse.urlsplit(url.strip())
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""


def bucket_origins(bucket: str, region: str, endpoint: str | None = None) -> tuple[str, ...]:
    """Where the browser posts a presigned upload: ``endpoint``'s origin when the S3
    client is pointed at one, else the bucket's global and regional virtual hosts."""
    if endpoint:
        return (origin_of(endpoint),)
    if not bucket:
        return ()
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    regional = (f"https://{bucket}.s3.{region}.{suffix}",) if region else ()
    return (f"https://{bucket}.s3.{suffix}", *regional)


def _fetch_discovery(issuer: str) -> Mapping[str, Any]:
    import urllib.request  # on the first answer only: not part of the cold import

    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    # The issuer is the stack's JwtIssuer (an https:// URL, template.yaml), not caller input.
    with urllib.request.urlopen(url, timeout=_DISCOVERY_TIMEOUT_S) as answer:  # noqa: S310
        document: Mapping[str, Any] = json.loads(answer.read())
    return document


@dataclass
class ConsoleSite:
    """The console's answers for one deployment (module docstring)."""

    settings: ConsoleSettings
    uploads_to: tuple[str, ...] = ()
    discover: Discover = _fetch_discovery
    clock: Callable[[], float] = time.monotonic
    _issuer_origins: tuple[str, ...] | None = field(default=None, repr=False)
    _retry_at: float = field(default=0.0, repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ConsoleSite:
        """The settings ``template.yaml`` gives the console function."""
        read = EnvironmentReader(env)
        mode = (read.get("API_AUTH") or "iam").lower()
        if mode not in ("iam", "jwt"):
            raise ConfigurationError(f"API_AUTH: {mode!r} is neither 'iam' nor 'jwt'")
        issuer = (read.get("JWT_ISSUER") or "").rstrip("/")
        client_id = read.get("CONSOLE_CLIENT_ID") or ""
        if mode == "jwt" and not (issuer and client_id):
            raise ConfigurationError("jwt mode: JWT_ISSUER and CONSOLE_CLIENT_ID must be set")
        settings = ConsoleSettings(
            auth="jwt" if mode == "jwt" else "iam",
            issuer=issuer if mode == "jwt" else "",
            client_id=client_id if mode == "jwt" else "",
            scopes=" ".join((read.get("CONSOLE_SCOPES") or "openid").split()),
            uploads="presigned",
            agents_claim=(read.get("JWT_AGENTS_CLAIM") or "") if mode == "jwt" else "",
        )
        endpoint = read.get("AWS_ENDPOINT_URL_S3") or read.get("AWS_ENDPOINT_URL")
        bucket = read.get("DOCUMENTS_BUCKET") or ""
        region = read.get("AWS_REGION") or ""
        return cls(settings, bucket_origins(bucket, region, endpoint))

    def issuer_origins(self) -> tuple[str, ...]:
        """The issuer's origin and its token endpoint's (from its discovery document,
        kept once found; while the issuer does not answer, its own origin only, and it is
        asked again ``_DISCOVERY_RETRY_S`` later)."""
        issuer = self.settings.issuer
        if not issuer:
            return ()
        if self._issuer_origins is None:
            if self.clock() < self._retry_at:
                return (origin_of(issuer),)
            try:
                token_endpoint = str(self.discover(issuer).get("token_endpoint") or "")
            except (OSError, ValueError) as exc:
                logger.warning("the issuer's discovery document is unavailable: %s", exc)
                self._retry_at = self.clock() + _DISCOVERY_RETRY_S
                return (origin_of(issuer),)
            self._issuer_origins = tuple(
                dict.fromkeys(o for o in (origin_of(issuer), origin_of(token_endpoint)) if o)
            )
        return self._issuer_origins

    def headers(self) -> dict[str, str]:
        """The security headers of every answer (``security_headers``)."""
        return security_headers((*self.issuer_origins(), *self.uploads_to))

    def respond(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """The payload 2.0 response to one API Gateway event for a console route."""
        method = str((event.get("requestContext") or {}).get("http", {}).get("method", ""))
        path = str(event.get("rawPath") or "")
        if method not in ("GET", "HEAD"):
            return self._answer(405, "text/plain; charset=utf-8", b"Method not allowed\n")
        if path == CONSOLE_PATH.rstrip("/"):
            # The pages' relative links resolve under /console/.
            answer = self._answer(302, "text/plain; charset=utf-8", b"")
            answer["headers"]["Location"] = CONSOLE_PATH + "index.html"
            return answer
        if path == CONSOLE_PATH + CONFIG_NAME:
            return self._answer(200, "application/json; charset=utf-8", self.settings.to_json())
        found = console_file(path)
        if found is None:
            return self._answer(404, "text/plain; charset=utf-8", b"Not found\n")
        name, content_type = found
        return self._answer(200, content_type, read_console_file(name))

    def _answer(self, status: int, content_type: str, body: bytes) -> dict[str, Any]:
        return {
            "statusCode": status,
            "headers": {**self.headers(), "Content-Type": content_type},
            "body": body.decode("utf-8"),
            "isBase64Encoded": False,
        }
