"""SSH for repository sources with paramiko (pure-Python SSH; no ``ssh`` binary, so the
same code runs in Lambda), as dulwich's SSH vendor.

Host keys are always checked: the registration's ``known_hosts`` lines (OpenSSH format;
``[host]:port`` for a port other than 22) are the only keys accepted, with paramiko's
``RejectPolicy`` for anything else, so an unknown or changed host key fails the sync.
The private key (the resolved credential: OpenSSH or PEM, Ed25519, ECDSA or RSA, no
passphrase) is parsed in memory and never written anywhere; the agent and the user's own
keys are never looked at.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any
from urllib.parse import unquote, urlsplit

from knowledge.ingest.repos.errors import RepoSyncError
from knowledge.ingest.repos.network import CONNECT_TIMEOUT, READ_TIMEOUT
from knowledge.ingest.repos.registration import RepoRegistration

__all__ = ["ParamikoVendor", "ssh_client"]


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
    def __init__(self, known_hosts: str, key: bytes | None) -> None:
        self._known_hosts = known_hosts
        self._key = key

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
        try:
            client.connect(
                host,
                port=port or 22,
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
        except paramiko.BadHostKeyException:
            client.close()
            raise RepoSyncError(
                "credentials", "the SSH host key is not the one in known_hosts"
            ) from None
        except paramiko.SSHException as exc:
            client.close()
            unknown = "not found in known_hosts" in str(exc)
            raise RepoSyncError(
                "credentials",
                "the SSH host key is not in known_hosts"
                if unknown
                else "the SSH server refused the key (or the connection)",
            ) from None
        return _Connection(client, channel)


def ssh_client(registration: RepoRegistration, secret: bytes | None) -> tuple[Any, str]:
    """A dulwich SSH client over paramiko for ``registration.url`` and the remote path."""
    from dulwich.client import SSHGitClient

    if not registration.known_hosts:
        raise RepoSyncError("credentials", "an ssh:// repository needs known_hosts")
    parts = urlsplit(registration.url)
    client = SSHGitClient(
        parts.hostname or "",
        port=parts.port,
        username=parts.username,
        vendor=ParamikoVendor(registration.known_hosts, secret),  # type: ignore[arg-type]
        thin_packs=False,
        quiet=True,
    )
    return client, unquote(parts.path)
