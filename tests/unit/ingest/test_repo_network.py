"""Which addresses a repository sync may connect to (knowledge.ingest.repos.network)."""

from __future__ import annotations

import pytest

from knowledge.core.errors import ConfigurationError
from knowledge.ingest.repos.errors import RepoSyncError
from knowledge.ingest.repos.network import LOCAL, HostPolicy


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",  # the Lambda runtime API lives on loopback
        "169.254.169.254",  # link-local metadata
        "10.1.2.3",
        "172.16.0.9",
        "192.168.1.1",
        "100.64.0.1",  # carrier-grade NAT
        "0.0.0.0",
        "::1",
        "fe80::1%eth0",
        "fd00::5",
        "::ffff:127.0.0.1",  # an IPv4-mapped loopback
        "::ffff:169.254.169.254",
    ],
)
def test_public_only_refuses_what_is_not_global(address: str) -> None:
    assert not HostPolicy.public_only().allows(address)
    assert LOCAL.allows(address)


@pytest.mark.parametrize("address", ["8.8.8.8", "140.82.112.3", "2606:4700::1111"])
def test_public_only_allows_global_addresses(address: str) -> None:
    assert HostPolicy.public_only().allows(address)


def test_an_allowed_network_is_allowed_and_nothing_beside_it() -> None:
    policy = HostPolicy.public_only(" 10.20.0.0/16 , fd00::/8")
    assert policy.allows("10.20.3.4")
    assert policy.allows("fd00::5")
    assert not policy.allows("10.21.0.1")
    assert not policy.allows("127.0.0.1")


def test_a_bad_network_names_the_setting() -> None:
    with pytest.raises(ConfigurationError, match=r"REPO_ALLOWED_NETWORKS: 'ten\.0/8'"):
        HostPolicy.public_only("ten.0/8")


def test_a_host_resolving_to_loopback_is_refused_by_name() -> None:
    with pytest.raises(RepoSyncError) as caught:
        HostPolicy.public_only().checked_address("localhost", 443)
    assert caught.value.kind == "network"
    assert "'localhost'" in caught.value.message
    assert "127.0.0.1" not in caught.value.message


def test_a_host_that_does_not_resolve_is_unreachable() -> None:
    with pytest.raises(RepoSyncError) as caught:
        HostPolicy.public_only().checked_address("no-such-host.invalid", 443)
    assert caught.value.kind == "unreachable"
