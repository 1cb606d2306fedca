"""An endpoint that is not OpenSearch (a wrong URL or path, a proxy, a gateway) answering
404 to everything: the store must say it cannot read the index, not that the scope is
empty. Only OpenSearch's own ``index_not_found_exception`` means "no index yet" (an agent
would otherwise be told "No relevant documents found" by a knowledge base it cannot reach).
"""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from json_http import serving

from knowledge.agent_tools.tool import KnowledgeSearchTool, ToolContext
from knowledge.core.errors import StoreError
from knowledge.core.model import SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.stores.opensearch import OpenSearchConfig, OpenSearchKnowledgeStore

SCOPE = KnowledgeScope("ops-bot", "runbooks")


class _NotFoundEverywhere(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        body = b"<html><body>Not Found</body></html>"
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def not_a_node() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotFoundEverywhere)
    server.daemon_threads = True
    with serving(server) as url:
        yield url


def _store(url: str) -> OpenSearchKnowledgeStore:
    config = OpenSearchConfig(url=url, max_retries=0, search_max_retries=0)
    return OpenSearchKnowledgeStore(config, embedder=HashingEmbedder(64))


def test_search_status_and_listing_fail_instead_of_reading_as_empty(not_a_node: str) -> None:
    store = _store(not_a_node)
    try:
        with pytest.raises(StoreError):
            store.search(SCOPE, SearchQuery("rollback"))
        with pytest.raises(StoreError):
            store.status(SCOPE)
        with pytest.raises(StoreError):
            store.list_documents(SCOPE)
        answer = KnowledgeSearchTool().run({"query": "rollback"}, ToolContext(store, SCOPE))
        assert answer.is_error
        assert answer.content.startswith("Failed to search knowledge:")
    finally:
        store.close()
