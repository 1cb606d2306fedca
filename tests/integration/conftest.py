"""Fixtures for integration tests that need real services.

The ``opensearch_url`` session fixture is defined in ``tests/conftest.py`` so that the
contract suite shares the same node; ``opensearch_node.py`` (here) starts it. ``node``
gives a test its own index on that node (``opensearch_index.NodeIndex``); ``fake_aws``
sets static fake AWS credentials (the Serverless code path signs its requests).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opensearch_index import NodeIndex, use_fake_aws_credentials


@pytest.fixture
def node(opensearch_url: str) -> Iterator[NodeIndex]:
    """This test's own index on the node (deleted afterwards, per-agent indexes too)."""
    made = NodeIndex(opensearch_url)
    yield made
    made.delete()


@pytest.fixture
def fake_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    use_fake_aws_credentials(monkeypatch)
