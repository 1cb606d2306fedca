"""Resolve a registration's credential reference to the secret, at sync time only.

``env:NAME`` reads the environment variable, ``file:/path`` the file (at most 64 KiB),
``arn:...`` asks Secrets Manager (``read_secret``, injected: the AWS front end passes a
reader that is allowed to read only the secrets of its prefix). The secret is never
stored, logged or put in a message: a failure names the reference's kind only.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from knowledge.ingest.repos.errors import RepoSyncError
from knowledge.ingest.repos.registration import CREDENTIAL_ARN, CREDENTIAL_ENV, CREDENTIAL_FILE

__all__ = ["MAX_SECRET_BYTES", "resolve_credential"]

MAX_SECRET_BYTES = 64 * 1024


def resolve_credential(
    reference: str | None,
    *,
    environ: Mapping[str, str] | None = None,
    read_secret: Callable[[str], bytes] | None = None,
) -> bytes | None:
    if reference is None:
        return None
    kind, _, rest = reference.partition(":")
    if kind == CREDENTIAL_ENV:
        value = (os.environ if environ is None else environ).get(rest)
        if not value:
            raise RepoSyncError("credential", f"the environment variable {rest} is not set")
        return value.encode("utf-8")
    if kind == CREDENTIAL_FILE:
        try:
            with open(rest, "rb") as handle:
                data = handle.read(MAX_SECRET_BYTES + 1)
        except OSError:
            raise RepoSyncError("credential", "the credential file cannot be read") from None
        if not data.strip() or len(data) > MAX_SECRET_BYTES:
            raise RepoSyncError("credential", "the credential file is empty or too large")
        return data
    if kind == CREDENTIAL_ARN and read_secret is not None:
        try:
            data = read_secret(reference)
        except Exception:
            raise RepoSyncError(
                "credential", "the secret cannot be read (check its name prefix and tag)"
            ) from None
        if not data.strip():
            raise RepoSyncError("credential", "the secret is empty")
        return data
    raise RepoSyncError("credential", f"a '{kind}' credential cannot be read here")
