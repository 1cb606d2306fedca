"""The local server over real HTTP on 127.0.0.1: routes, errors and the folder watcher."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from local_stack import over_workers, store_settings
from polling import WAIT_SECONDS, wait_until

from knowledge.config import open_store
from knowledge.local.server import LocalServer

pytestmark = pytest.mark.integration

RUNBOOK = """# Rolling back a deployment

## Helm

Run helm rollback checkout-api to return to the previous revision.
"""

KOREAN = """# 배포 실패 대응

## 배포 실패 시 롤백 절차

이전 리비전으로 롤백하고 자동 동기화를 끈다.
"""

FAQ = """# Billing FAQ

## Refunds

Refunds are available within 14 days of an annual charge.
"""


def request(
    base: str, method: str, path: str, body: bytes | dict[str, Any] | None = None
) -> tuple[int, dict[str, Any], dict[str, str]]:
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    req = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read()), dict(error.headers)


def search_paths(base: str, agent: str, context: str, query: str) -> list[str]:
    status, body, _ = request(
        base,
        "POST",
        f"/v1/agents/{agent}/contexts/{context}/search",
        {"query": query, "mode": "keyword"},
    )
    assert status == 200, body
    return [r["document_path"] for r in body["results"]]


def touch_later(path: Path, text: str) -> None:
    """Rewrite ``path``; bump its mtime so a same-size rewrite is still a change."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text, "utf-8")
    os.utime(path, ns=(before + 2_000_000_000, before + 2_000_000_000))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    bucket = tmp_path / "bucket"
    (bucket / "ops-bot" / "runbooks").mkdir(parents=True)
    (bucket / "support-bot" / "faq").mkdir(parents=True)
    (bucket / "ops-bot" / "runbooks" / "rollback.md").write_text(RUNBOOK, "utf-8")
    (bucket / "ops-bot" / "runbooks" / "deploy-failure.ko.md").write_text(KOREAN, "utf-8")
    (bucket / "support-bot" / "faq" / "billing.md").write_text(FAQ, "utf-8")
    (bucket / "support-bot" / "faq" / "billing.md.metadata.json").write_text(
        '{"metadataAttributes": {"team": "payments"}}', "utf-8"
    )
    (bucket / "Bad Agent" / "x").mkdir(parents=True)
    (bucket / "Bad Agent" / "x" / "ignored.md").write_text("helm", "utf-8")
    return bucket


@pytest.fixture
def server(root: Path, tmp_path: Path, workers: int) -> Iterator[LocalServer]:
    with closing(
        open_store(db_path=tmp_path / "k.db", embedder_name="hashing", environ={}, create=True)
    ) as store:
        local = LocalServer(
            root,
            store,
            host="127.0.0.1",
            port=0,
            poll_interval=0.1,
            body_timeout=0.5,
            workers=workers,
            worker_store=store_settings(tmp_path / "k.db"),
        )
        local.start(wait=False)
        assert local.wait_until_ready(WAIT_SECONDS)
        try:
            yield local
        finally:
            local.stop()


@over_workers
def test_health(server: LocalServer) -> None:
    status, body, headers = request(server.url, "GET", "/v1/health")
    assert (status, body) == (200, {"status": "ok", "store": "embedded"})
    assert headers["Content-Type"] == "application/json; charset=utf-8"
    assert server.url.startswith("http://127.0.0.1:")


@over_workers
def test_search_is_scoped_and_ranked(server: LocalServer) -> None:
    status, body, _ = request(
        server.url,
        "POST",
        "/v1/agents/ops-bot/contexts/runbooks/search",
        {"query": "helm rollback", "max_results": 3},
    )
    assert status == 200
    assert (body["query"], body["mode"]) == ("helm rollback", "keyword")  # hashing: keyword
    assert body["results"][0]["document_path"] == "rollback.md"
    scores = [r["score"] for r in body["results"]]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in scores)
    # another agent's scope sees nothing of ops-bot, and the invalid folder is not indexed
    assert search_paths(server.url, "support-bot", "faq", "helm rollback") == []
    assert search_paths(server.url, "ops-bot", "faq", "helm") == []


