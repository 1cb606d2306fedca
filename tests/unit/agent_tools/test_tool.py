"""knowledge.agent_tools.tool: the KnowledgeSearch tool's messages, parameters, format and
schema."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from knowledge.agent_tools.tool import (
    TOOL_DESCRIPTION,
    TOOL_NAME,
    KnowledgeSearchTool,
    ToolContext,
    ToolResult,
    format_search_results,
)
from knowledge.core.errors import (
    AccessDeniedError,
    ConfigurationError,
    EmbeddingError,
    NotFoundError,
    StoreError,
    StoreUnavailableError,
    UnsupportedModeError,
    ValidationError,
)
from knowledge.core.model import (
    DEFAULT_MIN_SCORE,
    STRONG_SCORE,
    SearchMode,
    SearchQuery,
    SearchResult,
)
from knowledge.core.scope import KnowledgeScope

SCOPE = KnowledgeScope("ops-bot", "runbooks")


class FakeStore:
    name = "fake"
    supported_modes = frozenset(SearchMode)
    default_mode = SearchMode.KEYWORD

    def __init__(self, results: list[SearchResult] | None = None, error: Exception | None = None):
        self.results = results or []
        self.error = error
        self.searches: list[tuple[KnowledgeScope, SearchQuery]] = []

    def search(self, scope: KnowledgeScope, query: SearchQuery) -> list[SearchResult]:
        self.searches.append((scope, query))
        if self.error is not None:
            raise self.error
        return list(self.results)


def hit(path: str, score: float, chunk: int, content: str) -> SearchResult:
    return SearchResult(document_path=path, chunk_index=chunk, content=content, score=score)


@pytest.fixture
def tool() -> KnowledgeSearchTool:
    return KnowledgeSearchTool()


def context(store: Any = None, scope: KnowledgeScope | None = SCOPE, **kw: Any) -> ToolContext:
    return ToolContext(store=store, scope=scope, **kw)


# --- refusals come first ------------------------------------------------------------------


def test_no_store(tool: KnowledgeSearchTool) -> None:
    # even with invalid arguments: refusal before parameters
    result = tool.run({"bogus": 1}, ToolContext(store=None, scope=SCOPE))
    assert result == ToolResult(True, "No knowledge store configured for this agent")


def test_no_scope(tool: KnowledgeSearchTool) -> None:
    store = FakeStore()
    result = tool.run({"bogus": 1}, ToolContext(store=store, scope=None))  # type: ignore[arg-type]
    assert result == ToolResult(True, "No knowledge scope configured for this agent")
    assert store.searches == []


# --- parameters -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "Invalid parameter: query: must be a non-blank string"),
        ({"query": "  "}, "Invalid parameter: query: must be a non-blank string"),
        ({"query": 5}, "Invalid parameter: query: must be a non-blank string"),
        (
            {"query": "x", "limit": 3},
            "Invalid parameter: limit: is not a known property (allowed: query, "
            "max_results, top_k, file_pattern, max_tokens, source_type, include_shared, "
            "group_by, origin_weights, lesson_weight, explain)",
        ),
        (
            {"query": "x", "top_k": 3, "max_results": 5},
            "Invalid parameter: top_k: top_k and max_results are two names for one limit "
            "and were given different values (top_k 3, max_results 5): give one of them",
        ),
        (
            {"query": "x", "top_k": 101},
            "Invalid parameter: top_k: must be between 1 and 100, got 101",
        ),
        ({"query": "x", "top_k": 2.5}, "Invalid parameter: top_k: must be an integer, got 2.5"),
        ({"query": "x", "top_k": True}, "Invalid parameter: top_k: must be an integer"),
        (
            {"query": "x", "max_results": 0},
            "Invalid parameter: max_results: must be between 1 and 100, got 0",
        ),
        (
            {"query": "x", "max_results": 101},
            "Invalid parameter: max_results: must be between 1 and 100, got 101",
        ),
        (
            {"query": "x", "max_results": 2.5},
            "Invalid parameter: max_results: must be an integer, got 2.5",
        ),
        ({"query": "x", "max_results": "3"}, "Invalid parameter: max_results: must be an integer"),
        ({"query": "x", "max_results": True}, "Invalid parameter: max_results: must be an integer"),
        (
            {"query": "x", "file_pattern": ""},
            "Invalid parameter: file_pattern: must be a non-blank glob string such as '*.md'",
        ),
        (
            {"query": "x", "file_pattern": ["*.md"]},
            "Invalid parameter: file_pattern: must be a non-blank glob string such as '*.md'",
        ),
        (
            {"query": "x", "source_type": "pdf"},
            "Invalid parameter: source_type: 'pdf' is not one of: upload, repo, manual, shared",
        ),
        (
            {"query": "x", "source_type": ["repo"]},
            "Invalid parameter: source_type: ['repo'] is not one of: upload, repo, manual, shared",
        ),
    ],
)
def test_invalid_parameters(
    tool: KnowledgeSearchTool, arguments: dict[str, Any], message: str
) -> None:
    store = FakeStore()
    result = tool.run(arguments, context(store))
    assert result == ToolResult(True, message)
    assert store.searches == []


def test_arguments_not_an_object(tool: KnowledgeSearchTool) -> None:
    result = tool.run(["query"], context(FakeStore()))  # type: ignore[arg-type]
    assert result == ToolResult(True, "Invalid parameter: arguments: must be an object")


def test_parameters_reach_the_store(tool: KnowledgeSearchTool) -> None:
    store = FakeStore()
    tool.run(
        {"query": "rollback", "max_results": 3.0, "file_pattern": "*.md"},
        context(store, mode=SearchMode.HYBRID),
    )
    scope, query = store.searches[0]
    assert scope == SCOPE
    assert query == SearchQuery(
        text="rollback", mode=SearchMode.HYBRID, max_results=3, file_patterns=("*.md",)
    )


def test_defaults(tool: KnowledgeSearchTool) -> None:
    store = FakeStore()
    tool.run({"query": "rollback"}, context(store))
    query = store.searches[0][1]
    assert (query.max_results, query.file_patterns, query.mode, query.cross_context) == (
        5,
        (),
        None,
        False,
    )


# --- search failures ------------------------------------------------------------------------


def test_search_failure_is_an_error_without_trace(tool: KnowledgeSearchTool) -> None:
    store = FakeStore(error=StoreUnavailableError("cannot reach http://127.0.0.1:9200"))
    result = tool.run({"query": "x"}, context(store))
    assert result == ToolResult(
        True, "Failed to search knowledge: the index backend is unavailable; try again later"
    )


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (StoreUnavailableError("OpenSearch at https://vpc-kb.eu-west-1.es.amazonaws.com x"), ""),
        (StoreError("index 'kb-prod' answered 500 from http://10.0.0.5:9200"), ""),
        (EmbeddingError("https://api.openai.com/v1/embeddings answered 401"), ""),
        (
            ConfigurationError(
                "secret arn:aws:secretsmanager:eu-west-1:123456789012:secret:kb not found"
            ),
            "",
        ),
        (
            AccessDeniedError(
                "operation",
                "User: arn:aws:sts::123456789012:assumed-role/agent is not authorized",
            ),
            "",
        ),
        (RuntimeError("disk full at /var/lib/kb/knowledge.db"), ""),
        (NotFoundError("no route for /v1/agents/ops-bot/contexts/runbooks/search"), "no route"),
    ],
)
def test_a_failure_tells_the_model_its_kind_never_a_url_arn_or_path(
    tool: KnowledgeSearchTool, error: Exception, said: str
) -> None:
    result = tool.run({"query": "x"}, context(FakeStore(error=error)))
    assert result.is_error
    assert result.content.startswith("Failed to search knowledge: ")
    for secret in ("http", "arn:", "123456789012", "kb-prod", "/var/lib", "Traceback"):
        assert secret not in result.content, result.content
    assert said in result.content


def test_unsupported_mode_is_invalid_parameter(tool: KnowledgeSearchTool) -> None:
    store = FakeStore(error=UnsupportedModeError("vector", "memory", "keyword"))
    result = tool.run({"query": "x"}, context(store, mode=SearchMode.VECTOR))
    assert result.is_error
    assert result.content == (
        "Invalid parameter: mode: 'vector' is not supported by the memory store "
        "(supported: keyword)"
    )


# --- results ---------------------------------------------------------------------------------


def test_no_results_is_success(tool: KnowledgeSearchTool) -> None:
    result = tool.run({"query": "quantum billing"}, context(FakeStore([])))
    assert result == ToolResult(False, "No relevant documents found for: quantum billing")


def test_results_source_first_format(tool: KnowledgeSearchTool) -> None:
    store = FakeStore(
        [
            hit("runbook.md", 0.9234, 3, "Check the pod logs with --previous."),
            hit("troubleshooting.md", 0.78, 1, "Exit code 137 means OOMKilled.\n"),
            hit("k8s/notes.md", 0.1, 0, "Line one\nline two"),
        ]
    )
    result = tool.run({"query": "CrashLoopBackOff"}, context(store))
    assert result == ToolResult(
        False,
        'Found 3 results for "CrashLoopBackOff" (best evidence: strong):\n'
        "---\n"
        "[1] runbook.md (score: 0.92, chunk: 3)\n"
        "Check the pod logs with --previous.\n"
        "---\n"
        "[2] troubleshooting.md (score: 0.78, chunk: 1)\n"
        "Exit code 137 means OOMKilled.\n"
        "---\n"
        "[3] k8s/notes.md (score: 0.10, chunk: 0)\n"
        "Line one\nline two",
    )


def test_one_result_is_singular() -> None:
    text = format_search_results("롤백", [hit("배포.md", 1.0, 0, "배포 실패 시 롤백 절차")])
    assert text == (
        'Found 1 result for "롤백" (best evidence: strong):\n'
        "---\n"
        "[1] 배포.md (score: 1.00, chunk: 0)\n"
        "배포 실패 시 롤백 절차"
    )


@pytest.mark.parametrize(
    ("scores", "word"),
    [
        ((STRONG_SCORE,), "strong"),
        ((DEFAULT_MIN_SCORE,), "partial"),
        ((DEFAULT_MIN_SCORE - 0.01,), "weak"),  # only shown to a caller who lowered min_score
        # The best score, wherever the ranking put it (lists are in rank order).
        ((DEFAULT_MIN_SCORE - 0.01, STRONG_SCORE), "strong"),
        ((STRONG_SCORE - 0.01, DEFAULT_MIN_SCORE - 0.01), "partial"),
    ],
)
def test_the_found_line_names_the_best_evidence(scores: tuple[float, ...], word: str) -> None:
    results = [hit(f"d{i}.md", score, 0, "text") for i, score in enumerate(scores)]
    first = format_search_results("q", results).splitlines()[0]
    noun = "result" if len(scores) == 1 else "results"
    assert first == f'Found {len(scores)} {noun} for "q" (best evidence: {word}):'


def test_format_no_results() -> None:
    assert format_search_results("x", []) == "No relevant documents found for: x"


# --- definition ------------------------------------------------------------------------------


def test_name_and_description(tool: KnowledgeSearchTool) -> None:
    assert tool.name == TOOL_NAME == "KnowledgeSearch"
    assert tool.description == TOOL_DESCRIPTION
    assert tool.description.startswith("Search agent's knowledge base for relevant documents.")
    assert "Returns document chunks ranked by relevance." in tool.description
    assert "agent's configured knowledge directory" in tool.description
    # When to call it: early, for these questions; an empty answer sends the model elsewhere.
    assert "Call it early" in tool.description
    for question in ('"how do I X"', '"why does X happen"', '"what is the runbook for Y"'):
        assert question in tool.description
    assert '"No relevant documents found" means the knowledge is not there' in tool.description
    assert "look elsewhere" in tool.description


def test_input_schema(tool: KnowledgeSearchTool) -> None:
    schema = tool.input_schema
    assert schema["type"] == "object"
    assert schema["required"] == ["query"]
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == {
        "query",
        "max_results",
        "top_k",
        "file_pattern",
        "max_tokens",
        "source_type",
        "include_shared",
        "group_by",
        "origin_weights",
        "lesson_weight",
        "explain",
    }
    assert schema["properties"]["source_type"]["enum"] == ["upload", "repo", "manual", "shared"]
    assert schema["properties"]["include_shared"]["type"] == "boolean"
    assert schema["properties"]["query"]["type"] == "string"
    assert schema["properties"]["max_results"]["type"] == "integer"
    assert schema["properties"]["file_pattern"]["type"] == "string"
    json.dumps(schema)  # serialisable as is
    schema["required"].append("oops")
    assert tool.input_schema["required"] == ["query"]  # a copy each time


def test_provider_definitions(tool: KnowledgeSearchTool) -> None:
    assert tool.to_anthropic_tool() == {
        "name": "KnowledgeSearch",
        "description": TOOL_DESCRIPTION,
        "input_schema": tool.input_schema,
    }
    assert tool.to_openai_tool() == {
        "type": "function",
        "function": {
            "name": "KnowledgeSearch",
            "description": TOOL_DESCRIPTION,
            "parameters": tool.input_schema,
        },
    }


# --- citations -------------------------------------------------------------------------------


def cited(path: str, **metadata: Any) -> SearchResult:
    return SearchResult(
        document_path=path, chunk_index=3, content="text", score=0.92, metadata=metadata
    )


@pytest.mark.parametrize(
    ("result", "line"),
    [
        (cited("handbook.pdf", format="pdf", page=12), "[1] handbook.pdf p. 12"),
        (
            cited("handbook.pdf", format="pdf", page=12, page_end=13),
            "[1] handbook.pdf pp. 12-13",
        ),
        (cited("deck.pptx", format="pptx", slide=4), "[1] deck.pptx slide 4"),
        (
            cited("plan.xlsx", format="xlsx", sheet="Budget", row_start=2, row_end=40),
            '[1] plan.xlsx sheet "Budget" rows 2-40',
        ),
        (cited("owners.csv", format="csv", row_start=7, row_end=7), "[1] owners.csv row 7"),
        (
            cited("guide.docx", format="docx", heading_path=["Install", "Linux"]),
            "[1] guide.docx § Install > Linux",
        ),
        (cited("page.html", format="html", heading_path=[]), "[1] page.html"),
        # Markdown keeps the seed's line exactly, heading path or not.
        (cited("runbook.md", format="markdown", heading_path=["Deploy"]), "[1] runbook.md"),
        # Numbers read back from a store as strings still cite.
        (cited("a.pdf", page="5"), "[1] a.pdf p. 5"),
    ],
)
def test_result_lines_cite_where_the_chunk_comes_from(result: SearchResult, line: str) -> None:
    text = format_search_results("q", [result])
    assert text.splitlines()[2] == f"{line} (score: 0.92, chunk: 3)"


def test_a_passage_of_adjacent_chunks_cites_the_whole_span() -> None:
    results = [
        SearchResult("h.pdf", 4, "first part", 0.9, metadata={"format": "pdf", "page": 12}),
        SearchResult("h.pdf", 5, "second part", 0.8, metadata={"format": "pdf", "page": 13}),
    ]
    text = format_search_results("q", results)
    assert text.splitlines()[2] == "[1] h.pdf pp. 12-13 (score: 0.90, chunks: 4-5)"


def test_max_tokens_drops_results_and_says_how_many() -> None:
    results = [hit(f"doc-{i}.md", 0.9 - i / 10, 0, "word " * 200) for i in range(4)]
    text = format_search_results("q", results, max_tokens=600)
    assert text.startswith('Found 2 results for "q" (best evidence: strong):')
    assert "[2] doc-1.md" in text
    assert "doc-2.md" not in text
    assert text.endswith("(2 more results were dropped to stay within max_tokens=600)")
    assert "dropped" not in format_search_results("q", results, max_tokens=100_000)


def _estimated_tokens(text: str) -> int:
    # The documented estimate (docs/agents.md): one token per CJK character (Hangul,
    # Han, Kana), one per four other characters, rounded up. Written out here, not imported.
    cjk = sum(
        1
        for ch in text
        if "\uac00" <= ch <= "\ud7a3" or "\u4e00" <= ch <= "\u9fff" or "\u3040" <= ch <= "\u30ff"
    )
    return cjk + -(-(len(text) - cjk) // 4)


@pytest.mark.parametrize("budget", [120, 300, 450, 1000])
@pytest.mark.parametrize(
    ("path", "query", "text"),
    [
        ("runbooks/" * 30 + "deploy.md", "rollback", "word " * 40),  # long paths
        ("deploy.md", "배포 실패 " * 5, "롤백 절차 " * 30),  # a Korean query and text
    ],
)
def test_the_whole_answer_stays_within_max_tokens(
    budget: int, path: str, query: str, text: str
) -> None:
    # Everything the model reads counts against its budget: the "Found" line, each
    # passage's header (path, citation, score), and the line saying what was dropped.
    results = [hit(f"{path}.{i}", 0.9 - i / 100, 3 * i, text) for i in range(12)]
    answer = format_search_results(query, results, max_tokens=budget)
    assert "dropped to stay within" in answer
    assert _estimated_tokens(answer) <= budget, answer


def test_adjacent_chunks_are_one_passage_in_the_tool() -> None:
    results = [hit("a.md", 0.9, 4, "first part"), hit("a.md", 0.8, 5, "second part")]
    text = format_search_results("q", results)
    assert "[1] a.md (score: 0.90, chunks: 4-5)" in text
    assert "first part\n\nsecond part" in text
    assert "[2]" not in text


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "Invalid parameter: max_tokens: must be at least 1, got 0"),
        ("many", "Invalid parameter: max_tokens: must be an integer"),
        (2.5, "Invalid parameter: max_tokens: must be an integer"),
    ],
)
def test_a_bad_max_tokens_is_an_invalid_parameter(
    tool: KnowledgeSearchTool, value: object, message: str
) -> None:
    store = FakeStore([hit("a.md", 1.0, 0, "text")])
    result = tool.run({"query": "q", "max_tokens": value}, context(store))
    assert result.is_error
    assert result.content == message
    assert store.searches == []


def test_max_tokens_reaches_the_answer(tool: KnowledgeSearchTool) -> None:
    store = FakeStore([hit(f"d{i}.md", 1.0 - i / 10, 0, "word " * 400) for i in range(3)])
    result = tool.run({"query": "q", "max_tokens": 700}, context(store))
    assert not result.is_error
    assert "(2 more results were dropped to stay within max_tokens=700)" in result.content
    default = tool.run({"query": "q"}, context(store))
    assert "dropped" not in default.content  # 3 x ~500 tokens fit the default 4000


@pytest.mark.parametrize(("given", "origin"), [("repo", "repo"), (" Manual ", "manual")])
def test_source_type_filters_the_hits_by_origin(
    tool: KnowledgeSearchTool, given: str, origin: str
) -> None:
    # The design's source_type is where a document came from, never its file format.
    store = FakeStore([hit("a.md", 0.9, 0, "text")])
    result = tool.run({"query": "deploy", "source_type": given}, context(store))
    assert not result.is_error
    (searched,) = store.searches
    assert dict(searched[1].metadata) == {"origin": origin}
    tool.run({"query": "deploy"}, context(store))
    assert dict(store.searches[1][1].metadata) == {}


def test_result_lines_name_the_origin_and_the_url() -> None:
    repo = SearchResult(
        "guides/deploy.md",
        2,
        "text",
        0.9,
        metadata={"origin": "repo", "format": "markdown", "url": "https://git.example.com/d.md"},
    )
    upload = SearchResult("notes.txt", 0, "more", 0.5, metadata={"origin": "upload"})
    lines = format_search_results("deploy", [repo, upload]).splitlines()
    assert lines[2] == (
        "[1] guides/deploy.md (score: 0.90, chunk: 2, origin: repo, "
        "url: https://git.example.com/d.md)"
    )
    assert lines[5] == "[2] notes.txt (score: 0.50, chunk: 0, origin: upload)"


def test_an_error_keeps_its_cause_for_the_host_never_in_the_model_text(
    tool: KnowledgeSearchTool,
) -> None:
    """The design's ToolResult.error(message, cause): the host can log what failed (the
    exception, with its URL and trace); the model reads only the plain message."""
    failure = StoreError("index 'kb-prod' answered 500 from http://10.0.0.5:9200")
    result = tool.run({"query": "x"}, context(FakeStore(error=failure)))
    assert result.is_error
    assert result.cause is failure
    assert "10.0.0.5" not in result.content
    assert "cause" not in repr(result)  # never printed into a transcript by accident
    invalid = tool.run({"query": ""}, context(FakeStore()))
    assert invalid.is_error
    assert isinstance(invalid.cause, ValidationError)
    assert tool.run({"query": "x"}, context(None)).cause is None  # a refusal has no cause
    assert tool.run({"query": "x"}, context(FakeStore())).cause is None


# --- the shared library (knowledge.agent_tools.shared, knowledge.core.scope_set) ---------------


def _library_store() -> Any:
    from knowledge.agent_tools.shared import SharedLibraryStore
    from knowledge.core.source import SourceDocument
    from knowledge.ingest.pipeline import upsert_document
    from knowledge.stores.memory import MemoryKnowledgeStore

    store = MemoryKnowledgeStore()
    for scope, path, text in (
        (SCOPE, "deploy.md", "# Deploy\n\nrollback the deploy"),
        (KnowledgeScope("_shared", "playbooks"), "incident.md", "# Incident\n\nrollback playbook"),
    ):
        data = text.encode()
        upsert_document(store, scope, SourceDocument(path, len(data), lambda d=data: d))
    return store, SharedLibraryStore(store, (KnowledgeScope("_shared", "playbooks"),))


def test_include_shared_defaults_to_the_grant_and_hits_name_their_library(
    tool: KnowledgeSearchTool,
) -> None:
    plain, granted = _library_store()
    default = tool.run({"query": "rollback"}, context(granted))
    assert not default.is_error
    (line,) = [line for line in default.content.splitlines() if "incident.md" in line]
    score = r"\(score: [01]\.\d\d, chunk: 0, origin: shared, library: playbooks\)"
    assert re.fullmatch(r"\[[12]\] incident\.md " + score, line)
    assert "deploy.md" in default.content
    assert tool.run({"query": "rollback", "include_shared": True}, context(granted)) == default
    alone = tool.run({"query": "rollback", "include_shared": False}, context(granted))
    assert "incident.md" not in alone.content
    assert "deploy.md" in alone.content
    only = tool.run({"query": "rollback", "source_type": "shared"}, context(granted))
    assert "incident.md" in only.content
    assert "deploy.md" not in only.content
    # A plain store knows no grant: leaving the library out is fine, asking for it is not.
    assert tool.run({"query": "rollback", "include_shared": False}, context(plain)) == alone
    refused = tool.run({"query": "rollback", "include_shared": True}, context(plain))
    assert refused == ToolResult(
        True, "Invalid parameter: include_shared: no shared library is granted to this agent"
    )


def test_a_bad_include_shared_is_an_invalid_parameter(tool: KnowledgeSearchTool) -> None:
    _, granted = _library_store()
    for value in ("yes", 1, 0, [True]):
        result = tool.run({"query": "rollback", "include_shared": value}, context(granted))
        assert result == ToolResult(
            True, "Invalid parameter: include_shared: must be true or false"
        )
