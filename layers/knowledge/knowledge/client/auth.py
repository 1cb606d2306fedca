"""How ``KnowledgeClient`` authenticates: SigV4 (``execute-api``), a bearer JWT, or nothing.

``Auth.apply`` adds credentials to one request and is called again for every attempt, so
a signature is always fresh; ``SigV4Auth`` re-reads refreshable credentials before each.
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any, Protocol

from knowledge.client.errors import AccessDeniedError
from knowledge.core.errors import (
    ValidationError,
)

__all__ = ["Auth", "BearerAuth", "SigV4Auth"]


class Auth(Protocol):
    """Adds credentials to one request. Called again for every attempt (fresh signature)."""

    def apply(self, method: str, url: str, headers: dict[str, str], body: bytes) -> None: ...


class BearerAuth:
    """``Authorization: Bearer <token>``; ``token`` may be a callable returning a fresh one."""

    def __init__(self, token: str | Callable[[], str]) -> None:
        if isinstance(token, str) and not token.strip():
            raise ValidationError("token", "must be a non-blank string")
        self._token = token

    def apply(self, method: str, url: str, headers: dict[str, str], body: bytes) -> None:
        token = self._token() if callable(self._token) else self._token
        headers["Authorization"] = f"Bearer {token}"


class SigV4Auth:
    """AWS Signature Version 4 for API Gateway (``execute-api``), through botocore.

    ``region``: from the URL (``<id>.execute-api.<region>.amazonaws.com``) when not given,
    else the botocore session's region. ``session``: a ``botocore.session.Session``
    (default: a new one, which reads the usual environment, profile and role chain).
    """

    def __init__(
        self,
        region: str | None = None,
        *,
        session: Any = None,
        service: str = "execute-api",
    ) -> None:
        self._region = region
        self._session = session
        self._service = service
        self._credentials: Any = None

    def _resolve_credentials(self) -> Any:
        if self._credentials is None:
            session = self._session
            if session is None:
                import botocore.session

                session = self._session = botocore.session.Session()
            credentials = session.get_credentials()
            if credentials is None:
                raise AccessDeniedError(
                    401, "no AWS credentials found for SigV4 signing (set a profile or role)"
                )
            self._credentials = credentials
        return self._credentials

    def region_for(self, url: str) -> str:
        if self._region:
            return self._region
        host = urllib.parse.urlsplit(url).hostname or ""
        parts = host.split(".")
        if "execute-api" in parts:
            index = parts.index("execute-api")
            if index + 1 < len(parts):
                return parts[index + 1]
        region = self._session.get_config_variable("region") if self._session else None
        if not region:
            raise ValidationError(
                "region", "cannot tell the AWS region from the URL; pass SigV4Auth(region=...)"
            )
        return str(region)

    def apply(self, method: str, url: str, headers: dict[str, str], body: bytes) -> None:
        from botocore.auth import SigV4Auth as BotocoreSigV4
        from botocore.awsrequest import AWSRequest

        # get_frozen_credentials() refreshes refreshable (role) credentials when they expire.
        frozen = self._resolve_credentials().get_frozen_credentials()
        request = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
        BotocoreSigV4(frozen, self._service, self.region_for(url)).add_auth(request)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            value = request.headers.get(name)
            if value is not None:
                headers[name] = value
