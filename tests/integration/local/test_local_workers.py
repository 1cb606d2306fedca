"""``kb serve --workers N``: worker processes on the same port, in real subprocesses.

A request is served by a worker for sure when its connection was accepted while the
primary process was stopped (SIGSTOP): only the worker could take it, and every later
request on that keep-alive connection is the worker's too, also the ones it forwards to
the primary (after SIGCONT).
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import signal
import socket
import subprocess
import threading
import urllib.error
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from local_stack import store_settings
from polling import WAIT_SECONDS, wait_until
from test_local_server import request
from test_local_server_hostile import assert_error_shape, kb_serve, parse, served_url, write

from knowledge.config import open_store
from knowledge.local.server import LocalServer
from knowledge.local.workers import MAX_QUICK_RESTARTS
from knowledge.service.api import KnowledgeApi

pytestmark = pytest.mark.integration

SEARCH = "/v1/agents/ops/contexts/run/search"
STATUS = "/v1/agents/ops/contexts/run/status"


class Served:
    """``kb serve ROOT --port 0 --db DB OPTIONS`` in a subprocess, its log read as it comes."""

    def __init__(self, root: Path, db: Path, *options: str, prefix: Sequence[str] = ()) -> None:
        self.process = kb_serve(root, db, *options, prefix=prefix)
        self.url = served_url(self.process)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def wait_for_log(self, text: str) -> None:
        wait_until(lambda: text in self.log, f"the log says {text!r}")

    def finish(self) -> int:
        """The exit code, once the server and every process holding its log ended."""
        code = self.process.wait(WAIT_SECONDS)
        self._reader.join(WAIT_SECONDS)
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()
        return code


@contextmanager
def served(root: Path, db: Path, *options: str, prefix: Sequence[str] = ()) -> Iterator[Served]:
    server = Served(root, db, *options, prefix=prefix)
    try:
        yield server
    finally:
        if server.process.poll() is None:
            os.kill(server.pid, signal.SIGCONT)
            server.process.kill()
        server.finish()


def children(pid: int) -> set[int]:
    """The processes ``pid`` started that still run."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        with (task / "children").open() as listing:
            found.update(int(n) for n in listing.read().split())
    return found


def forward_folder(pid: int) -> Path:
    """The folder of the Unix socket the primary ``pid`` listens on for its workers."""
    paths: dict[str, str] = {}
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) == 8:
            paths[fields[6]] = fields[7]
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd)
        inode = target.removeprefix("socket:[").removesuffix("]")
        if target.startswith("socket:[") and paths.get(inode, "").endswith("/primary.sock"):
            return Path(paths[inode]).parent
    raise AssertionError(f"process {pid} listens on no forwarding socket")


def state(stat: Path) -> str:
    """The state letter of a ``/proc/.../stat`` file (R, S, T stopped, Z exited...)."""
    return stat.read_text().rsplit(")", 1)[1].split()[0]


def gone(pid: int) -> bool:
    try:
        return state(Path(f"/proc/{pid}/stat")) == "Z"  # exited, not yet reaped
    except FileNotFoundError:
        return True


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


@contextmanager
def primary_stopped(process: subprocess.Popen[str]) -> Iterator[None]:
    """The primary process stopped: a connection made meanwhile is a worker's."""
    os.kill(process.pid, signal.SIGSTOP)  # delivered later: wait until every thread stopped
    tasks = Path(f"/proc/{process.pid}/task")
    wait_until(
        lambda: all(state(task / "stat") == "T" for task in tasks.iterdir()),
        "the primary process is stopped",
    )
    try:
        yield
    finally:
        os.kill(process.pid, signal.SIGCONT)


def ask(
    conn: http.client.HTTPConnection,
    method: str,
    path: str,
    body: bytes | dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """One request on ``conn``, which must stay the same connection (never reopened)."""
    sock = conn.sock
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    conn.request(
        method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})}
    )
    response = conn.getresponse()
    payload = json.loads(response.read())
    assert conn.sock is sock, "the connection was reopened: another process may have served it"
    return response.status, payload, dict(response.headers)


def worker_connection(server: Served) -> http.client.HTTPConnection:
    """A keep-alive connection a worker accepted (the primary was stopped meanwhile)."""
    server.wait_for_log("worker 1: serving")
    conn = http.client.HTTPConnection(*address(server.url), timeout=WAIT_SECONDS)
    with primary_stopped(server.process):
        conn.connect()
        status, body, _ = ask(conn, "GET", "/v1/health")  # answered by the worker itself
    assert status == 200, body
    return conn


