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

import json
from collections.abc import Iterator, Sequence
from contextlib import closing
from pathlib import Path

import pytest
from mcp.types import TextContent

from knowledge.agent_tools.mcp_server import call_result
from knowledge.agent_tools.results import estimate_tokens
from knowledge.agent_tools.scoped_tools import SEARCH_TOOL_NAME, ScopedTools
from knowledge.agent_tools.tool import KnowledgeSearchTool, SearchBackend, ToolContext, ToolResult
from knowledge.client import KnowledgeClient
from knowledge.config import STORE_BUILDERS, StoreSettings, register_store_builder
from knowledge.core.model import IndexOptions, SearchMode, SearchQuery
from knowledge.core.scope import KnowledgeScope
from knowledge.core.scope_set import SHARED_AGENT
from knowledge.embedding.base import Embedding
from knowledge.embedding.hashing import HashingEmbedder
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.sources.folders import BucketFolderSource
from knowledge.local.cli import main as cli_main
from knowledge.local.server import LocalServer
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


# --- where an answer is shown: the tool (and kb mcp), kb search, a deployed API's client ---

LINE = f"(vector side: {UNCOVERED_QUERY})"
ELSEWHERE = "초콜릿 케이크를 굽는 방법"  # nothing in the scope answers it


def tool_answer(backend: SearchBackend, text: str, mode: SearchMode) -> ToolResult:
    context = ToolContext(store=backend, scope=SCOPE, mode=mode)
    answer = KnowledgeSearchTool().run({"query": text}, context)
    assert not answer.is_error, answer.content
    return answer


@pytest.mark.parametrize("mode", list(SearchMode), ids=lambda m: m.value)
def test_the_tool_says_when_the_vector_side_was_not_used(
    store: KnowledgeStore, mode: SearchMode
) -> None:
    korean = tool_answer(store, KOREAN, mode)
    lines = korean.content.splitlines()
    assert lines[0].startswith("Found ")
    assert lines[0].endswith(f' for "{KOREAN}" (best evidence: strong):')
    assert korean.structured is not None
    assert korean.structured["results"][0]["source"] == "rollback.md"
    if mode is SearchMode.KEYWORD:  # a keyword search asked for nothing it did not do
        assert LINE not in korean.content
        assert lines[1] == "---"
        assert "vector_side" not in korean.structured
    else:
        assert lines[1] == LINE  # right under the first line, before the first passage
        assert lines[2] == "---"
        assert korean.structured["vector_side"] == UNCOVERED_QUERY
    english = tool_answer(store, ENGLISH, mode)
    assert LINE not in english.content
    assert english.structured is not None
    assert "vector_side" not in english.structured


@pytest.mark.parametrize("mode", [SearchMode.VECTOR, SearchMode.HYBRID], ids=lambda m: m.value)
def test_nothing_found_keeps_its_first_line_and_says_the_vector_side(
    store: KnowledgeStore, mode: SearchMode
) -> None:
    answer = tool_answer(store, ELSEWHERE, mode)
    assert answer.content.splitlines() == [f"No relevant documents found for: {ELSEWHERE}", LINE]
    assert answer.structured is not None
    assert answer.structured["evidence"] == "none"
    assert answer.structured["vector_side"] == UNCOVERED_QUERY


def test_the_tool_budget_counts_the_vector_side_line(store: KnowledgeStore) -> None:
    full = tool_answer(store, KOREAN, SearchMode.HYBRID)
    budget = estimate_tokens(full.content)  # exactly what the whole answer needs
    context = ToolContext(store=store, scope=SCOPE, mode=SearchMode.HYBRID)
    for max_tokens in range(budget - 12, budget + 1):
        cut = KnowledgeSearchTool().run({"query": KOREAN, "max_tokens": max_tokens}, context)
        assert LINE in cut.content
        assert estimate_tokens(cut.content) <= max_tokens, (max_tokens, cut.content)


def test_kb_mcp_tools_with_a_shared_library_say_it(store: KnowledgeStore) -> None:
    library = KnowledgeScope(SHARED_AGENT, "playbooks")
    tools = ScopedTools(store, SCOPE, mode=SearchMode.HYBRID, shared_libraries=[library])
    answer = tools.call(SEARCH_TOOL_NAME, {"query": KOREAN})
    assert not answer.is_error, answer.content
    assert answer.content.splitlines()[1] == LINE
    sent = call_result(answer)  # what kb mcp sends
    (text,) = sent.content
    assert isinstance(text, TextContent)
    assert text.text.splitlines()[1] == LINE
    assert sent.structured_content is not None
    assert sent.structured_content["vector_side"] == UNCOVERED_QUERY


