"""``kb context`` and ``kb search --group-by document`` on a local embedded store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knowledge.agent_tools.prompt_context import PREAMBLE
from knowledge.agent_tools.results import estimate_tokens
from knowledge.local.cli import main

STEPS = "".join(
    f"## Step {n}\n\nRun helm rollback for service {n}. Then watch the pods. "
    + "Wait for the readiness probes before the next one. " * 4
    + "\n\n"
    for n in range(4)
)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "rollback.md").write_text(f"# Rollback\n\n{STEPS}", "utf-8")
    (folder / "helm.md").write_text("# Helm\n\nhelm rollback takes a revision.\n", "utf-8")
    path = tmp_path / "k.db"
    argv = ["index", str(folder), "--agent", "ops", "--context", "rb", "--db", str(path)]
    assert main(argv) == 0
    return path


def test_kb_context_prints_the_block_within_the_budget(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scope = ["--agent", "ops", "--context", "rb", "--db", str(db)]
    capsys.readouterr()
    assert main(["context", "helm rollback", *scope, "--max-tokens", "120", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["tokens"]["used"] == estimate_tokens(body["context"]) <= 120
    assert body["dropped"]
    assert main(["context", "helm rollback", *scope, "--max-tokens", "90"]) == 0
    printed = capsys.readouterr()
    assert estimate_tokens(printed.out.rstrip("\n")) <= 90
    assert printed.out.startswith(PREAMBLE + "\n---\n[1] ")  # the block, as the route's
    assert "of 90 tokens by the estimate" in printed.err
    assert main(["context", "helm", *scope, "--max-tokens", "0"]) == 2
    assert "max_tokens" in capsys.readouterr().err


def test_kb_search_group_by_document(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scope = ["--agent", "ops", "--context", "rb", "--db", str(db)]
    capsys.readouterr()
    assert main(["search", "helm", *scope, "--group-by", "document", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert {r["document_path"]: r["matching_chunks"] for r in results} == {
        "rollback.md": 4,
        "helm.md": 1,
    }


def test_kb_context_explain_lists_the_budgets_drops(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from knowledge.ranking import explain

    scope = ["--agent", "ops", "--context", "rb", "--db", str(db)]
    capsys.readouterr()
    argv = ["context", "helm rollback", *scope, "--max-tokens", "120", "--explain"]
    assert main([*argv, "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    trace = body["explain"]
    assert trace["budget"]["dropped"] == body["dropped"] != []
    for index, chunk in enumerate(trace["chunks"]):
        assert explain.recompute(chunk, trace, index) == pytest.approx(
            chunk["rank_score"], abs=2e-6
        )
        assert explain.recompute_relevance(trace, index) == pytest.approx(chunk["score"], abs=2e-6)
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert printed.out.startswith(PREAMBLE)  # stdout stays the block
    assert "--- explain ---" not in printed.out
    assert "--- explain ---" in printed.err
    assert f"budget: {body['tokens']['used']} of 120 tokens" in printed.err
    assert f"dropped {body['dropped'][0]['document_path']}#" in printed.err
