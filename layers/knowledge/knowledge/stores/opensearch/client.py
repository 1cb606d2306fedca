"""Creating the ``opensearchpy`` client, retrying calls, and turning its errors into ours.

Everything here imports ``opensearchpy``/``boto3`` inside the function that needs them,
so importing the store costs nothing at a Lambda cold start until the first request.

Authentication:

- ``none``: a local node.
- ``basic``: username and password; the password comes from the config (local use) or
  from a Secrets Manager secret (``knowledge.core.secrets``), read when the client is created.
- ``sigv4``: requests signed with ``opensearchpy.Urllib3AWSV4SignerAuth`` (botocore's
  SigV4 signer) for service ``es`` or ``aoss``. It is given the botocore credentials
  object of a ``boto3.Session``, which for role-based providers (Lambda, ECS, EC2,
  assumed roles) is a ``RefreshableCredentials``: every request is signed with
  ``get_frozen_credentials()``, which renews credentials before they expire and never
  mixes the key of one set with the secret of another.
"""

# opensearchpy/boto3 load on first use, not at import (Lambda cold start)

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from knowledge.core.deadline import Deadline
from knowledge.core.errors import (
    ConfigurationError,
    KnowledgeError,
    StoreAccessDeniedError,
    StoreError,
    StoreUnavailableError,
)
from knowledge.stores.opensearch.settings import OpenSearchConfig

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

__all__ = [
    "RETRYABLE_STATUSES",
    "RetryPolicy",
    "create_client",
    "error_reason",
    "http_auth",
    "is_retryable",
    "read_password_secret",
    "refused_as_expensive",
    "sigv4_auth",
    "store_error",
]

T = TypeVar("T")

RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
"""Throttled or a node in trouble: worth another try after a pause."""

_UNAVAILABLE_STATUSES = frozenset({502, 503, 504})

_EXPENSIVE_REFUSAL = re.compile(
    r"\[(\w+)\] queries[^\[]*(?:\[[^\]]*\][^\[]*)*?cannot be executed when "
    r"'search\.allow_expensive_queries' is set to false"
)


def refused_as_expensive(error: BaseException) -> str | None:
    """The kind of query (``wildcard``, ``prefix``, ``regexp``, ``range``, ...) the node
    refused because its cluster sets ``search.allow_expensive_queries: false`` (a managed
    domain may), or ``None`` if ``error`` is something else."""
    found = _EXPENSIVE_REFUSAL.search(str(error))
    return None if found is None else found.group(1)


def read_password_secret(secret_arn: str, *, session: Any = None) -> tuple[str | None, str]:
    """``(username or None, password)`` from a Secrets Manager secret.

    The secret string is either the password itself or a JSON object with
    ``password`` (and optionally ``username``), as RDS-style secrets are. Read (and
    cached) by ``knowledge.core.secrets``; ``session`` is a ``boto3.Session`` to read with.
    Raises ``ConfigurationError`` naming the secret (never its value).
    """
    from knowledge.core.secrets import read_secret

    client = None
    if session is not None:
        parts = secret_arn.split(":")
        region = parts[3] if len(parts) > 3 and parts[3] else None
        client = session.client("secretsmanager", region_name=region)
    text = read_secret(secret_arn, client=client)
    if not text.lstrip().startswith("{"):
        return None, text
    try:
        parsed = json.loads(text)
    except ValueError:
        raise ConfigurationError(
            f"opensearch password secret {secret_arn}: looks like JSON but is not valid"
        ) from None
    password = parsed.get("password") if isinstance(parsed, dict) else None
    if not isinstance(password, str) or not password:
        raise ConfigurationError(
            f"opensearch password secret {secret_arn}: JSON secret has no 'password'"
        )
    username = parsed.get("username")
    return (username if isinstance(username, str) and username else None), password


def sigv4_auth(config: OpenSearchConfig, *, session: Any = None) -> Any:
    """The SigV4 signer for ``config.service`` in ``config.region``, with the process's
    (refreshable) AWS credentials. Raises ``ConfigurationError`` if there are none."""
    import boto3
    from opensearchpy import Urllib3AWSV4SignerAuth

    aws = session or boto3.Session(region_name=config.region)
    credentials = aws.get_credentials()
    if credentials is None:
        raise ConfigurationError(
            "opensearch auth: sigv4 needs AWS credentials and none were found "
            "(environment, profile, container or instance role)"
        )
    return Urllib3AWSV4SignerAuth(credentials, config.region, config.service)


def http_auth(config: OpenSearchConfig, *, session: Any = None) -> Any:
    """What ``OpenSearch(http_auth=...)`` gets for the configured auth mode."""
    if config.auth == "none":
        return None
    if config.auth == "sigv4":
        return sigv4_auth(config, session=session)
    username, password = config.username, config.password
    if config.password_secret_arn is not None:
        secret_user, password = read_password_secret(config.password_secret_arn, session=session)
        username = username or secret_user
    if not username or password is None:
        raise ConfigurationError("opensearch auth: basic auth needs a username and a password")
    return (username, password)


