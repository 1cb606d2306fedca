"""An overwrite on the real OpenSearch node, seen between its record switch and the removal
of the old chunks: once ``get_document`` or the documents listing reports the new version,
no search shows the old text (README "Writes", step 3). A proxy holds the deletes of the
old chunks while the node refreshes, which a periodic refresh does at any moment in
production."""

from __future__ import annotations

import threading

import pytest
from faults import FaultProxy
from opensearch_index import NodeIndex

from knowledge.core.model import IndexResult, SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import upsert_document
from knowledge.stores.opensearch import OpenSearchKnowledgeStore, RetryPolicy
from knowledge.stores.opensearch.hits import INCOMPLETE_HASH

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]

SCOPE = KnowledgeScope("agent", "docs")


def _store(node: NodeIndex, url: str | None = None) -> OpenSearchKnowledgeStore:
    return OpenSearchKnowledgeStore(
        node.config(url=url, timeout=60),
        embedder=HashingEmbedder(32),
        retry=RetryPolicy(max_retries=1, initial_backoff=0.01, max_backoff=0.02),
    )


def _doc(text: str) -> SourceDocument:
    data = text.encode("utf-8")
    return SourceDocument("a.md", len(data), lambda: data)


def _keyword(store: OpenSearchKnowledgeStore, text: str) -> list[str]:
    found = store.search(SCOPE, SearchQuery(text, mode=SearchMode.KEYWORD))
    return [r.document_path for r in found]


def _deletes(method: str, path: str, body: bytes) -> bool:
    return "_bulk" in path and b'"delete"' in body


def test_a_reported_version_is_the_only_one_searches_show(
    node: NodeIndex, node_proxy: FaultProxy
) -> None:
    reader, writer = _store(node), _store(node, node_proxy.url)
    try:
        assert upsert_document(writer, SCOPE, _doc("# A\n\nzebracanary rollout")).ok
        first = reader.get_document(SCOPE, "a.md")
        assert first is not None
        assert first.indexed
        outcome: list[IndexResult] = []
        node_proxy.pause(_deletes)
        thread = threading.Thread(
            target=lambda: outcome.append(
                upsert_document(writer, SCOPE, _doc("# A\n\nquokkarollout"))
            )
        )
        thread.start()
        try:
            assert node_proxy.wait_paused(1), (
                "the write never reached the removal of the old chunks"
            )
            node.refresh()  # a periodic refresh between the record switch and the deletes
            between = reader.get_document(SCOPE, "a.md")
            assert between is not None
            reported_new = between.indexed and between.content_hash != first.content_hash
            old_shown = _keyword(reader, "zebracanary") == ["a.md"]
            assert not (reported_new and old_shown), (
                "the new version is reported while searches still show the old text"
            )
            (listed,) = reader.list_documents(SCOPE).documents
            listed_new = listed.indexed and listed.content_hash != first.content_hash
            assert not (listed_new and old_shown), (
                "the listing reports the new version while searches still show the old text"
            )
            assert _keyword(reader, "quokkarollout") == ["a.md"]  # searchable throughout
            # and a write decided now (a redelivery) writes it again, never "unchanged"
            decided = reader.stored_document(SCOPE, "a.md")
            assert decided is not None
            assert decided.content_hash == INCOMPLETE_HASH
        finally:
            node_proxy.resume()
            thread.join(60)
        assert not thread.is_alive()
        assert outcome
        assert outcome[0].ok
        after = reader.get_document(SCOPE, "a.md")
        assert after is not None
        assert after.indexed
        assert after.content_hash not in (None, first.content_hash)
        assert reader.list_documents(SCOPE).documents == (after,)
        assert _keyword(reader, "zebracanary") == []
        assert _keyword(reader, "quokkarollout") == ["a.md"]
    finally:
        reader.close()
        writer.close()