def test_korean_query_round_trip(server: LocalServer) -> None:
    raw = json.dumps({"query": "배포실패", "mode": "keyword"}, ensure_ascii=False).encode()
    status, body, _ = request(server.url, "POST", "/v1/agents/ops-bot/search", raw)
    assert status == 200
    assert body["query"] == "배포실패"
    assert body["results"][0]["document_path"] == "deploy-failure.ko.md"
    assert body["results"][0]["metadata"]["source_key"] == "ops-bot/runbooks/deploy-failure.ko.md"


def test_metadata_filter_from_sidecar(server: LocalServer) -> None:
    path = "/v1/agents/support-bot/contexts/faq/search"
    status, body, _ = request(
        server.url, "POST", path, {"query": "refunds", "metadata": {"team": "payments"}}
    )
    assert status == 200
    assert {r["document_path"] for r in body["results"]} == {"billing.md"}
    _, body, _ = request(server.url, "POST", path, {"query": "refunds", "metadata": {"team": "x"}})
    assert body["results"] == []


@over_workers
def test_status_and_reindex(server: LocalServer) -> None:
    status, body, _ = request(server.url, "GET", "/v1/agents/ops-bot/contexts/runbooks/status")
    assert status == 200
    assert (body["agent"], body["context"], body["state"], body["document_count"]) == (
        "ops-bot",
        "runbooks",
        "READY",
        2,
    )
    status, body, _ = request(server.url, "POST", "/v1/agents/ops-bot/contexts/runbooks/reindex")
    assert status == 200
    assert (body["agent"], body["context"], body["indexed_documents"]) == ("ops-bot", "runbooks", 2)
    status, body, _ = request(server.url, "POST", "/v1/agents/ops-bot/contexts/nope/reindex")
    assert status == 404
    assert body["field"] is None


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "field"),
    [
        ("POST", "/v1/agents/ops-bot/contexts/runbooks/search", b'{"query": ""}', 400, "query"),
        ("POST", "/v1/agents/ops-bot/contexts/runbooks/search", b'{"query": ', 400, "body"),
        ("POST", "/v1/agents/ops-bot/contexts/runbooks/search", b"", 400, "body"),
        (
            "POST",
            "/v1/agents/ops-bot/contexts/runbooks/search",
            b'{"query": "x", "min_score": 2}',
            400,
            "min_score",
        ),
        ("POST", "/v1/agents/a%20b/contexts/runbooks/search", b'{"query": "x"}', 400, "agent"),
        ("GET", "/v1/agents/ops-bot/contexts/../status", None, 400, "context"),
        ("GET", "/v1/nothing", None, 404, None),
        ("GET", "/v1/agents/ops-bot/contexts/runbooks/search", None, 405, None),
        ("DELETE", "/v1/health", None, 405, None),
    ],
)
def test_errors(
    server: LocalServer, method: str, path: str, body: bytes | None, status: int, field: str | None
) -> None:
    got_status, got_body, _ = request(server.url, method, path, body)
    assert got_status == status
    assert got_body["field"] == field
    assert isinstance(got_body["error"], str)
    assert got_body["error"]


@over_workers
def test_oversized_body_is_400(server: LocalServer) -> None:
    big = json.dumps({"query": "x" * 70_000}).encode()
    status, body, _ = request(
        server.url, "POST", "/v1/agents/ops-bot/contexts/runbooks/search", big
    )
    assert status == 400
    assert body["field"] == "body"