def ready(url: str, documents: int) -> bool:
    status, body, _ = request(url, "GET", STATUS)
    return status == 200 and body["state"] == "READY" and body["document_count"] == documents


def fresh_results(db: Path, body: dict[str, Any]) -> list[dict[str, Any]]:
    """What a store opened now, in this process, answers to the search ``body``."""
    with closing(open_store(db_path=db, embedder_name="hashing", environ={})) as store:
        answer = KnowledgeApi(store).handle("POST", SEARCH, json.dumps(body).encode())
    assert answer.status == 200, answer.body
    results: list[dict[str, Any]] = answer.body["results"]
    return results


def test_a_worker_search_sees_what_the_primary_indexed_after_it_searched(tmp_path: Path) -> None:
    """The worker's caches (term counts, cached vectors) were filled by its first searches;
    the primary then indexes a new document. The worker's next searches find it, scored
    as a store opened afterwards scores it (stale counts would change every score)."""
    root, db = tmp_path / "bucket", tmp_path / "k.db"
    write(root / "ops" / "run" / "a.md", "# Deploy\n\nRun helm rollback to go back.\n")
    keyword = {"query": "rollback zebra", "mode": "keyword"}
    vector = {"query": "rollback zebra", "mode": "vector"}
    with served(root, db, "--workers", "2") as server:
        url = server.url
        wait_until(lambda: ready(url, 1), "the start-up index is done")
        conn = worker_connection(server)
        for body in (keyword, vector):
            status, answer, _ = ask(conn, "POST", SEARCH, body)
            assert status == 200, answer
            assert [r["document_path"] for r in answer["results"]] == ["a.md"]
        write(root / "ops" / "run" / "b.md", "# Zebra\n\nA zebra rollback, step by step.\n")
        wait_until(lambda: ready(url, 2), "the primary indexed the new document")
        for body in (keyword, vector):
            status, answer, _ = ask(conn, "POST", SEARCH, body)
            assert status == 200, answer
            assert "b.md" in [r["document_path"] for r in answer["results"]], body
            assert answer["results"] == fresh_results(db, body), body
        conn.close()


def test_a_worker_refuses_hostile_http_as_the_primary_does(tmp_path: Path) -> None:
    """The worker runs the primary's HTTP layer: other sites' pages, oversized and
    double-framed bodies, a malformed request line, all in the API's JSON error shape."""
    root = tmp_path / "bucket"
    write(root / "ops" / "run" / "a.md", "# Deploy\n\nhelm rollback\n")
    cases = [
        (b"GET /v1/health HTTP/1.1\r\nHost: evil.example\r\n\r\n", 421, "Host"),
        (
            b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://evil.example\r\n\r\n",
            403,
            "Origin",
        ),
        (
            b"POST " + SEARCH.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Length: 99999999\r\n\r\n",
            400,
            "body",
        ),
        (
            b"POST " + SEARCH.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            411,
            "body",
        ),
        (b"GARBAGE\r\n\r\n", 400, None),
    ]
    with served(root, tmp_path / "k.db", "--workers", "2") as server:
        url = server.url
        wait_until(lambda: ready(url, 1), "the start-up index is done")
        server.wait_for_log("worker 1: serving")
        with primary_stopped(server.process):
            for raw, expected, field in cases:
                with socket.create_connection(address(url), timeout=WAIT_SECONDS) as conn:
                    conn.sendall(raw)
                    reply = b""
                    while chunk := conn.recv(65536):
                        reply += chunk
                status, headers, payload = parse(reply)
                assert (status, assert_error_shape(payload)["field"]) == (expected, field), raw
                assert headers["content-type"] == "application/json; charset=utf-8"


def test_a_worker_forwards_writes_status_and_quotas_to_the_primary(tmp_path: Path) -> None:
    """Writes, the status and the write quota are the primary's: a worker passes them on
    and its caller gets the primary's status, headers and body."""
    root = tmp_path / "bucket"
    write(root / "ops" / "run" / "a.md", "# Deploy\n\nhelm rollback\n")
    options = ("--workers", "2", "--allow-writes", "--max-writes-per-minute", "1")
    with served(root, tmp_path / "k.db", *options) as server:
        url = server.url
        wait_until(lambda: ready(url, 1), "the start-up index is done")
        conn = worker_connection(server)
        status, body, _ = ask(conn, "GET", STATUS)
        assert (status, body["state"], body["document_count"]) == (200, "READY", 1)
        path = "/v1/agents/ops/contexts/run/documents/zebra.md"
        note = b"# Zebra\n\nzebra crossing\n"
        status, body, _ = ask(conn, "PUT", path, note, {"Content-Type": "text/markdown"})
        assert status == 202, body
        assert (root / "ops" / "run" / "zebra.md").read_bytes() == note
        status, body, headers = ask(conn, "PUT", path, note, {"Content-Type": "text/markdown"})
        assert status == 429, body
        assert headers["Retry-After"] == str(body["retry_after"])
        wait_until(lambda: ready(url, 2), "the written document is indexed")
        status, body, _ = ask(conn, "POST", SEARCH, {"query": "zebra", "mode": "keyword"})
        assert [r["document_path"] for r in body["results"]] == ["zebra.md"]
        status, body, _ = ask(conn, "GET", "/v1/agents/ops/contexts/run/nothing")
        assert (status, body["error"]) == (404, "no route for /v1/agents/ops/contexts/run/nothing")
        conn.close()


