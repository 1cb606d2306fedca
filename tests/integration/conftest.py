"""Fixtures for integration tests that need real services.

The ``opensearch_url`` session fixture is defined in ``tests/conftest.py`` so that the
contract suite shares the same node; ``opensearch_node.py`` (here) starts it. ``node``
gives a test its own index on that node (``opensearch_index.NodeIndex``); ``fake_aws``
sets static fake AWS credentials (the Serverless code path signs its requests).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from faults import FaultProxy
from opensearch_index import NodeIndex, http_json, use_fake_aws_credentials


@pytest.fixture
def workers() -> int:
    """The processes an in-process ``kb serve`` (``LocalServer``) answers with: 1 unless a
    test parametrizes ``workers`` to run over a worker process too."""
    return 1


@pytest.fixture
def node(opensearch_url: str) -> Iterator[NodeIndex]:
    """This test's own index on the node (deleted afterwards, per-agent indexes too)."""
    made = NodeIndex(opensearch_url)
    yield made
    made.delete()


@pytest.fixture
def fake_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    use_fake_aws_credentials(monkeypatch)


@pytest.fixture
def no_expensive_queries(opensearch_url: str) -> Iterator[str]:
    """The node refuses expensive queries (wildcard, prefix, regexp, range on keyword fields)
    during the test, as a domain with ``search.allow_expensive_queries: false`` does; the
    cluster setting is restored afterwards (a pytest process runs its tests one at a time,
    and every worker of ``make test`` has a node of its own)."""

    def allow(value: bool | None) -> None:
        body = {"transient": {"search.allow_expensive_queries": value}}
        status, answer = http_json("PUT", f"{opensearch_url}/_cluster/settings", body)
        assert status == 200, answer

    allow(False)
    try:
        yield opensearch_url
    finally:
        allow(None)


@pytest.fixture
def node_proxy(opensearch_url: str) -> Iterator[FaultProxy]:
    """A loopback ``faults.FaultProxy`` in front of the session node: the test points a store
    at ``node_proxy.url`` to see what it sends, or to hold, refuse or throttle a request."""
    with FaultProxy(opensearch_url) as running:
        yield running
