"""The store's line to OpenSearch: one lazy client, retried calls, plain bodies in and out.

``Connection`` creates the ``opensearchpy`` client on first use (one per store, so one
per Lambda container) and sends requests through ``RetryPolicy``; ``opensearchpy``
errors become ``StoreUnavailableError`` / ``StoreError`` naming what was being done.
It sends the bodies the read and write sides build and returns the answers as the node
gave them: it builds no request and reads no answer (an import-linter contract keeps it
from importing either side, the mapping or the answer readers).

Two kinds of calls:

- writes and index upkeep (``call``): ``config.timeout`` per request,
  ``config.max_retries`` retries with backoff; inside the caller's deadline when one is
  set (``knowledge.core.deadline``: the indexer sets one per record, the invocation's
  remaining time less its reserve), so a hung node fails the record before the Lambda
  times out instead of holding it past the end of its invocation;
- reads on the search path (``read``): a per-request timeout of ``config.search_timeout``
  (4 s), at most ``config.search_max_retries`` (1) retry, and all of it inside a
  deadline: the caller's (``knowledge.core.deadline``, e.g. the Lambda's remaining time) or
  ``config.search_budget``. A hung node ends in ``StoreUnavailableError`` in time.
"""

# opensearchpy loads on first use, not at import (Lambda cold start)

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from knowledge.core.deadline import Deadline, current_deadline
from knowledge.core.errors import StoreError, StoreUnavailableError
from knowledge.stores.opensearch.client import RetryPolicy, create_client, store_error
from knowledge.stores.opensearch.settings import OpenSearchConfig

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

__all__ = ["Connection"]

_INDEX_NOT_FOUND = "index_not_found_exception"

T = TypeVar("T")

_SEARCH_BACKOFF = 0.2


