"""The write session on Amazon OpenSearch Serverless (``client_ids=False``).

Serverless vector collections refuse client-chosen ids, and have no ``_mget`` of records
by id, no conditional write, no ``_refresh`` and no ``_delete_by_query`` (the package
README's table). So the ids are the server's: the session keeps the ids of what it wrote
(``generations.WriteState.server_ids`` until a document is committed, ``committed_ids`` after, since
they are not searchable yet), records are written unconditionally, and the older
generations of a document are found by a search and deleted by id (eventually
consistent; see the package README).

``ServerlessWriter`` is the sender thread's side (``sender.RequestWriter`` with those
differences); ``document_ids`` and ``delete_matching`` are the session's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from knowledge.core.errors import KnowledgeError, StoreUnavailableError
from knowledge.core.scope import KnowledgeScope
from knowledge.stores.opensearch import request_filters
from knowledge.stores.opensearch.hits import item_reason
from knowledge.stores.opensearch.mapping import GENERATION
from knowledge.stores.opensearch.write import records
from knowledge.stores.opensearch.write.bulk import item_ok, send_bulk, serialize
from knowledge.stores.opensearch.write.generations import Commit, Switch, WriteState
from knowledge.stores.opensearch.write.sender import RequestWriter

if TYPE_CHECKING:
    from knowledge.stores.opensearch.connection import Connection

__all__ = [
    "ServerlessWriter",
    "delete_matching",
    "document_ids",
    "find_ids",
    "older_generations_query",
]

_FIND_IDS_PAGE = 1000


class ServerlessWriter(RequestWriter):
    """``RequestWriter`` for Serverless: server-made ids, records without conditions,
    older generations found by a search."""

    def own_ids(self, commit: Commit) -> list[tuple[str, str]]:
        with self.state.lock:
            ids = self.state.server_ids.pop(commit.path, [])
        return [(commit.path, i) for i in ids]

    def _accepted(self, path: str, info: Mapping[str, Any]) -> None:
        # Server-made ids, kept to remove a generation that failed.
        with self.state.lock:
            self.state.server_ids.setdefault(path, []).append(str(info.get("_id")))

    def _write_records(
        self,
        pending: list[Commit],
        action: str,
        refresh: str | None,
        switched: dict[str, Switch],
        cleanup: list[tuple[str, str]],
    ) -> list[tuple[str, str]]:
        return cleanup + self._commit_serverless(pending, action)

    def _commit_serverless(self, commits: Sequence[Commit], action: str) -> list[tuple[str, str]]:
        """Records without ids or conditions; then the older generations, found by search."""
        if not commits:
            return []
        actions = [
            serialize(records.bulk_index_action(None, c.record), self.serializer) for c in commits
        ]
        try:
            answers = send_bulk(
                self.connection, self.index, actions, action, retry=self.connection.retry
            )
        except StoreUnavailableError:
            raise
        except KnowledgeError as exc:
            answers = [{"status": 500, "error": str(exc)} for _ in commits]
        cleanup: list[tuple[str, str]] = []
        for commit, info in zip(commits, answers, strict=True):
            if not item_ok(info):
                self.state.reject(commit.path, "document record: " + item_reason(info))
                cleanup.extend(self.own_ids(commit))
                continue
            with self.state.lock:
                written = self.state.server_ids.pop(commit.path, [])
                self.state.committed_ids[commit.path] = [*written, str(info.get("_id"))]
            query = older_generations_query(self.scope, commit.document_id, commit.generation)
            found = find_ids(self.connection, self.index, query, action)
            cleanup.extend((commit.path, i) for i in found)
        return cleanup


def document_ids(
    connection: Connection,
    index: str,
    *,
    scope: KnowledgeScope,
    state: WriteState,
    path: str,
    document_id: str,
    action: str,
) -> list[str]:
    """Every id of ``path``'s records and chunks, to delete the document: what a search
    finds, and what this session wrote (not searchable yet), once each."""
    query = records.other_generations_query(scope, document_id, None)
    found = find_ids(connection, index, query, action)
    with state.lock:
        # What this session wrote is not searchable yet: its ids were kept.
        found += state.committed_ids.pop(path, [])
    return list(dict.fromkeys(found))


def find_ids(
    connection: Connection, index: str, query: Mapping[str, Any], action: str
) -> list[str]:
    """The ids of every record matching ``query`` (paged with ``search_after``)."""
    ids: list[str] = []
    after: list[Any] | None = None
    while True:
        body = records.document_ids_page_body(query, _FIND_IDS_PAGE, after)
        hits = connection.search_all(index, body, action).get("hits", {}).get("hits", [])
        ids.extend(str(h["_id"]) for h in hits)
        if len(hits) < _FIND_IDS_PAGE:
            return ids
        after = hits[-1]["sort"]


def delete_matching(
    connection: Connection, index: str, query: Mapping[str, Any], serializer: Any, action: str
) -> None:
    """Delete what ``query`` matches without ``_delete_by_query``: its ids, found by a
    search, in one bulk request."""
    ids = find_ids(connection, index, query, action)
    if ids:
        lines = [serialize(records.bulk_delete_action(i), serializer) for i in ids]
        send_bulk(connection, index, lines, action, retry=connection.retry)


def older_generations_query(
    scope: KnowledgeScope, document_id: str, generation: str
) -> dict[str, Any]:
    """Records and chunks of a document older than ``generation`` (or without one: a
    problem-only record), never a newer writer's."""
    return {
        "bool": {
            "filter": [
                *request_filters.scope_filters(scope),
                {"term": {"document_id": document_id}},
            ],
            "should": [
                {"range": {GENERATION: {"lt": generation}}},
                {"bool": {"must_not": [{"exists": {"field": GENERATION}}]}},
            ],
            "minimum_should_match": 1,
        }
    }
