"""A repository registration and the bounds of a sync (pure, no I/O).

``RepoRegistration.from_request`` checks what a caller sends (``POST .../repos``,
``kb repo add``) and raises ``ValidationError`` naming the field:

- ``name``: 1-64 of ``[A-Za-z0-9._-]``, not starting with ``.``; the mirror folder
  ``_repos/<name>/`` of the scope;
- ``url``: ``https://``, ``http://`` or ``ssh://`` with a host; no password in it (a
  credential goes in ``credential``), no query or fragment; the scp-like address a Git
  host shows for SSH (``git@github.com:acme/runbooks.git``) is taken as its ``ssh://``
  URL (``ssh://git@github.com/acme/runbooks.git``);
- ``branch``: the one branch fetched (default ``main``);
- ``paths``: optional folder prefixes; only files under one of them are synced;
- ``credential``: a *reference*, never the secret: ``env:NAME`` or ``file:/abs/path``
  locally, a Secrets Manager ARN on AWS (``credential_kinds`` says which are accepted);
  refused with an ``http://`` URL unless its host is loopback (``sends_in_clear``): the
  token would cross the network in clear;
- ``username``: the HTTPS user sent with a token (default ``x-access-token``, which
  GitHub accepts; GitLab takes ``oauth2``, Bitbucket ``x-token-auth``);
- ``known_hosts``: OpenSSH ``known_hosts`` lines, required for ``ssh://`` (host keys are
  always checked) unless the credential is a Secrets Manager ARN, whose secret may hold
  them (``knowledge.ingest.repos.ssh.ssh_identity``; a sync with neither fails).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

from knowledge.core.documents import has_control_character
from knowledge.core.errors import ValidationError

__all__ = [
    "CREDENTIAL_ARN",
    "CREDENTIAL_ENV",
    "CREDENTIAL_FILE",
    "RepoRegistration",
    "SyncBounds",
    "sends_in_clear",
    "validate_repo_name",
]

CREDENTIAL_ENV = "env"
CREDENTIAL_FILE = "file"
CREDENTIAL_ARN = "arn"

_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}")
_BRANCH = re.compile(r"[A-Za-z0-9._/-]{1,200}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_SECRET_ARN = re.compile(
    r"arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+"
)
_FIELDS = {"name", "url", "branch", "paths", "credential", "username", "known_hosts"}
MAX_PATHS = 20
MAX_KNOWN_HOSTS = 64 * 1024


def validate_repo_name(value: object, field_name: str = "name") -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ValidationError(
            field_name,
            "must be 1-64 characters of letters, digits, '.', '_' or '-', not starting with '.'",
        )
    return value


def _text(data: Mapping[str, Any], key: str, default: str | None = None) -> str | None:
    value = data.get(key, default)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(key, "must be a non-empty string")
    return value


# git's scp-like syntax: user@host:path (no scheme, a path after the colon, never "//").
_SCP_LIKE = re.compile(r"(?P<user>[A-Za-z0-9._-]+)@(?P<host>[A-Za-z0-9.-]+):(?!//)(?P<path>[^\s]+)")


def _url(value: str) -> str:
    scp = _SCP_LIKE.fullmatch(value)
    if scp is not None:
        value = f"ssh://{scp['user']}@{scp['host']}/{scp['path'].lstrip('/')}"
    parts = urlsplit(value)
    if parts.scheme not in ("https", "http", "ssh"):
        raise ValidationError("url", "must be an https://, http:// or ssh:// Git URL")
    if not parts.hostname:
        raise ValidationError("url", "must name a host")
    if parts.password is not None or (parts.username and parts.scheme != "ssh"):
        raise ValidationError(
            "url", "must not hold credentials: reference them in 'credential' instead"
        )
    if parts.query or parts.fragment:
        raise ValidationError("url", "must not have a query or fragment")
    if not parts.path.strip("/"):
        raise ValidationError("url", "must name a repository path")
    try:
        _ = parts.port
    except ValueError as exc:
        raise ValidationError("url", "has an invalid port") from exc
    return value


def _is_loopback(host: str) -> bool:
    import ipaddress  # registration checks only (the status reader imports this module)

    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def sends_in_clear(url: str) -> bool:
    """Whether a credential sent to ``url`` would travel in clear: ``http://`` to a host
    other than loopback (a loopback server never puts it on a network; tests use one)."""
    parts = urlsplit(url)
    return parts.scheme == "http" and not _is_loopback(parts.hostname or "")


def _branch(value: str) -> str:
    if (
        not _BRANCH.fullmatch(value)
        or value.startswith(("/", "-"))
        or value.endswith(("/", ".lock"))
        or ".." in value
        or "//" in value
    ):
        raise ValidationError("branch", "is not a valid branch name")
    return value


def _paths(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_PATHS:
        raise ValidationError("paths", f"must be a list of at most {MAX_PATHS} folder prefixes")
    prefixes: list[str] = []
    for item in value:
        if not isinstance(item, str) or not item.strip("/"):
            raise ValidationError("paths", "each prefix must be a non-empty folder path")
        prefix = item.strip("/")
        if any(seg in ("", ".", "..") for seg in prefix.split("/")):
            raise ValidationError("paths", f"'{prefix[:80]}' has an empty, '.' or '..' segment")
        if has_control_character(prefix):
            raise ValidationError("paths", "a prefix must not contain control characters")
        prefixes.append(prefix)
    return tuple(prefixes)


def _credential(value: str | None, kinds: Sequence[str]) -> str | None:
    if value is None:
        return None
    kind, _, rest = value.partition(":")
    if kind == CREDENTIAL_ENV and kind in kinds and _ENV_NAME.fullmatch(rest):
        return value
    if kind == CREDENTIAL_FILE and kind in kinds and rest.startswith("/"):
        return value
    if kind == CREDENTIAL_ARN and kind in kinds and _SECRET_ARN.fullmatch(value):
        return value
    accepted = {
        CREDENTIAL_ENV: "env:VARIABLE_NAME",
        CREDENTIAL_FILE: "file:/absolute/path",
        CREDENTIAL_ARN: "a Secrets Manager secret ARN",
    }
    raise ValidationError(
        "credential",
        "must be a reference to the secret, never the secret: "
        + " or ".join(accepted[k] for k in kinds),
    )


@dataclass(frozen=True, slots=True)
class RepoRegistration:
    """One registered repository of a scope. Holds a credential reference only."""

    name: str
    url: str
    branch: str = "main"
    paths: tuple[str, ...] = ()
    credential: str | None = None
    username: str | None = None
    known_hosts: str | None = None

    @property
    def is_ssh(self) -> bool:
        return self.url.startswith("ssh://")

    def selects(self, path: str) -> bool:
        """Whether a repository file at ``path`` is under one of the ``paths`` prefixes."""
        if not self.paths:
            return True
        return any(path == p or path.startswith(p + "/") for p in self.paths)

    @classmethod
    def from_request(
        cls,
        data: Mapping[str, Any],
        *,
        credential_kinds: Sequence[str] = (CREDENTIAL_ENV, CREDENTIAL_FILE),
    ) -> RepoRegistration:
        unknown = sorted(set(data) - _FIELDS)
        if unknown:
            raise ValidationError(unknown[0], "is not a repository field")
        name = validate_repo_name(data.get("name"))
        url = _url(_text(data, "url") or "")  # _text refuses a missing url
        branch = _branch(_text(data, "branch", "main") or "main")
        known_hosts = _text(data, "known_hosts")
        if known_hosts is not None and len(known_hosts) > MAX_KNOWN_HOSTS:
            raise ValidationError("known_hosts", f"must be at most {MAX_KNOWN_HOSTS} characters")
        credential = _credential(_text(data, "credential"), credential_kinds)
        if credential is not None and sends_in_clear(url):
            raise ValidationError(
                "credential",
                "is sent only over https:// or ssh://: this http:// URL would send it in "
                "clear (use the repository's https:// URL)",
            )
        in_secret = credential is not None and credential.startswith(CREDENTIAL_ARN + ":")
        if url.startswith("ssh://") and known_hosts is None and not in_secret:
            raise ValidationError(
                "known_hosts",
                "is required for an ssh:// URL (or in its secret): the host key is always checked",
            )
        return cls(
            name=name,
            url=url,
            branch=branch,
            paths=_paths(data.get("paths")),
            credential=credential,
            username=_text(data, "username"),
            known_hosts=known_hosts,
        )

    @classmethod
    def from_stored(cls, data: Mapping[str, Any]) -> RepoRegistration:
        return cls(
            name=data["name"],
            url=data["url"],
            branch=data.get("branch", "main"),
            paths=tuple(data.get("paths") or ()),
            credential=data.get("credential"),
            username=data.get("username"),
            known_hosts=data.get("known_hosts"),
        )

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["paths"] = list(self.paths)
        return out

    def public(self) -> dict[str, Any]:
        """What the API shows: the reference's kind, never its value."""
        out = self.to_dict()
        ref = out.pop("credential")
        out["credential"] = None if ref is None else ref.partition(":")[0]
        out.pop("known_hosts")
        out["known_hosts"] = self.known_hosts is not None
        return out


@dataclass(frozen=True, slots=True)
class SyncBounds:
    """What one sync may take. Over a bound the sync writes nothing and says which."""

    max_repo_bytes: int = 256 * 1024 * 1024  # the fetched pack
    # The pack's objects once inflated (dulwich holds them in memory; the repos function
    # has 1,024 MB): a small pack of very compressible blobs stops here.
    max_inflated_bytes: int = 512 * 1024 * 1024
    max_files: int = 20_000  # files selected in the tree (``paths``), read or not
    max_file_bytes: int = 16 * 1024 * 1024  # one file; larger ones are skipped with a problem
    time_budget_seconds: float = 600.0  # the fetch plus the writes
