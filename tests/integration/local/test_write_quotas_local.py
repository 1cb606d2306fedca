"""Per-agent write quotas on ``kb serve --allow-writes``, through the real HTTP server: the
429 and its ``Retry-After`` header reach the client, another agent writes at the same
moment, the bytes and documents limits, a refused write leaves nothing in the folder, and
the next window takes writes again (the server's quota clock is the test's)."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from polling import wait_until

from knowledge.client import KnowledgeClient
from knowledge.config import open_store
from knowledge.core.scope import KnowledgeScope
from knowledge.local.server import LocalServer
from knowledge.service.write_quotas import MIB, WINDOW_SECONDS, WriteLimits

pytestmark = pytest.mark.integration

OPS = KnowledgeScope("ops-bot", "runbooks")
START = 1_800_000_000.0


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@contextmanager
def serving(
    tmp_path: Path, limits: WriteLimits, clock: Clock, **options: Any
) -> Iterator[LocalServer]:
    root = tmp_path / "bucket"
    (root / "ops-bot" / "runbooks").mkdir(parents=True)
    (root / "ops-bot" / "runbooks" / "rollback.md").write_text("# Rollback\n\nhelm\n", "utf-8")
    with closing(
        open_store(db_path=tmp_path / "k.db", embedder_name="hashing", environ={}, create=True)
    ) as store:
        server = LocalServer(
            root,
            store,
            port=0,
            poll_interval=0.1,
            allow_writes=True,
            write_limits=limits,
            quota_clock=clock,
            **options,
        )
        server.start()
        try:
            yield server
        finally:
            server.stop()


def send(
    server: LocalServer, method: str, path: str, data: bytes | None = None
) -> tuple[int, dict[str, Any], dict[str, str]]:
    request = urllib.request.Request(server.url + path, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "text/markdown")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read()), dict(error.headers)


def put(
    server: LocalServer, path: str, data: bytes = b"# Note\n\nhelm\n", agent: str = "ops-bot"
) -> tuple[int, dict[str, Any], dict[str, str]]:
    return send(server, "PUT", f"/v1/agents/{agent}/contexts/runbooks/documents/{path}", data)


def files(server: LocalServer, agent: str = "ops-bot") -> list[str]:
    folder = server.root / agent / "runbooks"
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_one_agent_over_its_requests_gets_429_and_another_agent_still_writes(
    tmp_path: Path,
) -> None:
    clock = Clock(START + 12.25)
    with serving(tmp_path, WriteLimits(5, 0, 0), clock) as server:
        for i in range(5):
            status, body, _ = put(server, f"n{i}.md")
            assert status == 202, body
        status, body, headers = put(server, "n5.md")
        assert status == 429, body
        assert headers["Retry-After"] == "48"
        assert body["limit"] == "write_requests_per_minute"
        assert (body["limit_value"], body["retry_after"]) == (5, 48)
        assert "write_requests_per_minute: 5" in body["error"]
        assert "retry in 48 s" in body["error"]
        assert "Traceback" not in json.dumps(body)
        assert not (server.root / "ops-bot" / "runbooks" / "n5.md").exists()
        # Another agent, at the same moment.
        (server.root / "support-bot" / "runbooks").mkdir(parents=True)
        assert put(server, "n5.md", agent="support-bot")[0] == 202
        # The same agent's reads are never limited.
        for _ in range(10):
            search = send(
                server,
                "POST",
                "/v1/agents/ops-bot/contexts/runbooks/search",
                json.dumps({"query": "helm"}).encode(),
            )
            assert search[0] == 200
            assert send(server, "GET", "/v1/agents/ops-bot/contexts/runbooks/status")[0] == 200
        # A DELETE counts too, and is refused before the folder is touched.
        assert send(server, "DELETE", "/v1/agents/ops-bot/contexts/runbooks/documents/n0.md")[
            0
        ] == (429)
        assert "n0.md" in files(server)
        # The next window takes the agent's writes again.
        clock.now = START + WINDOW_SECONDS
        assert put(server, "n5.md")[0] == 202
        assert "n5.md" in files(server)


def test_a_burst_of_parallel_puts_admits_exactly_the_limit(tmp_path: Path) -> None:
    with serving(tmp_path, WriteLimits(8, 0, 0), Clock(START)) as server:
        statuses: list[int] = []
        lock = threading.Lock()

        def writer(i: int) -> None:
            status = put(server, f"p{i}.md")[0]
            with lock:
                statuses.append(status)

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(statuses) == [202] * 8 + [429] * 12
        written = [name for name in files(server) if name.startswith("p")]
        assert len([n for n in written if not n.endswith(".metadata.json")]) == 8


def test_bytes_per_minute(tmp_path: Path) -> None:
    clock = Clock(START + 30)
    with serving(tmp_path, WriteLimits.of(0, 1, 0), clock) as server:
        body = b"# Big\n\n" + b"helm " * 120_000  # 600 kB: two are over 1 MiB
        assert put(server, "a.md", body)[0] == 202
        status, answer, headers = put(server, "b.md", body)
        assert (status, headers["Retry-After"]) == (429, "30"), answer
        assert (answer["limit"], answer["limit_value"]) == ("write_bytes_per_minute", MIB)
        assert "b.md" not in files(server)
        assert put(server, "small.md", b"# S\n\nhelm\n")[0] == 202  # still fits
        clock.now = START + WINDOW_SECONDS
        assert put(server, "b.md", body)[0] == 202


def test_a_full_scope_refuses_a_new_path_and_takes_an_overwrite(tmp_path: Path) -> None:
    with serving(tmp_path, WriteLimits(0, 0, 2), Clock(START)) as server:
        client = KnowledgeClient(server.url, retries=0)
        assert put(server, "guide.md", b"# Guide\n\nhelm\n")[0] == 202
        wait_until(lambda: client.status(OPS).document_count == 2, "the new document is indexed")
        status, body, headers = put(server, "third.md")
        assert status == 429, body
        assert body["limit"] == "documents_per_scope"
        assert (body["limit_value"], body["retryable"]) == (2, False)
        assert headers["Retry-After"] == str(WINDOW_SECONDS)
        assert "third.md" not in files(server)
        assert not any(name.startswith("third") for name in files(server))
        # Overwriting an indexed path is no new document.
        assert put(server, "rollback.md", b"# Rollback\n\nargo rollback\n")[0] == 202
        assert (
            (server.root / "ops-bot/runbooks/rollback.md")
            .read_text("utf-8")
            .startswith("# Rollback\n\nargo")
        )
        # Once a delete is indexed, the scope has room again.
        deleted = send(server, "DELETE", "/v1/agents/ops-bot/contexts/runbooks/documents/guide.md")
        assert deleted[0] == 202
        wait_until(lambda: client.status(OPS).document_count == 1, "the delete is indexed")
        assert put(server, "third.md")[0] == 202


def test_the_default_limits_admit_a_teams_writing(tmp_path: Path) -> None:
    """The defaults (120 requests, 256 MiB a minute, 10,000 documents a scope) never get in
    the way of a burst of notes and a few large files."""
    with serving(tmp_path, WriteLimits(), Clock(START)) as server:
        for i in range(60):
            assert put(server, f"notes%2Fn{i}.md")[0] == 202
        large = b"# Manual\n\n" + b"helm rollback " * (3 * MIB // 14)  # about 3 MiB
        for i in range(10):
            assert put(server, f"manuals%2Fm{i}.md", large)[0] == 202
