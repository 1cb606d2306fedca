"""The absolute score is the same on the embedded store and the OpenSearch node: one
threshold means the same on a laptop and in the deployed stack.

The same documents go into both stores; every query in every mode (with and without
``cross_context``, answerable and not) must give each result both stores return the same
``score`` within 0.02, and the same answer at the default floor (something or nothing).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from knowledge.core.model import SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import upsert_document
from knowledge.stores.protocol import KnowledgeStore

pytestmark = [pytest.mark.opensearch, pytest.mark.integration]

RUNBOOKS = KnowledgeScope("ops-bot", "runbooks")
POSTMORTEMS = KnowledgeScope("ops-bot", "postmortems")
DOCUMENTS = {
    RUNBOOKS: {
        "rollback.md": "# Rolling back a release\n\nRun helm rollback checkout-api to the "
        "previous revision, then watch the error rate for ten minutes.",
        "failover.md": "# Database failover\n\nPromote the replica with pg_ctl promote and "
        "point the connection pool at it.",
        "crashloop.md": "# CrashLoopBackOff\n\nRead the pod logs with kubectl logs --previous "
        "and check the liveness probe.",
        "oncall.md": "# On call\n\nPage the secondary after fifteen minutes without an "
        "acknowledgement.",
        "배포.md": "# 배포 실패 시 롤백 절차\n\n배포가 실패하면 이전 버전으로 롤백합니다.",
    },
    POSTMORTEMS: {
        "checkout.md": "# Checkout outage\n\nA bad release of checkout-api was rolled back "
        "after the error rate rose.",
    },
}
QUERIES = (
    "how do I roll back a release",
    "database failover replica",
    "pod keeps restarting CrashLoopBackOff",
    "배포실패 롤백",
    "chocolate cake recipe with strawberries",
    "what is the capital of France",
)


def _document(path: str, text: str) -> SourceDocument:
    data = text.encode("utf-8")
    return SourceDocument(path=path, size=len(data), read=lambda: data)


@pytest.fixture
def both(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[KnowledgeStore]]:
    """The embedded store and a fresh index on the session's node, made as the contract
    suite's registry makes them (tests/contract/conftest.py), holding the same documents."""
    from opensearch_index import NodeIndex  # tests/integration, on the path (tests/conftest.py)

    from knowledge.stores.embedded import EmbeddedKnowledgeStore
    from knowledge.stores.opensearch import OpenSearchKnowledgeStore

    node = NodeIndex(request.getfixturevalue("opensearch_url"))
    stores: list[KnowledgeStore] = [
        EmbeddedKnowledgeStore(tmp_path / "kb.db", embedder=HashingEmbedder(64)),
        OpenSearchKnowledgeStore(
            node.config(refresh_interval="100ms"), embedder=HashingEmbedder(64)
        ),
    ]
    for store in stores:
        for scope, documents in DOCUMENTS.items():
            for path, text in documents.items():
                assert upsert_document(store, scope, _document(path, text)).ok
    yield stores
    for store in stores:
        store.close()
    node.delete()


@pytest.mark.parametrize("mode", list(SearchMode), ids=lambda m: m.value)
@pytest.mark.parametrize("cross_context", [False, True], ids=["scope", "agent"])
def test_the_same_query_scores_the_same_on_both_stores(
    both: list[KnowledgeStore], mode: SearchMode, cross_context: bool
) -> None:
    embedded, node = both
    compared = 0
    for text in QUERIES:
        query = SearchQuery(
            text, mode=mode, max_results=20, min_score=0.0, cross_context=cross_context
        )
        mine = {(r.document_path, r.chunk_index): r.score for r in embedded.search(RUNBOOKS, query)}
        theirs = {(r.document_path, r.chunk_index): r.score for r in node.search(RUNBOOKS, query)}
        for key in mine.keys() & theirs.keys():
            assert mine[key] == pytest.approx(theirs[key], abs=0.02), (text, key)
            compared += 1
        # The default floor gives the same answer: something, or nothing.
        floored = SearchQuery(text, mode=mode, cross_context=cross_context)
        assert bool(embedded.search(RUNBOOKS, floored)) == bool(node.search(RUNBOOKS, floored))
    assert compared >= 4  # keyword mode matches few chunks of this small corpus
