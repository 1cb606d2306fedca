"""knowledge.local.cli: `kb index/search/status` end to end on a temporary folder and store."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from knowledge.config import STORE_BUILDERS, StoreSettings, register_store_builder
from knowledge.core.model import DEFAULT_MIN_SCORE, IndexOptions
from knowledge.core.scope import KnowledgeScope
from knowledge.core.source import SourceDocument
from knowledge.local.cli import ProgressBar, build_parser, main
from knowledge.local.progress import ListedSource
from knowledge.ranking.analysis import KOREAN_MORPHEMES
from knowledge.stores.protocol import KnowledgeStore

ROLLBACK = """# Rolling back a deployment

## Helm

Run helm rollback checkout-api to return to the previous revision.

## Argo CD

Disable auto-sync before you roll back, or the broken release comes back.
"""

KOREAN = """# 배포 실패 대응

## 배포 실패 시 롤백 절차

이전 리비전으로 롤백하고 자동 동기화를 끈다.
"""


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "rollback.md").write_text(ROLLBACK, "utf-8")
    (folder / "sub" / "failover.txt").write_text(
        "Promote the read replica when the primary database is lost.\n", "utf-8"
    )
    (folder / "deploy-failure.ko.md").write_text(KOREAN, "utf-8")
    (folder / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    return folder


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store" / "k.db"


def scope_args(db: Path) -> list[str]:
    return ["--agent", "ops-bot", "--context", "runbooks", "--db", str(db)]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def index(docs: Path, db: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    code, out, err = run(["index", str(docs), *scope_args(db), *extra], capsys)
    assert code == 0, err
    return out


# --- index ------------------------------------------------------------------------------


def test_index_prints_a_summary(docs: Path, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = index(docs, db, capsys)
    first = out.splitlines()[0]
    assert first.startswith("ops-bot/runbooks: indexed 3 documents (")
    assert "skipped 0 (0 unchanged), deleted 0, errors 0 in " in first
    assert db.exists()

    again = index(docs, db, capsys)
    assert "indexed 0 documents (0 chunks), skipped 3 (3 unchanged)" in again
    assert "  skipped" not in again  # unchanged files are only counted


def test_index_json_and_patterns(docs: Path, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["index", str(docs), *scope_args(db), "--pattern", "*.txt", "--json"], capsys
    )
    assert code == 0
    body = json.loads(out)
    assert (body["agent"], body["context"], body["indexed_documents"]) == (
        "ops-bot",
        "runbooks",
        1,
    )


def test_index_reindex_flag(docs: Path, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index(docs, db, capsys)
    out = index(docs, db, capsys, "--reindex")
    assert "indexed 3 documents" in out  # everything again, not "unchanged"


def test_index_removes_deleted_files(
    docs: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index(docs, db, capsys)
    (docs / "rollback.md").unlink()
    out = index(docs, db, capsys)
    assert "deleted 1" in out


def test_index_file_errors_exit_1_with_reasons(
    docs: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (docs / "rollback.md.metadata.json").write_text("{not json", "utf-8")
    code, out, err = run(["index", str(docs), *scope_args(db)], capsys)
    assert code == 1
    assert "errors 1" in out
    assert "  error   rollback.md.metadata.json: invalid metadata sidecar" in out
    assert "Traceback" not in err


def test_index_missing_folder(tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["index", str(tmp_path / "nope"), *scope_args(db)], capsys)
    assert code == 2
    assert out == ""
    assert err.startswith("kb: error: DIR: ")
    assert "is not a folder" in err
    assert len(err.strip().splitlines()) == 1


# --- search -----------------------------------------------------------------------------


def test_search_human_output(docs: Path, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index(docs, db, capsys)
    code, out, _ = run(["search", "helm rollback", *scope_args(db), "-k", "2"], capsys)
    assert code == 0
    lines = out.splitlines()
    code, out, _ = run(["search", "helm rollback", *scope_args(db), "-k", "2", "--json"], capsys)
    body = json.loads(out)
    count, best = len(body["results"]), body["results"][0]
    noun = "result" if count == 1 else "results"
    assert body["evidence"] in ("strong", "partial")  # on topic: above the default floor
    assert (
        lines[0] == f'Found {count} {noun} for "helm rollback" (best evidence: {body["evidence"]}):'
    )
    assert lines[1] == "---"
    # The absolute score, two decimals.
    assert lines[2].startswith(f"[1] rollback.md (score: {best['score']:.2f}, chunk: ")


def test_search_json_is_the_api_response(
    docs: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index(docs, db, capsys)
    code, out, _ = run(
        ["search", "롤백 절차", *scope_args(db), "--mode", "keyword", "--json"], capsys
    )
    assert code == 0
    body = json.loads(out)
    assert set(body) == {"query", "mode", "min_score", "evidence", "results", "took_ms"}
    assert (body["query"], body["mode"]) == ("롤백 절차", "keyword")
    assert body["min_score"] == DEFAULT_MIN_SCORE
    best = max(body["results"], key=lambda r: r["score"])
    assert body["evidence"] == best["strength"] != "weak"
    assert body["results"][0]["document_path"] == "deploy-failure.ko.md"
    assert "롤백" in body["results"][0]["content"]
    assert 0.0 <= body["results"][0]["score"] <= 1.0


def test_search_filters(docs: Path, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index(docs, db, capsys)
    code, out, _ = run(
        ["search", "primary database", *scope_args(db), "--pattern", "*.md", "--json"], capsys
    )
    assert code == 0
    assert all(r["document_path"].endswith(".md") for r in json.loads(out)["results"])


def test_search_filter_flag(docs: Path, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index(docs, db, capsys)
    # Every candidate, the weak ones too: the filter is what this is about.
    argv = ["search", "helm rollback database", *scope_args(db), "--mode", "keyword", "--json"]
    argv += ["--min-score", "0"]
    code, out, _ = run(argv, capsys)
    assert code == 0
    assert "rollback.md" in {r["document_path"] for r in json.loads(out)["results"]}
    only = '{"not": {"field": "document_path", "op": "eq", "value": "rollback.md"}}'
    code, out, _ = run([*argv, "--filter", only], capsys)
    assert code == 0
    found = {r["document_path"] for r in json.loads(out)["results"]}
    assert found
    assert "rollback.md" not in found


def test_search_no_results(docs: Path, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index(docs, db, capsys)
    code, out, _ = run(["search", "zebra", *scope_args(db), "--mode", "keyword"], capsys)
    assert code == 0
    assert out == "No relevant documents found for: zebra\n"


def test_search_is_scoped(docs: Path, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index(docs, db, capsys)
    argv = ["search", "helm", "--agent", "ops-bot", "--context", "other", "--db", str(db)]
    code, out, _ = run([*argv, "--mode", "keyword"], capsys)
    assert (code, out) == (0, "No relevant documents found for: helm\n")
    code, out, _ = run([*argv, "--mode", "keyword", "--cross-context", "--json"], capsys)
    assert [r["document_path"] for r in json.loads(out)["results"]] == ["rollback.md"]


def test_search_pages_with_offset_and_the_per_document_cap(
    docs: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index(docs, db, capsys)
    argv = ["search", "rollback database helm", *scope_args(db), "--mode", "keyword", "--json"]
    argv += ["--min-score", "0"]  # every candidate, the weak ones too: paging is the subject

    def found(*extra: str) -> list[tuple[str, int]]:
        code, out, _ = run([*argv, *extra], capsys)
        assert code == 0
        return [(r["document_path"], r["chunk_index"]) for r in json.loads(out)["results"]]

    both = found("-k", "2")
    assert len(both) == 2
    assert found("-k", "1") == both[:1]
    assert found("-k", "1", "--offset", "1") == both[1:]
    capped = found("-k", "10", "--max-chunks-per-document", "1")
    assert len({path for path, _ in capped}) == len(capped)


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--offset", "-1"], "kb: error: offset: must be"),
        (["--max-chunks-per-document", "0"], "kb: error: max_chunks_per_document: must be"),
        (["--min-score", "1.5"], "kb: error: min_score: must be between 0 and 1"),
        (["--meta", "team"], "kb: error: metadata: 'team' is not of the form KEY=VALUE"),
        (["--filter", "{nope"], "kb: error: filter: is not valid JSON"),
        (
            ["--filter", '{"or": [{"field": "a", "op": "in", "value": "x"}]}'],
            "kb: error: filter.or[0].value: must be a non-empty list for 'in'",
        ),
    ],
)
def test_search_bad_input_exit_2(
    db: Path, capsys: pytest.CaptureFixture[str], extra: list[str], fragment: str
) -> None:
    code, out, err = run(["search", "x", *scope_args(db), *extra], capsys)
    assert (code, out) == (2, "")
    assert err.startswith(fragment)


def test_blank_query_exit_2(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["search", "  ", *scope_args(db)], capsys)
    assert code == 2
    assert err == "kb: error: query: must be a non-blank string\n"


def test_invalid_scope_exit_2(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["status", "--agent", "a b", "--context", "c", "--db", str(db)], capsys)
    assert code == 2
    assert err.startswith("kb: error: agent: 'a b' must be 1-64 characters")


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "helm"],
        ["status"],
        ["documents"],
        ["search", "helm", "--rerank-model", "amazon.rerank-v1:0"],
    ],
    ids=["search", "status", "documents", "search-rerank"],
)
def test_reading_an_index_file_that_does_not_exist_is_an_error_not_a_new_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """A typo in --db (or the default file, while make run wrote .kb/local.db) used to
    create an empty index and answer "no results" or EMPTY with exit 0."""
    typo = tmp_path / "store" / "knowldge.db"
    code, out, err = run([*argv, *scope_args(typo)], capsys)
    assert (code, out) == (2, "")
    assert err.startswith(f"kb: error: db: no index file at {typo}")
    assert "--db" in err
    assert not typo.exists()
    assert not typo.parent.exists()


def test_mismatched_embedder_is_refused(
    docs: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index(docs, db, capsys)  # hashing, 256 dimensions
    code, out, err = run(["search", "helm", *scope_args(db), "--embedder", "openai"], capsys)
    assert code == 2
    assert out == ""
    assert err.startswith("kb: error: index ")
    assert "was built with hashing (256 dims); refusing openai" in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_unknown_embedder_exit_2(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["status", *scope_args(db), "--embedder", "word2vec"], capsys)
    assert code == 2
    assert "unknown embedder 'word2vec'" in err


def test_embedder_from_environment(
    docs: Path, db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    index(docs, db, capsys)
    monkeypatch.setenv("KB_EMBEDDER", "openai")
    code, _, err = run(["status", *scope_args(db)], capsys)
    assert code == 2
    assert "refusing openai" in err


# --- status -----------------------------------------------------------------------------


def test_status(docs: Path, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["index", str(docs), "--agent", "ops-bot", "--context", "faq", "--db", str(db)]
    code, _, _ = run(argv, capsys)
    assert code == 0  # the file exists; the scope asked about below has nothing yet
    code, out, _ = run(["status", *scope_args(db)], capsys)
    assert code == 0
    assert "state:        EMPTY" in out
    assert "last indexed: never" in out

    index(docs, db, capsys)
    code, out, _ = run(["status", *scope_args(db), "--json"], capsys)
    body = json.loads(out)
    assert (body["agent"], body["context"], body["state"], body["document_count"]) == (
        "ops-bot",
        "runbooks",
        "READY",
        3,
    )
    assert body["chunk_count"] >= 3
    assert body["last_indexed_at"] is not None
    assert body["problems"] == []
    # Every chunk of a first index was sent to the embedder.
    assert (body["embedded_chunks"], body["reused_chunks"]) == (body["chunk_count"], 0)
    code, out, _ = run(["status", *scope_args(db)], capsys)
    assert f"vectors:      {body['chunk_count']} embedded, 0 reused" in out


def test_status_lists_the_problems(
    docs: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (docs / "old.doc").write_bytes(b"\xd0\xcf\x11\xe0 legacy")
    (docs / "locked.docx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600))
    index(docs, db, capsys)
    code, out, _ = run(["status", *scope_args(db)], capsys)
    assert code == 0
    lines = out.splitlines()
    assert "problems:     2" in lines
    assert "  old.doc: unsupported format: legacy Word .doc; convert to .docx" in lines
    assert any(line.startswith("  locked.docx: corrupt file: ") for line in lines)
    code, out, _ = run(["status", *scope_args(db), "--json"], capsys)
    assert [p["document_path"] for p in json.loads(out)["problems"]] == ["old.doc", "locked.docx"]


def test_db_from_environment(
    docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "env.db"
    monkeypatch.setenv("KB_DB", str(db))
    code, _, _ = run(["index", str(docs), "--agent", "a", "--context", "c"], capsys)
    assert code == 0
    assert db.exists()


# --- errors -----------------------------------------------------------------------------


@pytest.fixture
def broken_store_kind() -> Iterator[str]:
    def build(settings: StoreSettings) -> KnowledgeStore:
        raise RuntimeError("wires crossed")

    register_store_builder("broken-test", build)
    yield "broken-test"
    del STORE_BUILDERS["broken-test"]


def test_unexpected_error_is_one_line(
    db: Path, capsys: pytest.CaptureFixture[str], broken_store_kind: str
) -> None:
    code, _, err = run(["status", *scope_args(db), "--store", broken_store_kind], capsys)
    assert code == 1
    assert err == (
        "kb: error: unexpected RuntimeError: wires crossed (run with --debug for the traceback)\n"
    )


def test_debug_shows_the_exception(db: Path, broken_store_kind: str) -> None:
    with pytest.raises(RuntimeError, match="wires crossed"):
        main(["status", *scope_args(db), "--store", broken_store_kind, "--debug"])


def test_unknown_store_kind(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["status", *scope_args(db), "--store", "cassandra"], capsys)
    assert code == 2
    assert "unknown store kind 'cassandra'" in err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["search", "x", "--agent", "a"])  # --context missing
    assert info.value.code == 2
    with pytest.raises(SystemExit):
        main(["search", "x", "--agent", "a", "--context", "c", "-k", "0"])
    assert "must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("command", "option", "value", "expected"),
    [
        ("serve", "--poll-interval", "nan", "must be a positive number of seconds"),
        ("serve", "--poll-interval", "inf", "must be a positive number of seconds"),
        ("serve", "--poll-interval", "0", "must be a positive number of seconds"),
        ("serve", "--poll-interval", "-1", "must be a positive number of seconds"),
        ("serve", "--port", "99999", "must be from 0 to 65535"),
        ("serve", "--port", "-1", "must be from 0 to 65535"),
        ("mcp", "--port", "99999", "must be from 0 to 65535"),
        ("mcp", "--port", "65536", "must be from 0 to 65535"),
    ],
)
def test_a_bad_port_or_poll_interval_is_a_usage_error_naming_it(
    command: str,
    option: str,
    value: str,
    expected: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Refused while the arguments are read, before anything starts (a NaN poll interval
    used to start a watcher that polled without pause; 99999 an OverflowError)."""
    argv = (
        ["serve", str(tmp_path / "no-such-folder")]
        if command == "serve"
        else ["mcp", *scope_args(tmp_path / "k.db"), "--transport", "http"]
    )
    with pytest.raises(SystemExit) as info:
        main([*argv, "--db", str(tmp_path / "k.db"), option, value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: {expected}, got {value}" in err
    assert "Traceback" not in err


def test_serve_missing_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["serve", str(tmp_path / "nope"), "--db", str(tmp_path / "k.db")], capsys)
    assert code == 2
    assert "does not exist" in err


def test_parser_knows_every_command() -> None:
    parser = build_parser()
    for argv in (
        ["index", "d", "--agent", "a", "--context", "c", "--reindex"],
        ["search", "q", "--agent", "a", "--context", "c", "--mode", "vector", "--cross-context"],
        ["status", "--agent", "a", "--context", "c", "--json"],
        ["serve", "root", "--host", "127.0.0.1", "--port", "0", "--poll-interval", "0.5"],
    ):
        assert parser.parse_args(argv).command == argv[0]


# --- progress -----------------------------------------------------------------------------


def test_progress_bar_draws_on_a_terminal() -> None:
    stream = io.StringIO()
    bar = ProgressBar(2, stream, enabled=True)
    bar.advance("a.md")
    bar.advance("b.md")
    bar.finish()
    text = stream.getvalue()
    assert "\rindexing [##########..........] 1/2 a.md" in text
    assert "\rindexing [####################] 2/2 b.md" in text
    assert text.endswith("\r")  # cleared for the summary
    assert bar.done == 2


def test_progress_bar_silent_when_disabled() -> None:
    stream = io.StringIO()
    bar = ProgressBar(2, stream, enabled=False)
    bar.advance("a.md")
    bar.finish()
    assert stream.getvalue() == ""
    assert bar.done == 1


def test_listed_source_counts_each_document_once() -> None:
    seen: list[str] = []
    docs = [SourceDocument(path=p, size=1, read=lambda: b"x") for p in ("a.md", "b.md")]
    source = ListedSource(docs, seen.append)
    listed = list(source.documents(KnowledgeScope("a", "c"), IndexOptions()))
    assert seen == []  # listing reads nothing
    assert [d.read() for d in listed] == [b"x", b"x"]
    listed[0].read()
    assert seen == ["a.md", "b.md"]


def test_search_reranks_with_a_configured_model(
    docs: Path, db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--rerank-model`` (or ``KB_RERANK_MODEL``) reranks a local search through Bedrock
    (here a fake ``Rerank`` endpoint on loopback, reached through boto3's own
    ``AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME``)."""
    from fake_rerank import fake_rerank_server

    index(docs, db, capsys)
    for name, value in {
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "secret-example",
        "AWS_DEFAULT_REGION": "us-west-2",
        "KB_RERANK_TOP_N": "2",
    }.items():
        monkeypatch.setenv(name, value)
    with fake_rerank_server() as fake:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME", fake.url)
        code, out, _ = run(
            [
                *("search", "promote replica", *scope_args(db), "--mode", "keyword", "--json"),
                *("--rerank-model", "amazon.rerank-v1:0"),
            ],
            capsys,
        )
    assert code == 0
    assert fake.problems == []
    (sent,) = fake.requests
    assert sent["queries"][0]["textQuery"]["text"] == "promote replica"
    body = json.loads(out)
    assert body["rerank"]["reranked"] is True
    assert body["rerank"]["candidates"] == len(sent["sources"]) <= 2
    assert body["results"][0]["document_path"] == "sub/failover.txt"
    assert body["results"][0]["rerank_score"] == 1.0  # both words found (the fake's score)


def test_a_bad_rerank_top_n_is_named(
    docs: Path, db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    index(docs, db, capsys)
    monkeypatch.setenv("KB_RERANK_TOP_N", "500")
    code, _, err = run(
        ["search", "x", *scope_args(db), "--rerank-model", "amazon.rerank-v1:0"], capsys
    )
    assert code != 0
    assert "KB_RERANK_TOP_N" in err


@pytest.mark.parametrize(
    "older",
    [
        "english-snowball-v2",  # Hangul as bigrams
        # No title and heading terms (analysis 4 added them, knowledge.ranking.headings).
        "english-snowball-mecab-ko-v3"
        if KOREAN_MORPHEMES
        else "english-snowball-hangul-bigrams-v3",
    ],
)
def test_serve_moves_an_index_of_an_older_analysis_aside_and_builds_a_new_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], older: str
) -> None:
    import sqlite3

    from knowledge.core.errors import AnalysisMismatchError
    from knowledge.local import cli_open

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nrollback the deployment\n", encoding="utf-8")
    db = tmp_path / "k.db"
    index(docs, db, capsys)
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'analysis'", (older,))
    args = build_parser().parse_args(["serve", str(tmp_path), "--db", str(db)])
    with pytest.raises(AnalysisMismatchError):  # what any other command says
        cli_open.open_cli_store(args).close()

    err = io.StringIO()
    with closing(cli_open.open_served_store(args, err)) as store:
        assert store.list_scopes() == []  # a new, empty index: the server fills it
    assert "moved it to" in err.getvalue()
    assert str(tmp_path / "k.db.old") in err.getvalue()
    with closing(sqlite3.connect(tmp_path / "k.db.old")) as conn:
        (recorded,) = conn.execute("SELECT value FROM meta WHERE key = 'analysis'").fetchone()
    assert recorded == older  # the old file, kept as it was


def test_serve_write_and_shared_flags_and_their_refusals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(["serve", str(tmp_path)])
    assert (args.allow_writes, args.shared_grant) == (False, None)  # off unless asked
    args = build_parser().parse_args(
        ["serve", str(tmp_path), "--allow-writes", "--shared-grant", "ops-bot=playbooks"]
    )
    assert (args.allow_writes, args.shared_grant) == (True, ["ops-bot=playbooks"])
    root = tmp_path / "root"
    root.mkdir()
    db = ["--db", str(tmp_path / "k.db"), "--embedder", "hashing"]
    assert main(["serve", str(root), *db, "--shared-grant", "_shared=x"]) == 2
    assert "cannot be granted" in capsys.readouterr().err
    assert main(["put", str(root), "--agent", "a", "--context", "c"]) == 2  # no --api-url
    assert "give --api-url" in capsys.readouterr().err


def test_search_explain_and_weights(
    docs: Path, db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from knowledge.ranking import explain

    index(docs, db, capsys)
    argv = ["search", "롤백 절차", *scope_args(db), "--mode", "keyword"]
    code, out, _ = run([*argv, "--json"], capsys)
    plain = json.loads(out)
    code, out, _ = run([*argv, "--json", "--explain", "--origin-weight", "upload=0.5"], capsys)
    assert code == 0
    body = json.loads(out)
    assert body["explain"]["searches"][0]["query"]["terms"] == ["롤백", "절차"]
    assert [r["rank_score"] for r in body["results"]] == [
        pytest.approx(r["rank_score"] * 0.5, abs=2e-6) for r in plain["results"]
    ]
    # A weight moves the ranking, not the absolute relevance.
    assert [r["score"] for r in body["results"]] == [r["score"] for r in plain["results"]]
    for i, result in enumerate(body["results"]):
        assert explain.recompute(result, body["explain"], i) == pytest.approx(
            result["rank_score"], abs=2e-6
        )
        assert explain.recompute_relevance(body["explain"], i) == pytest.approx(
            result["score"], abs=2e-6
        )
    # The deployment's weights for a local search come from the environment.
    monkeypatch.setenv("KB_ORIGIN_WEIGHTS", "upload=0.5")
    code, out, _ = run([*argv, "--explain"], capsys)
    assert code == 0
    assert "--- explain ---" in out
    assert "terms: 롤백, 절차" in out
    assert "upload=0.5" in out
    code, _, err = run([*argv, "--origin-weight", "vault=2"], capsys)
    assert code == 2
    assert "origin_weights" in err


def test_mcp_shared_library_is_a_local_grant_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scope = ["--agent", "ops-bot", "--context", "runbooks"]
    args = build_parser().parse_args(["mcp", *scope, "--shared-library", "playbooks"])
    assert args.shared_library == ["playbooks"]
    assert build_parser().parse_args(["mcp", *scope]).shared_library is None
    remote = ["mcp", *scope, "--api-url", "http://127.0.0.1:9", "--shared-library", "playbooks"]
    assert main(remote) == 2
    assert "the server's grant applies" in capsys.readouterr().err
    assert main(["mcp", *scope_args(tmp_path / "k.db"), "--shared-library", "../x"]) == 2
    assert "context" in capsys.readouterr().err


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "kb.example.internal"])
def test_serve_refuses_writes_on_an_address_others_can_reach(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], host: str
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    db = tmp_path / "k.db"
    argv = ["serve", str(root), "--db", str(db), "--embedder", "hashing", "--host", host]
    assert main([*argv, "--allow-writes", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert f"--allow-writes on --host {host}" in err
    assert "no authentication" in err
    assert "--allow-remote-writes" in err
    assert not db.exists()  # refused before anything was opened


def test_write_exposure_check_admits_loopback_and_an_explicit_acknowledgement(
    tmp_path: Path,
) -> None:
    from knowledge.core.errors import ConfigurationError
    from knowledge.local.folder_writes import check_write_exposure, is_loopback_host
    from knowledge.local.server import LocalServer
    from knowledge.stores.memory import MemoryKnowledgeStore

    for host in ("127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"):
        assert is_loopback_host(host)
        check_write_exposure(host, allow_writes=True, allow_remote_writes=False)
    for host in ("0.0.0.0", "::", "10.0.0.5", "example.com", ""):
        assert not is_loopback_host(host)
        check_write_exposure(host, allow_writes=False, allow_remote_writes=False)  # read-only
        check_write_exposure(host, allow_writes=True, allow_remote_writes=True)  # acknowledged
        with pytest.raises(ConfigurationError, match="no authentication"):
            check_write_exposure(host, allow_writes=True, allow_remote_writes=False)
    # The server itself refuses it too, whoever builds it.
    with pytest.raises(ConfigurationError, match="--allow-remote-writes"):
        LocalServer(tmp_path, MemoryKnowledgeStore(), host="0.0.0.0", port=0, allow_writes=True)
    args = build_parser().parse_args(["serve", str(tmp_path)])
    assert args.allow_remote_writes is False


def test_serve_write_limit_flags_reach_the_servers_quota(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from knowledge.local import server as local_server
    from knowledge.service.write_quotas import DEFAULT_WRITE_LIMITS, WriteLimits

    args = build_parser().parse_args(["serve", str(tmp_path)])
    assert (
        WriteLimits.of(
            args.max_writes_per_minute, args.max_write_mib_per_minute, args.max_documents_per_scope
        )
        == DEFAULT_WRITE_LIMITS
    )
    built: list[local_server.LocalServer] = []

    def serve(server: local_server.LocalServer, **_: object) -> int:
        built.append(server)
        return 0

    monkeypatch.setattr(local_server, "serve_until_stopped", serve)
    root = tmp_path / "root"
    root.mkdir()
    argv = ["serve", str(root), "--db", str(tmp_path / "k.db"), "--embedder", "hashing"]
    limits = ["--max-writes-per-minute", "30", "--max-write-mib-per-minute", "0"]
    assert main([*argv, "--allow-writes", *limits, "--max-documents-per-scope", "500"]) == 0
    quota = built[0].api.write_quota
    assert quota is not None
    assert quota.limits == WriteLimits(30, 0, 500)
    assert main(argv) == 0  # without --allow-writes: no write routes, no quota
    assert built[1].api.write_quota is None
    for flag, value, expected in (
        ("--max-writes-per-minute", "-1", "must be 0 (no limit) or more, got -1"),
        ("--max-write-mib-per-minute", "-5", "must be 0 (no limit) or more, got -5"),
        ("--max-documents-per-scope", "many", "'many' is not an integer"),
    ):
        with pytest.raises(SystemExit) as info:
            main([*argv, flag, value])
        assert info.value.code == 2
        assert f"argument {flag}: {expected}" in capsys.readouterr().err
    assert len(built) == 2  # refused while the arguments are read
