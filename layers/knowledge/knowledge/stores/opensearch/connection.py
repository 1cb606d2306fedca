"""The store's line to OpenSearch: one lazy client, retried calls, the indexes it may use.

``Connection`` creates the ``opensearchpy`` client on first use (one per store, so one
per Lambda container) and sends requests through ``RetryPolicy``; ``opensearchpy``
errors become ``StoreUnavailableError`` / ``StoreError`` naming what was being done.

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

Indexes are checked against the store (vector dimension, embedder) the first time each
is used, then remembered; one that is missing is created when a write needs it.
"""

# opensearchpy loads on first use, not at import (Lambda cold start)

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from knowledge.core.deadline import Deadline, current_deadline
from knowledge.core.errors import EmbeddingMismatchError, StoreError, StoreUnavailableError
from knowledge.stores.opensearch import queries, records
from knowledge.stores.opensearch.client import RetryPolicy, create_client, store_error
from knowledge.stores.opensearch.mapping import (
    RECORD_PROPERTIES,
    IndexLayout,
    check_layout,
    index_body,
    layout_of,
)
from knowledge.stores.opensearch.scope_size import ScopeSizes
from knowledge.stores.opensearch.settings import OpenSearchConfig

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

__all__ = ["Connection"]

_INDEX_NOT_FOUND = "index_not_found_exception"

T = TypeVar("T")

_SEARCH_BACKOFF = 0.2
_FIND_IDS_PAGE = 1000


class Connection:
    """A lazily created client and what the store knows of its indexes (module docstring).

    ``dimensions``/``embedding_model`` describe the store's embedder (``None``: keyword
    only). Thread-safe.
    """

    def __init__(
        self,
        config: OpenSearchConfig,
        *,
        client: OpenSearch | None,
        aws_session: Any,
        retry: RetryPolicy,
        dimensions: int | None,
        embedding_model: str | None,
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
        self._dimensions = dimensions
        self._embedding_model = embedding_model
        self._lock = threading.Lock()
        self._layouts: dict[str, IndexLayout] = {}
        self._closed = False
        self.scope_sizes = ScopeSizes()
        """Scopes' chunk counts, for ``ef_search`` (``scope_size``)."""

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
    def dimensions(self) -> int | None:
        """The store's vector dimension (``None``: keyword only)."""
        return self._dimensions

    @property
    def serializer(self) -> Any:
        return self.client().transport.serializer

    # --- indexes ---------------------------------------------------------------------------

    def open_index(self, index: str, *, create: bool) -> bool:
        """Check that ``index`` fits this store (read once, then remembered); create it if
        asked. False when it does not exist (and ``create`` is False). Writing to a vector
        index without an embedder is refused: those chunks would miss from vector search."""
        layout = self._layouts.get(index)
        if layout is None:
            layout = self._read_layout(index, create=create)
            if layout is None:
                return False
        if create and self._dimensions is None and layout.vector_dimensions is not None:
            raise EmbeddingMismatchError(
                f"index '{index}' stores {layout.vector_dimensions}-dimension vectors"
                + (f" from '{layout.embedding_model}'" if layout.embedding_model else "")
                + ", but this store has no embedder: its chunks would be missing from vector "
                "search; configure the same embedder or use another index name"
            )
        if create and not layout.has_generations:
            self._add_record_fields(index)
            layout = replace(layout, has_generations=True)
            with self._lock:
                self._layouts[index] = layout
        return True

    def metadata_pairs(self, index: str) -> bool:
        """Whether ``index`` (opened with ``open_index``) holds metadata as key/value terms
        (schema 4, ``metadata_pairs``); an index not read yet is taken to be new."""
        layout = self._layouts.get(index)
        return True if layout is None else layout.metadata_pairs

    def _read_layout(self, index: str, *, create: bool) -> IndexLayout | None:
        from opensearchpy.exceptions import NotFoundError, RequestError

        def read_mapping(client: OpenSearch, timeout: float) -> dict[str, Any] | None:
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

        action = f"read the mapping of index '{index}'"
        mapping = self.read(action, read_mapping)
        if mapping is None:
            if not create:
                return None
            config = self.config
            body = index_body(
                vector_dimensions=self._dimensions,
                embedding_model=self._embedding_model,
                vector_engine=config.vector_engine or "lucene",
                serverless=config.serverless,
                number_of_shards=config.number_of_shards,
                number_of_replicas=config.number_of_replicas,
                refresh_interval=config.refresh_interval,
                hnsw_m=config.hnsw_m,
                hnsw_ef_construction=config.hnsw_ef_construction,
                derived_source=config.vector_derived_source,
            )

            def create_index(client: OpenSearch, timeout: float) -> None:
                try:
                    client.indices.create(index=index, body=body, request_timeout=timeout)
                except RequestError as exc:
                    # Another writer created it first: fine, its mapping is checked below.
                    if "resource_already_exists_exception" not in str(exc.error):
                        raise

            self.call(f"create index '{index}'", create_index)
            mapping = self.read(action, read_mapping) or {}
        layout = layout_of(mapping, index)
        check_layout(
            layout,
            index,
            vector_dimensions=self._dimensions,
            embedding_model=self._embedding_model,
        )
        with self._lock:
            self._layouts[index] = layout
        return layout

    def _add_record_fields(self, index: str) -> None:
        """Give an index made by schema 1 the fields of generations and records."""
        body = {"properties": RECORD_PROPERTIES}
        self.call(
            f"add the record fields to index '{index}'",
            lambda client, timeout: client.indices.put_mapping(
                index=index, body=body, request_timeout=timeout
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

    def mget_records(self, index: str, record_ids: Sequence[str]) -> dict[str, records.RecordState]:
        """The current state of document records, read in real time (no refresh needed)."""
        if not record_ids:
            return {}
        body = records.records_mget_body(record_ids)

        def send(client: OpenSearch, timeout: float) -> dict[str, Any]:
            response: dict[str, Any] = client.mget(index=index, body=body, request_timeout=timeout)
            return response

        action = f"read {len(record_ids)} document record(s)"
        return records.parse_records_mget(self.call(action, send))

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

    def find_ids(self, index: str, query: Mapping[str, Any], action: str) -> list[str]:
        """The ids of every record matching ``query`` (paged with ``search_after``)."""
        ids: list[str] = []
        after: list[Any] | None = None
        while True:
            body = queries.document_ids_page_body(query, _FIND_IDS_PAGE, after)
            response: dict[str, Any] = self.call(
                action, functools.partial(_search_page, index=index, body=body)
            )
            hits = response.get("hits", {}).get("hits", [])
            ids.extend(str(h["_id"]) for h in hits)
            if len(hits) < _FIND_IDS_PAGE:
                return ids
            after = hits[-1]["sort"]

    def delete_by_query(self, index: str, query: Mapping[str, Any], action: str) -> int:
        """``_delete_by_query`` (not on Serverless); returns how many were deleted."""

        def send(client: OpenSearch, timeout: float) -> dict[str, Any]:
            response: dict[str, Any] = client.delete_by_query(
                index=index,
                body={"query": dict(query)},
                conflicts="proceed",
                request_timeout=timeout,
            )
            return response

        response = self.call(action, send)
        failures = response.get("failures") or []
        if failures:
            raise StoreError(
                f"OpenSearch at {self.config.url} failed to {action}: "
                f"{len(failures)} record(s) not deleted"
            )
        return int(response.get("deleted", 0))

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
