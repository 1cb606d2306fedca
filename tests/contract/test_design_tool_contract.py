"""The design's tool contract beside this API's, on every store (memory, embedded,
OpenSearch): ``top_k`` as ``max_results`` (tool, search and context bodies; both with
different values refused naming both), ``source_type`` as the origin (filters, metadata,
hits), the tool's structured answer ``{query, evidence, results: [{score, source, title,
snippet, url, context, source_type, ...}]}``, every hit naming its context (agent-wide:
two contexts' ``x.md`` told apart, a folder given to ``kb index`` included), the
``KnowledgeManage`` tool, and ``open_store`` refusing a file that is not there.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from knowledge.agent_tools.tool import KnowledgeSearchTool, ToolContext
from knowledge.core.errors import ConfigurationError
from knowledge.core.model import IndexOptions, SearchMode
from knowledge.core.scope import KnowledgeScope
from knowledge.ingest.pipeline import index_source
from knowledge.ingest.sources.folders import BucketFolderSource, LocalDirectorySource
from knowledge.service.api import KnowledgeApi
from knowledge.stores.protocol import KnowledgeStore

RUNBOOKS = KnowledgeScope("ops-bot", "runbooks")
POSTMORTEMS = KnowledgeScope("ops-bot", "postmortems")
PAYROLL = KnowledgeScope("hr-bot", "payroll")
URL = "https://git.example.com/ops/runbooks/blob/abc123/guides/deploy.md"
HIT_KEYS = {"score", "source", "title", "snippet", "url", "context", "source_type"}


def write(root: Path, rel: str, text: str, attributes: dict[str, str] | None = None) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    if attributes is not None:
        sidecar = path.with_name(path.name + ".metadata.json")
        sidecar.write_text(json.dumps({"metadataAttributes": attributes}), "utf-8")


@pytest.fixture
def indexed(store: KnowledgeStore, bucket: Path, tmp_path: Path) -> KnowledgeStore:
    """ops-bot/runbooks from the bucket (a repo file with its url among them), and
    ops-bot/postmortems from a plain folder as ``kb index DIR`` indexes one: both hold an
    ``x.md``. Another agent holds one too, which no search of ops-bot may show."""
    write(bucket, "ops-bot/runbooks/x.md", "# Failover runbook\n\nquokka failover: promote.")
    write(
        bucket,
        "ops-bot/runbooks/guides/deploy.md",
        "# Deploy\n\nThe quokka deploy runs at noon.",
        {"origin": "repo", "url": URL},
    )
    write(bucket, "hr-bot/payroll/x.md", "# Payroll\n\nquokka failover salaries")
    folder = tmp_path / "postmortems"
    write(folder, "x.md", "# Failover postmortem\n\nThe quokka failover went wrong twice.")
    for scope, source in (
        (RUNBOOKS, BucketFolderSource(bucket)),
        (PAYROLL, BucketFolderSource(bucket)),
        (POSTMORTEMS, LocalDirectorySource(folder)),
    ):
        assert index_source(store, scope, source, IndexOptions()).errors == ()
    return store


def tool_context(store: KnowledgeStore, *, cross_context: bool = False) -> ToolContext:
    return ToolContext(
        store=store, scope=RUNBOOKS, mode=SearchMode.KEYWORD, cross_context=cross_context
    )


def search(api: KnowledgeApi, context: str | None, **body: Any) -> tuple[int, dict[str, Any]]:
    request = {"query": "quokka failover", "mode": "keyword", "min_score": 0.0, **body}
    response = api.search(RUNBOOKS.agent, context, request)
    return response.status, response.body


def test_top_k_and_max_results_name_one_limit(indexed: KnowledgeStore) -> None:
    tool = KnowledgeSearchTool()
    context = tool_context(indexed, cross_context=True)
    assert "top_k" in tool.input_schema["properties"]
    for arguments in ({"top_k": 1}, {"max_results": 1}, {"top_k": 1, "max_results": 1}):
        result = tool.run({"query": "quokka failover", **arguments}, context)
        assert not result.is_error, (arguments, result.content)
        assert result.content.startswith('Found 1 result for "quokka failover"'), arguments
    refused = tool.run({"query": "quokka", "top_k": 1, "max_results": 2}, context)
    assert refused.is_error
    assert refused.content.startswith("Invalid parameter: top_k: ")
    assert "max_results" in refused.content
    too_many = tool.run({"query": "quokka", "top_k": 101}, context)
    assert too_many.content == "Invalid parameter: top_k: must be between 1 and 100, got 101"

    api = KnowledgeApi(indexed)
    for context_name in (RUNBOOKS.context, None):
        status, body = search(api, context_name, top_k=1)
        assert (status, len(body["results"])) == (200, 1), body
        status, body = search(api, context_name, top_k=2, max_results=2)
        assert (status, len(body["results"])) == (200, 2), body
        status, body = search(api, context_name, top_k=1, max_results=3)
        assert (status, body["field"]) == (400, "top_k")
        assert "max_results" in body["error"]
        status, body = search(api, context_name, top_k=0)
        assert (status, body["field"]) == (400, "top_k")
    block = api.prompt_context(
        RUNBOOKS.agent,
        None,
        {"query": "quokka failover", "mode": "keyword", "min_score": 0.0, "top_k": 1},
    )
    assert block.status == 200, block.body
    assert len(block.body["passages"]) == 1


def test_source_type_is_the_origin_in_filters_and_on_hits(indexed: KnowledgeStore) -> None:
    api = KnowledgeApi(indexed)

    def paths(**body: Any) -> set[str]:
        status, answer = search(api, RUNBOOKS.context, query="quokka", **body)
        assert status == 200, answer
        return {r["document_path"] for r in answer["results"]}

    repo = {"guides/deploy.md"}
    assert paths(filter={"field": "source_type", "op": "eq", "value": "repo"}) == repo
    assert paths(filter={"field": "origin", "op": "eq", "value": "repo"}) == repo
    assert paths(filter={"field": "source_type", "op": "in", "value": ["upload"]}) == {"x.md"}
    assert paths(metadata={"source_type": "repo"}) == repo
    assert paths(metadata={"source_type": "repo", "origin": "repo"}) == repo
    for body, field in (
        ({"filter": {"field": "source_type", "op": "eq", "value": "pdf"}}, "filter.value"),
        ({"metadata": {"source_type": "pdf"}}, "metadata.source_type"),
        ({"metadata": {"source_type": "repo", "origin": "upload"}}, "metadata.source_type"),
    ):
        status, answer = search(api, RUNBOOKS.context, **body)
        assert (status, answer["field"]) == (400, field), answer
    status, answer = search(api, RUNBOOKS.context, metadata={"source_type": "pdf"})
    assert "'format'" in answer["error"]  # a file format is filtered as format

    status, answer = search(api, RUNBOOKS.context, query="quokka")
    assert {r["document_path"]: r["source_type"] for r in answer["results"]} == {
        "x.md": "upload",
        "guides/deploy.md": "repo",
    }
    assert all(r["source_type"] == r["origin"] for r in answer["results"])
    found = KnowledgeSearchTool().run(
        {"query": "quokka", "source_type": "repo"}, tool_context(indexed)
    )
    assert found.structured is not None
    assert [h["source"] for h in found.structured["results"]] == ["guides/deploy.md"]


def test_every_hit_names_its_context(indexed: KnowledgeStore) -> None:
    api = KnowledgeApi(indexed)
    status, answer = search(api, None, query="failover", max_results=10)
    assert status == 200, answer
    shown = {(r["document_path"], r["agent"], r["context"]) for r in answer["results"]}
    assert shown == {("x.md", "ops-bot", "runbooks"), ("x.md", "ops-bot", "postmortems")}
    titles = {r["context"]: r["title"] for r in answer["results"]}
    assert titles == {"runbooks": "Failover runbook", "postmortems": "Failover postmortem"}
    status, one = search(api, RUNBOOKS.context, query="quokka", max_results=10)
    assert {(r["agent"], r["context"]) for r in one["results"]} == {("ops-bot", "runbooks")}
    block = api.prompt_context(
        RUNBOOKS.agent, None, {"query": "failover", "mode": "keyword", "min_score": 0.0}
    )
    assert {(p["document_path"], p["context"]) for p in block.body["passages"]} == {
        ("x.md", "runbooks"),
        ("x.md", "postmortems"),
    }
    assert "context: postmortems" in block.body["context"]

    result = KnowledgeSearchTool().run(
        {"query": "failover", "max_results": 10}, tool_context(indexed, cross_context=True)
    )
    assert result.structured is not None
    hits = result.structured["results"]
    assert {(h["source"], h["agent"], h["context"]) for h in hits} == shown
    # The text names them too, so a model reading it can tell the two x.md apart.
    lines = re.findall(r"^\[\d\] x\.md \(.*context: (\w+)", result.content, re.MULTILINE)
    assert sorted(lines) == ["postmortems", "runbooks"]


def test_the_structured_answer_has_the_designs_shape(indexed: KnowledgeStore) -> None:
    tool = KnowledgeSearchTool()
    Draft202012Validator.check_schema(tool.output_schema)
    validator = Draft202012Validator(tool.output_schema)
    result = tool.run({"query": "quokka deploy", "top_k": 3}, tool_context(indexed))
    answer = result.structured
    assert answer is not None
    validator.validate(answer)
    assert answer["query"] == "quokka deploy"
    assert answer["evidence"] in ("strong", "partial")
    assert answer["dropped"] == 0
    first = answer["results"][0]
    assert set(first) >= HIT_KEYS
    assert (first["source"], first["title"], first["url"]) == ("guides/deploy.md", "Deploy", URL)
    assert (first["context"], first["source_type"], first["format"]) == (
        "runbooks",
        "repo",
        "markdown",
    )
    assert "quokka deploy runs at noon" in first["snippet"]
    assert 0.0 <= first["score"] <= 1.0
    # The data is the text's: the same sources in the same order.
    shown = re.findall(r"^\[\d+\] (\S+) \(", result.content, re.MULTILINE)
    assert shown == [h["source"] for h in answer["results"]]

    none = tool.run({"query": "zebracorn"}, tool_context(indexed))
    assert none.content == "No relevant documents found for: zebracorn"
    assert none.structured == {
        "query": "zebracorn",
        "evidence": "none",
        "results": [],
        "dropped": 0,
    }
    bad = tool.run({"query": "quokka", "top_k": 1, "max_results": 2}, tool_context(indexed))
    assert bad.is_error
    assert bad.structured is None


def test_the_management_tool_reports_and_reindexes_its_scope_only(
    indexed: KnowledgeStore, bucket: Path
) -> None:
    from knowledge.agent_tools.manage_tool import KnowledgeManageTool

    plain = KnowledgeManageTool()
    assert plain.input_schema["properties"]["action"]["enum"] == ["status"]
    assert plain.input_schema["additionalProperties"] is False
    context = ToolContext(store=indexed, scope=RUNBOOKS)
    status = plain.run({"action": "status"}, context)
    assert not status.is_error, status.content
    assert status.content.startswith("Knowledge scope ops-bot/runbooks: READY")
    assert status.structured is not None
    assert (status.structured["context"], status.structured["document_count"]) == ("runbooks", 2)
    off = plain.run({"action": "reindex"}, context)
    assert off.is_error
    assert off.content.startswith("Invalid parameter: action: 'reindex' is not enabled")
    widened = plain.run({"action": "status", "agent": "hr-bot"}, context)
    assert widened.is_error
    assert widened.content.startswith("Invalid parameter: agent: ")
    assert plain.run({}, context).is_error

    write(bucket, "ops-bot/runbooks/new.md", "# New\n\nquokka drills")
    write(bucket, "hr-bot/payroll/new.md", "# New\n\nquokka pay")
    enabled = KnowledgeManageTool(
        reindex=lambda scope: index_source(indexed, scope, BucketFolderSource(bucket))
    )
    assert enabled.input_schema["properties"]["action"]["enum"] == ["status", "reindex"]
    done = enabled.run({"action": "reindex"}, context)
    assert not done.is_error, done.content
    assert done.content.startswith("Re-index of knowledge scope ops-bot/runbooks:")
    assert "indexed_documents 1" in done.content
    assert indexed.status(RUNBOOKS).document_count == 3
    assert indexed.status(PAYROLL).document_count == 1  # another scope: untouched


@pytest.fixture
def elsewhere(tmp_path: Path) -> Iterator[Path]:
    """A working folder with a ``.kb/local.db`` where ``make run`` writes it."""
    (tmp_path / ".kb").mkdir()
    (tmp_path / ".kb" / "local.db").write_bytes(b"")
    before = Path.cwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(before)


def test_open_store_refuses_an_index_file_that_is_not_there(elsewhere: Path) -> None:
    from knowledge.config import open_store

    missing = elsewhere / "typo" / "k.db"
    with pytest.raises(ConfigurationError) as refused:
        open_store(db_path=missing, embedder_name="hashing", environ={})
    message = str(refused.value)
    assert str(missing) in message
    assert "kb index" in message
    assert "create=True" in message
    assert not missing.parent.exists()  # nothing made on the way
    with pytest.raises(ConfigurationError) as default:
        open_store(environ={})  # .kb/knowledge.db: not what make run wrote
    assert str(elsewhere / ".kb" / "knowledge.db") in str(default.value)
    assert "db_path='.kb/local.db'" in str(default.value)
    made = elsewhere / "new" / "k.db"
    open_store(db_path=made, embedder_name="hashing", environ={}, create=True).close()
    assert made.exists()
    open_store(db_path=made, embedder_name="hashing", environ={}).close()  # it exists now
