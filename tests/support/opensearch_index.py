"""A test's own index on the shared OpenSearch node, seen without the store.

``NodeIndex`` names a fresh index (``test_<uuid>``), reads what the store wrote there
(``refresh``, ``records``) and builds store settings for it (``config``); the ``node``
fixture (conftest.py) gives one to a test and deletes it afterwards, with the per-agent
indexes (``<index>-agent-*``). ``http_json`` is the bare HTTP call the tests check with.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from knowledge.stores.opensearch import OpenSearchConfig

__all__ = ["NodeIndex", "http_json", "use_fake_aws_credentials"]


def http_json(method: str, url: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    """One JSON request to the node: its status and its decoded body (also on errors)."""
    data = None if body is None else json.dumps(body).encode("utf-8")
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read() or b"{}")


@dataclass
class NodeIndex:
    """The node and this test's index, seen without the store (to check what it wrote)."""

    url: str
    index: str = field(default_factory=lambda: f"test_{uuid.uuid4().hex}")

    def refresh(self) -> None:
        status, body = http_json("POST", f"{self.url}/{self.index}/_refresh")
        assert status == 200, body

    def records(self, **terms: str) -> list[dict[str, Any]]:
        self.refresh()
        query = {"bool": {"filter": [{"term": {k: v}} for k, v in terms.items()]}}
        status, body = http_json(
            "POST", f"{self.url}/{self.index}/_search", {"size": 1000, "query": query}
        )
        assert status == 200, body
        return [hit["_source"] for hit in body["hits"]["hits"]]

    def config(self, url: str | None = None, **settings: Any) -> OpenSearchConfig:
        """Store settings for this index (``url``: another way to the node, a proxy)."""
        values: dict[str, Any] = {
            "url": url or self.url,
            "index_name": self.index,
            "number_of_shards": 1,
            "number_of_replicas": 0,
            "refresh_interval": "100ms",
            "wait_for_refresh": True,  # the tests read their writes at once
            **settings,
        }
        return OpenSearchConfig(**values)

    def delete(self) -> None:
        """Delete the index and its per-agent indexes."""
        http_json("DELETE", f"{self.url}/{self.index}*")


def use_fake_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Static fake credentials and no profile or instance metadata (SigV4 signs with them;
    the local node ignores the signature)."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTESTING")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing-secret")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
