"""SSH for repository sources with paramiko (pure-Python SSH; no ``ssh`` binary, so the
same code runs in Lambda), as dulwich's SSH vendor.

Host keys are always checked: the ``known_hosts`` lines (OpenSSH format; ``[host]:port``
for a port other than 22) of the registration and of the secret (``ssh_identity``) are
the only keys accepted, with paramiko's ``RejectPolicy`` for anything else, so an unknown
or changed host key fails the sync. The private key (the resolved credential: OpenSSH or
PEM, Ed25519, ECDSA or RSA, no passphrase) is parsed in memory and never written
anywhere; the agent and the user's own keys are never looked at.

The secret is either the private key itself, or a JSON object ``{"private_key": ...,
"known_hosts": ...}`` (``known_hosts`` optional): then whoever keeps the secret (on AWS the
operator, in Secrets Manager) pins the host keys beside the key, and a registration
whose credential is a secret ARN may leave its own ``known_hosts`` out.

Where it may connect: ``hosts`` (``knowledge.ingest.repos.network.HostPolicy``) as for HTTPS. On
AWS the host is resolved once, every address must be allowed, and paramiko gets a socket
already connected to the checked address (the host key is still looked up by the host's
name), so an ``ssh://`` registration cannot reach loopback, link-local or a private
network the operator did not allow.
"""

from __future__ import annotations

import contextlib
import io
import json
import socket
from typing import Any
from urllib.parse import unquote, urlsplit

from knowledge.ingest.repos.errors import RepoSyncError
from knowledge.ingest.repos.network import CONNECT_TIMEOUT, READ_TIMEOUT, HostPolicy
from knowledge.ingest.repos.registration import RepoRegistration

__all__ = ["ParamikoVendor", "ssh_client", "ssh_identity"]

IDENTITY_FIELDS = ("private_key", "known_hosts")


def ssh_identity(secret: bytes | None) -> tuple[bytes | None, str | None]:
    """The private key and the secret's own ``known_hosts`` (``None`` when it has none)."""
    if secret is None or not secret.lstrip().startswith(b"{"):
        return secret, None
    try:
        data = json.loads(secret)
    except (UnicodeDecodeError, ValueError):
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("private_key"), str):
        raise RepoSyncError(
            "credential", "the SSH secret is JSON but has no 'private_key' string"
        ) from None
    hosts = data.get("known_hosts")
    if (hosts is not None and not isinstance(hosts, str)) or set(data) - set(IDENTITY_FIELDS):
        raise RepoSyncError(
            "credential", "the SSH secret holds only 'private_key' and 'known_hosts' strings"
        )
    return data["private_key"].encode("utf-8"), hosts or None


def _private_key(secret: bytes) -> Any:
    import paramiko

    text = secret.decode("utf-8", errors="replace").strip() + "\n"
    for kind in (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey):
        try:
            return kind.from_private_key(io.StringIO(text))
        except (paramiko.SSHException, ValueError):
            continue
    raise RepoSyncError(
        "credential", "the SSH key is not an unencrypted Ed25519, ECDSA or RSA private key"
    )


class _Connection:
    """What dulwich reads and writes: one channel running the Git command."""

    def __init__(self, client: Any, channel: Any) -> None:
        self._client = client
        self._channel = channel
        self.stderr = None

    def read(self, n: int | None = None) -> bytes:
        """Exactly ``n`` bytes unless the channel ends first, as a pipe's ``read`` gives
        (dulwich reads pkt-line lengths with ``read(4)``); a channel's ``recv`` may
        return fewer."""
        if n is None:
            chunks = []
            while chunk := self._channel.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks)
        data = b""
        while len(data) < n:
            chunk = self._channel.recv(n - len(data))
            if not chunk:
                break
            data += chunk
        return data

    def write(self, data: bytes) -> int:
        self._channel.sendall(data)
        return len(data)

    def can_read(self) -> bool:
        ready: bool = self._channel.recv_ready()
        return ready

    def close(self, timeout: int | None = None) -> None:
        with contextlib.suppress(Exception):
            self._channel.close()
        self._client.close()


