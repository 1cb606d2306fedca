"""Secrets from AWS Secrets Manager, read at run time and cached per process.

A secret never sits in a plain environment variable or in the template: the function
gets the secret's ARN and ``secretsmanager:GetSecretValue`` on that ARN only, and reads
the value when it first needs it. ``boto3`` is imported on that first read, not at
import (Lambda cold start). Values are cached for ``max_age`` seconds (rotation is
picked up after at most that long); the value never appears in an error message.

A secret string is either the value itself or a JSON object holding it in a field
(``{"api_key": "sk-..."}``, the form the console's key/value editor writes).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from knowledge.errors import ConfigurationError

__all__ = [
    "DEFAULT_MAX_AGE_SECONDS",
    "clear_secret_cache",
    "read_secret",
    "secret_reader",
]

DEFAULT_MAX_AGE_SECONDS = 900.0

_cache: dict[tuple[str, str | None], tuple[float, str]] = {}
_lock = threading.Lock()


def clear_secret_cache() -> None:
    """Forget every cached value (tests; or after a credential error, to read again)."""
    with _lock:
        _cache.clear()


def _region_of(arn: str) -> str | None:
    parts = arn.split(":")
    return parts[3] if len(parts) > 6 and parts[2] == "secretsmanager" and parts[3] else None


def _fetch(arn: str, client: Any | None) -> str:
    if client is None:
        import boto3  # only when a secret is first needed

        client = boto3.client("secretsmanager", region_name=_region_of(arn))
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        response = client.get_secret_value(SecretId=arn)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "error")
        raise ConfigurationError(f"secret {arn}: cannot be read ({code})") from exc
    except BotoCoreError as exc:
        raise ConfigurationError(f"secret {arn}: cannot be read ({type(exc).__name__})") from exc
    value = response.get("SecretString")
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
    max_age: float = DEFAULT_MAX_AGE_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """The value of the secret ``arn`` (the JSON ``field`` of it, if the secret is a JSON
    object and ``field`` is given), from the cache when read less than ``max_age`` ago.

    ``client`` is a Secrets Manager client (default: a boto3 client in the ARN's region).
    Raises ``ConfigurationError`` naming the ARN (never the value) when the secret cannot
    be read, is empty, or lacks the field.
    """
    if not isinstance(arn, str) or not arn.startswith("arn:"):
        raise ConfigurationError(f"secret ARN: {arn!r} is not an ARN")
    cache_key = (arn, field)
    now = clock()
    with _lock:
        cached = _cache.get(cache_key)
    if cached is not None and now - cached[0] < max_age:
        return cached[1]
    value = _extract(arn, _fetch(arn, client), field)
    with _lock:
        _cache[cache_key] = (now, value)
    return value


def secret_reader(
    arn: str, *, field: str | None = None, client: Any | None = None
) -> Callable[[], str]:
    """A function that returns the secret's value when called (for lazy API-key options)."""

    def read() -> str:
        return read_secret(arn, field=field, client=client)

    return read
