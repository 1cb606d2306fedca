"""A pass-through ``opensearchpy.OpenSearch`` wrapper that counts and times requests.

Injected into ``OpenSearchKnowledgeStore(client=...)`` (a public constructor argument), it
lets a benchmark see what the store sends without changing how the store works: every
attribute is the real client's, and ``search``/``msearch``/``bulk``/``delete_by_query``
and ``indices.*`` calls are forwarded unchanged, counted in ``calls`` and timed (wall-clock
seconds, summed per method) in ``seconds``. ``took`` of the last ``search`` or ``msearch``
answer (OpenSearch's own server-side time, integer ms) is kept, and ``took_sum`` adds up
the ``took`` of every answer since it was last set to 0 (a hybrid search reads its page's
text with a second request). An ``_msearch`` answer trimmed to its ``responses`` has no
``took`` of its own: the longest of its searches' stands for it (the node runs them side
by side, so it is at most the whole request's).
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

__all__ = ["RecordingClient"]


class _Ledger:
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.seconds: defaultdict[str, float] = defaultdict(float)

    def call(self, name: str, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self.calls[name] += 1
        started = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            self.seconds[name] += time.perf_counter() - started


class _RecordingIndices:
    def __init__(self, indices: Any, ledger: _Ledger) -> None:
        self._indices = indices
        self._ledger = ledger

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._indices, name)
        if not callable(attribute):
            return attribute
        ledger = self._ledger

        def call(*args: Any, **kwargs: Any) -> Any:
            return ledger.call(f"indices.{name}", attribute, *args, **kwargs)

        return call


class RecordingClient:
    """Wraps a real client (see the module docstring)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._ledger = _Ledger()
        self.calls = self._ledger.calls
        self.seconds = self._ledger.seconds
        self.last_took: int | None = None
        self.took_sum = 0
        self.indices = _RecordingIndices(client.indices, self._ledger)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def search(self, *args: Any, **kwargs: Any) -> Any:
        response = self._ledger.call("search", self._client.search, *args, **kwargs)
        self.last_took = response.get("took")
        self.took_sum += int(response.get("took") or 0)
        return response

    def msearch(self, *args: Any, **kwargs: Any) -> Any:
        response = self._ledger.call("msearch", self._client.msearch, *args, **kwargs)
        took = response.get("took")
        if took is None:  # a filter_path under "responses" keeps each search's took only
            took = max((r.get("took") or 0 for r in response.get("responses", ())), default=None)
        self.last_took = took
        self.took_sum += int(took or 0)
        return response

    def bulk(self, *args: Any, **kwargs: Any) -> Any:
        return self._ledger.call("bulk", self._client.bulk, *args, **kwargs)

    def delete_by_query(self, *args: Any, **kwargs: Any) -> Any:
        return self._ledger.call("delete_by_query", self._client.delete_by_query, *args, **kwargs)

    def close(self) -> None:
        self._client.close()
