"""Which addresses a repository sync may connect to: a registration's URL is a caller's
choice, so on AWS a sync must not become a way to reach what only the function can
(the Lambda runtime API on loopback, link-local metadata, a private network).

``HostPolicy`` says which addresses are allowed. Locally (``LOCAL``) every address is
(the caller is the machine's own user, and a Git server on the LAN is normal); on AWS
(``HostPolicy.from_environment``) only global addresses are, plus the networks an operator
lists in ``REPO_ALLOWED_NETWORKS`` (comma-separated CIDRs, for a Git server the function
can reach privately).

The check is made where the connection is made (``guarded_pool_manager``): the host is
resolved once, every address it resolves to must be allowed, and the connection goes to
the checked address (TLS still verifies the host name). So a redirect to another host, or
a name that resolves elsewhere at sync time than at registration (DNS rebinding), is
checked too. Refused: ``RepoSyncError`` of kind ``network``, naming the host, never the
address list.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from knowledge.core.errors import ConfigurationError
from knowledge.ingest.repos.errors import RepoSyncError

__all__ = [
    "ALLOWED_NETWORKS_ENV",
    "CONNECT_TIMEOUT",
    "LOCAL",
    "READ_TIMEOUT",
    "HostPolicy",
    "guarded_pool_manager",
]

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 60.0
"""Seconds to connect to a Git server and to wait for its next bytes (HTTPS and SSH)."""

ALLOWED_NETWORKS_ENV = "REPO_ALLOWED_NETWORKS"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """``allow_private``: every address is allowed; otherwise global addresses and
    ``networks`` only."""

    allow_private: bool = True
    networks: tuple[Network, ...] = ()

    @classmethod
    def from_environment(cls) -> HostPolicy:
        """The AWS policy: global addresses, plus ``REPO_ALLOWED_NETWORKS``."""
        return cls.public_only(os.environ.get(ALLOWED_NETWORKS_ENV, ""))

    @classmethod
    def public_only(cls, allowed: str | Sequence[str] = "") -> HostPolicy:
        items = allowed.split(",") if isinstance(allowed, str) else list(allowed)
        networks: list[Network] = []
        for item in (i.strip() for i in items):
            if not item:
                continue
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ConfigurationError(
                    f"{ALLOWED_NETWORKS_ENV}: {item!r} is not a network (e.g. 10.0.0.0/16)"
                ) from None
        return cls(allow_private=False, networks=tuple(networks))

    def allows(self, address: str) -> bool:
        if self.allow_private:
            return True
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return ip.is_global or any(ip in network for network in self.networks)

    def checked_address(self, host: str, port: int) -> str:
        """The address to connect to for ``host``; ``RepoSyncError`` when any address the
        host resolves to is not allowed (or it resolves to none)."""
        try:
            found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError:
            raise RepoSyncError("unreachable", f"cannot resolve the Git host {host!r}") from None
        addresses = [str(info[4][0]) for info in found]
        if not addresses:
            raise RepoSyncError("unreachable", f"cannot resolve the Git host {host!r}")
        if not all(self.allows(a) for a in addresses):
            raise RepoSyncError(
                "network",
                f"the Git host {host!r} is on a private, loopback or link-local network, "
                f"which a sync may not reach (an operator can allow a network in "
                f"{ALLOWED_NETWORKS_ENV})",
            )
        return addresses[0]


LOCAL = HostPolicy()


def guarded_pool_manager(policy: HostPolicy, **kwargs: Any) -> Any:
    """A ``urllib3.PoolManager`` whose every new connection is checked by ``policy``."""
    import urllib3
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    manager = urllib3.PoolManager(**kwargs)
    if policy.allow_private:
        return manager

    class _Checked:
        host: str
        port: int
        _dns_host: str

        def _new_conn(self) -> Any:
            self._dns_host = policy.checked_address(self.host, self.port)
            return super()._new_conn()  # type: ignore[misc]

    class _HTTP(_Checked, HTTPConnection):
        pass

    class _HTTPS(_Checked, HTTPSConnection):
        pass

    class _HTTPPool(HTTPConnectionPool):
        ConnectionCls = _HTTP

    class _HTTPSPool(HTTPSConnectionPool):
        ConnectionCls = _HTTPS

    manager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}
    return manager