def test_one_worker_is_one_process(tmp_path: Path) -> None:
    root = tmp_path / "bucket"
    write(root / "ops" / "run" / "a.md", "# Deploy\n\nhelm rollback\n")
    with served(root, tmp_path / "k.db", "--workers", "1") as server:
        url = server.url
        wait_until(lambda: ready(url, 1), "the start-up index is done")
        assert children(server.pid) == set()


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C", "SIGKILL"])
def test_workers_never_outlive_the_server(tmp_path: Path, how: str) -> None:
    """SIGTERM or Ctrl-C (SIGINT to the whole process group) stop the server and its
    workers; a primary killed outright leaves no worker behind either, nor its private
    socket's folder (its workers remove it)."""
    root = tmp_path / "bucket"
    write(root / "ops" / "run" / "a.md", "# Deploy\n\nhelm rollback\n")
    with served(root, tmp_path / "k.db", "--workers", "3", prefix=("setsid",)) as server:
        server.wait_for_log("worker 2: serving")
        workers = children(server.pid)
        assert len(workers) == 2
        folder = forward_folder(server.pid)
        if how == "Ctrl-C":
            os.killpg(server.pid, signal.SIGINT)  # setsid: its own process group
        else:
            os.kill(server.pid, getattr(signal, how))
        code = server.finish()  # the log ends when every process holding it has ended
        wait_until(lambda: all(gone(pid) for pid in workers), "every worker has exited")
        wait_until(lambda: not folder.exists(), "the forwarding socket's folder is removed")
    if how != "SIGKILL":
        assert code == 0, server.log
        assert "Traceback" not in server.log
    with pytest.raises(urllib.error.URLError):
        request(server.url, "GET", "/v1/health")


def test_a_worker_that_dies_is_started_again(tmp_path: Path) -> None:
    root = tmp_path / "bucket"
    write(root / "ops" / "run" / "a.md", "# Deploy\n\nhelm rollback\n")
    with served(root, tmp_path / "k.db", "--workers", "2") as server:
        server.wait_for_log("worker 1: serving")
        (worker,) = children(server.pid)
        os.kill(worker, signal.SIGKILL)
        server.wait_for_log(f"worker 1 (pid {worker}) exited (code -9); starting it again")
        wait_until(lambda: server.log.count("worker 1: serving") == 2, "the new worker serves")
        assert worker not in children(server.pid)
        conn = worker_connection(server)
        _, body, _ = ask(conn, "POST", SEARCH, {"query": "rollback", "mode": "keyword"})
        assert [r["document_path"] for r in body["results"]] == ["a.md"]
        conn.close()
        server.process.send_signal(signal.SIGTERM)
        assert server.finish() == 0, server.log


def test_a_worker_that_cannot_start_is_given_up_and_the_primary_serves(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Workers told to open a store file that is not there exit at once; after a few
    tries the server says it goes on without them, and answers every request itself."""
    root = tmp_path / "bucket"
    write(root / "ops" / "run" / "a.md", "# Deploy\n\nhelm rollback\n")
    caplog.set_level(logging.INFO, logger="knowledge.local.server")
    with closing(
        open_store(db_path=tmp_path / "k.db", embedder_name="hashing", environ={}, create=True)
    ) as store:
        server = LocalServer(
            root,
            store,
            port=0,
            poll_interval=0.1,
            workers=2,
            worker_store=store_settings(tmp_path / "elsewhere.db"),
        )
        server.start(wait=False)
        try:
            wait_until(lambda: "not starting it again" in caplog.text, "the worker is given up")
            assert server.worker_pids() == []
            status, body, _ = request(server.url, "POST", SEARCH, {"query": "rollback"})
            assert (status, [r["document_path"] for r in body["results"]]) == (200, ["a.md"])
        finally:
            server.stop()
    assert caplog.text.count("exited (code 1); starting it again") == MAX_QUICK_RESTARTS