def indexed_embedded(folder: Path, embedder: EnglishOnlyStandIn) -> Path:
    """The documents indexed into an embedded file under ``folder`` with ``embedder``
    (``folder/bucket`` holds them as a served folder would); the file's path."""
    from knowledge.stores.embedded import EmbeddedKnowledgeStore

    bucket = folder / "bucket"
    for rel, text in DOCUMENTS.items():
        path = bucket / SCOPE.agent / SCOPE.context / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    with closing(EmbeddedKnowledgeStore(folder / "kb.db", embedder=embedder)) as made:
        assert index_source(made, SCOPE, BucketFolderSource(bucket), IndexOptions()).errors == ()
    return folder / "kb.db"


@pytest.fixture
def english_only_kind(tmp_path: Path, embedder: EnglishOnlyStandIn) -> Iterator[str]:
    """A store kind for ``kb``: the documents' embedded file (``indexed_embedded``), opened
    with the English-only stand-in (``--store`` names it)."""
    from knowledge.stores.embedded import EmbeddedKnowledgeStore

    db = indexed_embedded(tmp_path, embedder)

    def build(settings: StoreSettings) -> KnowledgeStore:
        return EmbeddedKnowledgeStore(db, embedder=embedder)

    register_store_builder("english-only-test", build)
    yield "english-only-test"
    del STORE_BUILDERS["english-only-test"]


def kb_search(
    capsys: pytest.CaptureFixture[str], *flags: str, text: str = KOREAN
) -> tuple[int, str]:
    scope = ["--agent", SCOPE.agent, "--context", SCOPE.context]
    code = cli_main(["search", text, *scope, *flags])
    return code, capsys.readouterr().out


@pytest.mark.parametrize("mode", list(SearchMode), ids=lambda m: m.value)
def test_kb_search_json_and_text_say_when_the_vector_side_was_not_used(
    english_only_kind: str, capsys: pytest.CaptureFixture[str], mode: SearchMode
) -> None:
    flags = ("--store", english_only_kind, "--mode", mode.value)
    expected = None if mode is SearchMode.KEYWORD else UNCOVERED_QUERY
    code, out = kb_search(capsys, *flags, "--json")
    assert code == 0
    body = json.loads(out)
    assert body.get("vector_side") == expected
    assert body["mode"] == mode.value
    assert body["results"][0]["document_path"] == "rollback.md"
    code, out = kb_search(capsys, *flags)
    assert code == 0
    assert (out.splitlines()[1] == LINE) is (expected is not None)
    code, out = kb_search(capsys, *flags, "--json", text=ENGLISH)
    assert "vector_side" not in json.loads(out)
    code, out = kb_search(capsys, *flags, "--json", text=ELSEWHERE)
    body = json.loads(out)
    assert (body["results"], body["evidence"], body.get("vector_side")) == ([], "none", expected)


def test_a_deployed_apis_answer_carries_it_to_the_tool_and_kb_search(
    tmp_path: Path, embedder: EnglishOnlyStandIn, capsys: pytest.CaptureFixture[str]
) -> None:
    from knowledge.stores.embedded import EmbeddedKnowledgeStore

    db = indexed_embedded(tmp_path, embedder)
    served = EmbeddedKnowledgeStore(db, embedder=embedder)
    server = LocalServer(tmp_path / "bucket", served, host="127.0.0.1", port=0, poll_interval=0.1)
    server.start()
    try:
        client = KnowledgeClient(server.url)
        query = SearchQuery(KOREAN, mode=SearchMode.HYBRID)
        assert client.search_response(SCOPE, query).vector_side == UNCOVERED_QUERY
        plain = client.search_response(SCOPE, SearchQuery(ENGLISH, mode=SearchMode.HYBRID))
        assert plain.vector_side is None
        answer = tool_answer(client, KOREAN, SearchMode.HYBRID)
        assert answer.content.splitlines()[1] == LINE
        code, out = kb_search(capsys, "--api-url", server.url, "--mode", "vector", "--json")
        assert code == 0
        assert json.loads(out)["vector_side"] == UNCOVERED_QUERY
    finally:
        server.stop()
        served.close()
