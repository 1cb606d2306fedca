"""Whether a host or URL is this machine: ``localhost``, 127.0.0.0/8 or ``::1``.

One rule for the two places that ask: the OpenSearch config (a loopback node needs no
TLS or signing) and the local server (a loopback server answers only requests addressed
to a loopback name, against DNS rebinding).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["is_loopback_host", "is_loopback_url"]


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or an address, without port or brackets) is this machine
    by every resolver: ``localhost``, 127.0.0.0/8 or ``::1``."""
    host = host.lower().removesuffix(".")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_loopback_url(url: str) -> bool:
    """True if ``url`` points at this machine (``is_loopback_host`` of its host)."""
    return is_loopback_host(urlsplit(url).hostname or "")