def test_watcher_applies_create_modify_delete(server: LocalServer, root: Path) -> None:
    base = server.url
    folder = root / "ops-bot" / "runbooks"
    new_doc = folder / "nested" / "zebra.md"
    new_doc.parent.mkdir()

    touch_later(new_doc, "# Zebra\n\nThe zebra escalation path goes through the platform team.\n")
    wait_until(
        lambda: search_paths(base, "ops-bot", "runbooks", "zebra") == ["nested/zebra.md"],
        "a created file becomes searchable",
    )

    touch_later(new_doc, "# Okapi\n\nThe okapi escalation path goes through the platform team.\n")
    wait_until(
        lambda: (
            search_paths(base, "ops-bot", "runbooks", "okapi") == ["nested/zebra.md"]
            and search_paths(base, "ops-bot", "runbooks", "zebra") == []
        ),
        "a modified file is re-indexed without its old content",
    )

    new_doc.unlink()
    wait_until(
        lambda: search_paths(base, "ops-bot", "runbooks", "okapi") == [],
        "a deleted file disappears from search",
    )


def test_watcher_picks_up_a_new_scope_and_sidecar_changes(server: LocalServer, root: Path) -> None:
    base = server.url
    folder = root / "ops-bot" / "postmortems"
    folder.mkdir()
    touch_later(folder / "outage.md", "# Outage\n\nThe checkout outage lasted 42 minutes.\n")
    wait_until(
        lambda: search_paths(base, "ops-bot", "postmortems", "outage") == ["outage.md"],
        "a file in a new scope folder becomes searchable",
    )
    assert search_paths(base, "ops-bot", "runbooks", "outage") == []

    sidecar = root / "support-bot" / "faq" / "billing.md.metadata.json"
    touch_later(sidecar, '{"metadataAttributes": {"team": "finance"}}')

    def filtered(team: str) -> list[str]:
        _, body, _ = request(
            base,
            "POST",
            "/v1/agents/support-bot/contexts/faq/search",
            {"query": "refunds", "mode": "keyword", "metadata": {"team": team}},
        )
        return [r["document_path"] for r in body["results"]]

    wait_until(
        lambda: filtered("finance") == ["billing.md"] and filtered("payments") == [],
        "a changed sidecar re-indexes its document's metadata",
    )


def test_served_folder_indexes_documents_and_lists_problems_over_http(
    server: LocalServer, root: Path
) -> None:
    """``kb serve``'s path: a PDF dropped in is searchable with its page, an encrypted one
    is a problem in the status route, and deleting that file clears the problem."""
    import document_files as files

    folder = root / "ops-bot" / "runbooks"
    (folder / "handbook.pdf").write_bytes(files.pdf(["Cover", "Feed the wombat at noon."]))
    locked = folder / "locked.pdf"
    locked.write_bytes(files.pdf(["secret"], password="pw"))
    base = server.url
    wait_until(
        lambda: search_paths(base, "ops-bot", "runbooks", "wombat") == ["handbook.pdf"],
        "a PDF becomes searchable",
    )
    status, body, _ = request(
        base,
        "POST",
        "/v1/agents/ops-bot/contexts/runbooks/search",
        {"query": "wombat", "mode": "keyword", "metadata": {"format": "pdf"}},
    )
    assert status == 200, body
    (hit,) = body["results"]
    assert (hit["metadata"]["page"], hit["metadata"]["page_end"]) == (1, 2)
    assert (hit["origin"], hit["format"], hit["url"]) == ("upload", "pdf", None)

    # A file no pattern selects is counted in the status as the watcher finds it.
    (folder / "rack.jpg").write_bytes(b"\xff\xd8\xff\xe0")

    def unread() -> dict[str, int]:
        code, status_body, _ = request(base, "GET", "/v1/agents/ops-bot/contexts/runbooks/status")
        assert code == 200, status_body
        counts: dict[str, int] = status_body["unread_files"]
        return counts

    wait_until(lambda: unread().get(".jpg") == 1, "an image is counted, not read")
    (folder / "rack.jpg").unlink()
    wait_until(lambda: ".jpg" not in unread(), "its count goes with it")

    def problems() -> list[dict[str, Any]]:
        code, status_body, _ = request(base, "GET", "/v1/agents/ops-bot/contexts/runbooks/status")
        assert code == 200, status_body
        listed: list[dict[str, Any]] = status_body["problems"]
        return listed

    wait_until(
        lambda: problems() == [{"document_path": "locked.pdf", "reason": "encrypted PDF"}],
        "the encrypted PDF is listed as a problem",
    )
    locked.unlink()
    wait_until(lambda: problems() == [], "deleting the file clears its problem")


