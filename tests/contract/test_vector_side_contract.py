"""A query the embedder cannot read (``knowledge.ranking.vector_side``), on both stores.

With an English-only embedder (all-MiniLM-L6-v2) a Korean query's vector side is noise,
so a vector search answers from the keyword side and a hybrid one drops the vector side:
both give exactly the keyword search's results, the query is not embedded, and the
search answer and the explain trace say so. An English query in the same store still
runs its vector side. The embedder here is the hashing one under MiniLM's name: the rule
goes by the embedder's name, and the hashing vectors make a vector search that did run
visibly different from the keyword one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.embedding.base import Embedding
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.sources.folders import BucketFolderSource
from knowledge.ranking import explain
from knowledge.ranking.fusion import ENGLISH_ONLY_EMBEDDERS
from knowledge.ranking.vector_side import UNCOVERED_QUERY
from knowledge.service.api import KnowledgeApi
from knowledge.stores.protocol import KnowledgeStore

SCOPE = KnowledgeScope("ops-bot", "runbooks")
ENGLISH_ONLY = next(iter(ENGLISH_ONLY_EMBEDDERS))

DOCUMENTS = {
    "deploy.md": (
        "# 배포\n\n결제 서비스를 카나리 릴리스로 배포합니다. 대시보드에서 오류율을 확인한 "
        "뒤 카나리를 운영 환경으로 승격합니다.\n"
    ),
    "rollback.md": (
        "# 롤백\n\n배포가 실패하면 helm rollback 으로 이전 리비전으로 롤백하고 당직 "
        "엔지니어를 호출합니다.\n"
    ),
    "database.md": (
        "# 데이터베이스\n\n야간 백업에서 Postgres 데이터베이스를 복원합니다. 복제본을 "
        "승격하기 전에 복제 지연을 확인합니다.\n"
    ),
    "oncall.md": (
        "# On-call\n\nThe pager rotates weekly. Acknowledge an alert within five minutes "
        "and open an incident channel.\n"
    ),
}
KOREAN = "배포가 실패하면 어떻게 롤백합니까"
ENGLISH = "acknowledge an alert from the pager"


class EnglishOnlyStandIn(HashingEmbedder):
    """The hashing embedder under the English-only model's name; it keeps every text it
    was asked to embed."""

    def __init__(self) -> None:
        super().__init__(64)
        self.texts: list[str] = []

    @property
    def name(self) -> str:
        return ENGLISH_ONLY

    def embed(self, text: str) -> Embedding:
        self.texts.append(text)
        return super().embed(text)

    def embed_batch(self, texts: Sequence[str]) -> list[Embedding]:
        self.texts.extend(texts)
        return super().embed_batch(texts)


def _embedded(request: pytest.FixtureRequest, folder: Path, embedder: HashingEmbedder):
    from knowledge.stores.embedded import EmbeddedKnowledgeStore

    return EmbeddedKnowledgeStore(folder / "kb.db", embedder=embedder)


def _opensearch(request: pytest.FixtureRequest, folder: Path, embedder: HashingEmbedder):
    from opensearch_index import NodeIndex  # tests/integration, on the path (tests/conftest.py)

    from knowledge.stores.opensearch import OpenSearchKnowledgeStore

    node = NodeIndex(request.getfixturevalue("opensearch_url"))
    request.addfinalizer(node.delete)
    return OpenSearchKnowledgeStore(node.config(refresh_interval="100ms"), embedder=embedder)


@pytest.fixture
def embedder() -> EnglishOnlyStandIn:
    return EnglishOnlyStandIn()


@pytest.fixture(
    params=[
        pytest.param(_embedded, id="embedded"),
        pytest.param(
            _opensearch,
            id="opensearch",
            marks=(pytest.mark.opensearch, pytest.mark.integration),
        ),
    ]
)
def store(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: EnglishOnlyStandIn
) -> Iterator[KnowledgeStore]:
    made = request.param(request, tmp_path, embedder)
    bucket = tmp_path / "bucket"
    for rel, text in DOCUMENTS.items():
        path = bucket / SCOPE.agent / SCOPE.context / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    result = index_source(made, SCOPE, BucketFolderSource(bucket), IndexOptions())
    assert result.errors == (), result.errors
    yield made
    made.close()


def search(store: KnowledgeStore, text: str, mode: SearchMode):
    return store.search(SCOPE, SearchQuery(text, mode=mode, max_results=10, min_score=0.0))


@pytest.mark.parametrize("mode", [SearchMode.VECTOR, SearchMode.HYBRID], ids=lambda m: m.value)
def test_a_query_the_embedder_cannot_read_is_answered_from_the_keyword_side(
    store: KnowledgeStore, embedder: EnglishOnlyStandIn, mode: SearchMode
) -> None:
    keyword = search(store, KOREAN, SearchMode.KEYWORD)
    assert keyword
    assert keyword[0].document_path == "rollback.md"
    embedder.texts.clear()
    with explain.explaining() as trace:
        found = search(store, KOREAN, mode)
    assert embedder.texts == []  # the query was not embedded: its vector would be noise
    # The keyword search's results, scores and order (explanations aside).
    assert [r.to_dict() for r in found] == [r.to_dict() for r in keyword]
    body = trace.to_dict(found)
    (searched,) = body["searches"]
    assert searched["mode"] == mode.value  # the mode asked for
    assert searched["vector_side"] == UNCOVERED_QUERY
    assert searched["fusion"]["method"] == "keyword"
    assert searched["vector"] is None
    for index, result in enumerate(found):
        shown = result.to_dict()
        assert explain.recompute(shown, body, index) == pytest.approx(result.rank_score)
        assert explain.recompute_relevance(body, index) == pytest.approx(result.score)
    assert "vector side: " + UNCOVERED_QUERY in explain.format_trace(
        body, [r.to_dict() for r in found]
    )


@pytest.mark.parametrize("mode", [SearchMode.VECTOR, SearchMode.HYBRID], ids=lambda m: m.value)
def test_a_query_the_embedder_reads_still_runs_its_vector_side(
    store: KnowledgeStore, embedder: EnglishOnlyStandIn, mode: SearchMode
) -> None:
    embedder.texts.clear()
    with explain.explaining() as trace:
        found = search(store, ENGLISH, mode)
    assert embedder.texts == [ENGLISH]
    assert found
    assert found[0].document_path == "oncall.md"
    (searched,) = trace.to_dict(found)["searches"]
    assert "vector_side" not in searched
    assert searched["vector"] is not None
    assert searched["fusion"]["method"] != "keyword"


@pytest.mark.parametrize("mode", list(SearchMode), ids=lambda m: m.value)
def test_the_search_answer_says_when_the_vector_side_was_not_used(
    store: KnowledgeStore, mode: SearchMode
) -> None:
    api = KnowledgeApi(store)
    route = f"/v1/agents/{SCOPE.agent}/contexts/{SCOPE.context}"
    expected = None if mode is SearchMode.KEYWORD else UNCOVERED_QUERY
    for path in ("search", "context"):
        korean = api.handle("POST", f"{route}/{path}", {"query": KOREAN, "mode": mode.value})
        assert korean.status == 200, korean.body
        assert korean.body["mode"] == mode.value
        assert korean.body.get("vector_side") == expected, (path, korean.body)
        english = api.handle("POST", f"{route}/{path}", {"query": ENGLISH, "mode": mode.value})
        assert english.status == 200, english.body
        assert "vector_side" not in english.body
    answered = api.handle("POST", f"{route}/search", {"query": KOREAN, "mode": mode.value})
    assert answered.body["results"][0]["document_path"] == "rollback.md"
