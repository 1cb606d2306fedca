"""``kb mcp`` in a real subprocess, driven by the MCP SDK's own client over stdio."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp_stdio import run_session

from knowledge.core.scope import KnowledgeScope
from knowledge.local.cli import main as kb

pytestmark = pytest.mark.integration

RUNBOOK = "# Rolling back\n\n## Helm\n\nRun helm rollback checkout-api to the previous revision.\n"
OTHER_CONTEXT = "# Helm notes\n\nhelm charts live in the deploy repo\n"
SECRET = "# Payroll\n\nhelm salaries are secret to another agent\n"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """An embedded store with two contexts of ops-bot and one of another agent."""
    path = tmp_path / "k.db"
    for agent, context, name, text in (
        ("ops-bot", "runbooks", "rollback.md", RUNBOOK),
        ("ops-bot", "notes", "helm.md", OTHER_CONTEXT),
        ("hr-bot", "payroll", "salaries.md", SECRET),
    ):
        folder = tmp_path / agent / context
        folder.mkdir(parents=True)
        (folder / name).write_text(text, "utf-8")
        if context == "runbooks":  # a file no pattern selects: counted, not read
            (folder / "diagram.png").write_bytes(b"\x89PNG\r\n\x1a\n")
        argv = ["index", str(folder), "--agent", agent, "--context", context, "--db", str(path)]
        assert kb([*argv, "--embedder", "hashing"]) == 0
    return path


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


def test_tools_are_listed_with_the_seed_schema(db: Path) -> None:
    async def body(session: ClientSession) -> Any:
        return await session.list_tools()

    listed = run_session(db, ["--agent", "ops-bot", "--context", "runbooks"], body)
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == {"knowledge_search", "knowledge_status", "knowledge_documents"}
    schema = tools["knowledge_search"].input_schema
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
    assert schema["properties"]["origin_weights"]["additionalProperties"] is False
    assert schema["required"] == ["query"]
    assert tools["knowledge_status"].input_schema.get("properties", {}) == {}
    documents = tools["knowledge_documents"].input_schema
    assert set(documents["properties"]) == {"limit", "cursor"}
    assert documents["additionalProperties"] is False


def test_search_hits_no_hits_bad_arguments_and_status(db: Path) -> None:
    async def body(session: ClientSession) -> dict[str, Any]:
        return {
            "hit": await session.call_tool("knowledge_search", {"query": "helm rollback"}),
            "none": await session.call_tool("knowledge_search", {"query": "kubernetes quota"}),
            "blank": await session.call_tool("knowledge_search", {"query": "   "}),
            "too_many": await session.call_tool(
                "knowledge_search", {"query": "helm", "max_results": 1000}
            ),
            "status": await session.call_tool("knowledge_status", {}),
            "after": await session.call_tool("knowledge_search", {"query": "helm"}),
            "uploads": await session.call_tool(
                "knowledge_search", {"query": "helm rollback", "source_type": "upload"}
            ),
            "repos": await session.call_tool(
                "knowledge_search", {"query": "helm rollback", "source_type": "repo"}
            ),
            "format": await session.call_tool(
                "knowledge_search", {"query": "helm", "source_type": "markdown"}
            ),
        }

    out = run_session(db, ["--agent", "ops-bot", "--context", "runbooks"], body)
    assert not out["hit"].is_error
    hit = text_of(out["hit"])
    # Passed the default floor: at least partial evidence; the score is absolute.
    assert re.match(r'Found 1 result for "helm rollback" \(best evidence: (strong|partial)\):', hit)
    assert re.search(r"\[1\] rollback\.md \(score: [01]\.\d\d, chunk: ", hit)
    assert not out["none"].is_error
    assert text_of(out["none"]) == "No relevant documents found for: kubernetes quota"
    assert out["blank"].is_error
    assert "query" in text_of(out["blank"])
    assert out["too_many"].is_error
    assert "max_results" in text_of(out["too_many"])
    status = text_of(out["status"])
    assert status.startswith("Knowledge scope ops-bot/runbooks: READY")
    assert "documents: 1, chunks: 2" in status
    assert "1 file not read (no pattern selects them): .png 1" in status
    assert not out["after"].is_error  # the server survived the bad calls
    assert re.search(r"\[1\] rollback\.md \(score: [01]\.\d\d, chunk: ", text_of(out["uploads"]))
    assert "origin: upload)" in text_of(out["uploads"])
    assert text_of(out["repos"]) == "No relevant documents found for: helm rollback"
    assert out["format"].is_error
    assert text_of(out["format"]) == (
        "Invalid parameter: source_type: 'markdown' is not one of: upload, repo, manual, shared"
    )


def test_no_argument_can_choose_or_widen_the_scope(db: Path) -> None:
    attempts: list[dict[str, Any]] = [
        {"query": "helm", "agent": "hr-bot"},
        {"query": "helm", "context": "payroll"},
        {"query": "helm", "cross_context": True},
        {"query": "helm", "scope": {"agent": "hr-bot", "context": "payroll"}},
        {"query": "helm", "file_pattern": "../../hr-bot/payroll/*"},
        {"query": "helm", "file_pattern": "*"},
    ]

    async def body(session: ClientSession) -> list[Any]:
        return [await session.call_tool("knowledge_search", a) for a in attempts]

    results = run_session(db, ["--agent", "ops-bot", "--context", "runbooks"], body)
    for attempt, result in zip(attempts, results, strict=True):
        text = text_of(result)
        assert "salaries" not in text, (attempt, text)
        assert "helm.md" not in text, (attempt, text)
        if set(attempt) - {"query", "file_pattern"}:
            assert result.is_error, attempt  # unknown arguments are refused, not ignored


def test_cross_context_is_fixed_at_start_and_never_leaves_the_agent(db: Path) -> None:
    async def body(session: ClientSession) -> Any:
        return await session.call_tool("knowledge_search", {"query": "helm", "max_results": 10})

    result = run_session(
        db, ["--agent", "ops-bot", "--context", "runbooks", "--cross-context"], body
    )
    text = text_of(result)
    assert "rollback.md" in text
    assert "helm.md" in text
    assert "salaries" not in text


def test_backend_failure_is_a_tool_error_not_a_crash(db: Path, tmp_path: Path) -> None:
    async def body(session: ClientSession) -> list[Any]:
        return [
            await session.call_tool("knowledge_search", {"query": "helm"}),
            await session.call_tool("knowledge_status", {}),
        ]

    # a deployed API that is not there: every call fails, the server keeps answering
    search, status = run_session(
        db,
        ["--agent", "ops-bot", "--context", "runbooks", "--api-url", "http://127.0.0.1:9"],
        body,
    )
    assert search.is_error
    assert text_of(search).startswith("Failed to search knowledge:")
    assert status.is_error
    assert text_of(status).startswith("Failed to read the knowledge status:")


def test_documents_tool_lists_its_scope_only_and_refuses_a_foreign_cursor(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two documents in another agent's scope, and a cursor of that listing (from kb).
    folder = tmp_path / "hr-bot" / "reviews"
    folder.mkdir(parents=True)
    for name in ("a.md", "b.md"):
        (folder / name).write_text("# Review\n\nconfidential review\n", "utf-8")
    scope = ["--agent", "hr-bot", "--context", "reviews", "--db", str(db)]
    assert kb(["index", str(folder), *scope, "--embedder", "hashing"]) == 0
    capsys.readouterr()
    assert kb(["documents", *scope, "--embedder", "hashing", "--limit", "1", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [d["path"] for d in listed["documents"]] == ["a.md"]
    foreign = listed["next_cursor"]
    assert foreign

    async def body(session: ClientSession) -> dict[str, Any]:
        call = session.call_tool
        return {
            "all": await call("knowledge_documents", {}),
            "first": await call("knowledge_documents", {"limit": 1}),
            "zero": await call("knowledge_documents", {"limit": 0}),
            "agent": await call("knowledge_documents", {"agent": "hr-bot"}),
            "foreign": await call("knowledge_documents", {"cursor": foreign}),
        }

    out = run_session(db, ["--agent", "ops-bot", "--context", "runbooks"], body)
    listing = text_of(out["all"])
    assert not out["all"].is_error
    assert listing.startswith("Documents of knowledge scope ops-bot/runbooks:")
    assert "rollback.md  [upload, markdown, " in listing
    assert ", 2 chunks, " in listing
    for other in ("helm.md", "salaries.md", "a.md", "b.md", "--cursor"):
        assert other not in listing
    assert not out["first"].is_error  # one document: no next page
    assert "--cursor" not in text_of(out["first"])
    assert out["zero"].is_error
    assert "limit" in text_of(out["zero"])
    assert out["agent"].is_error
    assert "agent" in text_of(out["agent"])
    assert out["foreign"].is_error
    assert "cursor" in text_of(out["foreign"])
    assert "a.md" not in text_of(out["foreign"])
    assert "b.md" not in text_of(out["foreign"])


def test_a_model_pages_through_the_documents_with_the_cursor_it_is_given(
    db: Path, tmp_path: Path
) -> None:
    # The page names the tool's own argument and the value alone, so a model copies a
    # cursor, not a command-line option ("--cursor ..."), into its next call.
    folder = tmp_path / "ops-bot" / "runbooks"
    (folder / "scale.md").write_text("# Scaling\n\nscale the deployment up\n", "utf-8")
    scope = ["--agent", "ops-bot", "--context", "runbooks", "--db", str(db)]
    assert kb(["index", str(folder), *scope, "--embedder", "hashing"]) == 0

    async def body(session: ClientSession) -> list[str]:
        pages = [text_of(await session.call_tool("knowledge_documents", {"limit": 1}))]
        while (more := re.search(r'with cursor "([^"]+)"', pages[-1])) is not None:
            arguments = {"limit": 1, "cursor": more.group(1)}
            pages.append(text_of(await session.call_tool("knowledge_documents", arguments)))
            assert len(pages) <= 3, pages
        return pages

    pages = run_session(db, ["--agent", "ops-bot", "--context", "runbooks"], body)
    assert len(pages) == 2, pages
    assert "rollback.md  [upload, markdown, " in pages[0]
    assert "scale.md  [upload, markdown, " in pages[1]
    assert "--cursor" not in "".join(pages)


def test_an_index_that_is_not_there_stops_the_server_with_a_reason(tmp_path: Path) -> None:
    # A relative --db resolved from the MCP client's own folder, or a typo, would make an
    # empty index and tell the model "No relevant documents found" for ever: refuse.
    missing = tmp_path / "typo" / "local.db"
    scope = ["--agent", "ops-bot", "--context", "x"]
    done = subprocess.run(
        [sys.executable, "-m", "knowledge.local.cli", "mcp", *scope, "--db", str(missing)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert str(missing) in done.stderr
    assert "kb index" in done.stderr
    assert done.stdout == ""  # nothing but the protocol ever goes to stdout
    assert not missing.exists()
    assert not missing.parent.exists()


def test_the_reindex_tool_is_opt_in_and_reindexes_only_its_scope(tmp_path: Path) -> None:
    from knowledge.config import open_store
    from knowledge.local.server import LocalServer

    root = tmp_path / "bucket"
    for scope in ("ops-bot/runbooks", "ops-bot/other"):
        (root / scope).mkdir(parents=True)
        (root / scope / "a.md").write_text("# A\n\nhelm rollback\n", "utf-8")
    with closing(
        open_store(db_path=tmp_path / "s.db", embedder_name="hashing", create=True)
    ) as store:
        server = LocalServer(root, store, port=0, poll_interval=30.0)
        server.start()
        try:
            (root / "ops-bot/runbooks/b.md").write_text("# B\n\nnew\n", "utf-8")

            async def body(session: ClientSession) -> Any:
                listed = await session.list_tools()
                refused = await session.call_tool("knowledge_reindex", {"agent": "x"})
                done = await session.call_tool("knowledge_reindex", {})
                return listed, refused, done

            extra = ["--agent", "ops-bot", "--context", "runbooks", "--api-url", server.url]
            listed, refused, done = run_session(
                tmp_path / "s.db", [*extra, "--allow-reindex"], body
            )
            assert "knowledge_reindex" in {tool.name for tool in listed.tools}
            assert refused.is_error
            assert "takes no arguments" in text_of(refused)
            assert not done.is_error, text_of(done)
            assert text_of(done).startswith("Re-index of knowledge scope ops-bot/runbooks:")
            assert "indexed_documents 2," in text_of(done)  # a.md and b.md, this scope only
            assert store.get_document(KnowledgeScope("ops-bot", "runbooks"), "b.md") is not None
        finally:
            server.stop()
    assert kb(["mcp", "--agent", "a", "--context", "c", "--allow-reindex"]) == 2


def test_a_granted_shared_library_is_searched_in_the_same_call(db: Path, tmp_path: Path) -> None:
    folder = tmp_path / "_shared" / "playbooks"
    folder.mkdir(parents=True)
    (folder / "helm.md").write_text("# Helm playbook\n\nhelm rollback, step by step\n", "utf-8")
    argv = ["index", str(folder), "--agent", "_shared", "--context", "playbooks"]
    assert kb([*argv, "--db", str(db), "--embedder", "hashing"]) == 0

    async def body(session: ClientSession) -> list[str]:
        texts = []
        for arguments in (
            {"query": "helm rollback"},
            {"query": "helm rollback", "include_shared": False},
            {"query": "helm rollback", "include_shared": "yes"},
        ):
            texts.append(text_of(await session.call_tool("knowledge_search", arguments)))
        return texts

    scope = ["--agent", "ops-bot", "--context", "runbooks"]
    granted, alone, bad = run_session(db, [*scope, "--shared-library", "playbooks"], body)
    assert "helm.md (score:" in granted
    assert "origin: shared, library: playbooks" in granted
    assert "rollback.md" in granted
    assert "library:" not in alone
    assert "rollback.md" in alone
    assert bad == "Invalid parameter: include_shared: must be true or false"

    async def ask(session: ClientSession) -> str:
        arguments = {"query": "helm rollback", "include_shared": True}
        return text_of(await session.call_tool("knowledge_search", arguments))

    assert run_session(db, scope, ask) == (
        "Invalid parameter: include_shared: no shared library is granted to this agent"
    )


def test_the_ranking_controls_the_model_may_pass(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's default weights (a local store: ``KB_*``, as ``kb search``), a model's
    override within the bounds, one result per document, the trace; a bad weight and a
    field of the host's are refused, and the scope holds whatever the weights."""
    monkeypatch.setenv("KB_ORIGIN_WEIGHTS", "upload=0.5")

    async def body(session: ClientSession) -> dict[str, Any]:
        call = session.call_tool
        return {
            "host": await call("knowledge_search", {"query": "helm", "explain": True}),
            "model": await call(
                "knowledge_search",
                {"query": "helm", "explain": True, "origin_weights": {"upload": 2}},
            ),
            "grouped": await call("knowledge_search", {"query": "helm", "group_by": "document"}),
            "bad": await call("knowledge_search", {"query": "helm", "lesson_weight": 11}),
            "extra": await call("knowledge_search", {"query": "helm", "extra_lessons": 5}),
        }

    scope = ["--agent", "ops-bot", "--context", "runbooks", "--cross-context"]
    out = run_session(db, scope, body)
    host = text_of(out["host"])
    assert "--- explain ---" in host
    assert "weights: upload=0.5 repo=1 manual=1 shared=1" in host
    model = text_of(out["model"])
    assert "weights: upload=2 repo=1 manual=1 shared=1" in model
    assert "salaries" not in model  # another agent's, never
    assert "salaries" not in host
    grouped = text_of(out["grouped"])
    assert re.match(r'Found 2 results for "helm" \(best evidence: (strong|partial)\):', grouped)
    assert out["bad"].is_error
    assert text_of(out["bad"]).startswith("Invalid parameter: lesson_weight: must be between")
    assert out["extra"].is_error
    assert "extra_lessons: is not a known property" in text_of(out["extra"])


