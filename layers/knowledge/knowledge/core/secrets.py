"""Secrets from AWS Secrets Manager, read at run time through Powertools Parameters.

A secret never sits in a plain environment variable or in the template: the function
gets the secret's ARN and ``secretsmanager:GetSecretValue`` on that ARN only, and reads
the value when it first needs it. Reads go through Powertools' ``SecretsProvider``
(``aws_lambda_powertools.utilities.parameters``), which caches each value for
``max_age`` seconds: **the refresh window** (default ``DEFAULT_MAX_AGE_SECONDS``; the
functions take ``SECRET_MAX_AGE_SECONDS``). A rotated secret is therefore picked up at
the latest ``max_age`` seconds after rotation, and at once by a caller that sees the old
value refused (``SecretReader.refresh``: the OpenAI client does so on a 401).

``boto3`` and Powertools are imported on the first read, not at import (Lambda cold
start). The default client ends a hung read in bounded time (``knowledge.core.aws_clients``),
so a Secrets Manager that does not answer fails the request inside the function's
timeout. The value never appears in an error message.

A secret string is either the value itself or a JSON object holding it in a field
(``{"api_key": "sk-..."}``, the form the console's key/value editor writes).
"""

from __future__ import annotations

import json
import threading
from typing import Any

from knowledge.core.aws_clients import bounded_client
from knowledge.core.errors import ConfigurationError

__all__ = [
    "DEFAULT_MAX_AGE_SECONDS",
    "SecretReader",
    "clear_secret_cache",
    "read_secret",
    "secret_reader",
]

DEFAULT_MAX_AGE_SECONDS = 300

# One Powertools provider (and its cache) per Secrets Manager client; the key of a
# default client is its region. Clients are kept referenced so their ids stay unique.
_providers: dict[object, tuple[Any, Any]] = {}
_lock = threading.Lock()


def clear_secret_cache() -> None:
    """Forget every cached value (tests; the next read goes to Secrets Manager)."""
    with _lock:
        for provider, _ in _providers.values():
            provider.clear_cache()
        _providers.clear()


def _region_of(arn: str) -> str | None:
    parts = arn.split(":")
    return parts[3] if len(parts) > 6 and parts[2] == "secretsmanager" and parts[3] else None


def _provider(arn: str, client: Any | None) -> Any:
    try:
        from aws_lambda_powertools.utilities.parameters import SecretsProvider
    except ImportError as exc:
        raise ConfigurationError(
            f"secret {arn}: reading secrets needs aws-lambda-powertools "
            "(pip install 'knowledge-search[opensearch]')"
        ) from exc

    key: object = ("region", _region_of(arn)) if client is None else ("client", id(client))
    with _lock:
        found = _providers.get(key)
        if found is None:
            if client is None:  # boto3 loads here, when a secret is first needed
                client = bounded_client("secretsmanager", region_name=_region_of(arn))
            found = (SecretsProvider(boto3_client=client), client)
            _providers[key] = found
        return found[0]


def _error_code(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    response = getattr(cause, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", "error"))
    return type(cause).__name__ if cause is not None else "error"


def _fetch(arn: str, client: Any | None, max_age: int, force: bool) -> str:
    provider = _provider(arn, client)
    from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

    try:
        value = provider.get(arn, max_age=max_age, force_fetch=force)
    except GetParameterError as exc:
        raise ConfigurationError(f"secret {arn}: cannot be read ({_error_code(exc)})") from None
    if not isinstance(value, str):
        raise ConfigurationError(f"secret {arn}: has no string value (binary secrets are not read)")
    return value


def _extract(arn: str, secret: str, field: str | None) -> str:
    value = secret.strip()
    if field is not None and value.startswith("{"):
        try:
            document = json.loads(value)
        except json.JSONDecodeError:
            raise ConfigurationError(f"secret {arn}: looks like JSON but is not valid") from None
        if not isinstance(document, dict):
            raise ConfigurationError(f"secret {arn}: JSON value must be an object")
        found = document.get(field)
        if not isinstance(found, str) or not found.strip():
            raise ConfigurationError(
                f"secret {arn}: JSON object has no non-empty string field '{field}'"
            )
        value = found.strip()
    if not value:
        raise ConfigurationError(f"secret {arn}: is empty")
    return value


def read_secret(
    arn: str,
    *,
    field: str | None = None,
    client: Any | None = None,
    max_age: int = DEFAULT_MAX_AGE_SECONDS,
    refresh: bool = False,
) -> str:
    """The value of the secret ``arn`` (the JSON ``field`` of it, if the secret is a JSON
    object and ``field`` is given), from the cache when read less than ``max_age``
    seconds ago, unless ``refresh`` (read it from Secrets Manager now).

    ``client`` is a Secrets Manager client (default: a boto3 client in the ARN's region).
    Raises ``ConfigurationError`` naming the ARN (never the value) when the secret cannot
    be read, is empty, or lacks the field.
    """
    if not isinstance(arn, str) or not arn.startswith("arn:"):
        raise ConfigurationError(f"secret ARN: {arn!r} is not an ARN")
    return _extract(arn, _fetch(arn, client, max_age, refresh), field)


class SecretReader:
    """A secret as a lazy value: calling it reads (cached) ``read_secret``; ``refresh()``
    reads it from Secrets Manager now (after the old value was refused)."""

    def __init__(
        self,
        arn: str,
        *,
        field: str | None = None,
        client: Any | None = None,
        max_age: int = DEFAULT_MAX_AGE_SECONDS,
    ) -> None:
        self._arn = arn
        self._field = field
        self._client = client
        self._max_age = max_age

    @property
    def max_age(self) -> int:
        """The refresh window, in seconds."""
        return self._max_age

    def __call__(self) -> str:
        return read_secret(self._arn, field=self._field, client=self._client, max_age=self._max_age)

    def refresh(self) -> str:
        return read_secret(
            self._arn,
            field=self._field,
            client=self._client,
            max_age=self._max_age,
            refresh=True,
        )

    def __repr__(self) -> str:
        return f"SecretReader({self._arn!r}, field={self._field!r}, max_age={self._max_age})"


def secret_reader(
    arn: str,
    *,
    field: str | None = None,
    client: Any | None = None,
    max_age: int = DEFAULT_MAX_AGE_SECONDS,
) -> SecretReader:
    """A ``SecretReader`` for lazy API-key options (nothing is read until it is called)."""
    return SecretReader(arn, field=field, client=client, max_age=max_age)