class Connection:
    """A lazily created client and the calls through it (module docstring). Thread-safe."""

    def __init__(
        self,
        config: OpenSearchConfig,
        *,
        client: OpenSearch | None,
        aws_session: Any,
        retry: RetryPolicy,
    ) -> None:
        self.config = config
        self.retry = retry
        self._search_retry = replace(
            retry,
            max_retries=config.search_max_retries,
            initial_backoff=_SEARCH_BACKOFF,
            max_backoff=_SEARCH_BACKOFF * 2,
        )
        self._client = client
        self._owns_client = client is None
        self._aws_session = aws_session
        self._lock = threading.Lock()
        self._closed = False

    # --- the client ------------------------------------------------------------------------

    def client(self) -> OpenSearch:
        with self._lock:
            if self._closed:
                raise StoreError("the opensearch store is closed")
            if self._client is None:
                try:
                    self._client = create_client(self.config, session=self._aws_session)
                except Exception as exc:
                    raise store_error(exc, self.config, "create the client") from exc
            return self._client

    def call(self, action: str, request: Callable[[OpenSearch, float], T]) -> T:
        """Send one write/upkeep request: ``request(client, timeout)``, each try at most
        ``config.timeout``, with retries; inside the caller's deadline if one is set (no
        try or retry starts past it). Failures name ``action``."""
        from opensearchpy.exceptions import ImproperlyConfigured, OpenSearchException

        deadline = current_deadline()
        client = self.client()

        def attempt(c: OpenSearch) -> T:
            timeout = (
                self.config.timeout if deadline is None else deadline.timeout(self.config.timeout)
            )
            if timeout <= 0:
                raise StoreUnavailableError(
                    f"OpenSearch at {self.config.url} did not answer within the time budget "
                    f"of the work (trying to {action})"
                )
            return request(c, timeout)

        try:
            return self.retry.call(attempt, client, deadline=deadline)
        except (OpenSearchException, ImproperlyConfigured) as exc:
            raise store_error(exc, self.config, action) from exc

    def read(self, action: str, request: Callable[[OpenSearch, float], T]) -> T:
        """Send one search-path request: ``request(client, timeout)`` inside the deadline
        (the caller's, else ``search_budget``), each try at most ``search_timeout``."""
        from opensearchpy.exceptions import ImproperlyConfigured, OpenSearchException

        deadline = current_deadline() or Deadline.after(self.config.search_budget)
        client = self.client()

        def attempt(c: OpenSearch) -> T:
            timeout = deadline.timeout(self.config.search_timeout)
            if timeout <= 0:
                raise StoreUnavailableError(
                    f"OpenSearch at {self.config.url} did not answer within the time budget "
                    f"of the request (trying to {action})"
                )
            return request(c, timeout)

        try:
            return self._search_retry.call(attempt, client, deadline=deadline)
        except (OpenSearchException, ImproperlyConfigured) as exc:
            raise store_error(exc, self.config, action) from exc

    def close(self) -> None:
        """Close the client if it was created here. Idempotent; later calls raise."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            client, self._client = self._client, None
        if client is not None and self._owns_client:
            client.close()

    @property
    def serializer(self) -> Any:
        return self.client().transport.serializer

    # --- indexes ---------------------------------------------------------------------------

    def get_mapping(self, index: str) -> dict[str, Any] | None:
        """The mapping of ``index`` as the node answers it (on the search path's budget);
        ``None`` when the node says there is no such index."""
        from opensearchpy.exceptions import NotFoundError

        def send(client: OpenSearch, timeout: float) -> dict[str, Any] | None:
            try:
                mapping: dict[str, Any] = client.indices.get_mapping(
                    index=index, request_timeout=timeout
                )
            except NotFoundError as exc:
                # Only the node's own answer means "no such index"; a bare 404 is some
                # other endpoint (a wrong URL, a proxy) and must not read as an empty scope.
                if exc.error == _INDEX_NOT_FOUND:
                    return None
                raise
            return mapping

        return self.read(f"read the mapping of index '{index}'", send)

    def create_index(self, index: str, body: Mapping[str, Any]) -> None:
        """Create ``index`` with ``body``; one another writer created first is fine."""
        from opensearchpy.exceptions import RequestError

        def send(client: OpenSearch, timeout: float) -> None:
            try:
                client.indices.create(index=index, body=dict(body), request_timeout=timeout)
            except RequestError as exc:
                if "resource_already_exists_exception" not in str(exc.error):
                    raise

        self.call(f"create index '{index}'", send)

    def put_mapping(self, index: str, body: Mapping[str, Any], action: str) -> None:
        """Add the fields of ``body`` to the mapping of ``index``."""
        self.call(
            action,
            lambda client, timeout: client.indices.put_mapping(
                index=index, body=dict(body), request_timeout=timeout
            ),
        )

    # --- requests --------------------------------------------------------------------------

    def search(
        self,
        index: str,
        action: str,
        body: Mapping[str, Any],
        *,
        filter_path: str | None = None,
    ) -> dict[str, Any]:
        """One ``_search`` on the search path (time budget, see ``read``); ``filter_path``
        trims the answer to the parts the caller reads."""
        params = {"filter_path": filter_path} if filter_path else {}

        def send(client: OpenSearch, timeout: float) -> dict[str, Any]:
            response: dict[str, Any] = client.search(
                index=index, body=dict(body), request_timeout=timeout, params=params
            )
            return response

        return self.read(action, send)

    def msearch(
        self,
        index: str,
        action: str,
        lines: Sequence[Mapping[str, Any]],
        *,
        filter_path: str | None = None,
    ) -> dict[str, Any]:
        """One ``/<index>/_msearch`` on the search path (the lines name no index)."""
        params = {"filter_path": filter_path} if filter_path else {}

        def send(client: OpenSearch, timeout: float) -> dict[str, Any]:
            response: dict[str, Any] = client.msearch(
                index=index, body=list(lines), request_timeout=timeout, params=params
            )
            return response

        return self.read(action, send)

    def mget(self, index: str, body: Mapping[str, Any], action: str) -> dict[str, Any]:
        """One ``_mget`` on the write path: documents by id, in real time (no refresh)."""

        def send(client: OpenSearch, timeout: float) -> dict[str, Any]:
            response: dict[str, Any] = client.mget(
                index=index, body=dict(body), request_timeout=timeout
            )
            return response

        return self.call(action, send)

    def bulk(
        self, index: str, body: str, action: str, *, refresh: str | None = None
    ) -> dict[str, Any]:
        """One ``/<index>/_bulk`` request (retried as a whole on connection errors, 429 and
        5xx); the body's action lines name no index."""

        def send(client: OpenSearch, timeout: float) -> dict[str, Any]:
            params: dict[str, Any] = {} if refresh is None else {"refresh": refresh}
            response: dict[str, Any] = client.bulk(
                index=index, body=body, params=params, request_timeout=timeout
            )
            return response

        return self.call(action, send)

    def search_all(self, index: str, body: Mapping[str, Any], action: str) -> dict[str, Any]:
        """One ``_search`` on the write path (write timeouts and retries, not the search
        path's budget)."""
        return self.call(action, functools.partial(_search_page, index=index, body=body))

    def delete_by_query(self, index: str, query: Mapping[str, Any], action: str) -> dict[str, Any]:
        """One ``_delete_by_query`` (not on Serverless), conflicts skipped; its answer."""

        def send(client: OpenSearch, timeout: float) -> dict[str, Any]:
            response: dict[str, Any] = client.delete_by_query(
                index=index,
                body={"query": dict(query)},
                conflicts="proceed",
                request_timeout=timeout,
            )
            return response

        return self.call(action, send)

    def refresh(self, index: str) -> None:
        if self.config.serverless:
            return  # Serverless refreshes on its own schedule and has no _refresh API.
        self.call(
            f"refresh index '{index}'",
            lambda client, timeout: client.indices.refresh(index=index, request_timeout=timeout),
        )


def _search_page(
    client: OpenSearch, timeout: float, *, index: str, body: Mapping[str, Any]
) -> dict[str, Any]:
    response: dict[str, Any] = client.search(index=index, body=dict(body), request_timeout=timeout)
    return response