def test_search_answers_structured_content_that_the_sdk_client_checks(db: Path) -> None:
    """The answer as data beside the text: the tool declares ``outputSchema`` and the SDK
    client checks every structured answer against it (``call_tool`` raises otherwise).
    Across contexts each hit names its own (two folders given to ``kb index``); the
    design's ``top_k`` is ``max_results``; an error carries no structured content."""

    async def body(session: ClientSession) -> dict[str, Any]:
        listed = await session.list_tools()
        call = session.call_tool
        return {
            "schema": {t.name: t.output_schema for t in listed.tools},
            "hits": await call("knowledge_search", {"query": "helm", "top_k": 5}),
            "one": await call("knowledge_search", {"query": "helm", "top_k": 1}),
            "none": await call("knowledge_search", {"query": "kubernetes quota"}),
            "both": await call("knowledge_search", {"query": "helm", "top_k": 1, "max_results": 2}),
            "status": await call("knowledge_status", {}),
        }

    scope = ["--agent", "ops-bot", "--context", "runbooks", "--cross-context"]
    out = run_session(db, scope, body)
    schema = out["schema"]["knowledge_search"]
    assert schema is not None
    assert {"query", "evidence", "results"} <= set(schema["required"])
    hits = out["hits"]
    assert not hits.is_error, text_of(hits)
    answer = hits.structured_content
    assert answer["query"] == "helm"
    assert answer["evidence"] in ("strong", "partial")
    found = {(h["source"], h["agent"], h["context"]) for h in answer["results"]}
    assert found == {("rollback.md", "ops-bot", "runbooks"), ("helm.md", "ops-bot", "notes")}
    for hit in answer["results"]:
        assert {"score", "source", "title", "snippet", "url", "source_type"} <= set(hit)
        assert hit["source_type"] == "upload"
        assert "salaries" not in hit["snippet"]
    titles = {h["source"]: h["title"] for h in answer["results"]}
    assert titles == {"rollback.md": "Rolling back", "helm.md": "Helm notes"}
    assert "context: notes" in text_of(hits)
    assert len(out["one"].structured_content["results"]) == 1
    assert out["none"].structured_content == {
        "query": "kubernetes quota",
        "evidence": "none",
        "results": [],
        "dropped": 0,
    }
    assert out["both"].is_error
    assert out["both"].structured_content is None
    assert text_of(out["both"]).startswith("Invalid parameter: top_k: ")
    assert out["status"].structured_content["document_count"] == 1