@over_workers
def test_stop_is_idempotent_and_frees_the_port(server: LocalServer) -> None:
    url = server.url
    server.stop()
    server.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/v1/health", timeout=2)


@pytest.mark.parametrize("interval", [0.0, float("nan"), float("inf")])
def test_a_bad_poll_interval_is_refused_when_the_server_is_made(
    root: Path, interval: float
) -> None:
    """Not on the start-up thread, where it stopped the watcher from ever starting (or,
    as NaN, made it poll without pause) while the server looked healthy."""
    from knowledge.stores.memory import MemoryKnowledgeStore

    with pytest.raises(ValueError, match="poll_interval"):
        LocalServer(root, MemoryKnowledgeStore(), port=0, poll_interval=interval)


def test_a_port_out_of_range_is_a_configuration_error(root: Path) -> None:
    from knowledge.core.errors import ConfigurationError
    from knowledge.stores.memory import MemoryKnowledgeStore

    local = LocalServer(root, MemoryKnowledgeStore(), port=65536)
    with pytest.raises(ConfigurationError, match=r"cannot listen on 127\.0\.0\.1:65536"):
        local.start()
    local.stop()


def test_kb_serve_prints_url_and_stops_on_sigterm(root: Path, tmp_path: Path) -> None:
    """The real command: URL on stdout, one log line per request, clean exit on SIGTERM."""
    script = "import sys; from knowledge.local.cli import main; sys.exit(main(sys.argv[1:]))"
    argv = [sys.executable, "-c", script, "serve", str(root), "--port", "0"]
    argv += ["--db", str(tmp_path / "serve.db"), "--poll-interval", "0.2"]
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8"
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # blocks until the server is ready
        match = re.search(r"on (http://127\.0\.0\.1:\d+) \(Ctrl-C to stop\)", line)
        assert match, line
        status, body, _ = request(match.group(1), "GET", "/v1/health")
        assert (status, body["status"]) == (200, "ok")
        status_path = "/v1/agents/ops-bot/contexts/runbooks/status"
        wait_until(
            lambda: request(match.group(1), "GET", status_path)[1]["state"] == "READY",
            "the start-up index is done",
        )
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=WAIT_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert "Stopping..." in out
    assert re.search(r"GET /v1/health 200 \d+\.\dms", err)
    assert "indexed ops-bot/runbooks: 2 documents" in err
    assert "ignored Bad Agent: 'Bad Agent' must be 1-64 characters" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("headers", "status", "fragment"),
    [
        ("Content-Length: abc\r\n", 400, "bad Content-Length"),
        ("Transfer-Encoding: chunked\r\n", 411, "chunked"),
        # Two framings of one request: a proxy in front may take the other one and see
        # the rest of the body as a second request (request smuggling; RFC 9112 6.3).
        ("Content-Length: 2\r\nContent-Length: 40\r\n", 400, "Content-Length"),
        ("Transfer-Encoding: gzip\r\nContent-Length: 2\r\n", 411, "Transfer-Encoding"),
    ],
    ids=["bad-length", "chunked", "two-lengths", "other-encoding"],
)
def test_bad_framing_is_a_json_error(
    server: LocalServer, headers: str, status: int, fragment: str
) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    raw = (
        "POST /v1/agents/ops-bot/contexts/runbooks/search HTTP/1.1\r\n"
        f"Host: {host}\r\n{headers}Connection: close\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=5) as conn:
        conn.sendall(raw.encode("ascii"))
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    head, _, payload = reply.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode())
    body = json.loads(payload)
    assert body["field"] == "body"
    assert fragment in body["error"]
