"""A pass-through ``opensearchpy.OpenSearch`` wrapper that counts requests and keeps ``took``.

Injected into ``OpenSearchKnowledgeStore(client=...)`` (a public constructor argument), it
lets a benchmark see what the store sends without changing how the store works: every
attribute is the real client's, and ``search``/``msearch``/``bulk``/``delete_by_query``
and ``indices.*`` calls are forwarded unchanged after being counted. ``took`` of the last
``search`` or ``msearch`` answer (OpenSearch's own server-side time, integer ms) is kept.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

__all__ = ["RecordingClient"]


class _RecordingIndices:
    def __init__(self, indices: Any, calls: Counter[str]) -> None:
        self._indices = indices
        self._calls = calls

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._indices, name)
        if not callable(attribute):
            return attribute
        calls = self._calls

        def call(*args: Any, **kwargs: Any) -> Any:
            calls[f"indices.{name}"] += 1
            return attribute(*args, **kwargs)

        return call


class RecordingClient:
    """Wraps a real client (see the module docstring)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.calls: Counter[str] = Counter()
        self.last_took: int | None = None
        self.indices = _RecordingIndices(client.indices, self.calls)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def search(self, *args: Any, **kwargs: Any) -> Any:
        self.calls["search"] += 1
        response = self._client.search(*args, **kwargs)
        self.last_took = response.get("took")
        return response

    def msearch(self, *args: Any, **kwargs: Any) -> Any:
        self.calls["msearch"] += 1
        response = self._client.msearch(*args, **kwargs)
        self.last_took = response.get("took")
        return response

    def bulk(self, *args: Any, **kwargs: Any) -> Any:
        self.calls["bulk"] += 1
        return self._client.bulk(*args, **kwargs)

    def delete_by_query(self, *args: Any, **kwargs: Any) -> Any:
        self.calls["delete_by_query"] += 1
        return self._client.delete_by_query(*args, **kwargs)

    def close(self) -> None:
        self._client.close()
