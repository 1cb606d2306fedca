"""A document's chunks on a real OpenSearch node: the committed generation's, never an
orphan's (a writer that died after its chunks were accepted and before its record switch:
searches may show its chunks for a while, the listing names what the record names)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from opensearch_index import NodeIndex, http_json

from knowledge.core.identity import document_id
from knowledge.core.model import DocumentChunk, SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ranking.analysis import keyword_terms
from knowledge.stores.opensearch import OpenSearchKnowledgeStore
from knowledge.stores.opensearch.mapping import CHUNK_INDEX, CONTENT, CONTENT_TERMS, GENERATION
from knowledge.stores.protocol import DocumentHeader, EmbeddedChunk

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]

SCOPE = KnowledgeScope("ops-bot", "runbooks")
WHEN = datetime(2026, 3, 14, tzinfo=UTC)


def test_an_orphaned_generation_is_not_listed_though_searches_show_it(node: NodeIndex) -> None:
    store = OpenSearchKnowledgeStore(node.config(wait_for_refresh=True), HashingEmbedder(32))
    try:
        header = DocumentHeader("a.md", document_id(SCOPE, "a.md"), "h-1", WHEN)
        chunks = [EmbeddedChunk(DocumentChunk("a.md", i, f"committed part {i}")) for i in range(2)]
        with store.write_session(SCOPE) as session:
            session.put_document(header, chunks)
        first, _ = node.records(record="chunk", document_path="a.md")
        # A newer generation whose writer died before its record: its chunk is searchable.
        orphan = f"{time.time_ns() + 60 * 10**9:019d}-deadbeef"
        status, body = http_json(
            "PUT",
            f"{node.url}/{node.index}/_doc/{first['document_id']}:{orphan}:5?refresh=true",
            {
                **first,
                GENERATION: orphan,
                CHUNK_INDEX: 5,
                CONTENT: "zanzibar orphan words",
                CONTENT_TERMS: " ".join(keyword_terms("zanzibar orphan words")),
            },
        )
        assert status == 201, body
        found = store.search(SCOPE, SearchQuery("zanzibar orphan", mode=SearchMode.KEYWORD))
        assert [r.chunk_index for r in found] == [5]  # searches show the orphan
        page = store.list_chunks(SCOPE, "a.md")
        assert page is not None
        assert [(c.chunk_index, c.content) for c in page.chunks] == [
            (0, "committed part 0"),
            (1, "committed part 1"),
        ]
    finally:
        store.close()