def create_client(config: OpenSearchConfig, *, session: Any = None) -> OpenSearch:
    """A client for ``config.url``. Retries are ``RetryPolicy``'s (with backoff), not the
    transport's (which retries immediately), so the transport's are turned off."""
    from opensearchpy import OpenSearch

    auth = http_auth(config, session=session)
    https = config.url.startswith("https://")
    return OpenSearch(
        hosts=[config.url],
        http_auth=auth,
        use_ssl=https,
        verify_certs=config.verify_certs if https else False,
        ssl_show_warn=False,
        timeout=config.timeout,
        max_retries=0,
        retry_on_timeout=False,
    )


def error_reason(exc: BaseException) -> str:
    """The server's reason for a failed request (or the exception text), one line."""
    from opensearchpy.exceptions import ConnectionError as OSConnectionError
    from opensearchpy.exceptions import TransportError

    if isinstance(exc, OSConnectionError):
        cause = exc.info if isinstance(exc.info, BaseException) else None
        text = str(cause or exc.error or exc)
        return " ".join(text.split())[:300]
    if isinstance(exc, TransportError):
        info = exc.info
        if isinstance(info, dict):
            error = info.get("error")
            if isinstance(error, dict):
                causes = error.get("root_cause") or [error]
                first = causes[0] if causes else error
                kind = first.get("type") or error.get("type") or "error"
                reason = first.get("reason") or error.get("reason") or ""
                return f"{kind}: {reason}"[:300]
            if isinstance(error, str):
                return error[:300]
        return str(exc.error or exc)[:300]
    return " ".join(str(exc).split())[:300]


def store_error(exc: BaseException, config: OpenSearchConfig, action: str) -> KnowledgeError:
    """Our error for an ``opensearchpy``/``botocore`` failure while doing ``action``.

    Connection failures and 502/503/504 are ``StoreUnavailableError``; bad credentials
    or permissions (401/403) ``StoreAccessDeniedError``, naming the policy to check for
    the service; bad requests and everything else are ``StoreError``; errors already
    ours pass through. The message names the endpoint and never carries a traceback.
    """
    from opensearchpy.exceptions import (
        AuthenticationException,
        AuthorizationException,
        ImproperlyConfigured,
        TransportError,
    )
    from opensearchpy.exceptions import ConnectionError as OSConnectionError

    if isinstance(exc, KnowledgeError):
        return exc
    if isinstance(exc, OSConnectionError):
        return StoreUnavailableError(
            f"OpenSearch at {config.url} is unreachable: {error_reason(exc)} (trying to {action})"
        )
    if isinstance(exc, AuthenticationException | AuthorizationException):
        where = (
            "the collection's data access policy (and aoss:APIAccessAll on the collection)"
            if config.service == "aoss"
            else "the domain's access policy (or its fine-grained access control mapping)"
        )
        return StoreAccessDeniedError(
            f"OpenSearch at {config.url} refused to {action} ({exc.status_code}): "
            f"{error_reason(exc)}; check the {config.auth} credentials and {where}"
        )
    if isinstance(exc, TransportError):
        status = exc.status_code
        message = f"OpenSearch at {config.url} failed to {action} ({status}): {error_reason(exc)}"
        if isinstance(status, int) and status in _UNAVAILABLE_STATUSES:
            return StoreUnavailableError(message)
        return StoreError(message)
    if isinstance(exc, ImproperlyConfigured):
        return ConfigurationError(f"opensearch client: {exc}")
    return StoreError(
        f"OpenSearch at {config.url} failed to {action}: {type(exc).__name__}: {error_reason(exc)}"
    )


def is_retryable(exc: BaseException) -> bool:
    """Connection failures, timeouts, 429 and 5xx; never a 4xx the request itself caused."""
    from opensearchpy.exceptions import ConnectionError as OSConnectionError
    from opensearchpy.exceptions import TransportError

    if isinstance(exc, OSConnectionError):
        return True
    if isinstance(exc, TransportError):
        return isinstance(exc.status_code, int) and exc.status_code in RETRYABLE_STATUSES
    return False


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retries with capped exponential backoff and jitter; ``sleep`` is injectable."""

    max_retries: int = 3
    initial_backoff: float = 0.5
    max_backoff: float = 8.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    @classmethod
    def from_config(cls, config: OpenSearchConfig) -> RetryPolicy:
        return cls(config.max_retries, config.retry_initial_backoff, config.retry_max_backoff)

    def delay(self, attempt: int) -> float:
        """Pause before retry number ``attempt`` (1-based): half of the exponential step
        (capped at ``max_backoff``) plus a random share of the other half."""
        cap = min(self.max_backoff, self.initial_backoff * 2.0 ** (attempt - 1))
        jitter: float = random.uniform(0, cap / 2)  # noqa: S311 - jitter, not security
        return cap / 2 + jitter

    def call(
        self,
        fn: Callable[..., T],
        *args: Any,
        deadline: Deadline | None = None,
        **kwargs: Any,
    ) -> T:
        """``fn(*args, **kwargs)``, retried on retryable errors; the last error is raised.

        With a ``deadline``, no retry starts that could not get at least a tenth of a
        second before it (the pause included)."""
        attempt = 0
        while True:
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                if attempt >= self.max_retries or not is_retryable(exc):
                    raise
                attempt += 1
                pause = self.delay(attempt)
                if deadline is not None and deadline.remaining() < pause + _MIN_ATTEMPT_SECONDS:
                    raise
                self.sleep(pause)


_MIN_ATTEMPT_SECONDS = 0.1