class ParamikoVendor:
    def __init__(
        self, known_hosts: str, key: bytes | None, hosts: HostPolicy | None = None
    ) -> None:
        self._known_hosts = known_hosts
        self._key = key
        self._hosts = hosts

    def _socket(self, host: str, port: int) -> socket.socket | None:
        """A socket connected to the policy's checked address; ``None`` when every address
        is allowed (paramiko then connects by name, trying each address)."""
        if self._hosts is None or self._hosts.allow_private:
            return None
        address = self._hosts.checked_address(host, port)
        return socket.create_connection((address, port), timeout=CONNECT_TIMEOUT)

    def run_command(
        self,
        host: str,
        command: bytes | str,
        username: str | None = None,
        port: int | None = None,
        **_: Any,
    ) -> _Connection:
        import paramiko
        from paramiko.hostkeys import HostKeyEntry

        client = paramiko.SSHClient()
        known = client.get_host_keys()
        for line in self._known_hosts.splitlines():
            entry = HostKeyEntry.from_line(line) if line.strip() else None
            if entry is not None and entry.key is not None:
                for name in entry.hostnames:
                    known.add(name, entry.key.get_name(), entry.key)
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        pkey = None if self._key is None else _private_key(self._key)
        port = port or 22
        sock = self._socket(host, port)
        try:
            client.connect(
                host,
                port=port,
                sock=sock,
                username=username,
                pkey=pkey,
                allow_agent=False,
                look_for_keys=False,
                timeout=CONNECT_TIMEOUT,
                banner_timeout=CONNECT_TIMEOUT,
                auth_timeout=CONNECT_TIMEOUT,
            )
            channel = client.get_transport().open_session()
            channel.settimeout(READ_TIMEOUT)
            channel.exec_command(command.decode("utf-8") if isinstance(command, bytes) else command)
        except BaseException as exc:
            client.close()
            if sock is not None:
                sock.close()
            if isinstance(exc, paramiko.SSHException):
                raise _refused(exc) from None
            raise
        return _Connection(client, channel)


def _refused(exc: Exception) -> RepoSyncError:
    """Our own message for paramiko's refusal (its text can hold the host's answer)."""
    import paramiko

    if isinstance(exc, paramiko.BadHostKeyException):
        return RepoSyncError("credentials", "the SSH host key is not the one in known_hosts")
    unknown = "not found in known_hosts" in str(exc)
    return RepoSyncError(
        "credentials",
        "the SSH host key is not in known_hosts"
        if unknown
        else "the SSH server refused the key (or the connection)",
    )


def ssh_client(
    registration: RepoRegistration,
    secret: bytes | None,
    hosts: HostPolicy | None = None,
    *,
    thin: bool = False,
) -> tuple[Any, str]:
    """A dulwich SSH client over paramiko for ``registration.url`` and the remote path;
    ``hosts`` says which addresses it may connect to (default: any); ``thin``: ask for
    a thin pack (an incremental fetch, ``knowledge.ingest.repos.fetch``)."""
    from dulwich.client import SSHGitClient

    key, secret_hosts = ssh_identity(secret)
    known_hosts = "\n".join(h for h in (registration.known_hosts, secret_hosts) if h)
    if not known_hosts.strip():
        raise RepoSyncError(
            "credentials", "an ssh:// repository needs known_hosts (its own or its secret's)"
        )
    parts = urlsplit(registration.url)
    client = SSHGitClient(
        parts.hostname or "",
        port=parts.port,
        username=parts.username,
        vendor=ParamikoVendor(known_hosts, key, hosts),  # type: ignore[arg-type]
        thin_packs=thin,
        quiet=True,
    )
    return client, unquote(parts.path)
