"""knowledge.agent_tools.manage_tool: the KnowledgeManage tool's refusals, actions and messages."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from knowledge.agent_tools.manage_tool import MANAGE_TOOL_NAME, KnowledgeManageTool
from knowledge.agent_tools.tool import ToolContext, ToolResult
from knowledge.core.errors import StoreUnavailableError
from knowledge.core.model import FileProblem, IndexResult, IndexState, IndexStatus
from knowledge.core.scope import KnowledgeScope

SCOPE = KnowledgeScope("ops-bot", "runbooks")
STATUS = IndexStatus(
    document_count=2,
    chunk_count=5,
    last_indexed_at=datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
    state=IndexState.READY,
    problems=(FileProblem("scan.pdf", "no text layer (scanned image; OCR not supported)"),),
)


class StatusStore:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.asked: list[KnowledgeScope] = []

    def search(self, scope: KnowledgeScope, query: Any) -> list[Any]:
        return []

    def status(self, scope: KnowledgeScope) -> IndexStatus:
        self.asked.append(scope)
        if self.error is not None:
            raise self.error
        return STATUS


def test_refusals_come_first() -> None:
    tool = KnowledgeManageTool()
    no_store = tool.run({"bogus": 1}, ToolContext(store=None, scope=SCOPE))
    assert no_store == ToolResult(True, "No knowledge store configured for this agent")
    no_scope = tool.run({"bogus": 1}, ToolContext(store=StatusStore(), scope=None))
    assert no_scope == ToolResult(True, "No knowledge scope configured for this agent")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "Invalid parameter: action: is required (one of: status)"),
        ({"action": "delete"}, "Invalid parameter: action: 'delete' is not one of: status"),
        (
            {"action": "reindex"},
            "Invalid parameter: action: 'reindex' is not enabled here (one of: status)",
        ),
        (
            {"action": "status", "context": "payroll"},
            "Invalid parameter: context: is not a known property (allowed: action)",
        ),
        ({"action": ["status"]}, "Invalid parameter: action: ['status'] is not one of: status"),
    ],
)
def test_bad_arguments(arguments: dict[str, Any], message: str) -> None:
    store = StatusStore()
    result = KnowledgeManageTool().run(arguments, ToolContext(store=store, scope=SCOPE))
    assert result == ToolResult(True, message)
    assert store.asked == []


def test_status_as_text_and_data() -> None:
    store = StatusStore()
    result = KnowledgeManageTool().run({"action": "status"}, ToolContext(store=store, scope=SCOPE))
    assert not result.is_error
    assert result.content == (
        "Knowledge scope ops-bot/runbooks: READY\n"
        "documents: 2, chunks: 5, last indexed: 2025-01-02T03:04:05+00:00\n"
        "documents not indexed (1):\n"
        "- scan.pdf: no text layer (scanned image; OCR not supported)"
    )
    assert result.structured is not None
    assert result.structured["agent"] == "ops-bot"
    assert result.structured["context"] == "runbooks"
    assert result.structured["document_count"] == 2
    assert store.asked == [SCOPE]


def test_a_failing_backend_is_a_plain_error_with_its_cause() -> None:
    failure = StoreUnavailableError("http://10.0.0.7:9200 refused the connection")
    result = KnowledgeManageTool().run(
        {"action": "status"}, ToolContext(store=StatusStore(failure), scope=SCOPE)
    )
    assert result.is_error
    assert result.content.startswith("Failed to read the knowledge status: ")
    assert "10.0.0.7" not in result.content
    assert result.cause is failure


def test_reindex_only_when_enabled_and_only_of_the_scope() -> None:
    done: list[KnowledgeScope] = []

    def reindex(scope: KnowledgeScope) -> IndexResult:
        done.append(scope)
        return IndexResult(indexed_documents=3, indexed_chunks=9)

    tool = KnowledgeManageTool(reindex=reindex)
    assert tool.input_schema["properties"]["action"]["enum"] == ["status", "reindex"]
    assert "Action reindex" in tool.description
    assert "reindex" not in KnowledgeManageTool().description  # not offered, not mentioned
    result = tool.run({"action": "reindex"}, ToolContext(store=StatusStore(), scope=SCOPE))
    assert not result.is_error, result.content
    assert result.content.startswith("Re-index of knowledge scope ops-bot/runbooks: ")
    assert "indexed_documents 3" in result.content
    assert result.structured is not None
    assert result.structured["indexed_chunks"] == 9
    assert done == [SCOPE]

    def broken(scope: KnowledgeScope) -> dict[str, Any]:
        raise StoreUnavailableError("arn:aws:sqs:eu-west-1:123:queue is gone")

    failed = KnowledgeManageTool(reindex=broken).run(
        {"action": "reindex"}, ToolContext(store=StatusStore(), scope=SCOPE)
    )
    assert failed.is_error
    assert failed.content.startswith("Failed to re-index: ")
    assert "arn:" not in failed.content


def test_definitions() -> None:
    tool = KnowledgeManageTool()
    assert tool.name == MANAGE_TOOL_NAME == "KnowledgeManage"
    assert tool.to_anthropic_tool() == {
        "name": "KnowledgeManage",
        "description": tool.description,
        "input_schema": tool.input_schema,
    }
    assert tool.to_openai_tool()["function"]["parameters"]["additionalProperties"] is False
